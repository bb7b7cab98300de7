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
mod tests;
