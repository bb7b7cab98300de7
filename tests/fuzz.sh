#!/usr/bin/env bash
# Runs every cargo-fuzz target for N seconds each (default 60); fails on any finding.
# cargo-fuzz needs nightly (sanitizer flags): installed here if absent.
set -euo pipefail
cd "$(dirname "$0")/fuzz"
secs="${1:-60}"
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal >/dev/null
command -v cargo-fuzz >/dev/null 2>&1 || cargo +nightly install cargo-fuzz --locked >/dev/null
for target in $(cargo +nightly fuzz list --fuzz-dir .); do
    mkdir -p "corpus/$target"
    # Shared seeds (files in seeds/), then the target's own (seeds/TARGET/).
    find seeds -maxdepth 1 -type f -exec cp -n {} "corpus/$target/" \;
    [[ -d "seeds/$target" ]] && cp -n "seeds/$target"/* "corpus/$target/"
    echo "-- fuzz $target for ${secs}s"
    log="$(mktemp)"
    if ! cargo +nightly fuzz run --fuzz-dir . "$target" "corpus/$target" -- \
            -max_total_time="$secs" -max_len=4096 -print_final_stats=1 >"$log" 2>&1; then
        tail -60 "$log" >&2
        echo "fuzz target $target failed (crash, leak or build error); artifacts: $(ls artifacts/$target 2>/dev/null)" >&2
        exit 1
    fi
    grep -E "^(stat::number_of_executed_units|Done )" "$log" || tail -3 "$log"
    rm -f "$log"
done
