//! Fuzz target: the API state file's writer and reader (skua-config `state`) with the
//! engine's presentation format (skua-engine `text`).
//!
//! 1. Input read as a record: whenever the engine accepts it, its canonical text written
//!    into a state file reads back as exactly one record, the same one.
//! 2. Input read as a state file: the reader never panics, and whatever it accepts, put in
//!    canonical form as skuad does after reading and rendered again, reads back as the same
//!    zones and records. (Raw text is not re-rendered as it is: a raw tab separates fields
//!    outside an RFC 1035 quoted string and is a byte inside one, so no escape of it keeps
//!    its meaning in both places; skuad only ever writes canonical text, which has none.)
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
        let canon = |v: &str| {
            parse_rr(v, None, 3600).ok().map(|mut rr| {
                rr.owner = rr.owner.to_lowercase();
                rr
            })
        };
        let records: Vec<_> = f.records.iter().filter_map(|r| canon(&r.value)).collect();
        let texts: Vec<String> = records.iter().map(rr_to_string).collect();
        let zones: Vec<(String, String)> = f
            .zones
            .iter()
            .filter_map(|z| {
                let n = skua_engine::name::WireName::parse(&z.value.0, None).ok()?;
                Some((n.to_lowercase().to_string(), z.value.1.clone()))
            })
            .collect();
        let again = state::render(
            zones.iter().map(|(n, t)| (n.as_str(), t.as_str())),
            texts.iter().map(String::as_str),
        );
        let g = state::parse(&again, path).expect("a rendered state file parses");
        assert_eq!(g.records.len(), records.len());
        for (rr, b) in records.iter().zip(&g.records) {
            assert_eq!(canon(&b.value).as_ref(), Some(rr));
        }
        assert_eq!(g.zones.len(), zones.len());
        for ((n, t), b) in zones.iter().zip(&g.zones) {
            let parsed = skua_engine::name::WireName::parse(&b.value.0, None).ok();
            assert_eq!(parsed.map(|p| p.to_string()).as_ref(), Some(n));
            assert_eq!(&b.value.1, t);
        }
    }
});
