//! Client access control with Unbound's rule: the **most specific** netblock wins
//! (unbound.conf(5), `access-control:`), whatever the order of the lines.
//!
//! Lookups are a scan of the rules sorted longest prefix first; deployments have a handful
//! of rules, for which a linear scan over a few cache lines beats any trie.

use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::str::FromStr;

/// What to do with a client's query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AclAction {
    /// Answer. (Unbound refuses recursive-cache snooping with RD=0; Skua has no cache yet,
    /// so `allow` and `allow_snoop` answer alike.)
    Allow,
    /// Answer, including RD=0 queries against the cache.
    AllowSnoop,
    /// `allow_setrd`: answer as if RD were set.
    AllowSetRd,
    /// Drop silently.
    Deny,
    /// Answer REFUSED.
    Refuse,
    /// Answer only from local zones / auth zones; drop the rest.
    DenyNonLocal,
    /// Answer only from local zones / auth zones; REFUSED for the rest.
    RefuseNonLocal,
}

impl AclAction {
    /// The configuration keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::AllowSnoop => "allow_snoop",
            Self::AllowSetRd => "allow_setrd",
            Self::Deny => "deny",
            Self::Refuse => "refuse",
            Self::DenyNonLocal => "deny_non_local",
            Self::RefuseNonLocal => "refuse_non_local",
        }
    }
}

impl FromStr for AclAction {
    type Err = AclError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            Self::Allow,
            Self::AllowSnoop,
            Self::AllowSetRd,
            Self::Deny,
            Self::Refuse,
            Self::DenyNonLocal,
            Self::RefuseNonLocal,
        ]
        .into_iter()
        .find(|a| a.as_str().eq_ignore_ascii_case(s))
        .ok_or(AclError::UnknownAction)
    }
}

/// A bad `access-control:` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AclError {
    /// Not an address or `address/prefix`.
    BadNetblock,
    /// Prefix longer than the address.
    BadPrefix,
    /// Not one of the actions.
    UnknownAction,
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::BadNetblock => "bad netblock (expected ADDRESS or ADDRESS/PREFIX)",
            Self::BadPrefix => "prefix length longer than the address",
            Self::UnknownAction => {
                "unknown action (expected allow, allow_snoop, allow_setrd, deny, refuse, \
                 deny_non_local or refuse_non_local)"
            }
        })
    }
}

impl core::error::Error for AclError {}

/// An IPv4 or IPv6 netblock, kept as a 128-bit value (IPv4 mapped into ::ffff:0:0/96 so
/// that an IPv4 client arriving on a dual-stack socket matches its IPv4 rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Netblock {
    addr: u128,
    prefix: u8,
}

impl Netblock {
    /// Builds a netblock; host bits are cleared.
    pub fn new(addr: IpAddr, prefix: u8) -> Result<Self, AclError> {
        let (bits, prefix) = match addr {
            IpAddr::V4(a) if prefix <= 32 => (to_u128(IpAddr::V4(a)), prefix + 96),
            IpAddr::V6(a) if prefix <= 128 => (u128::from(a), prefix),
            _ => return Err(AclError::BadPrefix),
        };
        Ok(Self {
            addr: bits & mask(prefix),
            prefix,
        })
    }

    /// The prefix length, counted on the 128-bit form (an IPv4 /24 is 120): for ordering
    /// netblocks from the most specific.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    fn contains(&self, addr: u128) -> bool {
        addr & mask(self.prefix) == self.addr
    }

    /// Whether `addr` is inside (an IPv4 address matches IPv4 netblocks whether it comes as
    /// IPv4 or IPv4-mapped IPv6).
    pub fn contains_addr(&self, addr: IpAddr) -> bool {
        self.contains(to_u128(addr))
    }
}

impl FromStr for Netblock {
    type Err = AclError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p.parse::<u8>().map_err(|_| AclError::BadNetblock)?)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| AclError::BadNetblock)?;
        let prefix = prefix.unwrap_or(if addr.is_ipv4() { 32 } else { 128 });
        Self::new(addr, prefix)
    }
}

fn to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn mask(prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p)),
    }
}

/// The access-control list.
#[derive(Clone, Debug)]
pub struct Acl {
    /// Rules sorted by prefix length, longest first: the first match is the most specific.
    rules: Vec<(Netblock, AclAction)>,
}

impl Acl {
    /// An empty list (everything refused: Unbound's behaviour for unmatched clients).
    pub fn empty() -> Self {
        Self { rules: Vec::new() }
    }

    /// Unbound's defaults: refuse everything except localhost (unbound.conf(5)).
    pub fn unbound_default() -> Self {
        let mut acl = Self::empty();
        let lo4 = Netblock::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8);
        let lo6 = Netblock::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 128);
        let any4 = Netblock::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        let any6 = Netblock::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0);
        for (nb, a) in [
            (any4, AclAction::Refuse),
            (any6, AclAction::Refuse),
            (lo4, AclAction::Allow),
            (lo6, AclAction::Allow),
        ] {
            // The netblocks above are valid by construction.
            if let Ok(nb) = nb {
                acl.insert(nb, a);
            }
        }
        acl
    }

    /// Adds or replaces the rule for exactly this netblock (a later line for the same
    /// netblock overrides an earlier one, as in Unbound).
    pub fn insert(&mut self, nb: Netblock, action: AclAction) {
        if let Some(r) = self.rules.iter_mut().find(|(n, _)| *n == nb) {
            r.1 = action;
            return;
        }
        let at = self
            .rules
            .iter()
            .position(|(n, _)| n.prefix < nb.prefix)
            .unwrap_or(self.rules.len());
        self.rules.insert(at, (nb, action));
    }

    /// The action for `client`: the most specific matching rule, REFUSE when none matches.
    #[inline]
    pub fn check(&self, client: IpAddr) -> AclAction {
        let addr = to_u128(match client {
            // A v4-mapped client address is the IPv4 client (dual-stack sockets).
            IpAddr::V6(a) => a.to_ipv4_mapped().map_or(client, IpAddr::V4),
            v4 => v4,
        });
        self.rules
            .iter()
            .find(|(nb, _)| nb.contains(addr))
            .map_or(AclAction::Refuse, |(_, a)| *a)
    }

    /// The rules, most specific first: (address as IPv6, IPv4 as `::ffff:a.b.c.d`;
    /// prefix length in that 128-bit space; action). Dataplanes that need the list in
    /// another form (an LPM trie) rebuild it from this.
    pub fn rules(&self) -> impl Iterator<Item = (u128, u8, AclAction)> + '_ {
        self.rules.iter().map(|(nb, a)| (nb.addr, nb.prefix, *a))
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn defaults_allow_only_localhost() {
        let acl = Acl::unbound_default();
        assert_eq!(acl.check(ip("127.0.0.1")), AclAction::Allow);
        assert_eq!(acl.check(ip("127.9.9.9")), AclAction::Allow);
        assert_eq!(acl.check(ip("::1")), AclAction::Allow);
        assert_eq!(acl.check(ip("::ffff:127.0.0.1")), AclAction::Allow);
        assert_eq!(acl.check(ip("198.18.0.1")), AclAction::Refuse);
        assert_eq!(acl.check(ip("fd00::1")), AclAction::Refuse);
    }

    #[test]
    fn most_specific_wins_regardless_of_order() {
        let mut acl = Acl::empty();
        acl.insert("198.18.0.0/15".parse().unwrap(), AclAction::Deny);
        acl.insert("198.18.1.0/24".parse().unwrap(), AclAction::Allow);
        acl.insert("198.18.1.7".parse().unwrap(), AclAction::Refuse);
        acl.insert("198.18.2.0/24".parse().unwrap(), AclAction::DenyNonLocal);
        acl.insert("198.18.3.0/24".parse().unwrap(), AclAction::RefuseNonLocal);
        acl.insert("198.18.4.0/24".parse().unwrap(), AclAction::AllowSnoop);
        acl.insert("fd00::/8".parse().unwrap(), AclAction::AllowSetRd);
        assert_eq!(acl.check(ip("198.18.1.8")), AclAction::Allow);
        assert_eq!(acl.check(ip("198.18.1.7")), AclAction::Refuse);
        assert_eq!(acl.check(ip("198.19.0.1")), AclAction::Deny);
        assert_eq!(acl.check(ip("198.18.2.1")), AclAction::DenyNonLocal);
        assert_eq!(acl.check(ip("198.18.3.1")), AclAction::RefuseNonLocal);
        assert_eq!(acl.check(ip("198.18.4.1")), AclAction::AllowSnoop);
        assert_eq!(acl.check(ip("fd12::1")), AclAction::AllowSetRd);
        assert_eq!(acl.check(ip("10.0.0.1")), AclAction::Refuse);
        // Same netblock again: the later line replaces the earlier.
        acl.insert("198.18.1.0/24".parse().unwrap(), AclAction::Deny);
        assert_eq!(acl.check(ip("198.18.1.8")), AclAction::Deny);
    }

    #[test]
    fn parse_errors() {
        assert_eq!(
            "198.18.0.0/33".parse::<Netblock>(),
            Err(AclError::BadPrefix)
        );
        assert_eq!("fd00::/129".parse::<Netblock>(), Err(AclError::BadPrefix));
        assert_eq!("nonsense/8".parse::<Netblock>(), Err(AclError::BadNetblock));
        assert_eq!("1.2.3.4/x".parse::<Netblock>(), Err(AclError::BadNetblock));
        assert_eq!(
            "allow_all".parse::<AclAction>(),
            Err(AclError::UnknownAction)
        );
        assert_eq!("REFUSE".parse::<AclAction>(), Ok(AclAction::Refuse));
        // Host bits are cleared.
        assert_eq!(
            "198.18.1.9/24".parse::<Netblock>(),
            "198.18.1.0/24".parse::<Netblock>()
        );
    }
}
