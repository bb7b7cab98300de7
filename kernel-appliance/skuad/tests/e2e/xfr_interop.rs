//! skuad with NSD 4.6 and Knot 3.2, with TSIG, each test in a network namespace of its
//! own with only loopback:
//!
//! - as their primary (tests/xfr/interop.py): the first AXFR of each secondary, an API
//!   write sent by NOTIFY and IXFR, a reload without a serial bump followed as serial + 1,
//!   a wrong secret and an unknown key answered BADSIG/BADKEY and audited, kdig verifying
//!   every message of a signed AXFR;
//! - as their secondary (tests/xfr/secondary.py): an AXFR from each at start, then a change
//!   on each (NSD: zone file and `nsd-control reload`; Knot: `knotc zone-set`) received by
//!   NOTIFY and IXFR, the copies equal to the primaries', a primary whose TSIG does not
//!   verify refused and audited.
//!
//! The loopback tests are in xfr.rs (primary) and xfr_secondary.rs
//! (secondary). Needs root (a network namespace): it asserts it, never skips.

use std::path::PathBuf;

use crate::common::{LoopbackNs, assert_root, python_in};

#[test]
fn nsd_and_knot_as_secondaries_of_skuad() {
    let _suite = crate::common::suite(module_path!());
    run_script("interop.py", "xfr");
}

#[test]
fn nsd_and_knot_as_primaries_of_skuad() {
    let _suite = crate::common::suite(module_path!());
    run_script("secondary.py", "xfr-sec");
}

/// Runs tests/xfr/`script` as root in a new network namespace; fails when it does.
fn run_script(script: &str, tag: &str) {
    assert_root("a network namespace");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/xfr")
        .join(script);
    let ns = LoopbackNs::new(format!("skua-{tag}-{}", std::process::id()));
    let work = std::env::temp_dir().join(format!("skua-{tag}-interop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let out = python_in(&ns, &path, &work, 300);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    assert!(
        out.status.success(),
        "{script}: checks failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let _ = std::fs::remove_dir_all(&work);
}
