//! Resource records as loaded from configuration and zone files (owned, load-time form).
//!
//! The hot path never sees these: [`crate::store`] renders them into wire bytes once, at load.

use alloc::vec::Vec;

use crate::name::WireName;

/// RR type codes used by the engine (IANA "Resource Record (RR) TYPEs"), in hex as the
/// registry lists them.
#[allow(missing_docs)]
pub mod rtype {
    pub const A: u16 = 0x0001;
    pub const NS: u16 = 0x0002;
    pub const CNAME: u16 = 0x0005;
    pub const SOA: u16 = 0x0006;
    pub const PTR: u16 = 0x000c;
    pub const HINFO: u16 = 0x000d;
    pub const MX: u16 = 0x000f;
    pub const TXT: u16 = 0x0010;
    pub const AAAA: u16 = 0x001c;
    pub const SRV: u16 = 0x0021;
    pub const NAPTR: u16 = 0x0023;
    pub const DNAME: u16 = 0x0027;
    pub const OPT: u16 = 0x0029;
    pub const DS: u16 = 0x002b;
    pub const SSHFP: u16 = 0x002c;
    pub const RRSIG: u16 = 0x002e;
    pub const NSEC: u16 = 0x002f;
    pub const DNSKEY: u16 = 0x0030;
    pub const TLSA: u16 = 0x0034;
    pub const SVCB: u16 = 0x0040;
    pub const HTTPS: u16 = 0x0041;
    pub const IXFR: u16 = 0x00fb;
    pub const AXFR: u16 = 0x00fc;
    pub const MAILB: u16 = 0x00fd;
    pub const MAILA: u16 = 0x00fe;
    pub const ANY: u16 = 0x00ff;
    pub const CAA: u16 = 0x0101;
}

/// Class codes (RFC 1035 §3.2.4, RFC 6895 §3.2).
#[allow(missing_docs)]
pub mod class {
    pub const IN: u16 = 0x0001;
    pub const CH: u16 = 0x0003;
    pub const NONE: u16 = 0x00fe;
    pub const ANY: u16 = 0x00ff;
}

/// One resource record: owner, type, class, TTL and uncompressed wire RDATA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rr {
    /// Owner name, case as written.
    pub owner: WireName,
    /// RR type code.
    pub rtype: u16,
    /// Class code (IN for everything the engine serves from local data).
    pub class: u16,
    /// Time to live in seconds.
    pub ttl: u32,
    /// RDATA in uncompressed wire format (RFC 3597 §4: names inside RDATA are never
    /// compressed at load; the renderer may compress the well-known types).
    pub rdata: Vec<u8>,
}

/// Types whose RDATA holds domain names that RFC 3597 §4 allows to be compressed on output
/// (the RFC 1035 types). Returns the offset of each embedded name in order.
///
/// These are the types in use of the RDATA layout table's [`Compression::Rfc1035`] ones
/// (the obsolete MD, MF, MB, MG, MR and MINFO are written in full, as RFC 3597 §4 allows).
///
/// [`Compression::Rfc1035`]: crate::wire::rdata::Compression::Rfc1035
pub fn compressible_names(rtype: u16, rdata: &[u8]) -> Vec<usize> {
    use crate::name::wire_name_len;
    match rtype {
        rtype::NS | rtype::CNAME | rtype::PTR => alloc::vec![0],
        rtype::MX => alloc::vec![2],
        rtype::SOA => match wire_name_len(rdata) {
            Some(first) => alloc::vec![0, first],
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The name held at offset 0 of a CNAME/DNAME/NS/PTR RDATA, if well formed.
pub fn rdata_target(rdata: &[u8]) -> Option<WireName> {
    WireName::from_wire(rdata).ok()
}

/// The SOA MINIMUM field (RFC 2308 §5: negative answers use min(SOA TTL, MINIMUM)).
pub fn soa_minimum(rdata: &[u8]) -> Option<u32> {
    let tail = rdata.get(rdata.len().checked_sub(4)?..)?;
    Some(u32::from_be_bytes([tail[0], tail[1], tail[2], tail[3]]))
}
