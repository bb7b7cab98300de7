//! Forwarding settings: the zones and their upstreams, the limits, how each upstream given
//! by name is to be resolved (decided from the settings alone), and which addresses can be
//! upstreams at all.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, SocketAddr, SocketAddrV6};

/// Whether a zone forwards (RD=1 to recursive servers) or is a stub (RD=0 to
/// authoritative servers). Declared once: skua-config's reader uses this type too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneKind {
    /// `forward-zone:`.
    Forward,
    /// `stub-zone:`.
    Stub,
}

impl ZoneKind {
    /// The clause name, without the colon: `forward-zone` or `stub-zone`.
    pub fn clause(self) -> &'static str {
        match self {
            ZoneKind::Forward => "forward-zone",
            ZoneKind::Stub => "stub-zone",
        }
    }
}

/// One upstream address of a zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// Address and port (`@port`, default 53, or 853 with TLS).
    pub addr: SocketAddr,
    /// The name its TLS certificate must carry (`#name`); `None` without TLS.
    pub tls_name: Option<Arc<str>>,
}

/// A `forward-zone:` or `stub-zone:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneConfig {
    /// Lower-cased wire name.
    pub name: Vec<u8>,
    /// Forward or stub.
    pub kind: ZoneKind,
    /// `forward-addr`/`stub-addr` (and the addresses of `*-host` names, once known).
    pub upstreams: Vec<Upstream>,
    /// `forward-no-cache`/`stub-no-cache`: answers are passed on, not cached.
    pub no_cache: bool,
    /// `forward-first`/`stub-first`: with recursion, fall back to it (recursion is not
    /// built yet: this changes nothing today).
    pub first: bool,
    /// `forward-tls-upstream`/`stub-tls-upstream`: every upstream over TLS (RFC 7858).
    pub tls: bool,
    /// `forward-tcp-upstream`/`stub-tcp-upstream`: every upstream over TCP.
    pub tcp: bool,
    /// An id that stays the same while the zone's configuration does (cache entries made
    /// through the zone carry it, so a reload can drop only those of changed zones).
    pub id: u32,
}

/// A `forward-host:` or `stub-host:`: a name whose addresses are upstreams of a zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// The zone it serves: the [`ZoneConfig::name`] of one of the zones.
    pub zone: Vec<u8>,
    /// The host name, lower-cased wire format.
    pub name: Vec<u8>,
    /// The port its addresses are asked on (`@port`; else 53, or 853 with `#name`).
    pub port: u16,
    /// The name its TLS certificate must carry when the zone uses TLS; `None` without TLS.
    pub tls_name: Option<Arc<str>>,
}

/// How a host's name is resolved, decided from the configuration alone ([`plan_hosts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostPlan {
    /// By zone `.0` (an index of [`ForwardConfig::zones`]): the most specific zone that
    /// contains the name, which has an address that does not depend on this host.
    Via(usize),
    /// Its name is in zone `.0`, which has no address that does not depend on this very
    /// host (directly, or through other hosts): it cannot be resolved.
    Loop(usize),
    /// No forward or stub zone contains its name (and there is no recursion).
    Outside,
    /// [`HostConfig::zone`] names no configured zone.
    NoZone,
}

/// Bounds on work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Clients, and questions whose CNAME chain leads there, waiting on one question;
    /// more get SERVFAIL at once.
    pub waiters: usize,
    /// Questions in flight; more are refused with SERVFAIL at once.
    pub flights: usize,
    /// Upstream queries for one question before it fails.
    pub attempts: u32,
    /// Milliseconds from the question to SERVFAIL, whatever the upstreams do.
    pub budget_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            waiters: 64,
            flights: 4096,
            attempts: 6,
            budget_ms: 5_000,
        }
    }
}

/// Forwarding settings (unbound.conf names in brackets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardConfig {
    /// The zones; the most specific one that contains a name resolves it.
    pub zones: Vec<ZoneConfig>,
    /// UDP payload size advertised upstream [`edns-buffer-size`, 1232].
    pub edns_buffer_size: u16,
    /// Random letter case in the question (0x20) [`use-caps-for-id`].
    pub use_caps_for_id: bool,
    /// Every upstream query over TCP [`tcp-upstream`].
    pub tcp_upstream: bool,
    /// Unwanted replies after which the cache is flushed as a defence against a spoofing
    /// attempt, 0 for never [`unwanted-reply-threshold`].
    pub unwanted_reply_threshold: u64,
    /// Work bounds.
    pub limits: Limits,
    /// Upstreams given by name [`forward-host`, `stub-host`], resolved through the zones.
    pub hosts: Vec<HostConfig>,
    /// A host's addresses on the loopback (127.0.0.0/8, ::1, and the IPv4-mapped forms)
    /// or unspecified (0.0.0.0, ::: this machine too) are not used
    /// [`do-not-query-localhost`, default yes]; multicast, broadcast and unscoped
    /// link-local ones never are ([`upstream_addr`]). The zones' own addresses are given
    /// already checked the same way.
    pub do_not_query_localhost: bool,
    /// Hosts are resolved to IPv4 addresses (A) [`do-ip4`].
    pub do_ip4: bool,
    /// Hosts are resolved to IPv6 addresses (AAAA) [`do-ip6`].
    pub do_ip6: bool,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            zones: Vec::new(),
            edns_buffer_size: 1232,
            use_caps_for_id: false,
            tcp_upstream: false,
            unwanted_reply_threshold: 0,
            limits: Limits::default(),
            hosts: Vec::new(),
            do_not_query_localhost: true,
            do_ip4: true,
            do_ip6: true,
        }
    }
}

/// The most specific zone of `zones` containing `name` (lower case).
pub(super) fn zone_for_name(zones: &[ZoneConfig], name: &[u8]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, z) in zones.iter().enumerate() {
        if skua_engine::name::is_subdomain(name, &z.name)
            && best.is_none_or(|b| zones[b].name.len() < z.name.len())
        {
            best = Some(i);
        }
    }
    best
}

/// How each of `config.hosts` is resolved (in order): by the most specific zone that
/// contains its name, as any question for the name would be, provided that zone can get
/// an address without this host. A zone can when it has an address of its own or a host
/// that can be resolved without it: found by closure from the zones with addresses, so a
/// host inside its own zone (or two zones whose hosts are in each other) with no other
/// address is a [`HostPlan::Loop`].
pub fn plan_hosts(config: &ForwardConfig) -> Vec<HostPlan> {
    let zones = &config.zones;
    let own: Vec<Option<usize>> = config
        .hosts
        .iter()
        .map(|h| zones.iter().position(|z| z.name == h.zone))
        .collect();
    let via: Vec<Option<usize>> = config
        .hosts
        .iter()
        .map(|h| zone_for_name(zones, &h.name))
        .collect();
    let mut usable: Vec<bool> = zones.iter().map(|z| !z.upstreams.is_empty()).collect();
    let mut ok = alloc::vec![false; config.hosts.len()];
    loop {
        let mut grew = false;
        for i in 0..config.hosts.len() {
            if ok[i] || own[i].is_none() {
                continue;
            }
            if let Some(v) = via[i]
                && usable[v]
            {
                ok[i] = true;
                grew = true;
                if let Some(z) = own[i] {
                    usable[z] = true;
                }
            }
        }
        if !grew {
            break;
        }
    }
    (0..config.hosts.len())
        .map(|i| match (own[i], via[i]) {
            (None, _) => HostPlan::NoZone,
            (_, None) => HostPlan::Outside,
            (_, Some(v)) if ok[i] => HostPlan::Via(v),
            (_, Some(v)) => HostPlan::Loop(v),
        })
        .collect()
}

/// Why an address cannot be an upstream ([`upstream_addr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refused {
    /// 127.0.0.0/8 or ::1 (or IPv4-mapped, ::ffff:127.0.0.0/104): this machine, refused
    /// with `do-not-query-localhost` (Unbound's `donotq` list holds the same).
    Loopback,
    /// 0.0.0.0 or :: (or ::ffff:0.0.0.0): a query sent there goes to this machine;
    /// refused with `do-not-query-localhost`.
    Unspecified,
    /// 224.0.0.0/4 or ff00::/8, always: a query would go to a group, and a unicast reply
    /// from any member could not be matched to the address asked (RFC 1122 §3.2.1.3
    /// forbids a multicast source).
    Multicast,
    /// 255.255.255.255, always: the limited broadcast of the local network (RFC 919 §7).
    Broadcast,
    /// fe80::/10 without a scope id, always: it names an address on some link, and
    /// without the interface it cannot be sent to (RFC 4007 §6).
    LinkLocalWithoutScope,
}

impl Refused {
    /// Whether only `do-not-query-localhost` refuses it (this machine's addresses).
    pub fn is_localhost(self) -> bool {
        matches!(self, Refused::Loopback | Refused::Unspecified)
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refused::Loopback => "a loopback address (do-not-query-localhost is yes)",
            Refused::Unspecified => {
                "the unspecified address, this machine (do-not-query-localhost is yes)"
            }
            Refused::Multicast => "a multicast address",
            Refused::Broadcast => "the broadcast address",
            Refused::LinkLocalWithoutScope => {
                "an IPv6 link-local address without a scope (no interface to send it on)"
            }
        })
    }
}

/// `addr` as an upstream: in canonical form (an IPv4-mapped IPv6 address as the IPv4
/// address, `IpAddr::to_canonical`: one upstream, one key for its RTT and for
/// duplicates), or why it cannot be one. Multicast, broadcast and link-local IPv6
/// without a scope id are always refused; with `do_not_query_localhost`, also loopback
/// and unspecified addresses, IPv4-mapped ones included. The one check for configured
/// addresses (the daemon's loader) and resolved ones ([`HostConfig`]).
pub fn upstream_addr(
    addr: SocketAddr,
    do_not_query_localhost: bool,
) -> Result<SocketAddr, Refused> {
    let (scope, flow) = match addr {
        SocketAddr::V6(a) => (a.scope_id(), a.flowinfo()),
        SocketAddr::V4(_) => (0, 0),
    };
    let ip = addr.ip().to_canonical();
    let refused = match ip {
        IpAddr::V4(v4) if v4.is_broadcast() => Some(Refused::Broadcast),
        _ if ip.is_multicast() => Some(Refused::Multicast),
        IpAddr::V6(v6) if v6.is_unicast_link_local() && scope == 0 => {
            Some(Refused::LinkLocalWithoutScope)
        }
        _ if do_not_query_localhost && ip.is_loopback() => Some(Refused::Loopback),
        _ if do_not_query_localhost && ip.is_unspecified() => Some(Refused::Unspecified),
        _ => None,
    };
    if let Some(r) = refused {
        return Err(r);
    }
    Ok(match ip {
        IpAddr::V4(_) => SocketAddr::new(ip, addr.port()),
        IpAddr::V6(v6) => SocketAddr::V6(SocketAddrV6::new(v6, addr.port(), flow, scope)),
    })
}
