//! Differential conformance tests: skuad against Unbound (local zones,
//! forwarding to an NSD upstream) and NSD (auth zone). `SKUA_SUBJECT=unbound` (or `nsd`, `self`) compares the
//! reference against a second instance of itself instead (harness check).

use skua_conformance::compare::Report;
use skua_conformance::harness::{
    SHOWN_DIFFERENCES, Subject, run_auth_zone, run_forwarding, run_local_zones,
};

fn check(result: Result<Report, String>) {
    let report = match result {
        Ok(r) => r,
        Err(e) => panic!("differential test could not run: {e}"),
    };
    println!("{}", report.summary());
    // Both silent is agreement only where silence is the answer (deny zones).
    let silent = report.unexpected_silence();
    assert!(
        silent.is_empty(),
        "queries neither server answered, outside the deny zones: {silent:?}\n{}",
        report.summary()
    );
    assert!(
        report.differences.is_empty(),
        "{}",
        report.failure_message(
            std::env::var("SKUA_SHOW_DIFFS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(SHOWN_DIFFERENCES)
        )
    );
}

fn subject() -> Subject {
    Subject::from_env().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn local_zones_match_unbound() {
    check(run_local_zones(subject()));
}

#[test]
fn auth_zone_matches_nsd() {
    check(run_auth_zone(subject()));
}

#[test]
fn forwarding_matches_unbound() {
    check(run_forwarding(subject()));
}
