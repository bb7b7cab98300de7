//! Fuzz target: whole Ethernet frames through the AF_XDP fast path. It must never panic,
//! and every reply frame must itself parse and verify (checksums, lengths), fit the buffer,
//! and pass every frame check in turn: fed back, it reaches the engine, which drops it as a
//! response.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use skua_engine::Engine;
use skua_engine::testing::fuzz_engine;
use skua_fastpath::{Verdict, handle_frame};

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(fuzz_engine)
}

fuzz_target!(|data: &[u8]| {
    let mut frame = vec![0u8; 2048];
    let len = data.len().min(frame.len());
    frame[..len].copy_from_slice(&data[..len]);
    let mut scratch = vec![0u8; 2048];
    if let Verdict::Reply { len, .. } = handle_frame(engine(), 0, &mut frame, len, &mut scratch) {
        assert!(len <= frame.len());
        // The reply, fed back, must parse as a valid UDP frame (it is a response, so the
        // engine drops it: that proves the headers and checksums verified).
        let mut again = frame.clone();
        let v = handle_frame(engine(), 0, &mut again, len, &mut scratch);
        // No exception: the reply always goes to a unicast MAC and address, since a query
        // from a group or unspecified source is never answered (Drop::NotUnicastSource).
        assert!(
            matches!(v, Verdict::Drop(skua_fastpath::Drop::Engine)),
            "reply frame did not verify: {v:?}"
        );
    }
});
