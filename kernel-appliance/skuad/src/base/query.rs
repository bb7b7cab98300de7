//! Building a DNS query in wire form (the in-process benchmark's queries and the AF_XDP
//! self-test's probe).

use skua_engine::name::WireName;

/// Encodes one query: ID, RD, one question, optional OPT.
pub fn encode_query(
    id: u16,
    name: &WireName,
    qtype: u16,
    edns: Option<u16>,
    dnssec_ok: bool,
) -> Vec<u8> {
    let mut p = Vec::with_capacity(12 + name.len() + 4 + 11);
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(edns.is_some())]);
    p.extend_from_slice(name.as_bytes());
    p.extend_from_slice(&qtype.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    if let Some(size) = edns {
        p.extend_from_slice(&[0, 0, 0x29]);
        p.extend_from_slice(&size.to_be_bytes());
        p.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
    }
    p
}
