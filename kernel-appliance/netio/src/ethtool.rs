//! Two ethtool queries (`SIOCETHTOOL`, linux/ethtool.h): an interface's driver name and its
//! driver statistics (what `ethtool -i` and `ethtool -S` print).
//!
//! Used by the XDP dataplane to check facts the XDP API does not report, e.g. whether a veth
//! peer accepted the frames sent to it with `XDP_TX` (`tx_queue_N_xdp_xmit`).
//!
//! # Buffers the kernel sizes
//!
//! `ETHTOOL_GSTRINGS` and `ETHTOOL_GSTATS` are answered with the driver's *current* count,
//! written into the header, then that many entries after it (net/ethtool/ioctl.c:
//! `ethtool_get_strings` sets `gstrings.len` from `__ethtool_get_sset_count`,
//! `ethtool_get_stats` sets `stats.n_stats` from `get_sset_count`). The count we size from was
//! read by an earlier command (`ETHTOOL_GDRVINFO`), and the set can change in between
//! (veth's follows its queue count, e.g. `ethtool -L` while skuad starts). What the kernel
//! does with the count user space passes in depends on its version:
//!
//! - before "ethtool: Avoid overflowing userspace buffer on stats query" (netdev, December
//!   2025, backported to stable kernels) it is ignored: a set that grew is copied whole, past
//!   the end of a buffer sized from the old count;
//! - since, a non-zero count that differs from the current one is answered with a count of
//!   0 and no entries (and success).
//!
//! Both must be safe and give correct answers. Every buffer handed to the kernel is a
//! [`Guarded`] one: its own anonymous mapping whose usable bytes end exactly where a
//! `PROT_NONE` guard page begins. The kernel's `copy_to_user` writes a prefix of what it was
//! asked to and nothing past it (see [`Guarded`]), so on an older kernel a count that grew
//! makes the copy stop at the guard page and the ioctl fail with `EFAULT`; nothing outside
//! the mapping is written. [`stats`] passes the count it expects (so a newer kernel checks it
//! too), sizes the buffers with a margin, and reads again, a bounded number of times, when the
//! set changed: an `EFAULT`, a count of 0 where entries were expected, or names and values
//! from sets of different sizes. It never pairs a name with another statistic's value. The
//! ethtool netlink API would give length-delimited strings, but driver-private values
//! (`ETH_SS_STATS`) exist only through the ioctl, so the ioctl stays for both.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// `struct ethtool_drvinfo`: cmd, five 32-byte strings, 12 reserved bytes, five u32.
const DRVINFO_LEN: usize = 4 + 5 * 32 + 12 + 5 * 4;
/// Offset of `n_stats` in `struct ethtool_drvinfo`.
const DRVINFO_N_STATS: usize = 4 + 5 * 32 + 12 + 4;
/// `struct ethtool_gstrings` before its entries: cmd, string_set, len.
const GSTRINGS_HDR: usize = 12;
/// `struct ethtool_stats` before its entries: cmd, n_stats.
const GSTATS_HDR: usize = 8;
/// More statistics than any driver has: a bound on the buffers.
const MAX_STATS: usize = 1 << 16;
/// Reads of the statistics before [`stats`] gives up on a set that keeps changing.
const ATTEMPTS: usize = 4;

/// Room for a few more entries than the count we size from: a set that grew a little since
/// it was counted still fits, without an `EFAULT` and a retry.
fn with_margin(n: usize) -> usize {
    n + n / 4 + 16
}

/// `len` zero-initialised, writable bytes in an anonymous mapping of their own, ending
/// exactly where a `PROT_NONE` guard page of the same mapping begins.
///
/// Why that bounds what the kernel writes: `copy_to_user` (what every ethtool command uses
/// to write its answer) is built on `raw_copy_to_user`, whose contract every architecture
/// implements (include/linux/uaccess.h): "If raw_copy_{to,from}_user(to, from, size) returns
/// N, size - N bytes starting at to must become equal to the bytes fetched [...]. All data
/// past to + size - N must be left unmodified." What is written is therefore a prefix of the
/// destination, and every byte of that prefix was writable. The guard page is not
/// (`PROT_NONE`: any access faults, and the fault handler finds no write permission in the
/// VMA and takes the copy's exception fixup instead of writing), so the prefix ends at or
/// before the guard page and nothing at or past it changes; the caller gets `EFAULT`. On
/// x86-64 the copy is `rep movsb` with the direction flag clear (ascending addresses), or
/// `rep_movs_alternative` (arch/x86/lib/copy_user_64.S), whose word loop falls back to its
/// byte loop on a fault so that it stops exactly at the first byte it cannot write.
struct Guarded {
    /// Start of the mapping.
    map: NonNull<u8>,
    /// Length of the mapping: the usable pages and the guard page.
    map_len: usize,
    /// Offset of the buffer in the mapping: `map_len - page - len`.
    start: usize,
    /// Length of the buffer.
    len: usize,
}

fn page_size() -> usize {
    // SAFETY: sysconf(3) only reads its integer argument.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    // Every Linux page size is a positive power of two; 4 KiB if sysconf failed (-1).
    usize::try_from(page).unwrap_or(4096)
}

impl Guarded {
    fn new(len: usize) -> io::Result<Guarded> {
        let page = page_size();
        let usable = len.div_ceil(page) * page;
        let map_len = usable
            .checked_add(page)
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "buffer too large"))?;
        // Mapped inaccessible, then opened up to the usable part: a failure in between leaves
        // nothing writable.
        // SAFETY: an anonymous private mapping at an address the kernel picks: it overlaps
        // nothing that exists, and only integers are passed.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let guarded = Guarded {
            // mmap(2) never returns NULL for a request without MAP_FIXED.
            map: NonNull::new(map.cast()).ok_or_else(|| io::Error::other("mmap returned NULL"))?,
            map_len,
            start: usable - len,
            len,
        };
        if usable > 0 {
            // SAFETY: the first `usable` bytes of the mapping just made, which nothing else
            // references; page-aligned as mprotect(2) requires (mmap returns page-aligned
            // addresses, `usable` is a multiple of the page size). The last page stays
            // PROT_NONE: the guard.
            let r = unsafe { libc::mprotect(map, usable, libc::PROT_READ | libc::PROT_WRITE) };
            if r != 0 {
                // `guarded` unmaps it all when dropped.
                return Err(io::Error::last_os_error());
            }
        }
        Ok(guarded)
    }

    /// The first byte of the buffer; the guard page starts `len` bytes after it.
    fn base(&self) -> *mut u8 {
        // In bounds of the mapping: `start <= map_len - page`.
        self.map.as_ptr().wrapping_add(self.start)
    }

    /// [`Self::base`], for the kernel to write through.
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.base()
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `base()..base() + len` is the readable and writable part of the mapping
        // that ends at the guard page, mapped as long as `self` lives; anonymous memory is
        // initialised (zero, then whatever was written); the kernel writes into it only
        // during `Ethtool::ioctl`, which borrows `self` mutably, so not while this shared
        // slice lives.
        unsafe { std::slice::from_raw_parts(self.base(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes the slice the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.base(), self.len) }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the whole mapping made in `new`, unmapped once; no reference into it
        // outlives `self` (`bytes`/`bytes_mut` borrow `self`).
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// Runs the ethtool command whose header starts `buf`: the real `SIOCETHTOOL`, or in tests
/// a fake kernel that changes its statistics between calls.
trait Ethtool {
    fn ioctl(&mut self, ifname: &str, buf: &mut Guarded) -> io::Result<()>;
}

/// The running kernel, in the calling thread's network namespace.
struct Kernel;

impl Ethtool for Kernel {
    fn ioctl(&mut self, ifname: &str, buf: &mut Guarded) -> io::Result<()> {
        let name = ifname.as_bytes();
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "bad interface name",
            ));
        }
        // The commands whose answers the SAFETY argument below covers, each with a buffer that
        // holds at least its header (checked here rather than trusted from the callers).
        let header = match buf.bytes().get(..4).map(|c| u32_at(c, 0)) {
            Some(ETHTOOL_GDRVINFO) => DRVINFO_LEN,
            Some(ETHTOOL_GSTRINGS) => GSTRINGS_HDR,
            Some(ETHTOOL_GSTATS) => GSTATS_HDR,
            _ => 0,
        };
        if header == 0 || buf.bytes().len() < header {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an ethtool query this module makes",
            ));
        }
        // SAFETY: socket(2) takes plain integers; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new, valid descriptor that nothing else owns.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: `ifreq` is plain data; all zero is a valid value.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        // NUL-terminated: shorter than IFNAMSIZ, the rest stays zero.
        for (d, s) in ifr.ifr_name.iter_mut().zip(name) {
            *d = *s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
        // SAFETY: the kernel reads and may write back `ifr`, a live, whole `ifreq` borrowed
        // mutably for the call, whose name is NUL-terminated. Through `ifru_data` it reads
        // the command's header at the start of `buf` (checked above to be one of three
        // commands and to fit) and writes its answer at that address and after it
        // (net/ethtool/ioctl.c): for ETHTOOL_GDRVINFO a fixed-size struct, which `buf` holds
        // entirely; for ETHTOOL_GSTRINGS/GSTATS a header, then as many entries as the
        // driver has *now* (a kernel with the overflow fix: none unless that is the count in
        // the header), which may be more than `buf` holds. Those extra bytes land nowhere:
        // `buf` ends exactly at its mapping's PROT_NONE guard page and copy_to_user writes
        // only a prefix of its destination, all of it writable (see `Guarded`), so the copy
        // stops at the guard page and the ioctl returns EFAULT. `buf` is borrowed mutably,
        // so no Rust reference reads or writes it during the call, and it stays mapped until
        // it is dropped, after the call.
        let r = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn drvinfo(k: &mut impl Ethtool, ifname: &str) -> io::Result<[u8; DRVINFO_LEN]> {
    let mut buf = Guarded::new(DRVINFO_LEN)?;
    buf.bytes_mut()[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
    k.ioctl(ifname, &mut buf)?;
    let mut info = [0u8; DRVINFO_LEN];
    info.copy_from_slice(buf.bytes());
    Ok(info)
}

/// The count of driver statistics, as `ETHTOOL_GDRVINFO` reports it now.
fn n_stats(k: &mut impl Ethtool, ifname: &str) -> io::Result<usize> {
    Ok(u32_at(&drvinfo(k, ifname)?, DRVINFO_N_STATS) as usize)
}

/// The driver of `ifname` (`veth`, `virtio_net`, `mlx5_core`...), in the calling thread's
/// network namespace.
pub fn driver(ifname: &str) -> io::Result<String> {
    Ok(c_string(&drvinfo(&mut Kernel, ifname)?[4..36]))
}

/// The two commands whose answer the kernel sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    /// `ETHTOOL_GSTRINGS` of `ETH_SS_STATS`: 32-byte names.
    Names,
    /// `ETHTOOL_GSTATS`: u64 values.
    Values,
}

impl Table {
    fn header(self) -> usize {
        match self {
            Table::Names => GSTRINGS_HDR,
            Table::Values => GSTATS_HDR,
        }
    }

    fn entry(self) -> usize {
        match self {
            Table::Names => ETH_GSTRING_LEN,
            Table::Values => 8,
        }
    }

    /// The offset of the count in the header (`len`, `n_stats`): its last field.
    fn count_at(self) -> usize {
        self.header() - 4
    }
}

/// One GSTRINGS or GSTATS call.
enum Fetched {
    /// The buffer and the count of entries in it, at least one and at most its room.
    Done(Guarded, usize),
    /// The set changed since it was counted: the count the kernel reported (0 when it did not
    /// say), to size the next attempt.
    Changed(usize),
}

/// Runs `table`'s command expecting `n` entries (`n > 0`), with room for `room >= n`.
fn fetch(
    k: &mut impl Ethtool,
    ifname: &str,
    table: Table,
    n: usize,
    room: usize,
) -> io::Result<Fetched> {
    let mut buf = Guarded::new(table.header() + room * table.entry())?;
    let b = buf.bytes_mut();
    // Cannot truncate: n <= MAX_STATS. A kernel with the overflow fix answers nothing unless
    // this is its current count; an older one ignores it.
    let n32 = (n as u32).to_ne_bytes();
    match table {
        Table::Names => {
            b[..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
            b[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
            b[8..12].copy_from_slice(&n32);
        }
        Table::Values => {
            b[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
            b[4..8].copy_from_slice(&n32);
        }
    }
    let result = k.ioctl(ifname, &mut buf);
    // The kernel copies the header, with its count, before the entries (ioctl.c), so after
    // an EFAULT at the guard page the header still says how many entries it tried to copy.
    let count = u32_at(buf.bytes(), table.count_at()) as usize;
    match result {
        // An older kernel copying a set that outgrew the buffer, stopped by the guard page.
        Err(e) if e.raw_os_error() == Some(libc::EFAULT) => Ok(Fetched::Changed(count)),
        Err(e) => Err(e),
        // A newer kernel whose set no longer has `n` entries (or an older one whose set is
        // now empty: the caller re-counts).
        Ok(()) if count == 0 => Ok(Fetched::Changed(0)),
        // Cannot happen without an EFAULT (the entries past `room` would have hit the guard
        // page), but a count past the buffer must never be read as entries.
        Ok(()) if count > room => Ok(Fetched::Changed(count)),
        // `count` may differ from `n` on an older kernel: still one whole set.
        Ok(()) => Ok(Fetched::Done(buf, count)),
    }
}

/// The driver statistics of `ifname` (`ethtool -S`), names and values, in the calling
/// thread's network namespace.
///
/// The names and the values are read by two commands; if the set changes in between (or
/// outgrows the buffers), it is read again, up to a few times, then this gives up with an
/// error rather than pair names with values of another set.
pub fn stats(ifname: &str) -> io::Result<Vec<(String, u64)>> {
    stats_with(&mut Kernel, ifname)
}

fn stats_with(k: &mut impl Ethtool, ifname: &str) -> io::Result<Vec<(String, u64)>> {
    let mut n = n_stats(k, ifname)?;
    // The largest count an older kernel reported for a set that outgrew the buffer.
    let mut seen = 0;
    for _ in 0..ATTEMPTS {
        if n == 0 {
            return Ok(Vec::new());
        }
        if n.max(seen) > MAX_STATS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{ifname}: the driver reports {} statistics, more than {MAX_STATS}",
                    n.max(seen)
                ),
            ));
        }
        let room = with_margin(n.max(seen));
        let (names, n_names) = match fetch(k, ifname, Table::Names, n, room)? {
            Fetched::Done(buf, count) => (buf, count),
            Fetched::Changed(now) => {
                seen = seen.max(now);
                n = n_stats(k, ifname)?;
                continue;
            }
        };
        let (values, n_values) = match fetch(k, ifname, Table::Values, n, room)? {
            Fetched::Done(buf, count) => (buf, count),
            Fetched::Changed(now) => {
                seen = seen.max(now);
                n = n_stats(k, ifname)?;
                continue;
            }
        };
        if n_names != n_values {
            // The set changed between the two commands (on an older kernel, which answers
            // with whatever count it has): entry i of one is not entry i of the other.
            seen = seen.max(n_names.max(n_values));
            n = n_stats(k, ifname)?;
            continue;
        }
        let (names, values) = (names.bytes(), values.bytes());
        return Ok((0..n_names)
            .map(|i| {
                let s = GSTRINGS_HDR + i * ETH_GSTRING_LEN;
                let v = GSTATS_HDR + i * 8;
                let mut b = [0u8; 8];
                b.copy_from_slice(&values[v..v + 8]);
                (
                    c_string(&names[s..s + ETH_GSTRING_LEN]),
                    u64::from_ne_bytes(b),
                )
            })
            .collect());
    }
    Err(io::Error::other(format!(
        "{ifname}: the driver's statistics changed during each of {ATTEMPTS} attempts to read \
         them (last count {n})"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::process::Command;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn errors_name_the_cause() {
        // `lo` has no ethtool driver info; a missing interface is ENODEV. (Real drivers are
        // exercised by skuad's XDP tests on veth, and by the veth test below.)
        assert_eq!(
            driver("lo").unwrap_err().raw_os_error(),
            Some(libc::EOPNOTSUPP)
        );
        assert_eq!(
            driver("no-such-if0").unwrap_err().raw_os_error(),
            Some(libc::ENODEV)
        );
        assert!(driver("").is_err());
        assert!(driver("name-longer-than-ifnamsiz").is_err());
    }

    // -----------------------------------------------------------------------------------
    // The guard page, against a user-space stand-in for copy_to_user.

    /// Writes `data` at `to` in this process the way the kernel's copy_to_user does: through
    /// the page tables, forward, stopping at the first page it cannot write.
    /// process_vm_writev(2) pins the destination pages for writing (FOLL_WRITE, no
    /// FOLL_FORCE), so a PROT_NONE page stops it: it returns how many bytes it wrote, or
    /// EFAULT when it could write none.
    fn copy_to_user(to: *mut u8, data: &[u8]) -> io::Result<usize> {
        let local = libc::iovec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: data.len(),
        };
        let remote = libc::iovec {
            iov_base: to.cast(),
            iov_len: data.len(),
        };
        let pid = std::process::id() as libc::pid_t;
        // SAFETY: the syscall reads `data` through `local` (a live slice) and writes at most
        // `data.len()` bytes at `to` in this process, never to a page it cannot write. Every
        // caller passes an address inside a `Guarded` it borrows mutably, so what can be
        // written is that buffer (no other reference reads it during the call) and then its
        // PROT_NONE guard page, which stops the copy; every caller writes less than a page
        // past the buffer, so even a missing guard would only reach our own mapping.
        let r = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }

    /// The protection of the page holding `addr`, from /proc/self/maps (`rw-p`, `---p`).
    fn protection(addr: usize) -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for line in maps.lines() {
            let mut f = line.split_whitespace();
            let (range, perms) = (f.next().unwrap(), f.next().unwrap());
            let (a, b) = range.split_once('-').unwrap();
            let a = usize::from_str_radix(a, 16).unwrap();
            let b = usize::from_str_radix(b, 16).unwrap();
            if (a..b).contains(&addr) {
                return perms.to_string();
            }
        }
        panic!("{addr:#x} is not mapped")
    }

    #[test]
    fn the_guard_page_stops_a_copy_that_runs_past_the_buffer() {
        let page = page_size();
        for len in [1, 100, page - 1, page, page + 12] {
            let mut g = Guarded::new(len).unwrap();
            let base = g.as_mut_ptr() as usize;
            assert_eq!(
                (base + len) % page,
                0,
                "{len}: the buffer ends at a page boundary"
            );
            assert_eq!(protection(base), "rw-p");
            assert_eq!(protection(base + len - 1), "rw-p");
            assert_eq!(protection(base + len), "---p", "{len}: the guard page");
            assert!(g.bytes().iter().all(|&b| b == 0), "zero-initialised");
            // The "kernel" copies 200 bytes more than the buffer holds (a set that grew).
            let data: Vec<u8> = (0..len + 200).map(|i| (i % 251) as u8 + 1).collect();
            let wrote = copy_to_user(g.as_mut_ptr(), &data).unwrap();
            assert_eq!(wrote, len, "{len}: the copy stops at the guard page");
            assert_eq!(
                g.bytes(),
                &data[..len],
                "{len}: the buffer holds the prefix"
            );
            // A copy that starts on the guard page writes nothing: EFAULT, as the ioctl
            // returns when copy_to_user comes short.
            let e = copy_to_user(g.as_mut_ptr().wrapping_add(len), &data[..8]).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "{len}");
            assert_eq!(
                protection(base + len),
                "---p",
                "{len}: still the guard page"
            );
        }
    }

    // -----------------------------------------------------------------------------------
    // stats() against a fake kernel whose statistics change between commands.

    /// veth's statistics with `q` queues (drivers/net/veth.c): one, then seven per RX queue,
    /// then two per TX queue; one queue more moves every TX name to another index.
    fn veth_names(q: usize) -> Vec<String> {
        let mut v = vec!["peer_ifindex".to_string()];
        for i in 0..q {
            for s in [
                "xdp_packets",
                "xdp_bytes",
                "drops",
                "xdp_redirect",
                "xdp_drops",
                "xdp_tx",
                "xdp_tx_errors",
            ] {
                v.push(format!("rx_queue_{i}_{s}"));
            }
        }
        for i in 0..q {
            v.push(format!("tx_queue_{i}_xdp_xmit"));
            v.push(format!("tx_queue_{i}_xdp_xmit_errors"));
        }
        v
    }

    /// The fake kernel's value of a statistic: a function of its name, so a pair belongs
    /// together exactly when `value == value_of(name)`.
    fn value_of(name: &str) -> u64 {
        name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// Requires `got` to be the whole set of some queue count, each name with its own value.
    fn assert_consistent(got: &[(String, u64)]) {
        let q = got.len().saturating_sub(1) / 9;
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, veth_names(q), "not the set of any queue count");
        for (n, v) in got {
            assert_eq!(*v, value_of(n), "{n} paired with another statistic's value");
        }
    }

    /// A veth whose queue count is `queues[i]` at its i-th ethtool command (the last entry
    /// from then on). It answers like net/ethtool/ioctl.c: the header with the *current*
    /// count, then the entries, each part copied with [`copy_to_user`] into the caller's
    /// buffer, EFAULT when a copy comes short. `fixed`: like a kernel with the overflow fix,
    /// it answers a count of 0 and no entries when the caller's non-zero count differs from
    /// the current one; else like an older kernel, it ignores the caller's count.
    struct FakeKernel {
        queues: Vec<usize>,
        fixed: bool,
        calls: usize,
        /// Copies that hit the guard page.
        faults: usize,
        /// Answers of a fixed kernel to a count that was no longer current.
        refusals: usize,
        /// Added to the count in the header (a kernel that says more than it copies).
        overstate: u32,
    }

    impl FakeKernel {
        /// A kernel without the overflow fix.
        fn legacy(queues: impl IntoIterator<Item = usize>) -> FakeKernel {
            FakeKernel {
                queues: queues.into_iter().collect(),
                fixed: false,
                calls: 0,
                faults: 0,
                refusals: 0,
                overstate: 0,
            }
        }

        /// A kernel with it.
        fn fixed(queues: impl IntoIterator<Item = usize>) -> FakeKernel {
            FakeKernel {
                fixed: true,
                ..FakeKernel::legacy(queues)
            }
        }

        /// The count to answer `asked` with, given the current `n`.
        fn answer(&mut self, asked: u32, n: usize) -> usize {
            if self.fixed && asked != 0 && asked as usize != n {
                self.refusals += 1;
                0
            } else {
                n
            }
        }
    }

    impl Ethtool for FakeKernel {
        fn ioctl(&mut self, _ifname: &str, buf: &mut Guarded) -> io::Result<()> {
            let q = self.queues[self.calls.min(self.queues.len() - 1)];
            self.calls += 1;
            let mut set = veth_names(q);
            // copy_from_user of the command and its header.
            let cmd = u32_at(buf.bytes(), 0);
            let (header, entries): (Vec<u8>, Vec<u8>) = match cmd {
                ETHTOOL_GDRVINFO => {
                    let mut info = vec![0u8; DRVINFO_LEN];
                    info[..4].copy_from_slice(&cmd.to_ne_bytes());
                    info[4..8].copy_from_slice(b"veth");
                    info[DRVINFO_N_STATS..DRVINFO_N_STATS + 4]
                        .copy_from_slice(&(set.len() as u32).to_ne_bytes());
                    (info, Vec::new())
                }
                ETHTOOL_GSTRINGS => {
                    let mut h = buf.bytes()[..GSTRINGS_HDR].to_vec();
                    assert_eq!(u32_at(&h, 4), ETH_SS_STATS);
                    set.truncate(self.answer(u32_at(&h, 8), set.len()));
                    let n = set.len() as u32 + self.overstate;
                    h[8..12].copy_from_slice(&n.to_ne_bytes());
                    let names = set.iter().flat_map(|s| {
                        let mut b = s.as_bytes().to_vec();
                        b.resize(ETH_GSTRING_LEN, 0);
                        b
                    });
                    (h, names.collect())
                }
                ETHTOOL_GSTATS => {
                    let mut h = buf.bytes()[..GSTATS_HDR].to_vec();
                    set.truncate(self.answer(u32_at(&h, 4), set.len()));
                    let n = set.len() as u32 + self.overstate;
                    h[4..8].copy_from_slice(&n.to_ne_bytes());
                    let values = set.iter().flat_map(|s| value_of(s).to_ne_bytes());
                    (h, values.collect())
                }
                _ => return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP)),
            };
            let to = buf.as_mut_ptr();
            for (at, part) in [(0, &header), (header.len(), &entries)] {
                if part.is_empty() {
                    continue;
                }
                if copy_to_user(to.wrapping_add(at), part).unwrap_or(0) < part.len() {
                    self.faults += 1;
                    return Err(io::Error::from_raw_os_error(libc::EFAULT));
                }
            }
            Ok(())
        }
    }

    #[test]
    fn a_set_that_outgrew_the_buffer_hits_the_guard_page_and_is_read_again() {
        // An older kernel. GDRVINFO counts 1 queue (10 statistics); by GSTRINGS there are 64
        // (577): more than the buffer's margin. The copy stops at the guard page, and
        // stats() re-counts.
        let mut k = FakeKernel::legacy([1, 64]);
        let got = stats_with(&mut k, "fake0").unwrap();
        assert_eq!(k.faults, 1);
        assert_consistent(&got);
        assert_eq!(got.len(), veth_names(64).len());
    }

    #[test]
    fn names_and_values_of_different_sets_are_read_again() {
        // An older kernel. GDRVINFO, GSTRINGS: 4 queues; GSTATS: 2 (shrunk), then 2.
        let mut k = FakeKernel::legacy([4, 4, 2]);
        let got = stats_with(&mut k, "fake0").unwrap();
        assert_eq!(k.faults, 0);
        assert_consistent(&got);
        assert_eq!(got.len(), veth_names(2).len());
        // Grown within the margin between the two commands: no fault, still a mismatch.
        let mut k = FakeKernel::legacy([2, 2, 3]);
        let got = stats_with(&mut k, "fake0").unwrap();
        assert_eq!(k.faults, 0);
        assert_consistent(&got);
        assert_eq!(got.len(), veth_names(3).len());
    }

    #[test]
    fn a_fixed_kernel_answering_nothing_for_a_changed_set_is_read_again() {
        // Counted with 4 queues, GSTRINGS with 1: a kernel with the fix answers 0 entries,
        // which does not mean an empty set.
        let mut k = FakeKernel::fixed([4, 1]);
        let got = stats_with(&mut k, "fake0").unwrap();
        assert_eq!((k.refusals, k.faults), (1, 0));
        assert_consistent(&got);
        assert_eq!(got.len(), veth_names(1).len());
        // Changed between GSTRINGS and GSTATS: GSTATS answers nothing.
        let mut k = FakeKernel::fixed([2, 2, 3]);
        let got = stats_with(&mut k, "fake0").unwrap();
        assert_eq!((k.refusals, k.faults), (1, 0));
        assert_consistent(&got);
        assert_eq!(got.len(), veth_names(3).len());
    }

    #[test]
    fn a_set_that_never_settles_is_an_error_not_mismatched_pairs() {
        for fixed in [false, true] {
            let kernel = |queues: Vec<usize>| {
                if fixed {
                    FakeKernel::fixed(queues)
                } else {
                    FakeKernel::legacy(queues)
                }
            };
            // Names and values always from different queue counts.
            let mut k = kernel((0..100).map(|i| 1 + i % 2).collect());
            let e = stats_with(&mut k, "fake0").unwrap_err();
            assert!(
                e.to_string().contains("changed during each of 4 attempts"),
                "{e}"
            );
            // Always much larger than at the last count: on an older kernel every GSTRINGS
            // hits the guard page.
            let mut k = kernel((0..100).map(|i| 1 + 100 * i).collect());
            let e = stats_with(&mut k, "fake0").unwrap_err();
            assert!(
                e.to_string().contains("changed during each of 4 attempts"),
                "{e}"
            );
            let expect = if fixed { (0, ATTEMPTS) } else { (ATTEMPTS, 0) };
            assert_eq!((k.faults, k.refusals), expect, "fixed: {fixed}");
        }
    }

    #[test]
    fn a_count_past_the_buffer_is_never_read_as_entries() {
        // A header that claims more entries than the buffer holds, without an EFAULT.
        let mut k = FakeKernel::legacy([2]);
        k.overstate = MAX_STATS as u32;
        let e = stats_with(&mut k, "fake0").unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
    }

    #[test]
    fn any_schedule_gives_a_consistent_set_or_an_error() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut ok, mut err) = (0, 0);
        for i in 0..400 {
            // Mostly stable, sometimes changing, sometimes by a lot.
            let queues: Vec<usize> = (0..1 + next() % 12)
                .map(|_| match next() % 8 {
                    0 => 60 + (next() % 40) as usize,
                    _ => (next() % 5) as usize,
                })
                .collect();
            let mut k = if i % 2 == 0 {
                FakeKernel::fixed(queues.clone())
            } else {
                FakeKernel::legacy(queues.clone())
            };
            match stats_with(&mut k, "fake0") {
                Ok(got) => {
                    assert_consistent(&got);
                    ok += 1;
                }
                Err(e) => {
                    assert!(e.to_string().contains("changed during"), "{queues:?}: {e}");
                    err += 1;
                }
            }
        }
        assert!(ok > 100, "{ok} consistent reads, {err} errors");
    }

    // -----------------------------------------------------------------------------------
    // A real veth, in a network namespace of its own: root only.

    /// Namespaces and veth need root. Without it the test fails instead of skipping, as
    /// skuad's and skua-xdp's root tests do: CI runs as root, and a skipped test would prove
    /// nothing.
    fn require_root() {
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(
            euid, 0,
            "the veth test needs root (network namespaces, veth); it does not skip: run it \
             as root, e.g. `sudo -E cargo test -p skua-netio`"
        );
    }

    /// Runs `prog args`, requires success, returns stdout.
    fn run(prog: &str, args: &[&str]) -> String {
        let out = Command::new(prog).args(args).output().unwrap_or_else(|e| {
            panic!("cannot run `{prog}`: {e} (apt-get install iproute2 ethtool)")
        });
        assert!(
            out.status.success(),
            "`{prog} {}`: {}\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A network namespace, deleted (with the interfaces in it) when dropped, on failure too.
    struct Netns(String);

    impl Netns {
        fn new(name: String) -> Netns {
            // A leftover of an earlier run with the same PID.
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
            let ns = Netns(name);
            run("ip", &["netns", "add", &ns.0]);
            ns
        }

        /// Runs `f` on a thread of its own that joined the namespace (setns changes the
        /// calling thread only; the thread ends with `f`).
        fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
            let file = File::open(format!("/run/netns/{}", self.0)).unwrap();
            std::thread::scope(|s| {
                s.spawn(|| {
                    // SAFETY: setns(2) with an open descriptor of a network namespace
                    // (`file` outlives the scoped thread); it moves only this thread, which
                    // runs `f` and ends.
                    let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                    assert_eq!(r, 0, "setns: {}", io::Error::last_os_error());
                    f()
                })
                .join()
                .unwrap()
            })
        }

        /// Runs a command (words separated by spaces) in the namespace.
        fn exec(&self, cmd: &str) -> String {
            let mut args = vec!["netns", "exec", &self.0];
            args.extend(cmd.split_whitespace());
            run("ip", &args)
        }

        /// A veth pair `a`, `b` with `queues` RX and TX queues on each side, left down.
        fn veth(&self, a: &str, b: &str, queues: usize) {
            let q = format!("numtxqueues {queues} numrxqueues {queues}");
            self.exec(&format!("ip link add {a} {q} type veth peer name {b} {q}"));
        }

        /// `ethtool -S ifname`, names and values.
        fn ethtool_s(&self, ifname: &str) -> Vec<(String, u64)> {
            self.exec(&format!("ethtool -S {ifname}"))
                .lines()
                .skip_while(|l| !l.starts_with("NIC statistics"))
                .skip(1)
                .map(|l| {
                    let (k, v) = l.trim().rsplit_once(": ").unwrap();
                    (k.to_string(), v.trim().parse().unwrap())
                })
                .collect()
        }
    }

    impl Drop for Netns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
        }
    }

    /// The real kernel, counting its ioctls.
    struct Counting(Kernel, usize);

    impl Ethtool for Counting {
        fn ioctl(&mut self, ifname: &str, buf: &mut Guarded) -> io::Result<()> {
            self.1 += 1;
            self.0.ioctl(ifname, buf)
        }
    }

    /// How many names match `prefix{N}suffix`.
    fn per_queue(got: &[(String, u64)], prefix: &str, suffix: &str) -> usize {
        got.iter()
            .filter(|(n, _)| {
                n.strip_prefix(prefix)
                    .and_then(|r| r.strip_suffix(suffix))
                    .is_some_and(|q| q.bytes().all(|b| b.is_ascii_digit()))
            })
            .count()
    }

    #[test]
    fn stats_of_a_real_veth_match_ethtool_s_whatever_its_queue_count() {
        require_root();
        let ns = Netns::new(format!("skua-ethtool-{}", std::process::id()));
        // Down, without addresses: no traffic, so the counters hold still between our read
        // and ethtool's.
        ns.veth("ske0", "ske1", 4);
        for q in [4, 1, 3, 2] {
            ns.exec(&format!("ethtool -L ske0 rx {q} tx {q}"));
            let (drv, got) = ns.enter(|| (driver("ske0").unwrap(), stats("ske0").unwrap()));
            assert_eq!(drv, "veth");
            assert_eq!(got, ns.ethtool_s("ske0"), "{q} queues");
            assert_eq!(per_queue(&got, "rx_queue_", "_xdp_packets"), q);
            assert_eq!(per_queue(&got, "rx_queue_", "_xdp_tx"), q);
            assert_eq!(per_queue(&got, "tx_queue_", "_xdp_xmit"), q);
        }
    }

    #[test]
    fn stats_of_a_real_veth_stay_consistent_while_its_queues_change() {
        // The race of review item 7 for real: `ethtool -L` in a loop while stats() reads.
        // Every read is the whole set of one queue count or an error (values are all zero on
        // an idle veth, so consistency here is about the names).
        require_root();
        let ns = Netns::new(format!("skua-ethtool-race-{}", std::process::id()));
        ns.veth("skr0", "skr1", 16);
        /// Stops the flipper when dropped: also when a read panics, else the scope would
        /// wait for the flipper forever.
        struct Stop(Arc<AtomicBool>);
        impl Drop for Stop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let (reads, errors, ioctls, flips) = std::thread::scope(|s| {
            let stop = Stop(Arc::new(AtomicBool::new(false)));
            let flag = Arc::clone(&stop.0);
            let ns = &ns;
            let flipper = s.spawn(move || {
                let mut flips = 0;
                // Bounded on its own too.
                let deadline = Instant::now() + Duration::from_secs(30);
                while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let q = if flips % 2 == 0 { 1 } else { 16 };
                    ns.exec(&format!("ethtool -L skr0 rx {q} tx {q}"));
                    flips += 1;
                }
                flips
            });
            let (reads, errors, ioctls) = ns.enter(|| {
                let (mut reads, mut errors) = (0, 0);
                let mut k = Counting(Kernel, 0);
                let deadline = Instant::now() + Duration::from_secs(2);
                while Instant::now() < deadline {
                    match stats_with(&mut k, "skr0") {
                        Ok(got) => {
                            let q = per_queue(&got, "tx_queue_", "_xdp_xmit");
                            let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
                            assert_eq!(names, veth_names(q), "not the set of {q} queues");
                            reads += 1;
                        }
                        Err(e) => {
                            assert!(e.to_string().contains("changed during"), "{e}");
                            errors += 1;
                        }
                    }
                }
                (reads, errors, k.1)
            });
            drop(stop);
            (reads, errors, ioctls, flipper.join().unwrap())
        });
        // Three ioctls per read that found the set unchanged; more were retries.
        let retries = ioctls.saturating_sub(3 * (reads + errors));
        eprintln!(
            "{reads} consistent reads, {errors} errors, {retries} extra ioctls (retries), \
             {flips} queue changes"
        );
        assert!(flips > 2, "the queue count changed while reading");
        assert!(reads > 0, "{reads} consistent reads, {errors} errors");
    }
}
