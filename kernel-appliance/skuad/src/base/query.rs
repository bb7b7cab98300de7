//! Building a DNS query in wire form (the in-process benchmark's queries and the AF_XDP
//! self-test's probe), and a wire-form name as text (for logs and the API).

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

/// A name in wire form as text (`www.example.`), `?` when it is not a valid name: for logs
/// and the API's views (the resolver's hosts, zones and cache entries).
pub fn show_name(wire: &[u8]) -> String {
    WireName::from_wire(wire).map_or_else(|_| "?".into(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_text() {
        assert_eq!(show_name(b"\x03www\x07Example\x00"), "www.Example.");
        assert_eq!(show_name(b"\x00"), ".");
        assert_eq!(show_name(b"\x05ab"), "?");
    }
}
