//! The agent's kernel I/O: VRRP's raw sockets (IP protocol 112), takeover announcements
//! (gratuitous ARP on a packet socket, unsolicited Neighbor Advertisement on an ICMPv6
//! socket), the interface's addresses (rtnetlink) and its link state, and the dummy
//! interface the anycast prefixes live on (rtnetlink).
//!
//! The protocol itself is skua-vrrp's (sans-IO); this module only moves its bytes. The
//! crate's only `unsafe` is here, for the packet socket (`sockaddr_ll`), each block with
//! its `// SAFETY:`.

use std::io::{self, Read};
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkHeader,
    NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage, AddressScope};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use nix::sys::socket::{
    ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg, setsockopt, sockopt,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::addr::Vip;

/// The interface's index, or an error naming it.
pub fn if_index(name: &str) -> io::Result<u32> {
    nix::net::if_::if_nametoindex(name)
        .map_err(|e| io::Error::other(format!("interface {name}: {e}")))
}

/// Whether the interface has carrier (`/sys/class/net/IF/operstate` is `up`, or `unknown`
/// for interfaces that do not report one, such as a dummy).
pub fn link_up(name: &str) -> bool {
    match std::fs::read_to_string(format!("/sys/class/net/{name}/operstate")) {
        Ok(s) => matches!(s.trim(), "up" | "unknown"),
        Err(_) => false,
    }
}

/// The interface's MAC address.
pub fn mac(name: &str) -> io::Result<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{name}/address"))?;
    let mut out = [0u8; 6];
    let mut parts = s.trim().split(':');
    for b in &mut out {
        *b = parts
            .next()
            .and_then(|p| u8::from_str_radix(p, 16).ok())
            .ok_or_else(|| io::Error::other(format!("{name}: bad MAC address '{}'", s.trim())))?;
    }
    Ok(out)
}

/// The interface's addresses of a family (IPv6: link-local ones first), from
/// `getifaddrs(3)`.
pub fn addresses(name: &str, v6: bool) -> io::Result<Vec<IpAddr>> {
    let mut out = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs().map_err(io::Error::from)? {
        if ifa.interface_name != name {
            continue;
        }
        let Some(a) = ifa.address else { continue };
        match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
            (Some(s), _) if !v6 => out.push(IpAddr::V4(s.ip())),
            (_, Some(s)) if v6 => out.push(IpAddr::V6(s.ip())),
            _ => {}
        }
    }
    out.sort_by_key(|a| match a {
        IpAddr::V6(v) => !v.is_unicast_link_local(),
        IpAddr::V4(_) => false,
    });
    Ok(out)
}

/// A VRRP socket for one instance: bound to the interface, joined to the group (unless
/// unicast), TTL / hop limit 255 on everything it sends (RFC 9568 §5.1.1.3, §5.1.2.3).
pub struct VrrpSocket {
    sock: Socket,
    v6: bool,
    ifindex: u32,
}

/// One received advertisement with what the receive checks need (§7.1).
pub struct Received {
    /// IP source.
    pub src: IpAddr,
    /// IP destination.
    pub dst: IpAddr,
    /// TTL / hop limit.
    pub ttl: u8,
    /// The VRRP message.
    pub payload: Vec<u8>,
}

impl VrrpSocket {
    /// Opens the socket on `ifname`, sending from `src`; joins the VRRP group unless
    /// `unicast`.
    pub fn open(ifname: &str, src: IpAddr, unicast: bool) -> io::Result<VrrpSocket> {
        let ifindex = if_index(ifname)?;
        let proto = Protocol::from(i32::from(skua_vrrp::packet::PROTO));
        let v6 = src.is_ipv6();
        let sock = if v6 {
            Socket::new(Domain::IPV6, Type::RAW, Some(proto))?
        } else {
            Socket::new(Domain::IPV4, Type::RAW, Some(proto))?
        };
        sock.bind_device(Some(ifname.as_bytes()))?;
        sock.set_nonblocking(true)?;
        match src {
            IpAddr::V4(a) => {
                sock.set_ttl_v4(255)?;
                sock.set_multicast_ttl_v4(255)?;
                sock.set_multicast_loop_v4(false)?;
                // The interface (and the source: its address `a`) of what we send. Not
                // bind(): a raw socket bound to an address receives only datagrams to that
                // address, never the group's.
                sock.set_multicast_if_v4(&a)?;
                if !unicast {
                    sock.join_multicast_v4_n(
                        &skua_vrrp::packet::MCAST_V4,
                        &socket2::InterfaceIndexOrAddress::Index(ifindex),
                    )?;
                }
            }
            IpAddr::V6(_) => {
                sock.set_unicast_hops_v6(255)?;
                sock.set_multicast_hops_v6(255)?;
                sock.set_multicast_loop_v6(false)?;
                sock.set_multicast_if_v6(ifindex)?;
                sock.set_recv_hoplimit_v6(true)?;
                setsockopt(&sock.as_fd(), sockopt::Ipv6RecvPacketInfo, &true)
                    .map_err(io::Error::from)?;
                // Not bound either (see IPv4): the kernel sends to ff02::12 from the
                // interface's link-local address, the source RFC 9568 §5.1.2.1 asks for.
                if !unicast {
                    sock.join_multicast_v6(&skua_vrrp::packet::MCAST_V6, ifindex)?;
                }
            }
        }
        Ok(VrrpSocket { sock, v6, ifindex })
    }

    /// The descriptor, for poll.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// Sends one VRRP message to `dst`.
    pub fn send(&self, dst: IpAddr, payload: &[u8]) -> io::Result<()> {
        let to = match dst {
            IpAddr::V4(_) => SocketAddr::new(dst, 0),
            IpAddr::V6(a) => {
                let scope = if a.is_unicast_link_local() || a.is_multicast() {
                    self.ifindex
                } else {
                    0
                };
                SocketAddr::V6(SocketAddrV6::new(a, 0, 0, scope))
            }
        };
        self.sock.send_to(payload, &SockAddr::from(to))?;
        Ok(())
    }

    /// Reads one datagram, if any is waiting (`None`: would block, or not parseable as an
    /// IP packet of ours).
    pub fn recv(&self) -> io::Result<Option<Received>> {
        let mut buf = [0u8; 2048];
        let mut iov = [io::IoSliceMut::new(&mut buf)];
        let mut cmsg = nix::cmsg_space!(libc::in6_pktinfo, libc::c_int);
        let msg = match recvmsg::<SockaddrStorage>(
            self.sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(m) => m,
            Err(nix::errno::Errno::EAGAIN) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let n = msg.bytes;
        if !self.v6 {
            // IPv4 raw sockets hand over the IP header too.
            return Ok(parse_ipv4(&buf[..n]));
        }
        let (mut ttl, mut dst) = (None, None);
        for c in msg.cmsgs().into_iter().flatten() {
            match c {
                ControlMessageOwned::Ipv6HopLimit(h) => ttl = u8::try_from(h).ok(),
                ControlMessageOwned::Ipv6PacketInfo(pi) => {
                    dst = Some(Ipv6Addr::from(pi.ipi6_addr.s6_addr));
                }
                _ => {}
            }
        }
        let src = msg
            .address
            .and_then(|a| a.as_sockaddr_in6().map(|s| s.ip()));
        match (src, dst, ttl) {
            (Some(s), Some(d), Some(t)) => Ok(Some(Received {
                src: IpAddr::V6(s),
                dst: IpAddr::V6(d),
                ttl: t,
                payload: buf[..n].to_vec(),
            })),
            _ => Ok(None),
        }
    }
}

/// An IPv4 packet's source, destination, TTL and payload (`None` when it is not one).
fn parse_ipv4(p: &[u8]) -> Option<Received> {
    let ihl = usize::from(*p.first()? & 0x0f) * 4;
    if p.len() < ihl || ihl < 20 || p[0] >> 4 != 4 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([p[2], p[3]])).min(p.len());
    if total < ihl {
        return None;
    }
    Some(Received {
        src: IpAddr::V4(Ipv4Addr::new(p[12], p[13], p[14], p[15])),
        dst: IpAddr::V4(Ipv4Addr::new(p[16], p[17], p[18], p[19])),
        ttl: p[8],
        payload: p[ihl..total].to_vec(),
    })
}

/// Sends the takeover announcement for `vip` on `ifname`: a gratuitous ARP (RFC 5227 §3
/// announcement) for IPv4, an unsolicited Neighbor Advertisement with the Override flag
/// (RFC 4861 §7.2.6) from `ll` (the interface's link-local address) for IPv6.
pub fn announce(ifname: &str, vip: IpAddr, ll: Option<Ipv6Addr>) -> io::Result<()> {
    let mac = mac(ifname)?;
    let ifindex = if_index(ifname)?;
    match vip {
        IpAddr::V4(a) => {
            let frame = skua_vrrp::announce::garp_frame(mac, a);
            send_frame(ifindex, &frame)
        }
        IpAddr::V6(a) => {
            let ll =
                ll.ok_or_else(|| io::Error::other(format!("{ifname}: no link-local address")))?;
            let body = skua_vrrp::announce::unsolicited_na(ll, a, mac);
            let s = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))?;
            s.bind_device(Some(ifname.as_bytes()))?;
            s.set_multicast_hops_v6(255)?;
            s.set_multicast_if_v6(ifindex)?;
            s.bind(&SockAddr::from(SocketAddrV6::new(ll, 0, 0, ifindex)))?;
            let all_nodes =
                SocketAddrV6::new(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1), 0, 0, ifindex);
            s.send_to(&body, &SockAddr::from(all_nodes))?;
            Ok(())
        }
    }
}

/// A packet socket receiving the interface's ARP frames: another station announcing one of
/// our virtual addresses means another node took it without hearing us (a partition that
/// drops advertisements only), see [`crate::instance`].
pub struct ArpWatch {
    sock: Socket,
}

fn packet_addr(ifindex: u32, proto: u16) -> libc::sockaddr_ll {
    let z = MaybeUninit::<libc::sockaddr_ll>::zeroed();
    // SAFETY: sockaddr_ll is plain data for which all-zero bytes are a valid value.
    let mut sll = unsafe { z.assume_init() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = ifindex as i32;
    sll
}

fn packet_socket(proto: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call with constant arguments; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            i32::from(proto),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl ArpWatch {
    /// Opens the watch on the interface.
    pub fn open(ifindex: u32) -> io::Result<ArpWatch> {
        let proto = (libc::ETH_P_ARP as u16).to_be();
        let fd = packet_socket(proto)?;
        let sll = packet_addr(ifindex, proto);
        // SAFETY: bind reads a sockaddr_ll of the size given from `sll`, valid for the call.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                std::ptr::from_ref(&sll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let sock = Socket::from(fd);
        sock.set_nonblocking(true)?;
        Ok(ArpWatch { sock })
    }

    /// The descriptor, for poll.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// The next ARP message waiting, if any (frames that are not ARP are skipped).
    pub fn recv(&self) -> io::Result<Option<skua_vrrp::announce::Arp>> {
        let mut buf = [0u8; 256];
        loop {
            match (&self.sock).read(&mut buf) {
                Ok(n) => {
                    if let Some(a) = skua_vrrp::announce::parse_arp(&buf[..n]) {
                        return Ok(Some(a));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }
}

/// An ICMPv6 socket receiving the interface's Neighbor Advertisements: the IPv6 side of
/// [`ArpWatch`]. Only unsolicited ones with hop limit 255 (RFC 4861 §7.1.2) count as an
/// announcement: a solicited one answers somebody's question (our own probe's included).
pub struct NaWatch {
    sock: Socket,
}

impl NaWatch {
    /// Opens the watch on the interface.
    pub fn open(ifname: &str) -> io::Result<NaWatch> {
        let sock = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))?;
        sock.bind_device(Some(ifname.as_bytes()))?;
        sock.set_recv_hoplimit_v6(true)?;
        sock.set_nonblocking(true)?;
        Ok(NaWatch { sock })
    }

    /// The descriptor, for poll.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// The next unsolicited advertisement waiting: (target, its MAC).
    pub fn recv(&self) -> io::Result<Option<(Ipv6Addr, [u8; 6])>> {
        loop {
            let mut buf = [0u8; 1500];
            let mut iov = [io::IoSliceMut::new(&mut buf)];
            let mut cmsg = nix::cmsg_space!(libc::c_int);
            let msg = match recvmsg::<SockaddrStorage>(
                self.sock.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(m) => m,
                Err(nix::errno::Errno::EAGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            let n = msg.bytes;
            let hops = msg.cmsgs().into_iter().flatten().find_map(|c| match c {
                ControlMessageOwned::Ipv6HopLimit(h) => Some(h),
                _ => None,
            });
            let icmp = &buf[..n];
            if hops != Some(255) {
                continue;
            }
            let (Some(na), Some((_, solicited))) = (
                skua_vrrp::announce::parse_na(icmp),
                skua_vrrp::announce::na_flags(icmp),
            ) else {
                continue;
            };
            if let (false, Some(mac)) = (solicited, na.mac) {
                return Ok(Some((na.target, mac)));
            }
        }
    }
}

/// Another station announcing an address: ARP announcements (IPv4) or unsolicited Neighbor
/// Advertisements (IPv6).
pub enum Watch {
    /// IPv4.
    Arp(ArpWatch),
    /// IPv6.
    Na(NaWatch),
}

impl Watch {
    /// The descriptor, for poll.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Watch::Arp(w) => w.fd(),
            Watch::Na(w) => w.fd(),
        }
    }

    /// The next announcement waiting: (address, MAC). IPv4: an ARP announcement only
    /// (sender = target address, RFC 5227 §3), not the ordinary reply of a node whose kernel
    /// still holds the address, e.g. to our own probe's request.
    pub fn recv(&self) -> io::Result<Option<(IpAddr, [u8; 6])>> {
        match self {
            Watch::Arp(w) => loop {
                match w.recv()? {
                    Some(a) if a.sender_ip == a.target_ip => {
                        return Ok(Some((IpAddr::V4(a.sender_ip), a.sender_mac)));
                    }
                    Some(_) => continue,
                    None => return Ok(None),
                }
            },
            Watch::Na(w) => Ok(w.recv()?.map(|(t, m)| (IpAddr::V6(t), m))),
        }
    }
}

/// Sends one Ethernet frame on the interface through a packet socket.
fn send_frame(ifindex: u32, frame: &[u8]) -> io::Result<()> {
    let proto = (libc::ETH_P_ARP as u16).to_be();
    let fd = packet_socket(proto)?;
    let mut sll = packet_addr(ifindex, proto);
    sll.sll_halen = 6;
    sll.sll_addr[..6].copy_from_slice(&frame[..6]);
    // SAFETY: sendto reads `frame.len()` bytes from `frame` and a sockaddr_ll of the size
    // given from `sll`, both valid for the call's duration.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            0,
            std::ptr::from_ref(&sll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends one rtnetlink request and reads the kernel's answer: `Some(message)` for a request
/// answered by a message (a `Get`), `None` for an acknowledged change; a refusal as the
/// kernel's errno.
fn rtnl(payload: RouteNetlinkMessage, flags: u16) -> io::Result<Option<RouteNetlinkMessage>> {
    let mut nl = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(payload));
    nl.header.flags = flags;
    nl.header.sequence_number = 1;
    nl.finalize();
    let mut buf = vec![0u8; nl.buffer_len()];
    nl.serialize(&mut buf);
    let mut s = netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)?;
    s.bind_auto()?;
    s.connect(&netlink_sys::SocketAddr::new(0, 0))?;
    s.send(&buf, 0)?;
    // A link message with its statistics is a few kilobytes.
    let mut rx = vec![0u8; 65536];
    let n = s.recv(&mut &mut rx[..], 0)?;
    let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[..n])
        .map_err(|e| io::Error::other(format!("netlink reply: {e}")))?;
    match reply.payload {
        NetlinkPayload::Error(e) => match e.code {
            None => Ok(None),
            Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
        },
        NetlinkPayload::InnerMessage(m) => Ok(Some(m)),
        _ => Ok(None),
    }
}

/// Adds (`add`) or removes a virtual address on the interface (rtnetlink). IPv6 addresses
/// are added without duplicate address detection (`IFA_F_NODAD`): the address moves
/// between routers by design, and DAD would hold it tentative (unusable) for a second.
/// Adding an address already there, or removing one absent, is not an error.
pub fn set_address(ifindex: u32, vip: Vip, add: bool) -> io::Result<()> {
    let mut msg = AddressMessage::default();
    msg.header.family = if vip.addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    msg.header.prefix_len = vip.prefix;
    msg.header.index = ifindex;
    msg.header.scope = AddressScope::Universe;
    msg.attributes.push(AddressAttribute::Local(vip.addr));
    msg.attributes.push(AddressAttribute::Address(vip.addr));
    if vip.addr.is_ipv6() {
        msg.attributes
            .push(AddressAttribute::Flags(AddressFlags::Nodad));
    }
    let r = if add {
        rtnl(
            RouteNetlinkMessage::NewAddress(msg),
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
        )
    } else {
        rtnl(
            RouteNetlinkMessage::DelAddress(msg),
            NLM_F_REQUEST | NLM_F_ACK,
        )
    };
    match r {
        Ok(_) => Ok(()),
        // EEXIST on add, EADDRNOTAVAIL on remove: already as wanted.
        Err(e)
            if (add && e.raw_os_error() == Some(libc::EEXIST))
                || (!add && e.raw_os_error() == Some(libc::EADDRNOTAVAIL)) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// An interface as rtnetlink describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Its index.
    pub index: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
}

/// The interface named `name`, or `None` when there is none.
pub fn link(name: &str) -> io::Result<Option<Link>> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(name.to_string()));
    let m = match rtnl(RouteNetlinkMessage::GetLink(msg), NLM_F_REQUEST) {
        Ok(Some(RouteNetlinkMessage::NewLink(m))) => m,
        Ok(_) => return Err(io::Error::other(format!("{name}: no link in the reply"))),
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(Some(Link {
        index: m.header.index,
        up: m.header.flags.contains(LinkFlags::Up),
    }))
}

/// Makes sure the interface `name` exists and is up: an existing one (of any kind: a
/// dummy, `lo`, one the operator made) is used as it is; an absent one is created as a
/// dummy. Returns its index.
pub fn ensure_dummy(name: &str) -> io::Result<u32> {
    let l = match link(name)? {
        Some(l) => l,
        None => {
            let mut msg = LinkMessage::default();
            msg.attributes.push(LinkAttribute::IfName(name.to_string()));
            msg.attributes
                .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
                    InfoKind::Dummy,
                )]));
            match rtnl(
                RouteNetlinkMessage::NewLink(msg),
                NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
            ) {
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    return Err(io::Error::other(format!(
                        "creating dummy interface {name}: this kernel has no dummy driver \
                         (CONFIG_DUMMY); create the interface before the agent starts \
                         (`ip link add {name} type ifb`) or name an existing one"
                    )));
                }
                // EEXIST: created meanwhile by someone else, which is as good.
                Err(e) if e.raw_os_error() != Some(libc::EEXIST) => {
                    return Err(io::Error::other(format!(
                        "creating dummy interface {name}: {e}"
                    )));
                }
                _ => {}
            }
            link(name)?.ok_or_else(|| io::Error::other(format!("{name}: gone after creation")))?
        }
    };
    if !l.up {
        let mut msg = LinkMessage::default();
        msg.header.index = l.index;
        msg.header.flags = LinkFlags::Up;
        msg.header.change_mask = LinkFlags::Up;
        rtnl(RouteNetlinkMessage::SetLink(msg), NLM_F_REQUEST | NLM_F_ACK)
            .map_err(|e| io::Error::other(format!("setting {name} up: {e}")))?;
    }
    Ok(l.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_headers_are_read_and_bad_ones_refused() {
        let mut p = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 255, 112, 0, 0];
        p.extend_from_slice(&[198, 18, 0, 1, 224, 0, 0, 18]);
        p.extend_from_slice(&[0x31, 51, 100, 1, 0, 10, 0, 0]);
        let r = parse_ipv4(&p).unwrap();
        assert_eq!(r.src, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(r.dst, IpAddr::V4(skua_vrrp::packet::MCAST_V4));
        assert_eq!((r.ttl, r.payload.len()), (255, 8));
        assert!(parse_ipv4(&p[..10]).is_none());
        let mut bad = p.clone();
        bad[0] = 0x44; // IHL 16 bytes
        assert!(parse_ipv4(&bad).is_none());
        bad[0] = 0x65;
        assert!(parse_ipv4(&bad).is_none(), "not IPv4");
        assert!(parse_ipv4(&[]).is_none());
    }
}
