//! Helpers of the zone-transfer suites on loopback (`xfr`: skuad as a primary,
//! `xfr_secondary`: skuad as a secondary): the TSIG secret and zone both serve, the clock
//! TSIG signs with, the secret as its key file holds it, the answer records of a message.

use std::io::Write;

use skua_engine::rr::Rr;
use skua_xfr::wire;

pub const SECRET: [u8; 32] = *b"0123456789abcdef0123456789abcdef";

pub const ZONE: &str = "$ORIGIN example.org.\n$TTL 300\n\
@ IN SOA ns.example.org. admin.example.org. 10 3600 600 86400 300\n\
@ IN NS ns.example.org.\nns IN A 198.18.0.1\nwww IN A 198.18.0.10\n";

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub fn b64(b: &[u8]) -> String {
    // The system's base64 (coreutils): an independent encoder.
    let mut c = std::process::Command::new("base64")
        .arg("-w0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b).unwrap();
    String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()
}

pub fn records(m: &[u8]) -> Vec<Rr> {
    let [qd, an, _, _] = wire::counts(m).unwrap();
    let mut off = wire::HEADER_LEN;
    for _ in 0..qd {
        off = wire::read_question(m, off).unwrap().3;
    }
    let mut out = Vec::new();
    for _ in 0..an {
        let (r, o) = wire::read_owned_rr(m, off).unwrap();
        out.push(r);
        off = o;
    }
    out
}
