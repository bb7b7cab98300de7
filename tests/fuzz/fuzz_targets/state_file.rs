//! Fuzz target: the API state file's writer and reader (skua-config `state`) with the
//! engine's presentation format (skua-engine `text`).
//!
//! 1. Input read as a record: whenever the engine accepts it, its canonical text written
//!    into a state file reads back as exactly one record, the same one.
//! 2. Input read as a state file: the reader never panics, and whatever it accepts,
//!    rendered again, reads back as the same zones and records.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use skua_config::state;
use skua_engine::text::{parse_rr, rr_to_string};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("state.conf");

    if let Ok(mut rr) = parse_rr(text, None, 3600) {
        rr.owner = rr.owner.to_lowercase();
        let canon = rr_to_string(&rr);
        let file = state::render([], [canon.as_str()]);
        let back = state::parse(&file, path).expect("a rendered state file parses");
        assert!(back.zones.is_empty());
        assert_eq!(back.records.len(), 1, "{file}");
        assert_eq!(parse_rr(&back.records[0].value, None, 3600).as_ref(), Ok(&rr));
        // A zone named by the record's owner goes through the same quoting.
        let owner = rr.owner.to_string();
        let file = state::render([(owner.as_str(), "static")], []);
        let back = state::parse(&file, path).expect("a rendered state file parses");
        let name = &back.zones[0].value.0;
        assert_eq!(
            skua_engine::name::WireName::parse(name, None).ok().as_ref(),
            Some(&rr.owner)
        );
    }

    if let Ok(f) = state::parse(text, path) {
        let zones: Vec<(&str, &str)> = f
            .zones
            .iter()
            .map(|z| (z.value.0.as_str(), z.value.1.as_str()))
            .collect();
        let again = state::render(
            zones.iter().copied(),
            f.records.iter().map(|r| r.value.as_str()),
        );
        let g = state::parse(&again, path).expect("a rendered state file parses");
        assert_eq!(f.zones.len(), g.zones.len());
        assert_eq!(f.records.len(), g.records.len());
        for (a, b) in f.records.iter().zip(&g.records) {
            assert_eq!(
                parse_rr(&a.value, None, 3600).ok(),
                parse_rr(&b.value, None, 3600).ok()
            );
        }
        for (a, b) in f.zones.iter().zip(&g.zones) {
            let n = |s: &str| skua_engine::name::WireName::parse(s, None).ok();
            assert_eq!(n(&a.value.0), n(&b.value.0));
            assert_eq!(a.value.1, b.value.1);
        }
    }
});
