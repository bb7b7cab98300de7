//! Addresses with a prefix length, as the configuration writes them (`ADDR` or
//! `ADDR/LEN`): VRRP's virtual addresses and the anycast prefixes.

use std::net::IpAddr;

/// One virtual address with its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vip {
    /// The address.
    pub addr: IpAddr,
    /// Its prefix length on the interface (32/128 when not given, as keepalived).
    pub prefix: u8,
}

/// Parses `ADDR` or `ADDR/PREFIX` addresses (32/128 when no prefix is given, as
/// keepalived).
pub fn parse_vips(addresses: &[String]) -> Result<Vec<Vip>, String> {
    addresses
        .iter()
        .map(|s| {
            let (a, p) = match s.split_once('/') {
                Some((a, p)) => (a, Some(p)),
                None => (s.as_str(), None),
            };
            let addr: IpAddr = a
                .parse()
                .map_err(|_| format!("address '{s}' is not an IP address"))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let prefix = match p {
                None => max,
                Some(p) => p
                    .parse::<u8>()
                    .ok()
                    .filter(|p| *p <= max)
                    .ok_or_else(|| format!("address '{s}': bad prefix length"))?,
            };
            Ok(Vip { addr, prefix })
        })
        .collect()
}

/// Whether `ip` falls inside `p` (its address and prefix length).
pub fn contains(p: Vip, ip: IpAddr) -> bool {
    match (p.addr, ip) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(p.prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(p.prefix))
                .unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_contain_addresses() {
        let p = |s: &str| parse_vips(&[s.to_string()]).unwrap()[0];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(contains(p("198.18.99.53/32"), ip("198.18.99.53")));
        assert!(!contains(p("198.18.99.53/32"), ip("198.18.99.54")));
        assert!(contains(p("198.18.99.0/24"), ip("198.18.99.200")));
        assert!(contains(p("0.0.0.0/0"), ip("1.2.3.4")));
        assert!(!contains(p("198.18.99.53"), ip("fd00::1")));
        assert!(contains(p("fd00:99::/64"), ip("fd00:99::53")));
        assert!(!contains(p("fd00:99::53/128"), ip("fd00:99::54")));
    }
}
