//! skuad's integration tests, one test binary (`cargo test -p skuad --test e2e`; one suite:
//! `cargo test -p skuad --test e2e -- xdp::`). Each module was a test binary of its own; they
//! share the helpers in `common`.
//!
//! Which tests run together. Cargo ran the old binaries one after the other, each binary's
//! tests in parallel (as many at once as test threads, by default the machine's cores). In one
//! binary the tests of every module share the same threads, so a suite that assumed it ran
//! alone could now run beside another. Every test therefore takes its suite's turn on its first
//! line (`crate::common::suite(module_path!())`, checked below), and:
//! - the suites named in [`ALONE`] run only beside their own tests, exactly as when they were
//!   binaries of their own: they measure throughput or timing under load (`reload_load`:
//!   dnsperf for 40 s with no query lost; `idle_flood`: 1,000 sockets, answers within 2 s;
//!   `rrl`: rates; `hostile`: 30 % loss, resident memory; `ha_lease`: lease expiry to the
//!   second), or build network namespaces, veth pairs, XDP programs and servers on fixed ports
//!   in them (`xdp`, `cache`, `hostile`, `real_world`, `xfr_interop`), named by the process id
//!   and a tag (cache's namespace, `skua-cache-PID` as hostile's for cache.py, is now
//!   `skuad-cache-PID`);
//! - the other suites run beside each other, whatever their suite: they use loopback only, on
//!   ports from [`common::free_port`] (never handed out twice in the process) and directories
//!   named by tag (unique across the suites), so a test of one is as good a neighbour as a test
//!   of its own suite was before.
//!
//! Turns are given in the order tests ask (libtest starts them in name order, so a suite's
//! tests come together): a suite of [`ALONE`] waits for the room to empty, and tests asking
//! after it wait behind it. No suite here had a lock of its own; a lock a suite adds for its
//! own tests stays in its module.

mod common;

mod acme;
mod api;
mod cache;
mod daemon;
mod doh;
mod doq;
mod dot;
mod ha_lease;
mod hostile;
mod idle_flood;
mod real_world;
mod reload_load;
mod rrl;
mod sync;
mod xdp;
mod xfr;
mod xfr_interop;
mod xfr_secondary;

/// The suites that run only beside their own tests (see above).
const ALONE: &[&str] = &[
    "cache",
    "ha_lease",
    "hostile",
    "idle_flood",
    "real_world",
    "reload_load",
    "rrl",
    "xdp",
    "xfr_interop",
];

/// Every test of every module takes its suite's turn on its first line: one without it would
/// run beside any test, even of a suite in [`ALONE`].
#[test]
fn every_test_takes_its_suites_turn_first() {
    const TURN: &str = "let _suite = crate::common::suite(module_path!());";
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".rs") || name == "main.rs" || name == "common.rs" {
            continue;
        }
        files += 1;
        let module = name.trim_end_matches(".rs");
        let main = include_str!("main.rs");
        assert!(
            main.contains(&format!("\nmod {module};\n")),
            "{name} is not a module of main.rs"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, l) in lines.iter().enumerate() {
            if !(l.starts_with("#[test]") || l.starts_with("#[tokio::test")) {
                continue;
            }
            let f = (i + 1..lines.len())
                .find(|&j| lines[j].starts_with("fn ") || lines[j].starts_with("async fn "))
                .unwrap_or_else(|| panic!("{name}:{}: a test attribute without fn", i + 1));
            assert!(
                lines[f].ends_with('{') && lines.get(f + 1) == Some(&TURN),
                "{name}:{}: `{}` must begin with `{TURN}`",
                f + 1,
                lines[f]
            );
        }
    }
    assert!(files >= 18, "{files} suites found in {}", dir.display());
}
