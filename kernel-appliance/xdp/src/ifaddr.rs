//! Interface addresses, for the XDP program's destination maps: a dump of every address
//! (rtnetlink `RTM_GETADDR`), notifications of changes (`RTMGRP_IPV4_IFADDR`,
//! `RTMGRP_IPV6_IFADDR`), and the rule that says which of them the program may answer
//! ([`answerable`]).
//!
//! Why the daemon needs this: with a wildcard listener (`interface: 0.0.0.0` / `::`) the
//! program must still answer only the interface's own unicast addresses. A kernel socket
//! bound to the wildcard never replies from a broadcast, multicast or another host's address;
//! a program answering "any destination" did, with that address as the reply's source. The
//! maps hold only what [`answerable`] accepts, and skuad keeps them current while addresses
//! come and go.

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

// linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h (UAPI, stable numbers).
const NETLINK_ROUTE: libc::c_int = 0;
const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x01;
const NLM_F_DUMP_INTR: u16 = 0x10;
const NLM_F_DUMP: u16 = 0x300;
const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
const RTM_GETADDR: u16 = 22;
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
const RTMGRP_IPV6_IFADDR: u32 = 0x100;
const IFADDRMSG_LEN: usize = 8;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_BROADCAST: u16 = 4;
const IFA_FLAGS: u16 = 8;
const NLA_TYPE_MASK: u16 = !((1 << 15) | (1 << 14));
/// `IFA_F_OPTIMISTIC`: usable while DAD runs (RFC 4429).
const IFA_F_OPTIMISTIC: u32 = 0x04;
/// `IFA_F_DADFAILED`: duplicate address detection failed; the address is not usable.
const IFA_F_DADFAILED: u32 = 0x08;
/// `IFA_F_TENTATIVE`: DAD still running; RFC 4862 §5.4 says packets to it are discarded.
const IFA_F_TENTATIVE: u32 = 0x40;

/// One address of one interface, as the kernel reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfAddr {
    /// Interface index.
    pub index: u32,
    /// The local address (`IFA_LOCAL`, else `IFA_ADDRESS`).
    pub addr: IpAddr,
    /// Prefix length of the subnet it sits in.
    pub prefix_len: u8,
    /// The IPv4 broadcast address configured with it (`IFA_BROADCAST`), if any.
    pub broadcast: Option<Ipv4Addr>,
    /// `IFA_F_*` flags (`IFA_FLAGS` when present, else the 8-bit header field).
    pub flags: u32,
}

impl IfAddr {
    /// False while DAD runs (unless optimistic, RFC 4429) or after it failed: the kernel
    /// takes no packet for it. The kernel notifies again when DAD ends.
    pub fn usable(&self) -> bool {
        self.flags & IFA_F_DADFAILED == 0
            && (self.flags & IFA_F_TENTATIVE == 0 || self.flags & IFA_F_OPTIMISTIC != 0)
    }
}

/// Whether the XDP program may answer queries sent to `addr`, given every address of the
/// host (`all`): only unicast addresses an interface owns. Refused, so that such queries
/// go to the kernel, which knows what to do with them:
/// - IPv4: 0.0.0.0/8 ("this network", RFC 1122 §3.2.1.3), 127/8 (loopback, never valid
///   from the wire), 224/4 multicast (RFC 1112), 240/4 reserved, which holds the limited
///   broadcast 255.255.255.255 (RFC 919), and the directed broadcast of every IPv4 subnet
///   configured on the host (RFC 922: host part all ones; also all zeros, the old BSD form
///   RFC 1122 §3.2.1.3 still mentions), plus any explicit `IFA_BROADCAST`;
/// - IPv6: `::`, `::1`, ff00::/8 multicast (RFC 4291 §2.7), IPv4-mapped (RFC 4291
///   §2.5.5.2: never on the wire) and subnet-router anycast addresses (RFC 4291 §2.6.1: the
///   prefix with an all-zero interface identifier), the only anycast a host derives itself.
///
/// The program trusts its maps: this check is what keeps broadcast and multicast
/// destinations out of them (the program itself only refuses link-layer group addresses).
pub fn answerable(addr: IpAddr, all: &[IfAddr]) -> bool {
    match addr.to_canonical() {
        IpAddr::V4(a) => {
            let o = a.octets();
            if o[0] == 0 || o[0] == 127 || o[0] >= 224 {
                return false;
            }
            !all.iter().any(|i| match i.addr {
                IpAddr::V4(net) => {
                    i.broadcast == Some(a) || is_directed_broadcast(a, net, i.prefix_len)
                }
                IpAddr::V6(_) => false,
            })
        }
        IpAddr::V6(a) => {
            if a.is_unspecified() || a.is_loopback() || a.is_multicast() {
                return false;
            }
            if a.segments()[..6] == [0, 0, 0, 0, 0, 0xffff] {
                return false;
            }
            !all.iter().any(|i| match i.addr {
                IpAddr::V6(net) => is_subnet_router_anycast(a, net, i.prefix_len),
                IpAddr::V4(_) => false,
            })
        }
    }
}

/// `a` is the all-ones or all-zeros host of `net`/`len` (only subnets with room for hosts:
/// /31 and /32 have no broadcast, RFC 3021).
fn is_directed_broadcast(a: Ipv4Addr, net: Ipv4Addr, len: u8) -> bool {
    if len >= 31 {
        return false;
    }
    let mask = u32::MAX << (32 - u32::from(len));
    let (a, net) = (u32::from(a), u32::from(net));
    a & mask == net & mask && (a & !mask == !mask || a & !mask == 0)
}

/// `a` is the subnet-router anycast address of `net`/`len` (RFC 4291 §2.6.1); /127 and /128
/// have none (RFC 6164).
fn is_subnet_router_anycast(a: Ipv6Addr, net: Ipv6Addr, len: u8) -> bool {
    if len >= 127 {
        return false;
    }
    let mask = u128::MAX << (128 - u32::from(len));
    let (a, net) = (u128::from(a), u128::from(net));
    a & mask == net & mask && a & !mask == 0
}

/// Every address of every interface of this network namespace.
pub fn dump() -> io::Result<Vec<IfAddr>> {
    // A dump that raced with a change is flagged NLM_F_DUMP_INTR: take it again (bounded).
    for _ in 0..8 {
        if let Some(v) = dump_once()? {
            return Ok(v);
        }
    }
    Err(io::Error::other(
        "address dump interrupted by changes 8 times in a row",
    ))
}

fn dump_once() -> io::Result<Option<Vec<IfAddr>>> {
    let sock = Socket::open(0, 0)?;
    let mut msg = Vec::with_capacity(NLMSG_HDRLEN + IFADDRMSG_LEN);
    let len = u32::try_from(NLMSG_HDRLEN + IFADDRMSG_LEN).expect("fits");
    msg.extend_from_slice(&len.to_ne_bytes());
    msg.extend_from_slice(&RTM_GETADDR.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel fills it in
    msg.extend_from_slice(&[0u8; IFADDRMSG_LEN]); // AF_UNSPEC: both families
    sock.send(&msg)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    let mut interrupted = false;
    loop {
        let n = sock.recv(&mut buf)?;
        for (kind, flags, body) in messages(&buf[..n])? {
            interrupted |= flags & NLM_F_DUMP_INTR != 0;
            match kind {
                NLMSG_DONE => return Ok((!interrupted).then_some(out)),
                NLMSG_ERROR => {
                    let err = body
                        .get(..4)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, i32::from_ne_bytes);
                    return Err(if err < 0 {
                        io::Error::from_raw_os_error(-err)
                    } else {
                        io::Error::new(io::ErrorKind::InvalidData, "unexpected netlink ack")
                    });
                }
                RTM_NEWADDR => out.extend(parse_addr(body)),
                _ => {}
            }
        }
    }
}

/// A socket subscribed to address notifications of both families.
#[derive(Debug)]
pub struct AddrEvents(Socket);

impl AddrEvents {
    /// Subscribes. Subscribe before taking the first [`dump`], so that no change falls
    /// between the two.
    pub fn subscribe() -> io::Result<Self> {
        // Non-blocking: `wait` polls, then drains until EAGAIN.
        Socket::open(RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR, libc::SOCK_NONBLOCK).map(Self)
    }

    /// Waits up to `timeout` for notifications and consumes every one pending. True when
    /// an address was added or removed anywhere, or when notifications were lost (the
    /// socket's buffer overflowed: `ENOBUFS`); either way the caller takes a new [`dump`].
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        if !self.0.poll_in(timeout)? {
            return Ok(false);
        }
        let mut buf = vec![0u8; 64 * 1024];
        let mut changed = false;
        loop {
            match self.0.recv(&mut buf) {
                Ok(n) => {
                    changed |= messages(&buf[..n])?
                        .iter()
                        .any(|(k, _, _)| matches!(*k, RTM_NEWADDR | RTM_DELADDR));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(changed),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => changed = true,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Splits a netlink datagram into `(type, flags, payload)`.
fn messages(mut b: &[u8]) -> io::Result<Vec<(u16, u16, &[u8])>> {
    let mut out = Vec::new();
    while b.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if len < NLMSG_HDRLEN || len > b.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "bad netlink message length",
            ));
        }
        let kind = u16::from_ne_bytes([b[4], b[5]]);
        let flags = u16::from_ne_bytes([b[6], b[7]]);
        out.push((kind, flags, &b[NLMSG_HDRLEN..len]));
        b = b.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
    Ok(out)
}

/// Decodes an `RTM_NEWADDR` payload: `ifaddrmsg` then attributes.
fn parse_addr(body: &[u8]) -> Option<IfAddr> {
    let hdr = body.get(..IFADDRMSG_LEN)?;
    let (family, prefix_len, flags8) = (i32::from(hdr[0]), hdr[1], hdr[2]);
    let index = u32::from_ne_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
    let (mut address, mut local, mut broadcast, mut flags) = (None, None, None, None);
    for (kind, value) in attrs_of(&body[IFADDRMSG_LEN..]) {
        let ip = || -> Option<IpAddr> {
            match family {
                libc::AF_INET => Some(IpAddr::from(<[u8; 4]>::try_from(value).ok()?)),
                libc::AF_INET6 => Some(IpAddr::from(<[u8; 16]>::try_from(value).ok()?)),
                _ => None,
            }
        };
        match kind {
            IFA_ADDRESS => address = ip(),
            IFA_LOCAL => local = ip(),
            IFA_BROADCAST => {
                broadcast = match ip() {
                    Some(IpAddr::V4(b)) => Some(b),
                    _ => None,
                }
            }
            IFA_FLAGS => flags = value.try_into().ok().map(u32::from_ne_bytes),
            _ => {}
        }
    }
    Some(IfAddr {
        index,
        // On a point-to-point link IFA_ADDRESS is the peer's; IFA_LOCAL is ours.
        addr: local.or(address)?,
        prefix_len,
        broadcast,
        flags: flags.unwrap_or(u32::from(flags8)),
    })
}

/// Iterates `(type, value)` over netlink attributes, stopping at the first bad one.
pub(crate) fn attrs_of(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes([*b.first()?, *b.get(1)?]));
        let kind = u16::from_ne_bytes([*b.get(2)?, *b.get(3)?]) & NLA_TYPE_MASK;
        let value = b.get(4..len)?;
        b = b.get(len.next_multiple_of(4)..).unwrap_or_default();
        Some((kind, value))
    })
}

/// An rtnetlink socket, bound to `groups` (multicast groups to receive; 0 for none).
#[derive(Debug)]
struct Socket(OwnedFd);

impl Socket {
    /// `flags`: extra socket type flags (`SOCK_NONBLOCK`).
    fn open(groups: u32, flags: libc::c_int) -> io::Result<Self> {
        // SAFETY: plain syscall with integer arguments; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | flags,
                NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
        let sock = Self(unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: sockaddr_nl is plain data; all zeroes is a valid value.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        sa.nl_groups = groups;
        let len = libc::socklen_t::try_from(size_of::<libc::sockaddr_nl>()).expect("fits");
        // SAFETY: `sa` is a live sockaddr_nl of `len` bytes; the kernel only reads it.
        let rc = unsafe {
            libc::bind(
                sock.0.as_raw_fd(),
                std::ptr::from_ref(&sa).cast::<libc::sockaddr>(),
                len,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // A bounded wait for dumps: the kernel answers them synchronously, so a timeout
        // means something is badly wrong, not slow.
        let timeout = libc::timeval {
            tv_sec: 5,
            tv_usec: 0,
        };
        let tlen = libc::socklen_t::try_from(size_of::<libc::timeval>()).expect("fits");
        // SAFETY: `timeout` is a live timeval of `tlen` bytes; the kernel only reads it.
        let rc = unsafe {
            libc::setsockopt(
                sock.0.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                std::ptr::from_ref(&timeout).cast(),
                tlen,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sock)
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: `msg` is a live buffer of `msg.len()` bytes; the kernel only reads it.
        let n = unsafe { libc::send(self.0.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
        let n = unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// Waits up to `timeout` for something to read.
    fn poll_in(&self, timeout: Duration) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `p` is one live pollfd for the duration of the call.
        let n = unsafe { libc::poll(&raw mut p, 1, ms) };
        match n {
            n if n > 0 => Ok(true),
            0 => Ok(false),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifa(a: &str, len: u8) -> IfAddr {
        IfAddr {
            index: 2,
            addr: a.parse().unwrap(),
            prefix_len: len,
            broadcast: None,
            flags: 0,
        }
    }

    #[test]
    fn only_unicast_addresses_are_answerable() {
        let mut bcast = ifa("198.18.5.1", 24);
        bcast.broadcast = Some(Ipv4Addr::new(198, 18, 5, 128));
        let all = [
            ifa("198.18.0.1", 24),
            ifa("198.18.1.1", 31),
            ifa("198.18.2.9", 32),
            bcast,
            ifa("fd00:1::1", 64),
            ifa("fe80::1", 64),
        ];
        for (a, want) in [
            ("198.18.0.1", true),
            ("198.18.0.77", true),
            ("198.18.0.255", false), // RFC 922 directed broadcast
            ("198.18.0.0", false),   // the all-zeros form
            ("198.18.1.0", true),    // a /31 has two hosts and no broadcast (RFC 3021)
            ("198.18.1.1", true),
            ("198.18.2.9", true),
            ("198.18.5.128", false), // an explicit IFA_BROADCAST
            ("255.255.255.255", false),
            ("224.0.0.251", false),
            ("239.1.2.3", false),
            ("240.0.0.1", false),
            ("0.0.0.0", false),
            ("127.0.0.1", false),
            ("fd00:1::1", true),
            ("fe80::1", true),
            ("fd00:1::", false), // subnet-router anycast
            ("::", false),
            ("::1", false),
            ("ff02::fb", false),
            ("ff02::1", false),
            ("::ffff:198.18.0.1", true), // canonicalized: the IPv4 map holds it
            ("::ffff:198.18.0.255", false),
        ] {
            assert_eq!(answerable(a.parse().unwrap(), &all), want, "{a}");
        }
    }

    #[test]
    fn tentative_and_failed_addresses_are_not_usable() {
        let mut a = ifa("fd00::1", 64);
        assert!(a.usable());
        a.flags = IFA_F_TENTATIVE;
        assert!(!a.usable());
        a.flags = IFA_F_DADFAILED | 0x80; // with IFA_F_PERMANENT
        assert!(!a.usable());
        a.flags = IFA_F_TENTATIVE | IFA_F_OPTIMISTIC;
        assert!(a.usable());
    }

    #[test]
    fn parses_an_rtm_newaddr_payload() {
        // ifaddrmsg: AF_INET, /24, flags 0x80, scope 0, index 3; IFA_ADDRESS, IFA_LOCAL,
        // IFA_BROADCAST, IFA_FLAGS.
        let mut b = vec![libc::AF_INET as u8, 24, 0x80, 0];
        b.extend_from_slice(&3u32.to_ne_bytes());
        for (kind, value) in [
            (IFA_ADDRESS, vec![198, 18, 0, 2]),
            (IFA_LOCAL, vec![198, 18, 0, 1]),
            (IFA_BROADCAST, vec![198, 18, 0, 255]),
            (IFA_FLAGS, 0x80u32.to_ne_bytes().to_vec()),
        ] {
            b.extend_from_slice(&(4 + value.len() as u16).to_ne_bytes());
            b.extend_from_slice(&kind.to_ne_bytes());
            b.extend_from_slice(&value);
        }
        let a = parse_addr(&b).unwrap();
        assert_eq!(
            a,
            IfAddr {
                index: 3,
                addr: "198.18.0.1".parse().unwrap(),
                prefix_len: 24,
                broadcast: Some(Ipv4Addr::new(198, 18, 0, 255)),
                flags: 0x80,
            }
        );
        assert!(parse_addr(&b[..6]).is_none());
        // Cut inside the first attribute: no address, so no entry.
        assert!(parse_addr(&b[..IFADDRMSG_LEN + 6]).is_none());
    }

    #[test]
    fn dump_lists_loopback() {
        // No privilege needed: every namespace has lo with 127.0.0.1 once it is up, and
        // the dump must at least work and parse (lo may be down in a bare namespace).
        let all = dump().expect("RTM_GETADDR dump");
        for a in &all {
            assert_ne!(a.index, 0, "{a:?}");
        }
    }
}
