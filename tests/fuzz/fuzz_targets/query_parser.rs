//! Fuzz target: the zero-copy query parser must never panic, and whatever it accepts must
//! be self-consistent (question inside the packet, name well formed).
#![no_main]

use libfuzzer_sys::fuzz_target;
use skua_engine::name::{WireName, wire_name_len};
use skua_engine::wire::Query;

fuzz_target!(|data: &[u8]| {
    if let Ok(q) = Query::parse(data) {
        let name = q.qname();
        assert_eq!(wire_name_len(name), Some(name.len()));
        assert!(WireName::from_wire(name).is_ok());
        assert_eq!(q.question().len(), name.len() + 4);
        assert!(12 + q.question().len() <= data.len());
        let _ = (q.id(), q.flags(), q.qtype, q.qclass, q.edns);
    }
});
