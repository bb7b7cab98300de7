#!/usr/bin/env bash
# skuad's layers (docs/ARCHITECTURE.md, "skuad's layers"): each folder of
# kernel-appliance/skuad/src may name only itself and the layers below it in code (doc
# comments may point anywhere). Prints every import that runs upwards; exit 1 if any.
set -euo pipefail
cd "$(dirname "$0")/../kernel-appliance/skuad/src"
declare -A allowed=(
    [base]="base"
    [dataplane]="base dataplane"
    [control]="base control"
    [acme]="base control acme"
    [api]="base control acme api"
)
bad=0
for layer in "${!allowed[@]}"; do
    while IFS= read -r hit; do
        file=${hit%%:*}
        rest=${hit#*:}
        line=${rest%%:*}
        code=${rest#*:}
        # Doc and plain comments may link to any layer.
        [[ $code =~ ^[[:space:]]*// ]] && continue
        for used in $(grep -oE 'crate::[a-z_]+' <<<"$code" | sed 's/crate:://' | sort -u); do
            if [[ " ${allowed[$layer]} " != *" $used "* ]]; then
                echo "$layer/$file:$line: imports crate::$used, a layer above $layer" >&2
                bad=1
            fi
        done
    done < <(cd "$layer" && grep -rn 'crate::' --include='*.rs' . | sed 's#^\./##')
done
# The floor under the dataplanes: every query they are asked is answered through the front
# door (skua-serve), never by calling the engine, TSIG or NOTIFY code around it (where a
# branch for one transport was once missing in another). The XDP answer compilers
# (xdp/src/answers.rs, cached.rs) ask the engine to precompile answers, not to serve.
door_bypass=$(cd .. && grep -rnE '\.(handle_query(_with)?|answer_cached)\(|check_signed_query|notify::answer\(|sign_response\(' \
    src/dataplane src/base ../xdp/src/worker.rs ../fastpath/src/lib.rs | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)
if [[ -n $door_bypass ]]; then
    echo "a dataplane answers around the door (skua-serve):" >&2
    echo "$door_bypass" >&2
    bad=1
fi
if ((bad)); then
    exit 1
fi
echo "skuad layers: no upward import (base < dataplane, control < acme < api < supervisor);" \
    "the dataplanes answer through the door only (cores < skua-serve < dataplanes)"
