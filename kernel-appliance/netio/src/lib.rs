//! # skua-netio: batched kernel-socket I/O for `skuad`
//!
//! What it does: receive and send UDP datagrams in batches with `recvmmsg(2)` /
//! `sendmmsg(2)` (one syscall per up to [`Batch::capacity`] datagrams instead of one per
//! datagram), set the socket options a DNS server needs (`SO_REUSEPORT` before bind, buffer
//! sizes), pin threads to CPUs, and return freed heap to the OS after a large zone load.
//!
//! What it does not do: parse DNS, own sockets' lifetimes (callers pass `&UdpSocket`),
//! AF_XDP (a separate crate), or anything async.
//!
//! With skua-xdp, the only crate of the daemon with `unsafe` code: each block is a single
//! libc call whose pointers come from live, correctly sized Rust buffers ([`Batch`], socket
//! addresses); the ethtool queries hand the kernel buffers that end at a guard page, because
//! the kernel writes as many entries as a set holds at the time of the call ([`ethtool`]).

pub mod ethtool;

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A set of datagram buffers with their peer addresses, for one `recvmmsg` or `sendmmsg`.
pub struct Batch {
    buf_size: usize,
    bufs: Vec<u8>,
    lens: Vec<usize>,
    addrs: Vec<libc::sockaddr_storage>,
    addr_lens: Vec<libc::socklen_t>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    count: usize,
}

// SAFETY: the raw pointers inside `iovs`/`hdrs` are scratch values rebuilt before every
// syscall from buffers the Batch owns; they are never dereferenced outside those calls, so
// moving the Batch to another thread is sound.
unsafe impl Send for Batch {}

impl Batch {
    /// `capacity` datagrams of up to `buf_size` bytes each.
    pub fn new(capacity: usize, buf_size: usize) -> Self {
        // SAFETY: sockaddr_storage, iovec and mmsghdr are plain C structs for which the
        // all-zero bit pattern is a valid (empty) value.
        let zero_addr: libc::sockaddr_storage = unsafe { zeroed() };
        // SAFETY: as above.
        let zero_iov: libc::iovec = unsafe { zeroed() };
        // SAFETY: as above.
        let zero_hdr: libc::mmsghdr = unsafe { zeroed() };
        Self {
            buf_size,
            bufs: vec![0; capacity * buf_size],
            lens: vec![0; capacity],
            addrs: vec![zero_addr; capacity],
            addr_lens: vec![0; capacity],
            iovs: vec![zero_iov; capacity],
            hdrs: vec![zero_hdr; capacity],
            count: 0,
        }
    }

    /// How many datagrams fit.
    pub fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// Datagrams held after the last [`Batch::recv`] (or set with [`Batch::push`]).
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no datagram is held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Forgets the held datagrams.
    pub fn clear(&mut self) {
        self.count = 0;
    }

    /// Datagram `i`: its bytes and its peer.
    pub fn get(&self, i: usize) -> Option<(&[u8], SocketAddr)> {
        if i >= self.count {
            return None;
        }
        let start = i * self.buf_size;
        let data = &self.bufs[start..start + self.lens[i]];
        Some((data, from_storage(&self.addrs[i])?))
    }

    /// The next free buffer (whole `buf_size`), to write a datagram into before [`Batch::push`].
    pub fn next_buf(&mut self) -> Option<&mut [u8]> {
        if self.count >= self.capacity() {
            return None;
        }
        let start = self.count * self.buf_size;
        Some(&mut self.bufs[start..start + self.buf_size])
    }

    /// Commits the datagram written into [`Batch::next_buf`]: `len` bytes to `peer`.
    pub fn push(&mut self, len: usize, peer: SocketAddr) {
        if self.count >= self.capacity() {
            return;
        }
        let i = self.count;
        self.lens[i] = len.min(self.buf_size);
        self.addr_lens[i] = to_storage(peer, &mut self.addrs[i]);
        self.count += 1;
    }

    fn prepare(&mut self, n: usize, recv: bool) {
        for i in 0..n {
            let start = i * self.buf_size;
            self.iovs[i] = libc::iovec {
                iov_base: self.bufs[start..].as_mut_ptr().cast(),
                iov_len: if recv { self.buf_size } else { self.lens[i] },
            };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_name = std::ptr::from_mut(&mut self.addrs[i]).cast();
            h.msg_namelen = if recv {
                // Cannot truncate: sockaddr_storage is 128 bytes.
                size_of::<libc::sockaddr_storage>() as libc::socklen_t
            } else {
                self.addr_lens[i]
            };
            h.msg_iov = std::ptr::from_mut(&mut self.iovs[i]);
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
            h.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
    }

    /// Receives up to `capacity` datagrams; blocks until at least one arrives (or the
    /// socket's read timeout expires: then `Ok(0)`). Datagrams longer than `buf_size` are
    /// reported with `buf_size` bytes (truncated; the engine answers FORMERR or drops).
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        let n = self.capacity();
        self.prepare(n, true);
        // SAFETY: `hdrs[..n]` point at `iovs`, `addrs` and `bufs` owned by self, each sized as
        // declared in `prepare`; the kernel writes at most those sizes. `n` ≤ hdrs.len().
        let r = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                // Cannot truncate: batches are small (≤ 1024).
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            self.count = 0;
            return match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        // Cannot truncate or be negative: checked above, r ≤ n.
        let got = r as usize;
        for i in 0..got {
            self.lens[i] = (self.hdrs[i].msg_len as usize).min(self.buf_size);
        }
        self.count = got;
        Ok(got)
    }

    /// Sends every held datagram (looping over partial sends); returns how many were sent.
    /// Datagrams the kernel refuses (e.g. an unreachable peer) are skipped, not retried.
    pub fn send(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        let total = self.count;
        self.prepare(total, false);
        let mut sent = 0usize;
        while sent < total {
            // SAFETY: `hdrs[sent..total]` were prepared above and point into buffers owned by
            // self; the kernel only reads them.
            let r = unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    self.hdrs[sent..].as_mut_ptr(),
                    // Cannot truncate: batches are small.
                    (total - sent) as libc::c_uint,
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    // A per-datagram error (EPERM, ENETUNREACH...) stops the batch at that
                    // datagram: skip it and go on with the rest.
                    _ if sent + 1 < total => {
                        sent += 1;
                        continue;
                    }
                    _ => break,
                }
            }
            // Cannot be negative: checked above.
            sent += r as usize;
            if r == 0 {
                break;
            }
        }
        self.count = 0;
        Ok(sent)
    }
}

fn from_storage(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: ss_family says this storage holds a sockaddr_in, which is smaller than
            // sockaddr_storage and has no invalid bit patterns.
            let a: libc::sockaddr_in = unsafe { std::ptr::read(std::ptr::from_ref(s).cast()) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: ss_family says this storage holds a sockaddr_in6 (see above).
            let a: libc::sockaddr_in6 = unsafe { std::ptr::read(std::ptr::from_ref(s).cast()) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn to_storage(addr: SocketAddr, s: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: all-zero is a valid sockaddr_in.
            let mut sin: libc::sockaddr_in = unsafe { zeroed() };
            // Cannot truncate: AF_INET is 2.
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
            unsafe { std::ptr::write(std::ptr::from_mut(s).cast(), sin) };
            // Cannot truncate: 16 bytes.
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            // SAFETY: all-zero is a valid sockaddr_in6.
            let mut sin6: libc::sockaddr_in6 = unsafe { zeroed() };
            // Cannot truncate: AF_INET6 is 10.
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
            unsafe { std::ptr::write(std::ptr::from_mut(s).cast(), sin6) };
            // Cannot truncate: 28 bytes.
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

fn setsockopt_int(fd: i32, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: passes a pointer to a live i32 and its exact size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::from_ref(&value).cast(),
            // Cannot truncate: 4 bytes.
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sets `SO_SNDBUF` on a connected socket. Fixing the size also turns off the kernel's
/// send-buffer autotuning (which grows to megabytes), so a peer that stops reading blocks
/// our writes quickly and its timeout applies.
pub fn set_send_buffer(sock: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    setsockopt_int(
        sock.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_SNDBUF,
        i32::try_from(bytes).unwrap_or(i32::MAX),
    )
}

/// Socket type for [`bind_socket`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SOCK_DGRAM.
    Udp,
    /// SOCK_STREAM (listening).
    Tcp,
}

/// Creates, configures and binds a socket: `SO_REUSEPORT` (set before `bind`, so that one
/// socket per worker shares the port and the kernel spreads flows across them),
/// `SO_REUSEADDR` for TCP restarts, `IPV6_V6ONLY` for IPv6 addresses, optional buffer sizes.
/// TCP sockets are put in listening state with `backlog`. `freebind` (`IP_FREEBIND`, which
/// covers IPv6 too): bind an address the host does not hold (yet), as a service address that
/// the host agent adds on takeover; datagrams arrive once the address is configured.
pub fn bind_socket(
    addr: SocketAddr,
    kind: Kind,
    reuseport: bool,
    rcvbuf: Option<usize>,
    sndbuf: Option<usize>,
    backlog: i32,
    freebind: bool,
) -> io::Result<OwnedFd> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let ty = match kind {
        Kind::Udp => libc::SOCK_DGRAM,
        Kind::Tcp => libc::SOCK_STREAM,
    } | libc::SOCK_CLOEXEC;
    // SAFETY: plain syscall with constant arguments.
    let fd = unsafe { libc::socket(domain, ty, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    if reuseport {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    if kind == Kind::Tcp {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    }
    if addr.is_ipv6() {
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
    }
    if freebind {
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_FREEBIND, 1)?;
    }
    // Ask for the size; the kernel caps it at rmem_max (root may use the FORCE variants).
    if let Some(n) = rcvbuf {
        let n = i32::try_from(n).unwrap_or(i32::MAX);
        if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, n).is_err() {
            setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, n)?;
        }
    }
    if let Some(n) = sndbuf {
        let n = i32::try_from(n).unwrap_or(i32::MAX);
        if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, n).is_err() {
            setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, n)?;
        }
    }
    // SAFETY: all-zero is a valid sockaddr_storage, then filled by to_storage.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let len = to_storage(addr, &mut ss);
    // SAFETY: `ss` holds a sockaddr of `len` bytes for this socket's family.
    let r = unsafe { libc::bind(fd, std::ptr::from_ref(&ss).cast(), len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if kind == Kind::Tcp {
        // SAFETY: plain syscall on a bound socket.
        if unsafe { libc::listen(fd, backlog) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(owned)
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock `bpf_ktime_get_ns()` reads in an XDP program
/// (in the root time namespace), which `Instant` hides behind an opaque origin.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the one passed and reads nothing else;
    // CLOCK_MONOTONIC exists on every Linux, so it does not fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    // Never negative for CLOCK_MONOTONIC.
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    if cpu >= 8 * size_of::<libc::cpu_set_t>() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: CPU_SET writes one bit inside `set`; cpu is in range (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: passes a live cpu_set_t and its exact size; 0 = the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Number of CPUs this process may run on.
pub fn available_cpus() -> Vec<usize> {
    // SAFETY: zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    // SAFETY: passes a live cpu_set_t and its exact size.
    let r = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if r < 0 {
        return vec![0];
    }
    (0..8 * size_of::<libc::cpu_set_t>())
        // SAFETY: reads one bit of a live set; i is in range.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// Returns freed heap to the OS (glibc `malloc_trim`); call after building large zones so
/// that the transient load-time memory does not stay in RSS.
pub fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Raises this process's soft limit on open descriptors (`RLIMIT_NOFILE`) to `want`, or to
/// the hard limit when that is lower (an unprivileged process may raise its soft limit up
/// to its hard one, getrlimit(2)); a soft limit already at `want` or above is left alone.
/// Returns the soft limit in force afterwards.
pub fn raise_open_files(want: u64) -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the live struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let want: libc::rlim_t = want;
    if lim.rlim_cur >= want {
        return Ok(lim.rlim_cur);
    }
    let raised = libc::rlimit {
        rlim_cur: want.min(lim.rlim_max),
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit reads one live rlimit; the soft value is at most the hard one.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(raised.rlim_cur)
}

/// Resident set size of this process in bytes (from /proc/self/statm), if known.
pub fn rss_bytes() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = s.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * usize::try_from(page).ok()?)
}

/// A network interface holding some of our addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Name (`eth0`).
    pub name: String,
    /// Index.
    pub index: u32,
    /// The addresses of `wanted` found on it.
    pub addrs: Vec<std::net::IpAddr>,
    /// True for loopback.
    pub loopback: bool,
}

/// Finds which interfaces hold the given local addresses (`getifaddrs(3)`). Unspecified
/// addresses (0.0.0.0, ::) match every interface with an address of that family.
pub fn interfaces_for(wanted: &[std::net::IpAddr]) -> io::Result<Vec<Interface>> {
    use std::ffi::CStr;
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out: Vec<Interface> = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr of at least its family's size.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        let ss = match family {
            libc::AF_INET | libc::AF_INET6 => {
                // SAFETY: zero is a valid sockaddr_storage.
                let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
                let n = if family == libc::AF_INET {
                    size_of::<libc::sockaddr_in>()
                } else {
                    size_of::<libc::sockaddr_in6>()
                };
                // SAFETY: copies exactly the family's sockaddr size from a valid sockaddr
                // into a larger storage.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        ifa.ifa_addr.cast::<u8>(),
                        std::ptr::from_mut(&mut ss).cast::<u8>(),
                        n,
                    )
                };
                ss
            }
            _ => continue,
        };
        let Some(sa) = from_storage(&ss) else {
            continue;
        };
        let ip = sa.ip();
        let hit = wanted
            .iter()
            .any(|w| *w == ip || (w.is_unspecified() && w.is_ipv4() == ip.is_ipv4()));
        if !hit {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let loopback = ifa.ifa_flags & (libc::IFF_LOOPBACK as u32) != 0;
        let cname = std::ffi::CString::new(name.clone()).unwrap_or_default();
        // SAFETY: passes a valid NUL-terminated name.
        let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        match out.iter_mut().find(|i| i.name == name) {
            Some(i) => i.addrs.push(ip),
            None => out.push(Interface {
                name,
                index,
                addrs: vec![ip],
                loopback,
            }),
        }
    }
    // SAFETY: frees the list getifaddrs allocated; no reference into it survives.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The index of an interface, by name.
pub fn if_index(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: passes a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// Number of RX queues of an interface (from sysfs; 1 when unknown).
pub fn rx_queues(ifname: &str) -> usize {
    std::fs::read_dir(format!("/sys/class/net/{ifname}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

/// The MAC address of an interface (from sysfs).
pub fn mac_address(ifname: &str) -> Option<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{ifname}/address")).ok()?;
    let mut mac = [0u8; 6];
    let mut parts = s.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn batch_round_trip_over_loopback() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut tx = Batch::new(8, 512);
        for i in 0..5u8 {
            let buf = tx.next_buf().unwrap();
            buf[..3].copy_from_slice(&[i, i, i]);
            tx.push(3, b.local_addr().unwrap());
        }
        assert_eq!(tx.send(&a).unwrap(), 5);
        let mut rx = Batch::new(8, 512);
        let mut got = 0;
        while got < 5 {
            let n = rx.recv(&b).unwrap();
            assert!(n > 0);
            for i in 0..n {
                let (d, from) = rx.get(i).unwrap();
                assert_eq!(from, a.local_addr().unwrap());
                assert_eq!(d, &[(got + i) as u8; 3]);
            }
            got += n;
        }
    }

    #[test]
    fn loopback_interface_found() {
        let ifs = interfaces_for(&["127.0.0.1".parse().unwrap()]).unwrap();
        assert_eq!(ifs.len(), 1);
        assert!(ifs[0].loopback);
        assert_eq!(ifs[0].name, "lo");
        assert!(ifs[0].index > 0);
        assert!(rx_queues("lo") >= 1);
        assert_eq!(mac_address("lo"), Some([0; 6]));
        assert!(
            interfaces_for(&["198.18.255.254".parse().unwrap()])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn reuseport_allows_two_sockets_on_one_port() {
        let s1 = bind_socket(
            "127.0.0.1:0".parse().unwrap(),
            Kind::Udp,
            true,
            Some(1 << 20),
            None,
            0,
            false,
        )
        .unwrap();
        let u1 = UdpSocket::from(s1);
        let addr = u1.local_addr().unwrap();
        let s2 = bind_socket(addr, Kind::Udp, true, None, None, 0, false).unwrap();
        assert_eq!(UdpSocket::from(s2).local_addr().unwrap(), addr);
        assert!(bind_socket(addr, Kind::Udp, false, None, None, 0, false).is_err());
    }

    #[test]
    fn freebind_binds_an_address_the_host_does_not_hold() {
        // 198.18.255.253 is on no interface of a test machine (198.18.0.0/15 is the
        // benchmarking range these tests use only inside namespaces).
        let addr: SocketAddr = "198.18.255.253:0".parse().unwrap();
        assert!(bind_socket(addr, Kind::Udp, false, None, None, 0, false).is_err());
        let s = bind_socket(addr, Kind::Udp, false, None, None, 0, true).unwrap();
        assert_eq!(UdpSocket::from(s).local_addr().unwrap().ip(), addr.ip());
        let t = bind_socket(addr, Kind::Tcp, false, None, None, 16, true).unwrap();
        drop(t);
        let v6: SocketAddr = "[fd00:53::fffe]:0".parse().unwrap();
        assert!(bind_socket(v6, Kind::Udp, false, None, None, 0, true).is_ok());
    }
}
