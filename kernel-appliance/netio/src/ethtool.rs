//! Two ethtool queries (`SIOCETHTOOL`, linux/ethtool.h): an interface's driver name and its
//! driver statistics (what `ethtool -i` and `ethtool -S` print).
//!
//! Used by the XDP dataplane to check facts the XDP API does not report, e.g. whether a veth
//! peer accepted the frames sent to it with `XDP_TX` (`tx_queue_N_xdp_xmit`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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
/// More statistics than any driver has: a bound on the buffers.
const MAX_STATS: usize = 1 << 16;

/// Runs one ethtool command on `ifname` with `buf` as its argument (`ifr_data`).
fn ethtool(ifname: &str, buf: &mut [u8]) -> io::Result<()> {
    let name = ifname.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
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
    for (d, s) in ifr.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
    // SAFETY: SIOCETHTOOL reads `ifr` and the command buffer it points to, whose length the
    // callers size from the command (and the counts the kernel reported for it); both live
    // across the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn drvinfo(ifname: &str) -> io::Result<[u8; DRVINFO_LEN]> {
    let mut info = [0u8; DRVINFO_LEN];
    info[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
    ethtool(ifname, &mut info)?;
    Ok(info)
}

/// The driver of `ifname` (`veth`, `virtio_net`, `mlx5_core`...), in the calling thread's
/// network namespace.
pub fn driver(ifname: &str) -> io::Result<String> {
    Ok(c_string(&drvinfo(ifname)?[4..36]))
}

/// The driver statistics of `ifname` (`ethtool -S`), names and values.
pub fn stats(ifname: &str) -> io::Result<Vec<(String, u64)>> {
    let n = (u32_at(&drvinfo(ifname)?, DRVINFO_N_STATS) as usize).min(MAX_STATS);
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut names = vec![0u8; 12 + n * ETH_GSTRING_LEN];
    names[..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    names[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
    // Cannot truncate: n <= MAX_STATS.
    names[8..12].copy_from_slice(&(n as u32).to_ne_bytes());
    ethtool(ifname, &mut names)?;
    let mut values = vec![0u8; 8 + n * 8];
    values[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
    values[4..8].copy_from_slice(&(n as u32).to_ne_bytes());
    ethtool(ifname, &mut values)?;
    // The kernel may report fewer than asked if the set shrank in between.
    let got = (u32_at(&values, 4) as usize).min(n);
    Ok((0..got)
        .map(|i| {
            let s = 12 + i * ETH_GSTRING_LEN;
            let v = 8 + i * 8;
            let mut b = [0u8; 8];
            b.copy_from_slice(&values[v..v + 8]);
            (
                c_string(&names[s..s + ETH_GSTRING_LEN]),
                u64::from_ne_bytes(b),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_cause() {
        // `lo` has no ethtool driver info; a missing interface is ENODEV. (Real drivers are
        // exercised by skuad's XDP tests on veth.)
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
}
