//! # skua-fastpath: answer a DNS query inside the Ethernet frame it arrived in
//!
//! What it does: parse Ethernet (one 802.1Q/802.1ad tag), IPv4 or IPv6, and UDP from a raw
//! frame, **verify the IPv4 header checksum and the UDP checksum** (peers skip this; a
//! corrupted query is dropped and counted, never answered), hand the DNS payload to the
//! front door ([`skua_serve::Door`]: NOTIFY, TSIG, local data and the resolver's cache
//! through the engine, a miss read once), and turn the same frame into the reply: MACs,
//! addresses and ports swapped, lengths and checksums rewritten. Used by the AF_XDP workers
//! and, later, the unikernel's virtio-net loop.
//!
//! What it does not do: IPv4 options, fragments, IPv6 extension headers, TCP (the XDP
//! program passes those to the kernel; should one arrive here it is handed back as
//! [`Verdict::Kernel`]); ARP/NDP; routing (the reply leaves by the port it came in on, to
//! the MAC it came from). It never answers a frame sent to an Ethernet broadcast or
//! multicast address, nor one sent to an IP broadcast or multicast address
//! ([`Drop::NotUnicast`]): the reply would come from that address. Nor does it answer a
//! frame *from* such an address, or from an unspecified one ([`Drop::NotUnicastSource`]: an
//! Ethernet source with the group bit, an IPv4 source of 0.0.0.0, 224/4 or 240/4, an IPv6
//! source of `::` or ff00::/8): the reply would go to that address.
//!
//! `#![no_std]`, `#![forbid(unsafe_code)]`; it allocates only off the hot path (a miss's
//! question, the answer to a NOTIFY or a signed query, built by the door). No input makes
//! it panic.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use skua_engine::engine::DropReason as EngineDrop;
use skua_engine::{Engine, Transport};
use skua_serve::{Ask, Door, Event, Kind, Miss, Step, Zones};

const ETH_HLEN: usize = 14;
const VLAN_HLEN: usize = 4;
const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;
const IPV4_HLEN: usize = 20;
const IPV6_HLEN: usize = 40;
const UDP_HLEN: usize = 8;
const IPPROTO_UDP: u8 = 17;
/// TTL / hop limit of replies (RFC 1700's recommended default).
const REPLY_TTL: u8 = 64;

/// Why a frame was dropped here (each reason has its own counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[non_exhaustive]
pub enum Drop {
    /// Shorter than its headers say.
    Truncated = 0,
    /// IPv4 IHL below 5 or a version that does not match the EtherType.
    BadIpHeader = 1,
    /// IPv4 header checksum wrong (RFC 791 §3.1).
    BadIpChecksum = 2,
    /// UDP length below 8 or beyond the IP payload (RFC 768).
    BadUdpLength = 3,
    /// UDP checksum wrong, or zero over IPv6 (RFC 8200 §8.1).
    BadUdpChecksum = 4,
    /// The engine dropped it (ACL deny, deny zones, malformed DNS, responses).
    Engine = 5,
    /// The reply would not fit the frame buffer and no kernel fallback was wanted.
    NoRoom = 6,
    /// Response rate limiting dropped the reply (see `skua_engine::rrl`).
    RateLimited = 7,
    /// Sent to an Ethernet group address (broadcast, multicast) or to an IP broadcast or
    /// multicast address: never answered here (see [`handle_frame`]).
    NotUnicast = 8,
    /// Sent from an Ethernet group address, or from an unspecified, broadcast or multicast
    /// IP address: never answered here, the reply would go to that address (see
    /// [`handle_frame`]).
    NotUnicastSource = 9,
}

impl Drop {
    /// Number of reasons.
    pub const COUNT: usize = 10;
    /// Every reason, in counter order.
    pub const ALL: [Self; Self::COUNT] = [
        Self::Truncated,
        Self::BadIpHeader,
        Self::BadIpChecksum,
        Self::BadUdpLength,
        Self::BadUdpChecksum,
        Self::Engine,
        Self::NoRoom,
        Self::RateLimited,
        Self::NotUnicast,
        Self::NotUnicastSource,
    ];

    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::BadIpHeader => "bad_ip_header",
            Self::BadIpChecksum => "bad_ip_checksum",
            Self::BadUdpLength => "bad_udp_length",
            Self::BadUdpChecksum => "bad_udp_checksum",
            Self::Engine => "engine",
            Self::NoRoom => "no_room",
            Self::RateLimited => "rate_limited",
            Self::NotUnicast => "not_unicast",
            Self::NotUnicastSource => "not_unicast_source",
        }
    }
}

/// What to do with a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The frame now holds the reply, `len` bytes long: transmit it on the same queue.
    Reply {
        /// Frame length.
        len: usize,
        /// From the engine (hot path, RCODE, TC, inform, QTYPE, rate limiting, cache);
        /// `None` for the door's own answers (NOTIFY, a signed query).
        info: Option<skua_engine::engine::ReplyInfo>,
        /// Length of the query, still in the scratch buffer (for a refresh, see
        /// [`handle_frame_with`]).
        query_len: usize,
    },
    /// Drop and count.
    Drop(Drop),
    /// Not local data and not in the cache: the caller hands the query (`query_len` bytes in
    /// the scratch buffer) to the resolver, whose answer leaves through the kernel socket of
    /// `server`.
    Resolve {
        /// The question, read once by the door.
        miss: Miss,
        /// Query length in the scratch buffer.
        query_len: usize,
        /// The client.
        client: SocketAddr,
        /// Our address and port the query was sent to.
        server: SocketAddr,
    },
    /// Not for this path: the caller answers through the kernel socket. `query_len` bytes of
    /// DNS query were copied to the scratch buffer; `client` and `server` are the UDP
    /// endpoints. Used for replies larger than the frame, and for frames the XDP program
    /// should not have sent here (TCP, fragments, options).
    Kernel {
        /// Query length in the scratch buffer (0 when the frame is not DNS over UDP).
        query_len: usize,
        /// The client.
        client: Option<SocketAddr>,
        /// Our address and port the query was sent to.
        server: Option<SocketAddr>,
    },
}

#[derive(Clone, Copy)]
enum L3 {
    V4,
    V6,
}

/// Parsed offsets of a UDP frame.
#[derive(Clone, Copy)]
struct Udp {
    l3: L3,
    ip_off: usize,
    udp_off: usize,
    payload_len: usize,
}

/// Ones' complement sum (RFC 1071) of `data` added to `sum`, not folded.
fn csum_add(mut sum: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        sum += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut i = 0;
    while i + 1 < rest.len() {
        sum += u64::from(u16::from_be_bytes([rest[i], rest[i + 1]]));
        i += 2;
    }
    if i < rest.len() {
        sum += u64::from(rest[i]) << 8;
    }
    sum
}

/// Folds a 64-bit ones' complement sum to 16 bits.
fn csum_fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // Cannot truncate: folded to 16 bits above.
    sum as u16
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The pseudo-header sum for the UDP checksum (RFC 768, RFC 8200 §8.1).
fn pseudo_sum(frame: &[u8], u: &Udp, udp_len: usize) -> u64 {
    let (src_dst, next): (&[u8], u64) = match u.l3 {
        L3::V4 => (&frame[u.ip_off + 12..u.ip_off + 20], u64::from(IPPROTO_UDP)),
        L3::V6 => (&frame[u.ip_off + 8..u.ip_off + 40], u64::from(IPPROTO_UDP)),
    };
    csum_add(0, src_dst) + next + udp_len as u64
}

/// Verifies the UDP checksum. Also accepts the one pattern a sender on the same host
/// leaves with TX checksum offload (CHECKSUM_PARTIAL, e.g. a container's veth peer): the
/// field then holds the folded pseudo-header sum, and the NIC that would have finished it
/// does not exist. Dropping those would silently break DNS for local containers; a random
/// corruption matches that pattern no more often than it matches a valid checksum.
fn udp_checksum_ok(frame: &[u8], u: &Udp, udp_len: usize) -> bool {
    let pseudo = pseudo_sum(frame, u, udp_len);
    let data = &frame[u.udp_off..u.udp_off + udp_len];
    if csum_fold(pseudo + csum_add(0, data)) == 0xffff {
        return true;
    }
    be16(frame, u.udp_off + 6) == csum_fold(pseudo)
}

/// True for an address a reply must never come from nor go to: IPv4 limited broadcast (RFC
/// 919) and the rest of 240/4, IPv4 multicast (224/4, RFC 1112), IPv6 multicast (ff00::/8,
/// RFC 4291 §2.7), and the unspecified addresses. The XDP program (`bpf/skua_xdp.bpf.c`)
/// applies the same test to sources. A subnet's directed broadcast (RFC 922) cannot be told
/// from a unicast address without the interface's prefixes: as a destination, the XDP
/// program's maps never hold one (`skua_xdp::ifaddr::answerable`), so it never reaches this
/// path; as a source it is not caught (the reply then goes to the sender's unicast MAC only,
/// not to the subnet).
fn never_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_unspecified() || a.octets()[0] >= 224,
        IpAddr::V6(a) => a.is_unspecified() || a.is_multicast(),
    }
}

/// Parses and verifies; `Err(None)` = not a frame for us (hand to the kernel).
fn parse(frame: &[u8]) -> Result<Udp, Option<Drop>> {
    if frame.len() < ETH_HLEN {
        return Err(Some(Drop::Truncated));
    }
    let mut ethertype = be16(frame, 12);
    let mut l3_off = ETH_HLEN;
    if ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD {
        if frame.len() < ETH_HLEN + VLAN_HLEN {
            return Err(Some(Drop::Truncated));
        }
        ethertype = be16(frame, 16);
        l3_off += VLAN_HLEN;
    }
    match ethertype {
        ETH_P_IPV4 => {
            let ip = frame
                .get(l3_off..l3_off + IPV4_HLEN)
                .ok_or(Some(Drop::Truncated))?;
            if ip[0] >> 4 != 4 || ip[0] & 0x0f < 5 {
                return Err(Some(Drop::BadIpHeader));
            }
            // Options, fragments, other protocols: the kernel's job (RFC 791 §3.2).
            if ip[0] & 0x0f != 5 || be16(ip, 6) & 0x3fff != 0 || ip[9] != IPPROTO_UDP {
                return Err(None);
            }
            let total = usize::from(be16(ip, 2));
            if total < IPV4_HLEN + UDP_HLEN || l3_off + total > frame.len() {
                return Err(Some(Drop::Truncated));
            }
            if csum_fold(csum_add(0, ip)) != 0xffff {
                return Err(Some(Drop::BadIpChecksum));
            }
            let udp_off = l3_off + IPV4_HLEN;
            let udp_len = usize::from(be16(frame, udp_off + 4));
            if udp_len < UDP_HLEN || udp_len > total - IPV4_HLEN {
                return Err(Some(Drop::BadUdpLength));
            }
            let u = Udp {
                l3: L3::V4,
                ip_off: l3_off,
                udp_off,
                payload_len: udp_len - UDP_HLEN,
            };
            // A zero UDP checksum over IPv4 means "not computed" (RFC 768).
            if be16(frame, udp_off + 6) != 0 && !udp_checksum_ok(frame, &u, udp_len) {
                return Err(Some(Drop::BadUdpChecksum));
            }
            Ok(u)
        }
        ETH_P_IPV6 => {
            let ip = frame
                .get(l3_off..l3_off + IPV6_HLEN)
                .ok_or(Some(Drop::Truncated))?;
            if ip[0] >> 4 != 6 {
                return Err(Some(Drop::BadIpHeader));
            }
            // Extension headers and other protocols go to the kernel.
            if ip[6] != IPPROTO_UDP {
                return Err(None);
            }
            let payload = usize::from(be16(ip, 4));
            let udp_off = l3_off + IPV6_HLEN;
            if payload < UDP_HLEN || udp_off + payload > frame.len() {
                return Err(Some(Drop::Truncated));
            }
            let udp_len = usize::from(be16(frame, udp_off + 4));
            if udp_len < UDP_HLEN || udp_len > payload {
                return Err(Some(Drop::BadUdpLength));
            }
            let u = Udp {
                l3: L3::V6,
                ip_off: l3_off,
                udp_off,
                payload_len: udp_len - UDP_HLEN,
            };
            // Mandatory over IPv6 (RFC 8200 §8.1): zero is invalid.
            if be16(frame, udp_off + 6) == 0 || !udp_checksum_ok(frame, &u, udp_len) {
                return Err(Some(Drop::BadUdpChecksum));
            }
            Ok(u)
        }
        _ => Err(None),
    }
}

fn endpoints(frame: &[u8], u: &Udp) -> (SocketAddr, SocketAddr) {
    let sport = be16(frame, u.udp_off);
    let dport = be16(frame, u.udp_off + 2);
    match u.l3 {
        L3::V4 => {
            let s = &frame[u.ip_off + 12..u.ip_off + 16];
            let d = &frame[u.ip_off + 16..u.ip_off + 20];
            (
                SocketAddr::new(IpAddr::V4(Ipv4Addr::new(s[0], s[1], s[2], s[3])), sport),
                SocketAddr::new(IpAddr::V4(Ipv4Addr::new(d[0], d[1], d[2], d[3])), dport),
            )
        }
        L3::V6 => {
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&frame[u.ip_off + 8..u.ip_off + 24]);
            d.copy_from_slice(&frame[u.ip_off + 24..u.ip_off + 40]);
            (
                SocketAddr::new(IpAddr::V6(Ipv6Addr::from(s)), sport),
                SocketAddr::new(IpAddr::V6(Ipv6Addr::from(d)), dport),
            )
        }
    }
}

/// Answers the query in `frame[..len]` in place. `now` is whole seconds of the caller's
/// monotonic clock (response rate limiting counts in it; see `skua_engine::Request::now`).
/// `frame` is the whole buffer the frame sits in (the reply may be longer than the query, up
/// to `frame.len()`); `scratch` receives a copy of the DNS query (the engine reads it while
/// writing the reply into the frame) and must be at least as long as the largest query
/// accepted (the frame size).
///
/// With rate limiting, a reply that goes to the kernel path because it is larger than the
/// frame is charged twice, here and by the kernel path's own call (such replies are rare
/// with 4 KiB UMEM frames).
pub fn handle_frame(
    engine: &Engine,
    now: u32,
    frame: &mut [u8],
    len: usize,
    scratch: &mut [u8],
) -> Verdict {
    handle_frame_with(
        &Door::engine(engine),
        now,
        0,
        frame,
        len,
        scratch,
        &mut |_, _| {},
    )
}

/// [`handle_frame`] through the whole door: the resolver's cache (a name outside local data
/// that the cache holds is answered in the frame like local data, TTLs counted down; one it
/// does not hold is [`Verdict::Resolve`]; a hit that asks for a refresh says so in its
/// [`Verdict::Reply`]'s `info.refresh`, with the query still in `scratch[..query_len]`), a
/// NOTIFY for a secondary zone and a TSIG-signed query (`unix`: seconds since the epoch,
/// TSIG's clock), whose events `events` hears with the client they came from.
pub fn handle_frame_with<C: skua_engine::AnswerCache, Z: Zones + ?Sized>(
    door: &Door<'_, C, Z>,
    now: u32,
    unix: u64,
    frame: &mut [u8],
    len: usize,
    scratch: &mut [u8],
    events: &mut dyn FnMut(SocketAddr, Event),
) -> Verdict {
    let len = len.min(frame.len());
    let u = match parse(&frame[..len]) {
        Ok(u) => u,
        Err(Some(d)) => return Verdict::Drop(d),
        Err(None) => {
            return Verdict::Kernel {
                query_len: 0,
                client: None,
                server: None,
            };
        }
    };
    let (client, server) = endpoints(frame, &u);
    // Only queries to one of our unicast addresses in a unicast frame are answered. An
    // Ethernet group destination (the I/G bit, bit 0 of the first octet: broadcast or
    // multicast) is refused whatever the IP destination: a unicast datagram in a link-layer
    // broadcast should be discarded (RFC 1122 §3.3.6). An IP broadcast or multicast
    // destination is refused because the reply, the same frame turned around, would come from
    // that address. The XDP program passes both to the kernel; this is the second line.
    if frame[0] & 1 != 0 || never_unicast(server.ip()) {
        return Verdict::Drop(Drop::NotUnicast);
    }
    // Nor is a query from such an address: the reply would go to it. A group address is
    // never a valid source, neither an Ethernet one (the I/G bit of the source MAC, IEEE
    // 802) nor an IP one (RFC 1122 §3.2.1.3: an IPv4 source is never broadcast or multicast,
    // and 0.0.0.0 only while a host learns its address; RFC 4291 §2.7: an IPv6 multicast
    // address is never a source, and `::` only before an address is assigned, §2.5.2). The
    // kernel drops most of them on input (IPv4 broadcast, multicast and 0/8 sources as
    // martians, IPv6 multicast sources in ipv6_rcv). The XDP program passes all of them to
    // the kernel, counted as `pass_bad_source`.
    if frame[6] & 1 != 0 || never_unicast(client.ip()) {
        return Verdict::Drop(Drop::NotUnicastSource);
    }
    let payload_off = u.udp_off + UDP_HLEN;
    let qlen = u.payload_len;
    let Some(q) = scratch.get_mut(..qlen) else {
        return Verdict::Drop(Drop::NoRoom);
    };
    q.copy_from_slice(&frame[payload_off..payload_off + qlen]);
    let room = frame.len() - payload_off;
    let ask = Ask {
        kind: Kind::Udp,
        peer: client,
        now,
        unix,
        pad: None,
        query: &scratch[..qlen],
    };
    let kernel = Verdict::Kernel {
        query_len: qlen,
        client: Some(client),
        server: Some(server),
    };
    let (dns_len, info) =
        match door.handle(&ask, &mut frame[payload_off..], &mut |e| events(client, e)) {
            Step::Reply { len, info } => (len, info),
            Step::Resolve(miss) => {
                return Verdict::Resolve {
                    miss,
                    query_len: qlen,
                    client,
                    server,
                };
            }
            // Too large for the frame: the caller's kernel path.
            Step::Drop {
                reason: EngineDrop::Buffer,
                ..
            } => return kernel,
            Step::Drop {
                reason: EngineDrop::RateLimited,
                ..
            } => return Verdict::Drop(Drop::RateLimited),
            Step::Drop { .. } => return Verdict::Drop(Drop::Engine),
        };
    // A reply truncated only because the frame is small goes out through the kernel,
    // whole: the engine's limit for this client may be larger than the frame. (A slipped
    // reply is truncated on purpose: it goes out here.)
    if let Some(i) = info
        && i.truncated
        && !i.slipped
        && door.engine.reply_limit(&scratch[..qlen], Transport::Udp) > room
    {
        return kernel;
    }
    Verdict::Reply {
        len: rewrite(frame, &u, dns_len),
        info,
        query_len: qlen,
    }
}

/// Turns the query frame into the reply frame carrying `dns_len` bytes of DNS payload.
fn rewrite(frame: &mut [u8], u: &Udp, dns_len: usize) -> usize {
    // Ethernet: back to where it came from.
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&frame[0..6]);
    frame.copy_within(6..12, 0);
    frame[6..12].copy_from_slice(&mac);
    let udp_len = UDP_HLEN + dns_len;
    // Cannot truncate: a frame is at most 64 KiB (checked by the engine's 65535 limit).
    let udp_len16 = udp_len as u16;
    let ip = u.ip_off;
    match u.l3 {
        L3::V4 => {
            let mut a = [0u8; 4];
            a.copy_from_slice(&frame[ip + 12..ip + 16]);
            frame.copy_within(ip + 16..ip + 20, ip + 12);
            frame[ip + 16..ip + 20].copy_from_slice(&a);
            let total = (IPV4_HLEN + udp_len) as u16;
            frame[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
            frame[ip + 6] = 0; // no fragment flags: DF clear, as a kernel UDP socket would
            frame[ip + 7] = 0;
            frame[ip + 8] = REPLY_TTL;
            frame[ip + 10] = 0;
            frame[ip + 11] = 0;
            let c = !csum_fold(csum_add(0, &frame[ip..ip + IPV4_HLEN]));
            frame[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        }
        L3::V6 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&frame[ip + 8..ip + 24]);
            frame.copy_within(ip + 24..ip + 40, ip + 8);
            frame[ip + 24..ip + 40].copy_from_slice(&a);
            frame[ip + 4..ip + 6].copy_from_slice(&udp_len16.to_be_bytes());
            frame[ip + 7] = REPLY_TTL;
        }
    }
    let uo = u.udp_off;
    let mut p = [0u8; 2];
    p.copy_from_slice(&frame[uo..uo + 2]);
    frame.copy_within(uo + 2..uo + 4, uo);
    frame[uo + 2..uo + 4].copy_from_slice(&p);
    frame[uo + 4..uo + 6].copy_from_slice(&udp_len16.to_be_bytes());
    frame[uo + 6] = 0;
    frame[uo + 7] = 0;
    let sum = pseudo_sum(frame, u, udp_len) + csum_add(0, &frame[uo..uo + udp_len]);
    let mut c = !csum_fold(sum);
    // A computed zero is sent as all ones (RFC 768).
    if c == 0 {
        c = 0xffff;
    }
    frame[uo + 6..uo + 8].copy_from_slice(&c.to_be_bytes());
    uo + udp_len
}

/// Builds a UDP frame around `payload` (tests, self-test, benchmarks): `vlan` adds an
/// 802.1Q tag. Returns the frame length, or `None` when `out` is too small.
#[allow(clippy::too_many_arguments)]
pub fn build_udp_frame(
    out: &mut [u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    vlan: Option<u16>,
    src: SocketAddr,
    dst: SocketAddr,
    payload: &[u8],
) -> Option<usize> {
    let l3 = if vlan.is_some() {
        ETH_HLEN + VLAN_HLEN
    } else {
        ETH_HLEN
    };
    let iph = if src.is_ipv4() { IPV4_HLEN } else { IPV6_HLEN };
    let total = l3 + iph + UDP_HLEN + payload.len();
    let f = out.get_mut(..total)?;
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&src_mac);
    if let Some(tag) = vlan {
        f[12..14].copy_from_slice(&ETH_P_8021Q.to_be_bytes());
        f[14..16].copy_from_slice(&(tag & 0x0fff).to_be_bytes());
    }
    let udp_len = UDP_HLEN + payload.len();
    let udp_len16 = u16::try_from(udp_len).ok()?;
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f[l3 - 2..l3].copy_from_slice(&ETH_P_IPV4.to_be_bytes());
            let ip = &mut f[l3..l3 + IPV4_HLEN];
            ip.fill(0);
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&u16::try_from(IPV4_HLEN + udp_len).ok()?.to_be_bytes());
            ip[8] = REPLY_TTL;
            ip[9] = IPPROTO_UDP;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            let c = !csum_fold(csum_add(0, ip));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f[l3 - 2..l3].copy_from_slice(&ETH_P_IPV6.to_be_bytes());
            let ip = &mut f[l3..l3 + IPV6_HLEN];
            ip.fill(0);
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&udp_len16.to_be_bytes());
            ip[6] = IPPROTO_UDP;
            ip[7] = REPLY_TTL;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
        }
        _ => return None,
    }
    let uo = l3 + iph;
    f[uo..uo + 2].copy_from_slice(&src.port().to_be_bytes());
    f[uo + 2..uo + 4].copy_from_slice(&dst.port().to_be_bytes());
    f[uo + 4..uo + 6].copy_from_slice(&udp_len16.to_be_bytes());
    f[uo + 6..uo + 8].fill(0);
    f[uo + 8..].copy_from_slice(payload);
    let u = Udp {
        l3: if src.is_ipv4() { L3::V4 } else { L3::V6 },
        ip_off: l3,
        udp_off: uo,
        payload_len: payload.len(),
    };
    let mut c = !csum_fold(pseudo_sum(f, &u, udp_len) + csum_add(0, &f[uo..uo + udp_len]));
    if c == 0 {
        c = 0xffff;
    }
    f[uo + 6..uo + 8].copy_from_slice(&c.to_be_bytes());
    Some(total)
}

#[cfg(test)]
mod tests;
