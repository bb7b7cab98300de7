//! Unbound's `local-zone` types (unbound.conf(5), "local-zone:") and its default zones.
//!
//! This module only names the types and lists the defaults; what each type answers is
//! compiled into lookup tables by [`crate::store`], so the hot path never branches on it.

use core::fmt;
use core::str::FromStr;

/// A `local-zone:` type, with Unbound's meaning (unbound.conf(5)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LocalZoneType {
    /// Drop queries without local data.
    Deny,
    /// REFUSED for queries without local data.
    Refuse,
    /// Local data, else NXDOMAIN/NODATA (with the apex SOA when present).
    Static,
    /// Local data, else NODATA for known names, else resolve normally.
    Transparent,
    /// Local data, else resolve normally (no NODATA for other types).
    TypeTransparent,
    /// Answer every name in the zone with the apex data.
    Redirect,
    /// Like transparent, and log the client.
    Inform,
    /// Like deny, and log the client.
    InformDeny,
    /// Like redirect, and log the client.
    InformRedirect,
    /// Ignore local data, resolve normally.
    AlwaysTransparent,
    /// Ignore local data, REFUSED.
    AlwaysRefuse,
    /// Ignore local data, NXDOMAIN.
    AlwaysNxdomain,
    /// Ignore local data, NODATA.
    AlwaysNodata,
    /// Ignore local data, drop.
    AlwaysDeny,
    /// 0.0.0.0 / :: for A / AAAA at every name, NODATA otherwise.
    AlwaysNull,
    /// Views are not implemented yet: behaves as transparent in the global zones (as Unbound).
    NoView,
    /// Turns off a default zone; otherwise transparent.
    NoDefault,
}

impl LocalZoneType {
    /// Every type, in the order of unbound.conf(5).
    pub const ALL: [Self; 17] = [
        Self::Deny,
        Self::Refuse,
        Self::Static,
        Self::Transparent,
        Self::TypeTransparent,
        Self::Redirect,
        Self::Inform,
        Self::InformDeny,
        Self::InformRedirect,
        Self::AlwaysTransparent,
        Self::AlwaysRefuse,
        Self::AlwaysNxdomain,
        Self::AlwaysNodata,
        Self::AlwaysDeny,
        Self::AlwaysNull,
        Self::NoView,
        Self::NoDefault,
    ];

    /// The configuration keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Refuse => "refuse",
            Self::Static => "static",
            Self::Transparent => "transparent",
            Self::TypeTransparent => "typetransparent",
            Self::Redirect => "redirect",
            Self::Inform => "inform",
            Self::InformDeny => "inform_deny",
            Self::InformRedirect => "inform_redirect",
            Self::AlwaysTransparent => "always_transparent",
            Self::AlwaysRefuse => "always_refuse",
            Self::AlwaysNxdomain => "always_nxdomain",
            Self::AlwaysNodata => "always_nodata",
            Self::AlwaysDeny => "always_deny",
            Self::AlwaysNull => "always_null",
            Self::NoView => "noview",
            Self::NoDefault => "nodefault",
        }
    }

    /// Whether local data in the zone is consulted at all. The `always_*` types ignore it,
    /// except `always_null`, whose local data Unbound 1.17 still answers (observed; the
    /// man page says otherwise).
    pub fn uses_local_data(self) -> bool {
        !matches!(
            self,
            Self::AlwaysTransparent
                | Self::AlwaysRefuse
                | Self::AlwaysNxdomain
                | Self::AlwaysNodata
                | Self::AlwaysDeny
        )
    }

    /// Whether matching queries are logged with the client address.
    pub fn informs(self) -> bool {
        matches!(self, Self::Inform | Self::InformDeny | Self::InformRedirect)
    }

    /// Whether the zone answers every name below it from the apex data.
    pub fn redirects(self) -> bool {
        matches!(self, Self::Redirect | Self::InformRedirect)
    }
}

/// An unknown `local-zone` type keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownZoneType;

impl fmt::Display for UnknownZoneType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown local-zone type (expected one of: ")?;
        for (i, t) in LocalZoneType::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(t.as_str())?;
        }
        f.write_str(")")
    }
}

impl FromStr for LocalZoneType {
    type Err = UnknownZoneType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
            .ok_or(UnknownZoneType)
    }
}

impl fmt::Display for LocalZoneType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One default zone: name, type, and its local data in presentation format.
pub struct DefaultZone {
    /// Zone name.
    pub name: alloc::string::String,
    /// Zone type.
    pub zone_type: LocalZoneType,
    /// Local data lines (`local-data:` syntax).
    pub data: alloc::vec::Vec<alloc::string::String>,
}

const SOA_NS: [&str; 2] = [
    "10800 IN NS localhost.",
    "10800 IN SOA localhost. nobody.invalid. 1 3600 1200 604800 10800",
];

/// Unbound's default zones (unbound.conf(5), "local-zone:", default zone contents):
/// localhost, the loopback reverse zones, home.arpa (RFC 8375), onion (RFC 7686), test and
/// invalid (RFC 6761), and the AS112 reverse zones (RFC 1918, RFC 3330/6598, RFC 4291/4193).
pub fn default_zones() -> alloc::vec::Vec<DefaultZone> {
    use alloc::format;
    use alloc::vec::Vec;
    let mut out = Vec::new();
    let with_soa = |name: &str, zone_type: LocalZoneType, extra: &[&str]| {
        let mut data: Vec<_> = SOA_NS.iter().map(|d| format!("{name} {d}")).collect();
        data.extend(extra.iter().map(|d| alloc::string::String::from(*d)));
        DefaultZone {
            name: name.into(),
            zone_type,
            data,
        }
    };
    out.push(with_soa(
        "localhost.",
        LocalZoneType::Redirect,
        &[
            "localhost. 10800 IN A 127.0.0.1",
            "localhost. 10800 IN AAAA ::1",
        ],
    ));
    out.push(with_soa(
        "127.in-addr.arpa.",
        LocalZoneType::Static,
        &["1.0.0.127.in-addr.arpa. 10800 IN PTR localhost."],
    ));
    let v6_loop = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa.";
    let mut z = with_soa(v6_loop, LocalZoneType::Static, &[]);
    z.data.push(format!("{v6_loop} 10800 IN PTR localhost."));
    out.push(z);
    for name in ["home.arpa.", "onion.", "test.", "invalid."] {
        out.push(with_soa(name, LocalZoneType::Static, &[]));
    }
    let mut as112: Vec<alloc::string::String> = Vec::new();
    as112.push("10.in-addr.arpa.".into());
    for i in 16..=31 {
        as112.push(format!("{i}.172.in-addr.arpa."));
    }
    as112.push("168.192.in-addr.arpa.".into());
    for n in [
        "0.in-addr.arpa.",
        "254.169.in-addr.arpa.",
        "2.0.192.in-addr.arpa.",
        "100.51.198.in-addr.arpa.",
        "113.0.203.in-addr.arpa.",
        "255.255.255.255.in-addr.arpa.",
    ] {
        as112.push(n.into());
    }
    for i in 64..=127 {
        as112.push(format!("{i}.100.in-addr.arpa."));
    }
    as112.push("0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa.".into());
    as112.push("d.f.ip6.arpa.".into());
    for c in ["8", "9", "a", "b"] {
        as112.push(format!("{c}.e.f.ip6.arpa."));
    }
    as112.push("8.b.d.0.1.0.0.2.ip6.arpa.".into());
    for name in as112 {
        out.push(with_soa(&name, LocalZoneType::Static, &[]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips() {
        for t in LocalZoneType::ALL {
            assert_eq!(t.as_str().parse::<LocalZoneType>(), Ok(t));
        }
        assert_eq!("STATIC".parse::<LocalZoneType>(), Ok(LocalZoneType::Static));
        assert!("nxdomain".parse::<LocalZoneType>().is_err());
    }

    #[test]
    fn defaults_cover_the_documented_zones() {
        let d = default_zones();
        let names: alloc::vec::Vec<_> = d.iter().map(|z| z.name.as_str()).collect();
        for n in [
            "localhost.",
            "127.in-addr.arpa.",
            "onion.",
            "test.",
            "invalid.",
            "home.arpa.",
        ] {
            assert!(names.contains(&n), "{n}");
        }
        assert!(names.contains(&"10.in-addr.arpa."));
        assert!(names.contains(&"31.172.in-addr.arpa."));
        assert!(names.contains(&"127.100.in-addr.arpa."));
        assert!(names.contains(&"b.e.f.ip6.arpa."));
        assert_eq!(d[0].zone_type, LocalZoneType::Redirect);
        assert!(d.iter().all(|z| z.data.iter().any(|l| l.contains(" SOA "))));
    }
}
