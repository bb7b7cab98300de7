//! The forwarding state machine: questions in flight, upstream queries, replies matched,
//! scrubbed and cached, every waiting client answered.
//!
//! Sans-IO: [`Forwarder::resolve`] takes a question and an opaque client handle `C` (the
//! daemon's way back to the client); the forwarder queues [`Event`]s: a [`Transmit`] to
//! carry to an upstream, or an [`Answer`] for a list of clients. The daemon hands back what
//! the upstream sent ([`Forwarder::reply`]), or that the transport failed
//! ([`Forwarder::failed`]), and calls [`Forwarder::tick`] when [`Forwarder::next_timer`] is
//! due. Time is milliseconds of a monotonic clock, and the cache's seconds are derived from
//! it; random numbers come from the caller ([`Entropy`]).
//!
//! Identical questions in flight are coalesced: one upstream query, every client answered
//! from its reply (up to [`Limits::waiters`] clients per question). A reply is accepted only
//! from the address and port the query went to, with its ID and its question — with
//! `use-caps-for-id`, letter for letter (RFC 5452 §9.1, draft-vixie-dnsext-dns0x20): the
//! daemon's socket brings the random source port. Anything else (a datagram shorter than a
//! header included) is counted as unwanted and the query keeps waiting for the real reply.
//!
//! A CNAME/DNAME chain that leaves the zone asked (for a name outside it, or inside a
//! zone configured below it) goes on as a question for the target, through the target's
//! own zone, waited on by the first: a restart, as Unbound's iterator restarts a query at
//! a CNAME. A client's question restarts at most [`MAX_RESTARTS`] times, all within its
//! own budget; a target nobody waits for any more is dropped with its queries.
//!
//! Upstreams given by name (`forward-host:`/`stub-host:`, [`HostConfig`]) are resolved
//! through the forwarder itself, A and AAAA, by the zone that holds the name, as any
//! question would be (through the cache first); their addresses join the zone's upstreams
//! and are resolved again when their TTL runs out. See [`Forwarder::hosts`].

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use skua_engine::rr::rtype;
use skua_engine::wire::{HEADER_LEN, flags, rcode};

use crate::cache::{Cache, Key, Kind, MsgShard, Rendered, SetShard, ShardLock};
use crate::infra::Infra;
use crate::msg::Message;
use crate::render::{Section, render};
use crate::rrset::RrSet;
use crate::scrub::{self, Asked, Bailiwick, Verdict};

/// Random numbers, from the caller.
pub trait Entropy {
    /// A uniformly random `u32`.
    fn u32(&mut self) -> u32;
}

/// Extended DNS Error codes we send (RFC 8914 §4).
pub mod ede {
    /// 3 Stale Answer.
    pub const STALE_ANSWER: u16 = 3;
    /// 22 No Reachable Authority: no upstream answered.
    pub const NO_REACHABLE_AUTHORITY: u16 = 22;
    /// 23 Network Error: upstreams answered with errors or the transport failed.
    pub const NETWORK_ERROR: u16 = 23;
}

/// Whether a zone forwards (RD=1 to recursive servers) or is a stub (RD=0 to
/// authoritative servers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneKind {
    /// `forward-zone:`.
    Forward,
    /// `stub-zone:`.
    Stub,
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

/// What the forwarder knows of a host ([`Forwarder::hosts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostStatus {
    /// The zone it serves ([`HostConfig::zone`]).
    pub zone: Vec<u8>,
    /// Its name ([`HostConfig::name`]).
    pub name: Vec<u8>,
    /// The port its addresses are asked on.
    pub port: u16,
    /// How its name is resolved.
    pub plan: HostPlan,
    /// The addresses in use, with the port (IPv4 first): upstreams of the zone.
    pub addrs: Vec<SocketAddr>,
    /// Addresses it resolved to that are not used, and why ([`upstream_addr`]:
    /// `do-not-query-localhost`, multicast, broadcast, link-local).
    pub refused: Vec<(IpAddr, Refused)>,
    /// A resolution is under way.
    pub resolving: bool,
    /// Every family asked was answered at least once (addresses, or none).
    pub answered: bool,
    /// Resolutions that failed in a row (SERVFAIL, no upstream answered); 0 after an
    /// answer. The addresses in use are kept meanwhile.
    pub failures: u32,
    /// When it is next resolved, ms (the earliest of its families); `None` if never.
    pub next_ms: Option<u64>,
}

/// Addresses of one family a `forward-host:`/`stub-host:` name contributes at most (the
/// lowest ones of its answer): Unbound too uses only a few addresses per server name.
pub const MAX_HOST_ADDRS: usize = 8;

/// The least time between two resolutions of a host's name, ms (a TTL of 0 would
/// otherwise have it asked continuously).
pub const HOST_MIN_REFRESH_MS: u64 = 5_000;
/// After a failed resolution of a host's name, the next one comes after 1 s, doubling on
/// each failure in a row up to this, ms.
pub const HOST_MAX_RETRY_MS: u64 = 60_000;

/// Restarts of one client question at a CNAME/DNAME target resolved on its own (a new
/// question for the target, through the zone that holds it) before it fails: Unbound's
/// `max-query-restarts` default (11, `util/config_file.c`; `MAX_RESTART_COUNT` was 8 in
/// older releases).
pub const MAX_RESTARTS: u32 = 11;

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
fn zone_for_name(zones: &[ZoneConfig], name: &[u8]) -> Option<usize> {
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

/// The address in an A or AAAA record's RDATA.
fn ip_of(rdata: &[u8]) -> Option<IpAddr> {
    match rdata.len() {
        4 => {
            let b: [u8; 4] = rdata.try_into().ok()?;
            Some(IpAddr::V4(Ipv4Addr::from(b)))
        }
        16 => {
            let b: [u8; 16] = rdata.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(b)))
        }
        _ => None,
    }
}

/// A question: lower-cased wire name, type, class.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Question {
    /// Lower-cased wire name.
    pub name: Vec<u8>,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
}

impl Question {
    fn key(&self) -> Key<'_> {
        Key::new(&self.name, self.qtype, self.qclass)
    }
}

/// How an upstream query travels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UDP from a fresh random port.
    Udp,
    /// TCP (RFC 7766).
    Tcp,
    /// TLS on TCP (RFC 7858); the certificate must carry this name.
    Tls(Arc<str>),
}

/// An upstream query to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Hand this back with the reply or the failure.
    pub token: u64,
    /// Where to.
    pub to: SocketAddr,
    /// How.
    pub transport: Transport,
    /// The DNS message (no TCP length prefix).
    pub bytes: Vec<u8>,
}

/// An answer for waiting clients: what to send each of them, built by the engine for
/// each client's own query (ID, case, EDNS, size limit).
#[derive(Clone, Debug)]
pub struct Answer<C> {
    /// Who asked.
    pub clients: Vec<C>,
    /// The answer: header flags, records, TTL offsets.
    pub rendered: Arc<Rendered>,
    /// Every TTL is this (a stale answer); otherwise expiry minus now.
    pub fixed_ttl: Option<u32>,
}

/// What the daemon must do.
#[derive(Clone, Debug)]
pub enum Event<C> {
    /// Send a query upstream.
    Transmit(Transmit),
    /// Answer clients.
    Answer(Answer<C>),
    /// Upstream query `token` is over (answered, timed out, replaced): close its socket,
    /// forget its ID on a shared connection. Late replies to it count as unwanted.
    Cancel(u64),
}

/// What [`Forwarder::resolve`] did with a question.
#[derive(Debug, PartialEq, Eq)]
pub enum Start<C> {
    /// In flight: the client will be in an [`Answer`].
    Pending,
    /// No forward or stub zone contains the name: the caller answers (REFUSED today;
    /// recursion later).
    NoZone(C),
    /// Over a limit: the caller answers SERVFAIL.
    Busy(C),
}

/// Who waits on a question.
#[derive(Clone, Debug)]
enum Waiter<C> {
    Client(C),
    /// Another question whose CNAME chain leads here.
    Chain(Question),
    /// The hosts ([`HostConfig`]) with this name, for this address type.
    Host,
}

/// What came of resolving a host's name for one address type.
enum HostOutcome {
    /// These addresses, fresh until the expiry (cache seconds).
    Addrs(Vec<IpAddr>, u32),
    /// None (NXDOMAIN, NODATA), until the expiry (cache seconds).
    Negative(u32),
    /// SERVFAIL, no upstream answered, over a limit.
    Failed,
}

/// One address type of a host.
#[derive(Clone, Debug)]
struct Family {
    qtype: u16,
    /// Asked at all (`do-ip4`, `do-ip6`).
    on: bool,
    /// In use.
    addrs: Vec<IpAddr>,
    /// Left out ([`upstream_addr`]), and why.
    refused: Vec<(IpAddr, Refused)>,
    /// When to resolve next, ms.
    due: u64,
    /// A resolution is under way.
    pending: bool,
    failures: u32,
    answered: bool,
}

impl Family {
    fn new(qtype: u16, on: bool) -> Self {
        Family {
            qtype,
            on,
            addrs: Vec::new(),
            refused: Vec::new(),
            due: 0,
            pending: false,
            failures: 0,
            answered: false,
        }
    }
}

struct HostState {
    cfg: HostConfig,
    plan: HostPlan,
    /// The index of the zone it serves.
    zone: Option<usize>,
    /// The zone its name is resolved through ([`HostPlan::Via`]), as configured: the
    /// addresses in `fams` came from it. A reload that changes it drops them.
    via: Option<Via>,
    /// A, then AAAA.
    fams: [Family; 2],
}

/// A zone that resolves hosts' names, as configured: its settings and own addresses
/// ([`ZoneConfig`], without its hosts' addresses) and its hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Via {
    zone: ZoneConfig,
    hosts: Vec<HostConfig>,
}

/// What [`Forwarder::begin`] did.
enum Begin<C> {
    Pending,
    NoZone(Option<Waiter<C>>),
    Busy(Option<Waiter<C>>),
}

/// Counters for metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForwardStats {
    /// Upstream queries sent.
    pub queries: u64,
    /// Replies that matched nothing we asked (wrong ID, question, address).
    pub unwanted: u64,
    /// Questions answered SERVFAIL.
    pub servfail: u64,
    /// Retries over TCP after TC=1.
    pub tcp_retries: u64,
    /// Cache flushes after `unwanted-reply-threshold`.
    pub defences: u64,
    /// Questions that joined one already in flight.
    pub coalesced: u64,
    /// Addresses in hosts' answers left out as upstreams ([`upstream_addr`]), each time
    /// an answer holds them.
    pub host_addrs_refused: u64,
}

struct Outstanding {
    question: Question,
    to: SocketAddr,
    transport: Transport,
    id: u16,
    /// The name as sent (with 0x20 letter case).
    sent_name: Vec<u8>,
    edns: bool,
    sent_ms: u64,
    deadline_ms: u64,
    /// The upstream's timeout when the query left (what a timeout doubles).
    rto: u32,
}

struct Flight<C> {
    zone: usize,
    waiters: Vec<Waiter<C>>,
    tried: Vec<SocketAddr>,
    attempts: u32,
    deadline_ms: u64,
    /// CNAMEs followed so far, with their expiry (seconds), for the answer section.
    chain: Vec<(RrSet, u32)>,
    /// Whether any upstream answered at all (timeouts only: EDE 22; errors: 23).
    errors: u32,
    outstanding: Option<u64>,
    /// Earlier queries of this question that timed out: their replies are still taken
    /// (a reply that was merely late is as good as the retry's, and a resolver that fell
    /// behind must not lose the answers waiting in its queue), until the question ends.
    late: Vec<u64>,
    /// When waiting clients get a stale answer (serve-expired-client-timeout), ms.
    stale_at: Option<u64>,
    /// Retry without EDNS on this upstream (it answered FORMERR/NOTIMP to EDNS).
    no_edns: Vec<SocketAddr>,
    /// Waiting for the zone's first address: its upstreams are all hosts being resolved.
    parked: bool,
    /// Restarts at a chain target between the question a client (or a host, or a
    /// refresh) asked and this one: 0 for that question, one more for each target
    /// ([`MAX_RESTARTS`]). A target's flight also has the deadline of the question
    /// whose chain started it: a chain ends within the first question's budget.
    restarts: u32,
    /// The chain target this question waits on (its [`Waiter::Chain`] is there).
    target: Option<Question>,
    /// Started for a chain: dropped when no question waits on it any more.
    for_chain: bool,
}

/// What to do with a finished question.
#[derive(Clone)]
struct Done {
    rcode: u16,
    kind: Kind,
    /// (RRset, section, expiry seconds).
    sets: Vec<(RrSet, Section, u32)>,
    ede: Option<u16>,
    cache: bool,
    /// Restarts at chain targets the answer took ([`MAX_RESTARTS`] at most).
    restarts: u32,
}

/// The forwarder.
pub struct Forwarder<C, M: ShardLock<MsgShard>, S: ShardLock<SetShard>> {
    config: ForwardConfig,
    cache: Arc<Cache<M, S>>,
    infra: Infra,
    flights: BTreeMap<Question, Flight<C>>,
    outstanding: BTreeMap<u64, Outstanding>,
    /// (deadline ms, token) of each outstanding query; (deadline, 0) entries are stale
    /// answer timers keyed in `stale_timers`.
    timers: BTreeMap<(u64, u64), ()>,
    next_token: u64,
    events: VecDeque<Event<C>>,
    unwanted_run: u64,
    /// `forward-host`/`stub-host` names and their addresses, as in `config.hosts`.
    hosts: Vec<HostState>,
    /// Each zone's configured upstreams (`config.zones[i].upstreams` adds the hosts'
    /// addresses).
    base: Vec<Vec<Upstream>>,
    /// Changes whenever a zone's upstreams or a host's state do.
    generation: u64,
    /// Run [`Forwarder::tick`] at once (after a reconfiguration).
    wake: bool,
    /// The questions parked on each zone (by index) waiting for its hosts' addresses
    /// (their [`Flight::parked`]): unparking a zone looks at these only, not at every
    /// flight, so a tick stays linear in the questions parked.
    parked: BTreeMap<usize, BTreeSet<Question>>,
    /// Work queued for the end of the call that is running ([`Forwarder::drain`]): the
    /// hosts due are to be started, and these zones' parked questions looked at. Queued
    /// rather than done at once, because each would nest a call per zone otherwise: a
    /// question parked on a zone starts its host, whose question is parked on the zone
    /// that holds the host's name, which starts its host, and so on.
    hosts_due: bool,
    /// The zones whose parked questions are to be looked at (see `hosts_due`).
    to_unpark: BTreeSet<usize>,
    /// Questions whose chain target ended, with its result (`None`: it failed): queued
    /// too, so that a chain of targets ending together ends in a loop, not in a call
    /// nested per link.
    chained: VecDeque<(Question, Option<Done>)>,
    /// For each zone (by index), the configured zones strictly below it: their names
    /// are not its upstreams' to answer ([`Bailiwick`]).
    cuts: Vec<Vec<Vec<u8>>>,
    /// Counters.
    pub stats: ForwardStats,
    /// Flights looked at to unpark questions (the tests bound this work).
    #[cfg(test)]
    unpark_visits: u64,
}

/// Milliseconds to the cache's seconds.
fn secs(ms: u64) -> u32 {
    (ms / 1000) as u32
}

impl<C: Clone, M: ShardLock<MsgShard>, S: ShardLock<SetShard>> Forwarder<C, M, S> {
    /// A forwarder over `cache`.
    pub fn new(config: ForwardConfig, cache: Arc<Cache<M, S>>) -> Self {
        let mut f = Forwarder {
            config,
            cache,
            infra: Infra::new(),
            flights: BTreeMap::new(),
            outstanding: BTreeMap::new(),
            timers: BTreeMap::new(),
            next_token: 1,
            events: VecDeque::new(),
            unwanted_run: 0,
            hosts: Vec::new(),
            base: Vec::new(),
            generation: 0,
            wake: false,
            parked: BTreeMap::new(),
            hosts_due: false,
            to_unpark: BTreeSet::new(),
            chained: VecDeque::new(),
            cuts: Vec::new(),
            stats: ForwardStats::default(),
            #[cfg(test)]
            unpark_visits: 0,
        };
        f.set_hosts(Vec::new(), false);
        f
    }

    /// The settings in force; each zone's upstreams include the addresses its hosts
    /// resolved to (after the configured ones, without duplicates).
    pub fn config(&self) -> &ForwardConfig {
        &self.config
    }

    /// A number that changes whenever a zone's upstreams or the outcome of a host's
    /// resolution (its addresses, those left out, whether answered, its failures in a
    /// row) change, and on every [`Forwarder::reconfigure`]: the caller then republishes
    /// [`Forwarder::config`] and logs what changed in [`Forwarder::hosts`]. A resolution
    /// starting, or ending with what was known already, is no change (`resolving` and
    /// `next_ms` of [`Forwarder::hosts`] move without one).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Each host of `config.hosts`, in order: how it is resolved and what it resolved to.
    pub fn hosts(&self) -> Vec<HostStatus> {
        self.hosts
            .iter()
            .map(|h| {
                let mut addrs = Vec::new();
                let mut refused = Vec::new();
                for fam in &h.fams {
                    for &ip in &fam.addrs {
                        // Once: an AAAA record may hold an IPv4-mapped address, kept as
                        // the IPv4 address.
                        let a = SocketAddr::new(ip, h.cfg.port);
                        if !addrs.contains(&a) {
                            addrs.push(a);
                        }
                    }
                    refused.extend(fam.refused.iter().copied());
                }
                let on = || h.fams.iter().filter(|f| f.on);
                HostStatus {
                    zone: h.cfg.zone.clone(),
                    name: h.cfg.name.clone(),
                    port: h.cfg.port,
                    plan: h.plan,
                    addrs,
                    refused,
                    resolving: on().any(|f| f.pending),
                    answered: on().count() > 0 && on().all(|f| f.answered),
                    failures: on().map(|f| f.failures).max().unwrap_or(0),
                    next_ms: match h.plan {
                        HostPlan::Via(_) => on().filter(|f| !f.pending).map(|f| f.due).min(),
                        _ => None,
                    },
                }
            })
            .collect()
    }

    /// Builds the hosts' state for `self.config` (its zones as configured, without the
    /// hosts' addresses), keeping what `old` knew of a host that is configured the same and
    /// resolved through a zone configured the same (`refresh`: resolve them all again
    /// soon), and the zones' upstreams from it. A host whose resolving zone changed (other
    /// addresses, settings, hosts, or another zone now holds its name) starts afresh:
    /// what the old zone said is not trusted any more, as its cache entries are not.
    fn set_hosts(&mut self, old: Vec<HostState>, refresh: bool) {
        let plans = plan_hosts(&self.config);
        let (ip4, ip6) = (self.config.do_ip4, self.config.do_ip6);
        let mut hosts = Vec::with_capacity(self.config.hosts.len());
        for (cfg, plan) in self.config.hosts.iter().zip(plans) {
            let fresh = [Family::new(rtype::A, ip4), Family::new(rtype::AAAA, ip6)];
            let via = match plan {
                HostPlan::Via(v) => self.config.zones.get(v).map(|z| Via {
                    zone: z.clone(),
                    hosts: self
                        .config
                        .hosts
                        .iter()
                        .filter(|h| h.zone == z.name)
                        .cloned()
                        .collect(),
                }),
                _ => None,
            };
            let mut fams = match old.iter().find(|o| o.cfg == *cfg) {
                Some(o) if via.is_some() && o.via == via => o.fams.clone(),
                _ => fresh.clone(),
            };
            for (fam, on) in fams.iter_mut().zip([ip4, ip6]) {
                if !on {
                    *fam = Family::new(fam.qtype, false);
                }
                fam.on = on;
                if refresh && !fam.pending {
                    fam.due = 0;
                }
            }
            hosts.push(HostState {
                cfg: cfg.clone(),
                plan,
                zone: self.config.zones.iter().position(|z| z.name == cfg.zone),
                via,
                fams,
            });
        }
        self.hosts = hosts;
        let zones = &self.config.zones;
        self.cuts = zones
            .iter()
            .map(|z| {
                zones
                    .iter()
                    .filter(|c| {
                        c.name.len() > z.name.len()
                            && skua_engine::name::is_subdomain(&c.name, &z.name)
                    })
                    .map(|c| c.name.clone())
                    .collect()
            })
            .collect();
        self.base = self
            .config
            .zones
            .iter()
            .map(|z| z.upstreams.clone())
            .collect();
        for z in 0..self.config.zones.len() {
            self.rebuild(z);
        }
        self.prune_infra();
        self.generation += 1;
    }

    /// Sets zone `z`'s upstreams: its own, then its hosts' addresses.
    fn rebuild(&mut self, z: usize) {
        let Some(mut ups) = self.base.get(z).cloned() else {
            return;
        };
        for h in self.hosts.iter().filter(|h| h.zone == Some(z)) {
            for ip in h.fams.iter().flat_map(|f| f.addrs.iter()) {
                let addr = SocketAddr::new(*ip, h.cfg.port);
                if !ups.iter().any(|u| u.addr == addr) {
                    ups.push(Upstream {
                        addr,
                        tls_name: h.cfg.tls_name.clone(),
                    });
                }
            }
        }
        if let Some(zone) = self.config.zones.get_mut(z)
            && zone.upstreams != ups
        {
            zone.upstreams = ups;
            self.generation += 1;
        }
    }

    /// Forgets what is known of addresses that are no zone's upstream any more.
    fn prune_infra(&mut self) {
        let keep: BTreeSet<SocketAddr> = self
            .config
            .zones
            .iter()
            .flat_map(|z| z.upstreams.iter().map(|u| u.addr))
            .collect();
        self.infra.retain(|a| keep.contains(a));
    }

    /// Whether one of zone `z`'s hosts that is resolved through another zone is being
    /// resolved, or is due and will be by the end of this call ([`Forwarder::drain`]): a
    /// question of `z` without an address may wait for it. (A host resolved through `z`
    /// itself cannot give it its first address.)
    fn zone_waits(&self, z: usize, now: u64) -> bool {
        self.hosts.iter().any(|h| {
            h.zone == Some(z)
                && matches!(h.plan, HostPlan::Via(v) if v != z)
                && h.fams.iter().any(|f| f.pending || (f.on && f.due <= now))
        })
    }

    /// Runs the work queued meanwhile, until there is none: the hosts due are started,
    /// then the zones whose hosts' state changed let their parked questions go on (or
    /// fail). Called last by every entry point that can queue work ([`Forwarder::resolve`],
    /// [`Forwarder::reply`], [`Forwarder::failed`], [`Forwarder::tick`]), so however long
    /// a chain of zones is, no call nests in another for each of them.
    fn drain(&mut self, now: u64, rng: &mut impl Entropy) {
        loop {
            if let Some((q, target)) = self.chained.pop_front() {
                match target {
                    Some(done) => self.finish_chain(&q, done, now),
                    None => self.fail(&q, now),
                }
            } else if core::mem::take(&mut self.hosts_due) {
                self.run_hosts(now, rng);
            } else if let Some(z) = self.to_unpark.pop_first() {
                self.unpark(z, now, rng);
            } else {
                break;
            }
        }
    }

    /// Starts resolving every host name that is due.
    fn run_hosts(&mut self, now: u64, rng: &mut impl Entropy) {
        let mut due: Vec<Question> = Vec::new();
        for h in &self.hosts {
            if !matches!(h.plan, HostPlan::Via(_)) {
                continue;
            }
            for fam in &h.fams {
                if fam.on && !fam.pending && fam.due <= now {
                    let q = Question {
                        name: h.cfg.name.clone(),
                        qtype: fam.qtype,
                        qclass: skua_engine::rr::class::IN,
                    };
                    if !due.contains(&q) {
                        due.push(q);
                    }
                }
            }
        }
        for q in due {
            self.start_host(q, now, rng);
        }
    }

    /// Resolves `q` (a host's name, A or AAAA) for every host that waits on it: from the
    /// cache's RRsets when there, else as a question of the zone that holds the name.
    fn start_host(&mut self, q: Question, now: u64, rng: &mut impl Entropy) {
        let mut any = false;
        for h in &mut self.hosts {
            if h.cfg.name != q.name || !matches!(h.plan, HostPlan::Via(_)) {
                continue;
            }
            for fam in &mut h.fams {
                if fam.on && fam.qtype == q.qtype && !fam.pending {
                    fam.pending = true;
                    any = true;
                }
            }
        }
        if !any {
            return;
        }
        // No new generation: that a resolution is under way is in `hosts()`, which the
        // caller reads whenever it likes; what it republishes on a new generation (the
        // zones' upstreams, what it logs) changes only with the outcome.
        if let Some((set, exp)) = self.cache.rrset(&q.name, q.qtype, q.qclass, secs(now)) {
            let ips = set.rdatas.iter().filter_map(|r| ip_of(r)).collect();
            return self.host_result(&q, HostOutcome::Addrs(ips, exp), now);
        }
        match self.begin(q.clone(), Some(Waiter::Host), None, now, rng) {
            Begin::Pending => {}
            Begin::NoZone(_) | Begin::Busy(_) => self.host_result(&q, HostOutcome::Failed, now),
        }
    }

    /// What the resolution of `q` for hosts came to, from the question's end.
    fn host_outcome(q: &Question, done: Option<&Done>, now_s: u32) -> HostOutcome {
        let Some(d) = done else {
            return HostOutcome::Failed;
        };
        if d.rcode != 0 && d.rcode != u16::from(rcode::NXDOMAIN) {
            return HostOutcome::Failed;
        }
        let expires = d
            .sets
            .iter()
            .filter(|(_, sec, _)| *sec != Section::Additional)
            .map(|&(_, _, e)| e)
            .min()
            .unwrap_or(now_s);
        let ips: Vec<IpAddr> = d
            .sets
            .iter()
            .filter(|(s, sec, _)| *sec == Section::Answer && s.rtype == q.qtype)
            .flat_map(|(s, _, _)| s.rdatas.iter().filter_map(|r| ip_of(r)))
            .collect();
        if d.kind == Kind::Positive && !ips.is_empty() {
            HostOutcome::Addrs(ips, expires)
        } else {
            HostOutcome::Negative(expires)
        }
    }

    /// Applies the outcome of resolving `q` to the hosts waiting on it, and their zones'
    /// upstreams; questions parked on those zones go on (or fail when nothing is left to
    /// wait for) in [`Forwarder::drain`].
    fn host_result(&mut self, q: &Question, out: HostOutcome, now: u64) {
        let dnql = self.config.do_not_query_localhost;
        let mut refused = 0u64;
        let mut changed = false;
        let refresh_at = |exp: u32| (u64::from(exp) * 1000).max(now + HOST_MIN_REFRESH_MS);
        let mut zones: Vec<usize> = Vec::new();
        for h in &mut self.hosts {
            if h.cfg.name != q.name {
                continue;
            }
            for fam in &mut h.fams {
                if fam.qtype != q.qtype || !fam.pending {
                    continue;
                }
                fam.pending = false;
                let before = (
                    fam.addrs.clone(),
                    fam.refused.clone(),
                    fam.answered,
                    fam.failures,
                );
                match &out {
                    HostOutcome::Addrs(ips, exp) => {
                        fam.addrs.clear();
                        fam.refused.clear();
                        // Canonical, sorted (a rotated answer is the same set, not a
                        // change) and capped: an upstream's reply must not turn into
                        // thousands of upstreams.
                        let mut ips: Vec<IpAddr> = ips.iter().map(|ip| ip.to_canonical()).collect();
                        ips.sort_unstable();
                        ips.dedup();
                        for ip in ips {
                            match upstream_addr(SocketAddr::new(ip, h.cfg.port), dnql) {
                                Ok(_) if fam.addrs.len() < MAX_HOST_ADDRS => fam.addrs.push(ip),
                                Ok(_) => {}
                                Err(why) => {
                                    refused += 1;
                                    if fam.refused.len() < MAX_HOST_ADDRS {
                                        fam.refused.push((ip, why));
                                    }
                                }
                            }
                        }
                        fam.failures = 0;
                        fam.answered = true;
                        fam.due = refresh_at(*exp);
                    }
                    HostOutcome::Negative(exp) => {
                        // The name stopped resolving (or has no address of this type).
                        fam.addrs.clear();
                        fam.refused.clear();
                        fam.failures = 0;
                        fam.answered = true;
                        fam.due = refresh_at(*exp);
                    }
                    HostOutcome::Failed => {
                        // The addresses in use stay until an answer says otherwise.
                        fam.failures = fam.failures.saturating_add(1);
                        let shift = fam.failures.min(7) - 1;
                        fam.due = now + (1000u64 << shift).min(HOST_MAX_RETRY_MS);
                    }
                }
                // Visible: the addresses (in use and left out), whether answered, the
                // failures in a row; not when it is next asked. The same addresses again
                // (sorted, so in any order) are no change.
                if (&fam.addrs, &fam.refused, fam.answered, fam.failures)
                    != (&before.0, &before.1, before.2, before.3)
                {
                    changed = true;
                }
                if let Some(z) = h.zone
                    && !zones.contains(&z)
                {
                    zones.push(z);
                }
            }
        }
        self.stats.host_addrs_refused += refused;
        if changed {
            self.generation += 1;
        }
        if zones.is_empty() {
            return;
        }
        for &z in &zones {
            self.rebuild(z);
        }
        self.prune_infra();
        self.to_unpark.extend(zones);
    }

    /// Takes `q` out of the questions parked on zone `z`.
    fn unindex_parked(&mut self, z: usize, q: &Question) {
        if let Some(set) = self.parked.get_mut(&z) {
            set.remove(q);
            if set.is_empty() {
                self.parked.remove(&z);
            }
        }
    }

    /// Questions parked on zone `z`: sent when it has upstreams now, failed when it has
    /// none and nothing it waits for is under way.
    fn unpark(&mut self, z: usize, now: u64, rng: &mut impl Entropy) {
        if !self.parked.contains_key(&z) {
            return;
        }
        let ready = self
            .config
            .zones
            .get(z)
            .is_some_and(|zc| !zc.upstreams.is_empty());
        if !ready && self.zone_waits(z, now) {
            self.hosts_due = true;
            return;
        }
        let parked = self.parked.remove(&z).unwrap_or_default();
        #[cfg(test)]
        {
            self.unpark_visits += parked.len() as u64;
        }
        for q in parked {
            match self.flights.get_mut(&q) {
                Some(f) if f.parked && f.zone == z => f.parked = false,
                _ => continue,
            }
            if ready {
                self.send(&q, now, rng, None);
            } else {
                self.fail(&q, now);
            }
        }
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<Cache<M, S>> {
        &self.cache
    }

    /// What is known of each upstream.
    pub fn infra(&self) -> &Infra {
        &self.infra
    }

    /// Questions in flight.
    pub fn in_flight(&self) -> usize {
        self.flights.len()
    }

    /// Replaces the settings (a reload). The cache is kept except what was resolved
    /// through zones whose configuration changed (their [`ZoneConfig::id`] is gone).
    /// Questions in flight through a zone that is still there finish; the others fail.
    /// Upstreams no longer configured are forgotten. Hosts configured as before, whose
    /// name is resolved through a zone configured as before, keep their addresses (and
    /// are resolved again when due); the others lose them, and they and new ones are
    /// resolved at the next [`Forwarder::tick`], which [`Forwarder::next_timer`] asks for
    /// at once.
    pub fn reconfigure(&mut self, config: ForwardConfig) {
        // What was resolved through a zone that changed or went is dropped: its answers
        // (by zone id) and every RRset under its name (RRsets carry no zone).
        let gone: Vec<&ZoneConfig> = self
            .config
            .zones
            .iter()
            .filter(|z| !config.zones.iter().any(|n| n.id == z.id))
            .collect();
        if !gone.is_empty() {
            let ids: Vec<u32> = gone.iter().map(|z| z.id).collect();
            self.cache.flush(crate::cache::Flush::Zones(&ids));
            for z in &gone {
                self.cache.flush(crate::cache::Flush::Subtree(&z.name));
            }
        }
        // Flights keep their zone index only if it still means the same zone.
        let old = core::mem::replace(&mut self.config, config);
        self.parked.clear();
        let mut orphans = Vec::new();
        for (q, f) in &mut self.flights {
            let id = old.zones.get(f.zone).map(|z| z.id);
            match self.config.zones.iter().position(|z| Some(z.id) == id) {
                Some(i) => f.zone = i,
                None => {
                    // Its zone is gone: it fails at the next tick (past its budget, no
                    // query out), and is parked on no zone meanwhile. Its queries end
                    // now: a reply would be judged by the bailiwick of whatever zone has
                    // its old index.
                    f.deadline_ms = 0;
                    f.parked = false;
                    orphans.push(q.clone());
                }
            }
            if f.parked {
                self.parked.entry(f.zone).or_default().insert(q.clone());
            }
        }
        for q in orphans {
            self.drop_flight_queries(&q, None);
        }
        let refresh = old.do_not_query_localhost != self.config.do_not_query_localhost;
        let hosts = core::mem::take(&mut self.hosts);
        self.set_hosts(hosts, refresh);
        self.wake = true;
    }

    /// The zone that resolves a question for `name` (lower case) of type `qtype`: the most
    /// specific one containing it, or for DS, containing its parent (DS lives on the parent
    /// side of a zone cut, RFC 4035 §2.4; Unbound's `forward_request` and stub lookup strip
    /// the label the same way).
    pub fn zone_for_question(&self, name: &[u8], qtype: u16) -> Option<usize> {
        match name.first() {
            Some(&len) if qtype == rtype::DS && len != 0 => {
                self.zone_for(name.get(1 + usize::from(len)..).unwrap_or(b"\x00"))
            }
            _ => self.zone_for(name),
        }
    }

    /// The most specific zone containing `name` (lower case).
    pub fn zone_for(&self, name: &[u8]) -> Option<usize> {
        zone_for_name(&self.config.zones, name)
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event<C>> {
        self.events.pop_front()
    }

    /// When [`Forwarder::tick`] must next run, ms.
    pub fn next_timer(&self) -> Option<u64> {
        if self.wake {
            return Some(0);
        }
        let t = self.timers.keys().next().map(|&(t, _)| t);
        // Stale answers due, and the budget of questions with no query of their own out:
        // parked on a zone's hosts, or waiting on a chain target (which may have joined a
        // question with a later deadline).
        let s = self
            .flights
            .values()
            .filter_map(|f| {
                let budget = (f.parked || f.target.is_some()).then_some(f.deadline_ms);
                [f.stale_at, budget].into_iter().flatten().min()
            })
            .min();
        // Host names due for resolution.
        let h = self
            .hosts
            .iter()
            .filter(|h| matches!(h.plan, HostPlan::Via(_)))
            .flat_map(|h| h.fams.iter())
            .filter(|f| f.on && !f.pending)
            .map(|f| f.due)
            .min();
        [t, s, h].into_iter().flatten().min()
    }

    /// Starts resolving `q` for `client` at `now` (ms). With `refresh`, the question is
    /// resolved even if it is in the cache (a prefetch or a stale entry's refresh;
    /// `client` is then `None`).
    pub fn resolve(
        &mut self,
        q: Question,
        client: Option<C>,
        now: u64,
        rng: &mut impl Entropy,
    ) -> Start<C> {
        let start = match self.begin(q, client.map(Waiter::Client), None, now, rng) {
            Begin::NoZone(Some(Waiter::Client(c))) => Start::NoZone(c),
            Begin::Busy(Some(Waiter::Client(c))) => Start::Busy(c),
            _ => Start::Pending,
        };
        self.drain(now, rng);
        start
    }

    /// Starts resolving `q` for `waiter` (or joins the flight of `q` in progress). `chain`
    /// gives a chain target's restarts and deadline (those of the question it continues).
    fn begin(
        &mut self,
        q: Question,
        waiter: Option<Waiter<C>>,
        chain: Option<(u32, u64)>,
        now: u64,
        rng: &mut impl Entropy,
    ) -> Begin<C> {
        let Some(zone) = self.zone_for_question(&q.name, q.qtype) else {
            return Begin::NoZone(waiter);
        };
        let client = matches!(waiter, Some(Waiter::Client(_)));
        // Clients and questions whose chain leads here count alike against the bound.
        let bounded = matches!(waiter, Some(Waiter::Client(_) | Waiter::Chain(_)));
        if let Some(f) = self.flights.get_mut(&q) {
            let waiting = f
                .waiters
                .iter()
                .filter(|w| matches!(w, Waiter::Client(_) | Waiter::Chain(_)))
                .count();
            return match waiter {
                Some(w) if bounded && waiting >= self.config.limits.waiters => Begin::Busy(Some(w)),
                Some(w) => {
                    if client {
                        self.stats.coalesced += 1;
                    }
                    f.waiters.push(w);
                    Begin::Pending
                }
                None => Begin::Pending,
            };
        }
        if self.flights.len() >= self.config.limits.flights {
            return Begin::Busy(waiter);
        }
        let cfg = self.cache.config();
        let stale_at = (client && cfg.serve_expired && cfg.serve_expired_client_timeout > 0)
            .then(|| now + u64::from(cfg.serve_expired_client_timeout));
        let flight = Flight {
            zone,
            waiters: waiter.into_iter().collect(),
            tried: Vec::new(),
            attempts: 0,
            deadline_ms: chain.map_or(now + self.config.limits.budget_ms, |(_, d)| d),
            chain: Vec::new(),
            errors: 0,
            outstanding: None,
            late: Vec::new(),
            stale_at,
            no_edns: Vec::new(),
            parked: false,
            restarts: chain.map_or(0, |(r, _)| r),
            target: None,
            for_chain: chain.is_some(),
        };
        self.flights.insert(q.clone(), flight);
        self.send(&q, now, rng, None);
        Begin::Pending
    }

    /// Sends the next upstream query of `q`; `over` forces a transport (TCP after TC=1)
    /// and the upstream. Finishes the question with SERVFAIL when nothing is left to try.
    fn send(
        &mut self,
        q: &Question,
        now: u64,
        rng: &mut impl Entropy,
        over: Option<(SocketAddr, Transport)>,
    ) {
        let Some(zi) = self.flights.get(q).map(|f| f.zone) else {
            return;
        };
        if over.is_none()
            && self
                .config
                .zones
                .get(zi)
                .is_some_and(|z| z.upstreams.is_empty())
        {
            // No address yet: the zone's upstreams are hosts. Every host due is resolved
            // at the end of this call (from the cache if it has them, by `drain`: not from
            // here, which would nest a call per zone of a chain); the question waits while
            // one of its zone's is being resolved or due, and fails at once (SERVFAIL,
            // EDE 22) when none is.
            self.hosts_due = true;
            let waits = self.zone_waits(zi, now);
            let Some(f) = self.flights.get_mut(q) else {
                return;
            };
            if waits && now < f.deadline_ms {
                f.parked = true;
                self.parked.entry(zi).or_default().insert(q.clone());
                return;
            }
            return self.fail(q, now);
        }
        let Some(f) = self.flights.get_mut(q) else {
            return;
        };
        let Some(zone) = self.config.zones.get(f.zone) else {
            return self.fail(q, now);
        };
        if f.attempts >= self.config.limits.attempts || now >= f.deadline_ms {
            return self.fail(q, now);
        }
        let (to, transport) = match over {
            Some(o) => o,
            None => {
                let all: Vec<SocketAddr> = zone.upstreams.iter().map(|u| u.addr).collect();
                let untried: Vec<SocketAddr> = all
                    .iter()
                    .copied()
                    .filter(|a| !f.tried.contains(a))
                    .collect();
                // Every upstream tried once: start another round.
                let pool = if untried.is_empty() { all } else { untried };
                let Some(to) = self.infra.select(&pool, now, rng.u32()) else {
                    return self.fail(q, now);
                };
                let up = zone.upstreams.iter().find(|u| u.addr == to);
                let transport = match up.and_then(|u| u.tls_name.clone()) {
                    Some(name) if zone.tls => Transport::Tls(name),
                    _ if zone.tls => Transport::Tls(Arc::from("")),
                    _ if zone.tcp || self.config.tcp_upstream => Transport::Tcp,
                    _ => Transport::Udp,
                };
                (to, transport)
            }
        };
        f.attempts += 1;
        if !f.tried.contains(&to) {
            f.tried.push(to);
        }
        let id = rng.u32() as u16;
        let mut sent_name = q.name.clone();
        if self.config.use_caps_for_id {
            randomize_case(&mut sent_name, rng);
        }
        let edns = !f.no_edns.contains(&to);
        let rd = zone.kind == ZoneKind::Forward;
        let bytes = build_query(
            id,
            rd,
            &sent_name,
            q.qtype,
            q.qclass,
            edns.then_some(self.config.edns_buffer_size),
        );
        let token = self.next_token;
        self.next_token += 1;
        // TCP and TLS get longer: connection set-up is more round trips.
        let rto32 = self.infra.rto(to);
        let rto = u64::from(rto32);
        let wait = match transport {
            Transport::Udp => rto,
            _ => rto * 3,
        };
        let deadline = (now + wait).min(f.deadline_ms);
        if let Some(old) = f.outstanding.replace(token) {
            self.drop_outstanding(old);
        }
        self.outstanding.insert(
            token,
            Outstanding {
                question: q.clone(),
                to,
                transport: transport.clone(),
                id,
                sent_name,
                edns,
                sent_ms: now,
                deadline_ms: deadline,
                rto: rto32,
            },
        );
        self.timers.insert((deadline, token), ());
        self.stats.queries += 1;
        self.events.push_back(Event::Transmit(Transmit {
            token,
            to,
            transport,
            bytes,
        }));
    }

    /// Ends every query of `q`'s flight but `keep` (the current one and the late ones).
    fn drop_flight_queries(&mut self, q: &Question, keep: Option<u64>) {
        let Some(f) = self.flights.get_mut(q) else {
            return;
        };
        let mut tokens: Vec<u64> = core::mem::take(&mut f.late);
        tokens.extend(f.outstanding.take());
        for t in tokens {
            if Some(t) != keep {
                self.drop_outstanding(t);
            }
        }
    }

    fn drop_outstanding(&mut self, token: u64) {
        if let Some(o) = self.outstanding.remove(&token) {
            self.timers.remove(&(o.deadline_ms, token));
            self.events.push_back(Event::Cancel(token));
        }
    }

    /// Whether upstream query `token` still waits for a reply.
    pub fn is_outstanding(&self, token: u64) -> bool {
        self.outstanding.contains_key(&token)
    }

    /// The transport of query `token` failed (connection refused or reset, TLS handshake
    /// or certificate failure, ICMP unreachable): try the next upstream.
    pub fn failed(&mut self, token: u64, now: u64, rng: &mut impl Entropy) {
        self.query_failed(token, now, rng);
        self.drain(now, rng);
    }

    /// Query `token` (outstanding) ended in an error: the upstream is charged with it, and
    /// the question goes to the next upstream unless it was a late query (the current one
    /// goes on). Its I/O is cancelled (the daemon forgets its socket or connection ID).
    fn query_failed(&mut self, token: u64, now: u64, rng: &mut impl Entropy) {
        let Some(o) = self.outstanding.remove(&token) else {
            return;
        };
        self.timers.remove(&(o.deadline_ms, token));
        self.events.push_back(Event::Cancel(token));
        self.infra.failed(o.to);
        let Some(f) = self.flights.get_mut(&o.question) else {
            return;
        };
        f.errors += 1;
        if f.outstanding != Some(token) {
            f.late.retain(|&t| t != token);
            return;
        }
        f.outstanding = None;
        self.send(&o.question, now, rng, None);
    }

    /// A message arrived from `from` for query `token`.
    pub fn reply(
        &mut self,
        token: u64,
        from: SocketAddr,
        bytes: &[u8],
        now: u64,
        rng: &mut impl Entropy,
    ) {
        self.take_reply(token, from, bytes, now, rng);
        self.drain(now, rng);
    }

    /// [`Forwarder::reply`], without running the work it queued.
    fn take_reply(
        &mut self,
        token: u64,
        from: SocketAddr,
        bytes: &[u8],
        now: u64,
        rng: &mut impl Entropy,
    ) {
        let Some(o) = self.outstanding.get(&token) else {
            self.unwanted();
            return;
        };
        // What cannot be the reply (from another address, shorter than a header, another
        // ID) is unwanted and the query waits on: anyone who knows the port could send it,
        // and it must not end the query or count against the upstream (RFC 5452 §9.1).
        // Unbound drops short datagrams and looks the query up by ID and address before
        // anything else too (`outnet_udp_cb`).
        if from != o.to
            || bytes.len() < HEADER_LEN
            || u16::from_be_bytes([bytes[0], bytes[1]]) != o.id
        {
            self.unwanted();
            return;
        }
        let Ok(m) = Message::parse(bytes) else {
            // Garbage with the query's ID from the right address: an error reply.
            self.query_failed(token, now, rng);
            return;
        };
        let question_ok = m.question.as_ref().is_some_and(|mq| {
            mq.qtype == o.question.qtype
                && mq.qclass == o.question.qclass
                && if self.config.use_caps_for_id {
                    mq.name == o.sent_name
                } else {
                    mq.name.eq_ignore_ascii_case(&o.sent_name)
                }
        });
        let header_ok =
            m.id == o.id && m.flags & flags::QR != 0 && m.flags & flags::OPCODE_MASK == 0;
        if from != o.to || !header_ok || !question_ok {
            self.unwanted();
            return;
        }
        let o = self.outstanding.remove(&token).expect("present");
        self.timers.remove(&(o.deadline_ms, token));
        self.events.push_back(Event::Cancel(token));
        let q = o.question.clone();
        let rtt = now.saturating_sub(o.sent_ms).min(u64::from(u32::MAX)) as u32;
        if !self.flights.contains_key(&q) {
            return;
        }
        // This reply decides: the question's other queries (current or late) are over.
        self.drop_flight_queries(&q, None);
        // TC=1 over UDP: the same upstream over TCP (RFC 7766 §5).
        if m.flags & flags::TC != 0 && o.transport == Transport::Udp {
            self.infra.replied(o.to, rtt);
            self.stats.tcp_retries += 1;
            return self.send(&q, now, rng, Some((o.to, Transport::Tcp)));
        }
        let rc = m.rcode();
        // FORMERR/NOTIMP to a query with EDNS: once more without (RFC 6891 §7).
        if o.edns
            && (rc == u16::from(rcode::FORMERR) || rc == u16::from(rcode::NOTIMP))
            && m.opt.is_none()
        {
            if let Some(f) = self.flights.get_mut(&q) {
                f.no_edns.push(o.to);
            }
            return self.send(&q, now, rng, Some((o.to, o.transport)));
        }
        let zone_idx = self.flights.get(&q).map(|f| f.zone).unwrap_or(0);
        let Some(zone) = self.config.zones.get(zone_idx) else {
            return self.fail(&q, now);
        };
        let asked = Asked {
            name: &q.name,
            qtype: q.qtype,
            qclass: q.qclass,
        };
        let bw = Bailiwick {
            zone: &zone.name,
            cuts: self.cuts.get(zone_idx).map_or(&[], |c| &c[..]),
        };
        let verdict = scrub::scrub_in(&m, asked, &bw);
        if verdict == Verdict::Lame {
            self.infra.replied(o.to, rtt);
            self.infra.failed(o.to);
            if let Some(f) = self.flights.get_mut(&q) {
                f.errors += 1;
            }
            return self.send(&q, now, rng, None);
        }
        self.infra.replied(o.to, rtt);
        // An NS answer goes out with the addresses of its name servers, as Unbound's does.
        let glue = match &verdict {
            Verdict::Answer { answer } if q.qtype == rtype::NS => answer
                .iter()
                .find(|s| s.rtype == rtype::NS && s.owner.eq_ignore_ascii_case(&q.name))
                .map(|ns| scrub::ns_addresses(&m, ns, &bw))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        self.accept(&q, verdict, glue, now, rng);
    }

    fn unwanted(&mut self) {
        self.stats.unwanted += 1;
        self.unwanted_run += 1;
        let t = self.config.unwanted_reply_threshold;
        if t != 0 && self.unwanted_run >= t {
            // Unbound's defence: a flood of mismatched replies may be a spoofing attempt
            // that succeeded somewhere; drop what we cached.
            self.unwanted_run = 0;
            self.stats.defences += 1;
            self.cache.flush(crate::cache::Flush::All);
        }
    }

    /// A scrubbed, usable verdict for `q`; `glue` goes to the additional section of an
    /// answer (kept with the answer only, not offered to the RRset store: additional data
    /// answers no question).
    fn accept(
        &mut self,
        q: &Question,
        verdict: Verdict,
        glue: Vec<RrSet>,
        now: u64,
        rng: &mut impl Entropy,
    ) {
        let Some(f) = self.flights.get(q) else {
            return;
        };
        let zone = &self.config.zones[f.zone];
        let cache_it = !zone.no_cache;
        let now_s = secs(now);
        let c = self.cache.config().clone();
        let keep = |set: RrSet, negative: bool| -> (RrSet, u32) {
            let mut set = set;
            set.ttl = if negative {
                c.clamp_negative(set.ttl)
            } else {
                c.clamp(set.ttl)
            };
            if cache_it {
                self.cache.offer(set, now_s)
            } else {
                let exp = now_s.saturating_add(set.ttl);
                (set, exp)
            }
        };
        let (rc, kind, answer, soa) = match verdict {
            Verdict::Answer { answer } => (0u16, Kind::Positive, answer, None),
            Verdict::NoData { answer, soa } => (0, Kind::NoData, answer, soa),
            Verdict::NxDomain { answer, soa } => (3, Kind::NxDomain, answer, soa),
            Verdict::Chain { answer, target } => {
                let kept: Vec<(RrSet, u32)> = answer.into_iter().map(|s| keep(s, false)).collect();
                return self.follow(q, kept, target, now, rng);
            }
            Verdict::Lame => return,
        };
        let mut sets: Vec<(RrSet, Section, u32)> = answer
            .into_iter()
            .map(|s| keep(s, false))
            .map(|(s, e)| (s, Section::Answer, e))
            .collect();
        for mut g in glue {
            g.ttl = c.clamp(g.ttl);
            let expires = now_s.saturating_add(g.ttl);
            sets.push((g, Section::Additional, expires));
        }
        if let Some(mut soa) = soa {
            // RFC 2308 §5: the SOA goes out with the negative TTL and counts down with it.
            // It stays with this answer and is not offered to the RRset store: there it would
            // meet the zone's SOA as an SOA query cached it (ranked higher, as answer data)
            // and go out with that SOA's own TTL, and the negative answer would be cached
            // that long; an SOA query could get the negative one. Unbound keeps the two
            // apart as well (`PACKED_RRSET_SOA_NEG`).
            soa.ttl = c.clamp_negative(scrub::negative_ttl(&soa));
            let expires = now_s.saturating_add(soa.ttl);
            sets.push((soa, Section::Authority, expires));
        }
        // A negative answer without SOA is passed on but not cached (RFC 2308 §5).
        let cacheable = cache_it
            && (kind == Kind::Positive || sets.iter().any(|(s, _, _)| s.rtype == rtype::SOA));
        self.finish(
            q,
            Done {
                rcode: rc,
                kind,
                sets,
                ede: None,
                cache: cacheable,
                restarts: 0,
            },
            now,
        );
    }

    /// The chain left `q`'s zone at `target`: resolve the target (through its own zone),
    /// and finish `q` when it is done.
    fn follow(
        &mut self,
        q: &Question,
        kept: Vec<(RrSet, u32)>,
        target: Vec<u8>,
        now: u64,
        rng: &mut impl Entropy,
    ) {
        let Some(f) = self.flights.get_mut(q) else {
            return;
        };
        f.chain.extend(kept);
        // Each target resolved on its own is a restart of the client's question, bounded
        // as Unbound's are (`max-query-restarts`): an upstream that answers `aK CNAME
        // aK+1` for ever costs MAX_RESTARTS + 1 questions, not one every round trip.
        let restarts = f.restarts + 1;
        let deadline = f.deadline_ms;
        if f.chain.len() > scrub::MAX_CHAIN * 2 || restarts > MAX_RESTARTS {
            return self.fail(q, now);
        }
        let next = Question {
            name: target,
            qtype: q.qtype,
            qclass: q.qclass,
        };
        if next == *q || self.chain_would_loop_or_overrun(&next, q) {
            // A loop through zones (a CNAME b in one, b CNAME a in another), or a chain
            // in flight already longer than any answer may be: SERVFAIL now rather than
            // waiting on each other until the budget runs out.
            return self.fail(q, now);
        }
        if self.zone_for_question(&next.name, next.qtype).is_none() {
            // Nobody to ask about the target: the chain as far as it goes (the client's
            // stub asks the target itself), as an answer that is not cached.
            let sets = self.flights[q]
                .chain
                .iter()
                .map(|(s, e)| (s.clone(), Section::Answer, *e))
                .collect();
            return self.finish(
                q,
                Done {
                    rcode: 0,
                    kind: Kind::Positive,
                    sets,
                    ede: None,
                    cache: false,
                    restarts: 0,
                },
                now,
            );
        }
        // Cached already (and not in flight: a question in flight is joined)?
        let now_s = secs(now);
        if !self.flights.contains_key(&next)
            && let Some(done) = self.cached_sets(&next, now_s)
        {
            return self.finish_chain(q, done, now);
        }
        // The chain's waiter goes in with the question, so that a target that fails at
        // once (no address to ask) fails `q` too. A target in flight already is joined,
        // within the bound on its waiters; a new one gets `q`'s restarts and deadline.
        match self.begin(
            next.clone(),
            Some(Waiter::Chain(q.clone())),
            Some((restarts, deadline)),
            now,
            rng,
        ) {
            Begin::Pending => {
                if let Some(f) = self.flights.get_mut(q) {
                    f.target = Some(next);
                }
            }
            Begin::NoZone(_) | Begin::Busy(_) => self.fail(q, now),
        }
    }

    /// Whether waiting on `next` would have `q` wait on itself (`next`'s chain, through
    /// the targets in flight, leads back to `q`), or on a chain longer than the restarts
    /// an answer may take.
    fn chain_would_loop_or_overrun(&self, next: &Question, q: &Question) -> bool {
        let mut at = next;
        for _ in 0..=MAX_RESTARTS {
            if at == q {
                return true;
            }
            match self.flights.get(at).and_then(|f| f.target.as_ref()) {
                Some(t) => at = t,
                None => return false,
            }
        }
        true
    }

    /// `q` ended (answered, failed or dropped): it no longer waits on its chain target,
    /// and a target started for a chain that nobody waits on any more ends too (its
    /// queries cancelled), and so on down the chain. A question whose client got its
    /// SERVFAIL leaves nothing asking upstreams on its behalf.
    fn release_target(&mut self, q: &Question, target: Option<Question>) {
        let mut child = q.clone();
        let mut target = target;
        while let Some(t) = target.take() {
            let Some(f) = self.flights.get_mut(&t) else {
                return;
            };
            let before = f.waiters.len();
            f.waiters
                .retain(|w| !matches!(w, Waiter::Chain(p) if *p == child));
            if f.waiters.len() == before || !f.waiters.is_empty() || !f.for_chain {
                return;
            }
            self.drop_flight_queries(&t, None);
            let Some(f) = self.flights.remove(&t) else {
                return;
            };
            if f.parked {
                self.unindex_parked(f.zone, &t);
            }
            target = f.target;
            child = t;
        }
    }

    /// The RRsets of a cached positive answer for `q` from the RRset store, if all there.
    fn cached_sets(&self, q: &Question, now_s: u32) -> Option<Done> {
        let (set, exp) = self.cache.rrset(&q.name, q.qtype, q.qclass, now_s)?;
        Some(Done {
            rcode: 0,
            kind: Kind::Positive,
            sets: alloc::vec![(set, Section::Answer, exp)],
            ede: None,
            cache: true,
            restarts: 0,
        })
    }

    /// Finishes `q` (waiting on a chain target) with the target's result.
    fn finish_chain(&mut self, q: &Question, target: Done, now: u64) {
        let Some(f) = self.flights.get(q) else {
            return;
        };
        // One restart more than the target's answer took: an answer made of chains in
        // flight that joined one another is bounded as one question's own restarts are.
        let restarts = target.restarts + 1;
        if restarts > MAX_RESTARTS {
            return self.fail(q, now);
        }
        let cache_it = target.cache && !self.config.zones[f.zone].no_cache;
        let mut sets: Vec<(RrSet, Section, u32)> = f
            .chain
            .iter()
            .map(|(s, e)| (s.clone(), Section::Answer, *e))
            .collect();
        // The target's additional data (an NS answer's addresses) belongs to its own
        // question only.
        sets.extend(
            target
                .sets
                .into_iter()
                .filter(|(_, sec, _)| *sec != Section::Additional),
        );
        self.finish(
            q,
            Done {
                rcode: target.rcode,
                kind: if target.kind == Kind::Positive {
                    Kind::Positive
                } else {
                    target.kind
                },
                sets,
                ede: target.ede,
                cache: cache_it,
                restarts,
            },
            now,
        );
    }

    /// SERVFAIL for `q` (or a stale answer, RFC 8767 §4, when the cache may serve one).
    fn fail(&mut self, q: &Question, now: u64) {
        let Some(f) = self.flights.get(q) else {
            return;
        };
        let ede = if f.errors == 0 {
            ede::NO_REACHABLE_AUTHORITY
        } else {
            ede::NETWORK_ERROR
        };
        self.stats.servfail += 1;
        let done = Done {
            rcode: u16::from(rcode::SERVFAIL),
            kind: Kind::NoData,
            sets: Vec::new(),
            ede: Some(ede),
            cache: false,
            restarts: 0,
        };
        // Hosts waiting on `q` may let questions parked on their zone go on: those send.
        self.finish(q, done, now);
    }

    /// Removes `q`'s flight, caches its answer when it may, and answers its waiters.
    fn finish(&mut self, q: &Question, done: Done, now: u64) {
        self.drop_flight_queries(q, None);
        let Some(mut f) = self.flights.remove(q) else {
            return;
        };
        if f.parked {
            self.unindex_parked(f.zone, q);
        }
        self.release_target(q, f.target.take());
        let now_s = secs(now);
        let failed = done.rcode == u16::from(rcode::SERVFAIL);
        let mut waiters = f.waiters;
        // A failure with a stale entry at hand: the stale answer instead (RFC 8767 §4).
        if failed {
            let key = q.key();
            let stale = self.stale_rendered(&key, now_s);
            if let Some(r) = stale {
                let reply_ttl = self.cache.config().serve_expired_reply_ttl;
                self.answer_waiters(q, &mut waiters, Arc::new(r), Some(reply_ttl), None, now);
                return;
            }
        }
        let expires = done.sets.iter().map(|&(_, _, e)| e).min().unwrap_or(now_s);
        let body = render(&q.name, done.sets.iter().map(|(s, sec, e)| (s, *sec, *e)));
        let rendered = Arc::new(Rendered {
            flags: flags::QR | flags::RA | done.rcode,
            kind: done.kind,
            body,
            expires,
            ttl: expires.saturating_sub(now_s),
            zone: self.config.zones.get(f.zone).map_or(0, |z| z.id),
            ede: done.ede,
        });
        if done.cache && !failed && rendered.ttl > 0 {
            self.cache.insert(&q.key(), (*rendered).clone(), now_s);
        }
        self.answer_waiters(q, &mut waiters, rendered, None, Some(done), now);
    }

    /// Answers the waiters of `q`: clients, questions whose chain led here (queued for
    /// [`Forwarder::drain`]), hosts.
    fn answer_waiters(
        &mut self,
        q: &Question,
        waiters: &mut Vec<Waiter<C>>,
        rendered: Arc<Rendered>,
        fixed_ttl: Option<u32>,
        done: Option<Done>,
        now: u64,
    ) {
        let mut clients = Vec::new();
        let mut chains = Vec::new();
        let mut host = false;
        for w in waiters.drain(..) {
            match w {
                Waiter::Client(c) => clients.push(c),
                Waiter::Chain(p) => chains.push(p),
                Waiter::Host => host = true,
            }
        }
        if !clients.is_empty() {
            self.events.push_back(Event::Answer(Answer {
                clients,
                rendered: rendered.clone(),
                fixed_ttl,
            }));
        }
        let ok = done
            .as_ref()
            .filter(|d| d.rcode != u16::from(rcode::SERVFAIL));
        for p in chains {
            self.chained.push_back((p, ok.cloned()));
        }
        if host {
            let out = Self::host_outcome(q, done.as_ref(), secs(now));
            self.host_result(q, out, now);
        }
    }

    /// Runs what is due at `now`: upstream timeouts (next upstream, or SERVFAIL), stale
    /// answers for clients that waited `serve-expired-client-timeout`, and questions past
    /// their budget.
    pub fn tick(&mut self, now: u64, rng: &mut impl Entropy) {
        self.wake = false;
        // Stale answers first: a client that waited long enough gets one even if the
        // question goes on (to refresh the cache).
        let due: Vec<Question> = self
            .flights
            .iter()
            .filter(|(_, f)| f.stale_at.is_some_and(|t| t <= now))
            .map(|(q, _)| q.clone())
            .collect();
        for q in due {
            self.stale_now(&q, now);
        }
        let expired: Vec<(u64, u64)> = self
            .timers
            .range(..=(now, u64::MAX))
            .map(|(&k, _)| k)
            .collect();
        for (t, token) in expired {
            self.timers.remove(&(t, token));
            let Some(o) = self.outstanding.get(&token) else {
                continue;
            };
            let (to, rto, question) = (o.to, o.rto, o.question.clone());
            self.infra.timed_out(to, now, rto);
            match self.flights.get_mut(&question) {
                // Timed out, not given up: its reply is still taken while the retry runs.
                Some(f) if f.outstanding == Some(token) => {
                    f.outstanding = None;
                    f.late.push(token);
                }
                _ => {
                    self.outstanding.remove(&token);
                    self.events.push_back(Event::Cancel(token));
                    continue;
                }
            }
            self.send(&question, now, rng, None);
        }
        // Flights with no query out and past their budget (a reconfigured zone, or one
        // parked on hosts that did not resolve in time).
        let stuck: Vec<Question> = self
            .flights
            .iter()
            .filter(|(_, f)| f.outstanding.is_none() && f.deadline_ms <= now)
            .map(|(q, _)| q.clone())
            .collect();
        for q in stuck {
            self.fail(&q, now);
        }
        // Host names due, then questions parked on a zone that has upstreams now (a
        // reconfiguration gave it addresses).
        self.hosts_due = true;
        self.to_unpark.extend(self.parked.keys().copied());
        self.drain(now, rng);
    }

    /// The stale answer the cache may serve for `key` at `now_s` (RFC 8767 §4), as an
    /// answer for waiting clients: EDE 3 "Stale Answer".
    fn stale_rendered(&self, key: &crate::cache::Key<'_>, now_s: u32) -> Option<Rendered> {
        self.cache.stale(key, now_s, |h| Rendered {
            flags: h.flags,
            kind: Kind::Positive,
            body: crate::render::Body {
                counts: h.counts.try_into().unwrap_or([0; 6]),
                bounds: h.bounds.to_vec(),
                tail: h.tail.to_vec(),
                ttls: h.ttls.to_vec(),
            },
            expires: 0,
            ttl: 0,
            zone: 0,
            ede: Some(ede::STALE_ANSWER),
        })
    }

    fn stale_now(&mut self, q: &Question, now: u64) {
        let Some(f) = self.flights.get_mut(q) else {
            return;
        };
        f.stale_at = None;
        let now_s = secs(now);
        let stale = self.stale_rendered(&q.key(), now_s);
        let Some(r) = stale else {
            return;
        };
        let f = self.flights.get_mut(q).expect("present");
        let (mut clients, rest): (Vec<_>, Vec<_>) = f
            .waiters
            .drain(..)
            .partition(|w| matches!(w, Waiter::Client(_)));
        f.waiters = rest;
        let ttl = self.cache.config().serve_expired_reply_ttl;
        self.answer_waiters(q, &mut clients, Arc::new(r), Some(ttl), None, now);
    }
}

/// Flips the case of each letter of `name` at random (0x20, draft-vixie-dnsext-dns0x20).
fn randomize_case(name: &mut [u8], rng: &mut impl Entropy) {
    let mut bits = 0u32;
    let mut left = 0;
    let mut pos = 0usize;
    while pos < name.len() && name[pos] != 0 {
        let len = usize::from(name[pos]);
        let end = (pos + 1 + len).min(name.len());
        for b in &mut name[pos + 1..end] {
            if b.is_ascii_alphabetic() {
                if left == 0 {
                    bits = rng.u32();
                    left = 32;
                }
                if bits & 1 != 0 {
                    *b ^= 0x20;
                }
                bits >>= 1;
                left -= 1;
            }
        }
        pos += 1 + len;
    }
}

/// An upstream query: header, question, and an OPT record when `edns` gives a size
/// (RFC 6891 §6.1.2; DO clear: nothing is validated yet).
pub fn build_query(
    id: u16,
    rd: bool,
    name: &[u8],
    qtype: u16,
    qclass: u16,
    edns: Option<u16>,
) -> Vec<u8> {
    let mut m = Vec::with_capacity(HEADER_LEN + name.len() + 4 + 11);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&(if rd { flags::RD } else { 0 }).to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, u8::from(edns.is_some())]);
    m.extend_from_slice(name);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&qclass.to_be_bytes());
    if let Some(size) = edns {
        m.extend_from_slice(&[0, 0, 41]);
        m.extend_from_slice(&size.to_be_bytes());
        m.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{CacheConfig, Lookup};
    use alloc::vec;
    use core::cell::RefCell;

    type TestCache = Cache<RefCell<MsgShard>, RefCell<SetShard>>;
    type Fwd = Forwarder<u32, RefCell<MsgShard>, RefCell<SetShard>>;

    /// A counter as randomness: predictable, and every ID differs.
    struct Seq(u32);
    impl Entropy for Seq {
        fn u32(&mut self) -> u32 {
            self.0 = self.0.wrapping_mul(1_103_515_245).wrapping_add(12345);
            self.0
        }
    }

    fn up(n: u8) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, n], 53))
    }

    fn zone(name: &[u8], kind: ZoneKind, ups: &[u8], id: u32) -> ZoneConfig {
        ZoneConfig {
            name: name.to_vec(),
            kind,
            upstreams: ups
                .iter()
                .map(|&n| Upstream {
                    addr: up(n),
                    tls_name: None,
                })
                .collect(),
            no_cache: false,
            first: false,
            tls: false,
            tcp: false,
            id,
        }
    }

    fn fwd(zones: Vec<ZoneConfig>, cache: CacheConfig) -> Fwd {
        let cfg = ForwardConfig {
            zones,
            ..ForwardConfig::default()
        };
        // One thread: the RefCell shards make the cache !Sync, which is the point.
        #[allow(clippy::arc_with_non_send_sync)]
        let cache = Arc::new(TestCache::new(cache));
        Forwarder::new(cfg, cache)
    }

    const WWW: &[u8] = b"\x03www\x07example\x00";

    fn q(name: &[u8], qtype: u16) -> Question {
        Question {
            name: name.to_vec(),
            qtype,
            qclass: 1,
        }
    }

    /// A reply to `query` (the transmitted bytes): same ID and question, `rcode`, the
    /// records given as (owner, type, ttl, rdata) in answer and authority.
    fn reply(
        query: &[u8],
        rcode: u16,
        tc: bool,
        answer: &[(&[u8], u16, u32, &[u8])],
        auth: &[(&[u8], u16, u32, &[u8])],
    ) -> Vec<u8> {
        let qm = Message::parse(query).unwrap();
        let qq = qm.question.unwrap();
        let mut m = Vec::new();
        m.extend_from_slice(&qm.id.to_be_bytes());
        let f =
            0x8000 | (qm.flags & flags::RD) | flags::RA | rcode | if tc { flags::TC } else { 0 };
        m.extend_from_slice(&f.to_be_bytes());
        m.extend_from_slice(&[0, 1]);
        m.extend_from_slice(&(answer.len() as u16).to_be_bytes());
        m.extend_from_slice(&(auth.len() as u16).to_be_bytes());
        m.extend_from_slice(&[0, 0]);
        m.extend_from_slice(&qq.name);
        m.extend_from_slice(&qq.qtype.to_be_bytes());
        m.extend_from_slice(&qq.qclass.to_be_bytes());
        for (o, t, ttl, rd) in answer.iter().chain(auth) {
            m.extend_from_slice(o);
            m.extend_from_slice(&t.to_be_bytes());
            m.extend_from_slice(&[0, 1]);
            m.extend_from_slice(&ttl.to_be_bytes());
            m.extend_from_slice(&(rd.len() as u16).to_be_bytes());
            m.extend_from_slice(rd);
        }
        m
    }

    /// The next event that is not a cancellation.
    fn next(f: &mut Fwd) -> Option<Event<u32>> {
        loop {
            match f.poll_event() {
                Some(Event::Cancel(_)) => continue,
                e => return e,
            }
        }
    }

    fn transmit(f: &mut Fwd) -> Transmit {
        match next(f) {
            Some(Event::Transmit(t)) => t,
            other => panic!("expected a transmit, got {other:?}"),
        }
    }

    fn answer(f: &mut Fwd) -> Answer<u32> {
        match next(f) {
            Some(Event::Answer(a)) => a,
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    fn rcode_of(a: &Answer<u32>) -> u16 {
        a.rendered.flags & 0xf
    }

    fn soa(minimum: u32) -> Vec<u8> {
        let mut v = b"\x02ns\x07example\x00\x05admin\x07example\x00".to_vec();
        for x in [1u32, 2, 3, 4, minimum] {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v
    }

    #[test]
    fn forwards_coalesces_and_caches() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(1);
        assert_eq!(
            f.resolve(q(WWW, 1), Some(10), 1000, &mut rng),
            Start::Pending
        );
        let t = transmit(&mut f);
        assert_eq!(t.to, up(1));
        assert_eq!(t.transport, Transport::Udp);
        let sent = Message::parse(&t.bytes).unwrap();
        assert_eq!(sent.flags & flags::RD, flags::RD);
        assert_eq!(sent.opt.unwrap().udp_size, 1232);
        // Same question while in flight: no second upstream query.
        assert_eq!(
            f.resolve(q(WWW, 1), Some(11), 1001, &mut rng),
            Start::Pending
        );
        assert!(next(&mut f).is_none());
        let r = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
        f.reply(t.token, up(1), &r, 1020, &mut rng);
        let a = answer(&mut f);
        assert_eq!(a.clients, vec![10, 11]);
        assert_eq!(rcode_of(&a), 0);
        assert_eq!(a.rendered.body.counts, [0, 1, 0, 0, 0, 0]);
        assert_eq!(f.stats.coalesced, 1);
        // Cached: a hit 100 s later has TTL 200.
        let key = Key::new(WWW, 1, 1);
        let ttl = f.cache().lookup(&key, 101, |h| {
            let mut tail = h.tail.to_vec();
            crate::render::patch_ttls(&mut tail, h.ttls, 101, None);
            u32::from_be_bytes([tail[6], tail[7], tail[8], tail[9]])
        });
        assert_eq!(ttl, Ok(200));
        // The upstream's RTT was learnt.
        assert_eq!(f.infra().hosts()[0].replies, 1);
    }

    #[test]
    fn spoofed_replies_are_ignored() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
            CacheConfig::default(),
        );
        f.config.use_caps_for_id = true;
        let mut rng = Seq(7);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        let sent = Message::parse(&t.bytes).unwrap();
        // 0x20: the name went out in mixed case.
        let sent_name = sent.question.unwrap().name;
        assert!(sent_name.eq_ignore_ascii_case(WWW) && sent_name != WWW);
        let good = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
        let poison = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[6, 6, 6, 6])], &[]);
        // Wrong source address.
        f.reply(t.token, up(9), &poison, 5, &mut rng);
        // Wrong ID.
        let mut bad_id = poison.clone();
        bad_id[0] ^= 0xff;
        f.reply(t.token, up(1), &bad_id, 5, &mut rng);
        // Question in the wrong case (the attacker doesn't know the 0x20 bits).
        let mut bad_case = poison.clone();
        bad_case[13..16].copy_from_slice(b"www");
        assert_ne!(
            bad_case[13..16],
            t.bytes[13..16],
            "this seed mixes the case of www"
        );
        f.reply(t.token, up(1), &bad_case, 5, &mut rng);
        // Unknown token.
        f.reply(999, up(1), &poison, 5, &mut rng);
        assert_eq!(f.stats.unwanted, 4);
        assert!(next(&mut f).is_none());
        f.reply(t.token, up(1), &good, 6, &mut rng);
        let a = answer(&mut f);
        assert_eq!(a.rendered.body.tail[12..16], [192, 0, 2, 1]);
    }

    #[test]
    fn out_of_bailiwick_is_not_cached_and_chain_crosses_zones() {
        let mut f = fwd(
            vec![
                zone(b"\x07example\x00", ZoneKind::Forward, &[1], 1),
                zone(b"\x05other\x00", ZoneKind::Forward, &[2], 2),
            ],
            CacheConfig::default(),
        );
        let mut rng = Seq(3);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        // example.'s upstream answers with a CNAME into other. and (poison) an address for
        // the target and for an unrelated name of other.
        let target: &[u8] = b"\x03cdn\x05other\x00";
        let r = reply(
            &t.bytes,
            0,
            false,
            &[
                (WWW, 5, 300, target),
                (target, 1, 300, &[6, 6, 6, 6]),
                (b"\x01x\x05other\x00", 1, 300, &[6, 6, 6, 7]),
            ],
            &[],
        );
        f.reply(t.token, up(1), &r, 10, &mut rng);
        // The target is asked of other.'s upstream.
        let t2 = transmit(&mut f);
        assert_eq!(t2.to, up(2));
        assert_eq!(
            Message::parse(&t2.bytes).unwrap().question.unwrap().name,
            target
        );
        // Nothing of other. was cached from example.'s reply.
        assert!(f.cache().rrset(target, 1, 1, 0).is_none());
        assert!(f.cache().rrset(b"\x01x\x05other\x00", 1, 1, 0).is_none());
        let r2 = reply(
            &t2.bytes,
            0,
            false,
            &[(target, 1, 60, &[192, 0, 2, 7])],
            &[],
        );
        f.reply(t2.token, up(2), &r2, 20, &mut rng);
        let a = answer(&mut f);
        assert_eq!(a.clients, vec![1]);
        assert_eq!(a.rendered.body.counts, [0, 2, 0, 0, 0, 0]);
        assert!(a.rendered.body.tail.ends_with(&[192, 0, 2, 7]));
        // Both questions are cached.
        assert!(f.cache().lookup(&Key::new(WWW, 1, 1), 0, |_| ()).is_ok());
        assert!(f.cache().lookup(&Key::new(target, 1, 1), 0, |_| ()).is_ok());
    }

    #[test]
    fn timeouts_retry_then_servfail_with_ede() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1, 2], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(5);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t1 = transmit(&mut f);
        let due = f.next_timer().unwrap();
        assert_eq!(due, 376);
        f.tick(due, &mut rng);
        let t2 = transmit(&mut f);
        assert_ne!(t1.to, t2.to, "the other upstream next");
        // Nobody answers: SERVFAIL with EDE 22 within the budget.
        let a = loop {
            let now = f.next_timer().unwrap();
            assert!(now <= 5_000);
            f.tick(now, &mut rng);
            match next(&mut f) {
                Some(Event::Transmit(_)) => continue,
                Some(Event::Answer(a)) => break a,
                Some(Event::Cancel(_)) | None => panic!("nothing at {now}"),
            }
        };
        assert_eq!(rcode_of(&a), 2);
        assert_eq!(a.rendered.ede, Some(ede::NO_REACHABLE_AUTHORITY));
        assert_eq!(f.in_flight(), 0);
        assert_eq!(f.next_timer(), None);
        // Every query of the question is over: a reply now is unwanted.
        let late = reply(&t1.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
        f.reply(t1.token, t1.to, &late, 6_000, &mut rng);
        assert_eq!(f.stats.unwanted, 1);
    }

    #[test]
    fn a_late_reply_to_a_timed_out_query_still_answers() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1, 2], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(5);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t1 = transmit(&mut f);
        f.tick(f.next_timer().unwrap(), &mut rng);
        let t2 = transmit(&mut f);
        // The first query's reply arrives after its timeout, while the retry is out.
        let late = reply(&t1.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
        f.reply(t1.token, t1.to, &late, 400, &mut rng);
        let mut cancelled = Vec::new();
        let a = loop {
            match f.poll_event() {
                Some(Event::Cancel(t)) => cancelled.push(t),
                Some(Event::Answer(a)) => break a,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(rcode_of(&a), 0);
        assert!(
            cancelled.contains(&t1.token) && cancelled.contains(&t2.token),
            "{cancelled:?}"
        );
        assert_eq!(f.stats.unwanted, 0);
        assert_eq!(f.next_timer(), None);
    }

    #[test]
    fn truncation_goes_to_tcp_and_errors_to_the_next_upstream() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1, 2], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(9);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        f.reply(
            t.token,
            t.to,
            &reply(&t.bytes, 0, true, &[], &[]),
            5,
            &mut rng,
        );
        let tcp = transmit(&mut f);
        assert_eq!((tcp.to, tcp.transport.clone()), (t.to, Transport::Tcp));
        // SERVFAIL from it: the other upstream, over UDP again.
        f.reply(
            tcp.token,
            tcp.to,
            &reply(&tcp.bytes, 2, false, &[], &[]),
            9,
            &mut rng,
        );
        let other = transmit(&mut f);
        assert_ne!(other.to, t.to);
        // Garbage under the query's ID (a header, then a question cut short): an error
        // too; then both are tried and a second round begins.
        let mut garbage = other.bytes[..16].to_vec();
        garbage[2] |= 0x80;
        assert!(Message::parse(&garbage).is_err());
        f.reply(other.token, other.to, &garbage, 12, &mut rng);
        let again = transmit(&mut f);
        f.reply(
            again.token,
            again.to,
            &reply(
                &again.bytes,
                0,
                false,
                &[(WWW, 1, 30, &[192, 0, 2, 3])],
                &[],
            ),
            15,
            &mut rng,
        );
        assert_eq!(rcode_of(&answer(&mut f)), 0);
    }

    #[test]
    fn negative_answers_cached_for_soa_minimum() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(11);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        let s = soa(120);
        f.reply(
            t.token,
            up(1),
            &reply(
                &t.bytes,
                3,
                false,
                &[],
                &[(b"\x07example\x00", 6, 3600, &s)],
            ),
            0,
            &mut rng,
        );
        let a = answer(&mut f);
        assert_eq!(rcode_of(&a), 3);
        assert_eq!(a.rendered.body.counts, [0, 0, 0, 1, 0, 0]);
        let key = Key::new(WWW, 1, 1);
        assert!(
            f.cache()
                .lookup(&key, 119, |h| h.flags & 0xf)
                .is_ok_and(|r| r == 3)
        );
        assert_eq!(f.cache().lookup(&key, 120, |_| ()), Err(Lookup::Miss));
    }

    #[test]
    fn negative_ttl_is_not_the_cached_soa_ttl() {
        // The zone's SOA is cached from an SOA query (TTL 3600, MINIMUM 120); a NODATA
        // later carries the same SOA: the negative answer still goes out, and is cached,
        // with min(TTL, MINIMUM) = 120 (RFC 2308 §5), and the SOA query keeps its 3600.
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(19);
        let ex: &[u8] = b"\x07example\x00";
        let s = soa(120);
        let _ = f.resolve(q(ex, 6), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        f.reply(
            t.token,
            up(1),
            &reply(&t.bytes, 0, false, &[(ex, 6, 3600, &s)], &[]),
            0,
            &mut rng,
        );
        assert_eq!(answer(&mut f).rendered.ttl, 3600);
        let _ = f.resolve(q(WWW, 16), Some(2), 1000, &mut rng);
        let t = transmit(&mut f);
        f.reply(
            t.token,
            up(1),
            &reply(&t.bytes, 0, false, &[], &[(ex, 6, 3600, &s)]),
            1000,
            &mut rng,
        );
        let a = answer(&mut f);
        assert_eq!(a.rendered.ttl, 120);
        // The SOA's TTL as sent at 1 s, the time of the answer.
        let mut tail = a.rendered.body.tail.clone();
        crate::render::patch_ttls(&mut tail, &a.rendered.body.ttls, 1, None);
        let at = usize::from(u16::from_le_bytes([
            a.rendered.body.ttls[0],
            a.rendered.body.ttls[1],
        ]));
        assert_eq!(
            u32::from_be_bytes([tail[at], tail[at + 1], tail[at + 2], tail[at + 3]]),
            120
        );
        assert_eq!(
            f.cache().lookup(&Key::new(WWW, 16, 1), 121, |_| ()),
            Err(Lookup::Miss)
        );
        // The SOA question is still answered from the cache with its own TTL.
        assert_eq!(
            f.cache().rrset(ex, 6, 1, 2).map(|(set, _)| set.ttl),
            Some(3600)
        );
    }

    #[test]
    fn ns_answer_carries_the_addresses_of_its_servers() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(29);
        let ex: &[u8] = b"\x07example\x00";
        let ns1: &[u8] = b"\x03ns1\x07example\x00";
        let _ = f.resolve(q(ex, 2), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        let mut r = reply(&t.bytes, 0, false, &[(ex, 2, 3600, ns1)], &[]);
        // One additional record: ns1's address.
        r[11] = 1;
        r.extend_from_slice(ns1);
        r.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 53]);
        f.reply(t.token, up(1), &r, 0, &mut rng);
        let a = answer(&mut f);
        assert_eq!(a.rendered.body.counts, [0, 1, 0, 0, 0, 1]);
        assert!(a.rendered.body.tail.ends_with(&[192, 0, 2, 53]));
        // The message lives as long as its shortest RRset, the address's 60 s.
        assert_eq!(a.rendered.ttl, 60);
        // Additional data answers no question.
        assert!(f.cache().rrset(ns1, 1, 1, 0).is_none());
    }

    #[test]
    fn ds_is_asked_in_the_parent_zone() {
        // sub.example. and example. are stub zones on different servers: the DS of
        // sub.example. lives in example. (RFC 4035 §2.4), the rest of sub.example. in it.
        let sub: &[u8] = b"\x03sub\x07example\x00";
        let mut f = fwd(
            vec![
                zone(b"\x07example\x00", ZoneKind::Stub, &[1], 1),
                zone(sub, ZoneKind::Stub, &[2], 2),
            ],
            CacheConfig::default(),
        );
        let mut rng = Seq(23);
        let _ = f.resolve(q(sub, 43), Some(1), 0, &mut rng);
        assert_eq!(transmit(&mut f).to, up(1));
        let _ = f.resolve(q(sub, 48), Some(2), 0, &mut rng);
        assert_eq!(transmit(&mut f).to, up(2));
        assert_eq!(f.zone_for_question(b"\x00", 43), None);
        assert_eq!(
            f.zone_for_question(b"\x01x\x03sub\x07example\x00", 43),
            Some(1)
        );
    }

    #[test]
    fn stub_queries_go_without_rd_and_no_cache_zones_are_not_cached() {
        let mut nc = zone(b"\x07example\x00", ZoneKind::Stub, &[1], 1);
        nc.no_cache = true;
        let mut f = fwd(vec![nc], CacheConfig::default());
        let mut rng = Seq(13);
        assert_eq!(
            f.resolve(q(b"\x01x\x05other\x00", 1), Some(4), 0, &mut rng),
            Start::NoZone(4)
        );
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        assert_eq!(Message::parse(&t.bytes).unwrap().flags & flags::RD, 0);
        f.reply(
            t.token,
            up(1),
            &reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]),
            1000,
            &mut rng,
        );
        assert_eq!(rcode_of(&answer(&mut f)), 0);
        assert_eq!(
            f.cache().lookup(&Key::new(WWW, 1, 1), 1, |_| ()),
            Err(Lookup::Miss)
        );
        assert!(f.cache().rrset(WWW, 1, 1, 1).is_none());
    }

    #[test]
    fn stale_answer_when_upstream_is_down() {
        let cache = CacheConfig {
            serve_expired: true,
            ..CacheConfig::default()
        };
        let mut f = fwd(vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)], cache);
        let mut rng = Seq(17);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        f.reply(
            t.token,
            up(1),
            &reply(&t.bytes, 0, false, &[(WWW, 1, 10, &[192, 0, 2, 1])], &[]),
            0,
            &mut rng,
        );
        let _ = answer(&mut f);
        // Expired at 10 s; the upstream is down now.
        let _ = f.resolve(q(WWW, 1), Some(2), 20_000, &mut rng);
        let mut now = 20_000;
        let a = loop {
            match next(&mut f) {
                Some(Event::Transmit(_)) | Some(Event::Cancel(_)) => {}
                Some(Event::Answer(a)) => break a,
                None => {
                    now = f.next_timer().unwrap();
                    f.tick(now, &mut rng);
                }
            }
        };
        assert_eq!(a.clients, vec![2]);
        assert_eq!(a.fixed_ttl, Some(30));
        assert_eq!(a.rendered.ede, Some(ede::STALE_ANSWER));
        assert_eq!(rcode_of(&a), 0);
        assert!(now <= 25_000);
    }

    #[test]
    fn a_reload_ends_the_queries_of_a_zone_that_changed() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(79);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        // "." gets another upstream: the question asked of the old one fails, and its
        // reply, if one comes, is not taken (it would be judged as the new zone's).
        let mut cfg = f.config().clone();
        cfg.zones[0] = zone(b"\x00", ZoneKind::Forward, &[2], 2);
        f.reconfigure(cfg);
        assert!(matches!(f.poll_event(), Some(Event::Cancel(c)) if c == t.token));
        assert!(!f.is_outstanding(t.token));
        f.tick(10, &mut rng);
        let a = answer(&mut f);
        assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![1], 2));
        let r = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
        f.reply(t.token, t.to, &r, 11, &mut rng);
        assert_eq!(f.stats.unwanted, 1);
        assert!(f.cache().lookup(&Key::new(WWW, 1, 1), 0, |_| ()).is_err());
    }

    // forward-host / stub-host.

    const NS_NET: &[u8] = b"\x02ns\x03net\x00";
    const EXAMPLE: &[u8] = b"\x07example\x00";

    fn host(zone: &[u8], name: &[u8], port: u16) -> HostConfig {
        HostConfig {
            zone: zone.to_vec(),
            name: name.to_vec(),
            port,
            tls_name: None,
        }
    }

    /// "." forwards to up(1); "example." has only the host ns.net. on port 5353.
    fn hosted(cache: CacheConfig) -> Fwd {
        let mut f = fwd(
            vec![
                zone(b"\x00", ZoneKind::Forward, &[1], 1),
                zone(EXAMPLE, ZoneKind::Forward, &[], 2),
            ],
            cache,
        );
        let mut cfg = f.config().clone();
        cfg.hosts = vec![host(EXAMPLE, NS_NET, 5353)];
        f.reconfigure(cfg);
        f
    }

    fn question_of(t: &Transmit) -> (Vec<u8>, u16) {
        let q = Message::parse(&t.bytes).unwrap().question.unwrap();
        (q.name.to_ascii_lowercase(), q.qtype)
    }

    /// Every transmit queued, by question.
    fn transmits(f: &mut Fwd) -> Vec<Transmit> {
        let mut out = Vec::new();
        while let Some(e) = f.poll_event() {
            match e {
                Event::Transmit(t) => out.push(t),
                Event::Cancel(_) => {}
                Event::Answer(a) => panic!("unexpected answer {a:?}"),
            }
        }
        out
    }

    fn take(ts: &mut Vec<Transmit>, name: &[u8], qtype: u16) -> Transmit {
        let i = ts
            .iter()
            .position(|t| question_of(t) == (name.to_vec(), qtype))
            .unwrap_or_else(|| panic!("no query for {name:?}/{qtype} in {ts:?}"));
        ts.remove(i)
    }

    fn v4(a: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    fn nodata(t: &Transmit) -> Vec<u8> {
        reply(
            &t.bytes,
            0,
            false,
            &[],
            &[(b"\x03net\x00", 6, 60, &soa(60))],
        )
    }

    #[test]
    fn host_resolved_through_its_zone_before_the_question_goes() {
        let mut f = hosted(CacheConfig::default());
        let mut rng = Seq(41);
        let g0 = f.generation();
        // Due at once: the daemon's next tick resolves it.
        assert_eq!(f.next_timer(), Some(0));
        // A question for example. before any tick: the host is resolved first (A and AAAA,
        // through ".", the zone that holds ns.net.) and the question waits.
        assert_eq!(f.resolve(q(WWW, 1), Some(1), 0, &mut rng), Start::Pending);
        let mut ts = transmits(&mut f);
        assert_eq!(ts.len(), 2, "{ts:?}");
        let a = take(&mut ts, NS_NET, rtype::A);
        let aaaa = take(&mut ts, NS_NET, rtype::AAAA);
        assert_eq!((a.to, aaaa.to), (up(1), up(1)));
        let st = &f.hosts()[0];
        assert!(st.resolving && st.addrs.is_empty() && st.plan == HostPlan::Via(0));
        // The parked question's budget is a timer; the hosts' next resolution is not
        // scheduled while under way.
        assert!(f.next_timer().unwrap() <= 5_000);
        // The A record arrives: the question goes to that address, on the host's port.
        let r = reply(
            &a.bytes,
            0,
            false,
            &[(NS_NET, 1, 300, &[198, 18, 0, 9])],
            &[],
        );
        f.reply(a.token, up(1), &r, 10, &mut rng);
        let t = transmit(&mut f);
        assert_eq!(t.to, v4([198, 18, 0, 9], 5353));
        assert_eq!(question_of(&t), (WWW.to_vec(), 1));
        assert_eq!(
            f.config().zones[1].upstreams,
            vec![Upstream {
                addr: v4([198, 18, 0, 9], 5353),
                tls_name: None
            }]
        );
        assert!(f.generation() > g0);
        f.reply(
            t.token,
            t.to,
            &reply(&t.bytes, 0, false, &[(WWW, 1, 60, &[192, 0, 2, 80])], &[]),
            20,
            &mut rng,
        );
        let ans = answer(&mut f);
        assert_eq!((ans.clients.clone(), rcode_of(&ans)), (vec![1], 0));
        // No AAAA: the IPv4 address stays the only one.
        f.reply(aaaa.token, up(1), &nodata(&aaaa), 30, &mut rng);
        let st = &f.hosts()[0];
        assert_eq!(st.addrs, vec![v4([198, 18, 0, 9], 5353)]);
        assert!(st.answered && !st.resolving && st.failures == 0);
        // Next resolution: the A record's TTL (300 s), the NODATA's (60 s, the SOA's).
        assert_eq!(st.next_ms, Some(60_000));
        // The host's answer went into the cache like any other.
        assert!(f.cache().rrset(NS_NET, 1, 1, 1).is_some());
        // RTT is kept for the resolved address.
        assert!(
            f.infra()
                .hosts()
                .iter()
                .any(|h| h.addr == v4([198, 18, 0, 9], 5353) && h.replies == 1)
        );
    }

    #[test]
    fn a_host_contributes_a_bounded_sorted_set_of_addresses() {
        let mut f = hosted(CacheConfig::default());
        f.config.do_ip6 = false;
        let mut rng = Seq(43);
        f.tick(0, &mut rng);
        let mut ts = transmits(&mut f);
        let a = take(&mut ts, NS_NET, rtype::A);
        // 300 addresses, in descending order (a hostile or rotating upstream).
        let addrs: Vec<[u8; 4]> = (0..300u16)
            .rev()
            .map(|i| [198, 18, (i >> 8) as u8, i as u8])
            .collect();
        let rrs: Vec<(&[u8], u16, u32, &[u8])> = addrs
            .iter()
            .map(|x| (NS_NET, 1u16, 300u32, &x[..]))
            .collect();
        let r = reply(&a.bytes, 0, false, &rrs, &[]);
        f.reply(a.token, up(1), &r, 10, &mut rng);
        let ups: Vec<SocketAddr> = f.config().zones[1]
            .upstreams
            .iter()
            .map(|u| u.addr)
            .collect();
        let want: Vec<SocketAddr> = (0..MAX_HOST_ADDRS as u16)
            .map(|i| v4([198, 18, 0, i as u8], 5353))
            .collect();
        assert_eq!(ups, want);
    }

    #[test]
    fn host_re_resolved_at_ttl_keeping_its_addresses_meanwhile() {
        let mut f = hosted(CacheConfig::default());
        f.config.do_ip6 = false;
        let cfg = f.config().clone();
        f.reconfigure(cfg);
        let mut rng = Seq(43);
        f.tick(0, &mut rng);
        let t = transmit(&mut f);
        assert_eq!(question_of(&t), (NS_NET.to_vec(), rtype::A));
        assert!(next(&mut f).is_none(), "do-ip6: no: no AAAA query");
        let r = reply(
            &t.bytes,
            0,
            false,
            &[(NS_NET, 1, 10, &[198, 18, 0, 9])],
            &[],
        );
        f.reply(t.token, up(1), &r, 0, &mut rng);
        assert_eq!(f.hosts()[0].next_ms, Some(10_000));
        assert_eq!(f.next_timer(), Some(10_000));
        // Nothing before the TTL runs out.
        f.tick(9_999, &mut rng);
        assert!(next(&mut f).is_none());
        f.tick(10_000, &mut rng);
        let t = transmit(&mut f);
        assert_eq!(
            (question_of(&t), t.to),
            ((NS_NET.to_vec(), rtype::A), up(1))
        );
        assert!(f.hosts()[0].resolving);
        // Meanwhile questions still go to the old address.
        let _ = f.resolve(q(WWW, 1), Some(1), 10_001, &mut rng);
        let w = transmit(&mut f);
        assert_eq!(w.to, v4([198, 18, 0, 9], 5353));
        let r = reply(&w.bytes, 0, false, &[(WWW, 1, 60, &[192, 0, 2, 80])], &[]);
        f.reply(w.token, w.to, &r, 10_002, &mut rng);
        assert_eq!(rcode_of(&answer(&mut f)), 0);
        // The new address replaces the old one.
        let r = reply(
            &t.bytes,
            0,
            false,
            &[(NS_NET, 1, 10, &[198, 18, 0, 10])],
            &[],
        );
        f.reply(t.token, up(1), &r, 10_010, &mut rng);
        assert_eq!(
            f.config().zones[1]
                .upstreams
                .iter()
                .map(|u| u.addr)
                .collect::<Vec<_>>(),
            vec![v4([198, 18, 0, 10], 5353)]
        );
        // The old address's RTT record goes with it.
        assert!(
            !f.infra()
                .hosts()
                .iter()
                .any(|h| h.addr == v4([198, 18, 0, 9], 5353))
        );
        // A TTL below the floor: the next resolution after HOST_MIN_REFRESH_MS.
        f.tick(20_010, &mut rng);
        let t = transmit(&mut f);
        let r = reply(
            &t.bytes,
            0,
            false,
            &[(NS_NET, 1, 0, &[198, 18, 0, 10])],
            &[],
        );
        f.reply(t.token, up(1), &r, 20_020, &mut rng);
        assert_eq!(f.hosts()[0].next_ms, Some(20_020 + HOST_MIN_REFRESH_MS));
        // A failed resolution (the upstream silent) keeps the address, retried after 1 s,
        // then 2 s.
        f.tick(25_020, &mut rng);
        let mut now = 25_020;
        while f.hosts()[0].resolving {
            let _ = transmits(&mut f);
            now = f.next_timer().unwrap();
            f.tick(now, &mut rng);
        }
        let _ = transmits(&mut f);
        let st = &f.hosts()[0];
        assert_eq!(st.failures, 1);
        assert_eq!(st.addrs, vec![v4([198, 18, 0, 10], 5353)]);
        assert_eq!(st.next_ms, Some(now + 1_000));
        assert!(now - 25_020 <= 5_000);
        // The name stops resolving (NXDOMAIN): its address is dropped.
        f.tick(now + 1_000, &mut rng);
        let t = transmit(&mut f);
        let r = reply(
            &t.bytes,
            3,
            false,
            &[],
            &[(b"\x03net\x00", 6, 30, &soa(30))],
        );
        f.reply(t.token, up(1), &r, now + 1_001, &mut rng);
        let st = &f.hosts()[0];
        assert!(st.addrs.is_empty() && st.answered && st.failures == 0);
        assert!(f.config().zones[1].upstreams.is_empty());
        // Now a question for the zone fails at once: SERVFAIL, EDE 22, nothing sent.
        let _ = f.resolve(
            q(b"\x01x\x07example\x00", 1),
            Some(7),
            now + 1_002,
            &mut rng,
        );
        let a = answer(&mut f);
        assert_eq!(
            (a.clients.clone(), rcode_of(&a), a.rendered.ede),
            (vec![7], 2, Some(ede::NO_REACHABLE_AUTHORITY))
        );
    }

    /// `w{i}.example.` in wire form.
    fn numbered(i: usize) -> Vec<u8> {
        let label = alloc::format!("w{i}");
        let mut n = vec![label.len() as u8];
        n.extend_from_slice(label.as_bytes());
        n.extend_from_slice(EXAMPLE);
        n
    }

    #[test]
    fn many_parked_questions_cost_linear_work() {
        // 2,000 questions parked on example., whose only upstream is a host being
        // resolved: a tick, then the host's address, look at each of them a bounded number
        // of times (once per zone, not once per parked question).
        const N: usize = 2_000;
        let mut f = hosted(CacheConfig::default());
        let mut cfg = f.config().clone();
        cfg.do_ip6 = false;
        f.reconfigure(cfg);
        let mut rng = Seq(67);
        for i in 0..N {
            assert_eq!(
                f.resolve(q(&numbered(i), 1), Some(i as u32), 0, &mut rng),
                Start::Pending
            );
        }
        let t = transmit(&mut f);
        assert_eq!(question_of(&t), (NS_NET.to_vec(), rtype::A));
        assert!(next(&mut f).is_none(), "every question parked");
        assert_eq!(f.in_flight(), N + 1);
        f.unpark_visits = 0;
        f.tick(100, &mut rng);
        assert!(next(&mut f).is_none());
        assert!(
            f.unpark_visits <= N as u64,
            "a tick looked at parked questions {} times",
            f.unpark_visits
        );
        let r = reply(
            &t.bytes,
            0,
            false,
            &[(NS_NET, 1, 300, &[198, 18, 0, 9])],
            &[],
        );
        f.reply(t.token, up(1), &r, 110, &mut rng);
        let ts = transmits(&mut f);
        assert_eq!(ts.len(), N);
        assert!(ts.iter().all(|t| t.to == v4([198, 18, 0, 9], 5353)));
        assert!(f.unpark_visits <= 2 * N as u64, "{}", f.unpark_visits);
        // None is parked any more: the next tick looks at none.
        f.unpark_visits = 0;
        f.tick(120, &mut rng);
        assert_eq!(f.unpark_visits, 0);
    }

    /// `"."` forwards to up(1); zones `z0.` .. `z{n-1}.` have a host each and no address:
    /// `z0.`'s is ns.net. (in "."), `z{j}.`'s is `ns.z{j-1}.`, inside the zone before it.
    fn chain(n: usize) -> Fwd {
        let mut zones = vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)];
        let mut hosts = Vec::new();
        for j in 0..n {
            zones.push(zone(&chain_zone(j), ZoneKind::Forward, &[], j as u32 + 2));
            hosts.push(host(&chain_zone(j), &chain_host(j), 53));
        }
        let mut f = fwd(zones, CacheConfig::default());
        let mut cfg = f.config().clone();
        cfg.hosts = hosts;
        cfg.do_ip6 = false;
        f.reconfigure(cfg);
        f
    }

    /// `z{j}.` in wire form.
    fn chain_zone(j: usize) -> Vec<u8> {
        let label = alloc::format!("z{j}");
        let mut n = vec![label.len() as u8];
        n.extend_from_slice(label.as_bytes());
        n.push(0);
        n
    }

    /// The host of `z{j}.`: ns.net., or `ns.z{j-1}.`.
    fn chain_host(j: usize) -> Vec<u8> {
        if j == 0 {
            return NS_NET.to_vec();
        }
        let mut n = b"\x02ns".to_vec();
        n.extend_from_slice(&chain_zone(j - 1));
        n
    }

    /// The address the host of `z{j}.` resolves to.
    fn chain_addr(j: usize) -> SocketAddr {
        v4([198, 18, 1 + (j / 256) as u8, (j % 256) as u8], 53)
    }

    #[test]
    fn a_long_chain_of_host_only_zones_resolves_in_little_stack() {
        // 1,000 zones, each with only a host whose name is inside the zone before it. A
        // question for the last one starts every host; each host's name can be asked only
        // once the zone before has its address. Starting, resolving and failing them all
        // must not nest one call per zone: this runs on a 256 KiB stack.
        const N: usize = 1_000;
        let run = || {
            let mut f = chain(N);
            let mut rng = Seq(73);
            let mut www = b"\x03www".to_vec();
            www.extend_from_slice(&chain_zone(N - 1));
            assert_eq!(f.resolve(q(&www, 1), Some(1), 0, &mut rng), Start::Pending);
            let mut ts = transmits(&mut f);
            assert_eq!(ts.len(), 1, "only ns.net. can be asked yet");
            assert!(f.hosts().iter().all(|h| h.resolving));
            let mut now = 0;
            for j in 0..N {
                let t = ts.pop().unwrap();
                assert_eq!(question_of(&t), (chain_host(j), rtype::A));
                assert_eq!(t.to, if j == 0 { up(1) } else { chain_addr(j - 1) });
                let IpAddr::V4(ip) = chain_addr(j).ip() else {
                    unreachable!()
                };
                let r = reply(
                    &t.bytes,
                    0,
                    false,
                    &[(&t_name(&t), 1, 300, &ip.octets())],
                    &[],
                );
                now += 1;
                f.reply(t.token, t.to, &r, now, &mut rng);
                ts = transmits(&mut f);
                assert_eq!(ts.len(), 1, "step {j}: {ts:?}");
            }
            // The question goes to the last zone's address.
            let t = ts.pop().unwrap();
            assert_eq!(
                (question_of(&t), t.to),
                ((www.clone(), 1), chain_addr(N - 1))
            );
            let r = reply(&t.bytes, 0, false, &[(&www, 1, 60, &[192, 0, 2, 1])], &[]);
            f.reply(t.token, t.to, &r, now + 1, &mut rng);
            let a = answer(&mut f);
            assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![1], 0));

            // The same chain when ns.net. has no address: every zone's host fails in turn,
            // and the question gets SERVFAIL at once.
            let mut f = chain(N);
            assert_eq!(f.resolve(q(&www, 1), Some(2), 0, &mut rng), Start::Pending);
            let t = transmit(&mut f);
            assert_eq!(question_of(&t), (NS_NET.to_vec(), rtype::A));
            let r = reply(
                &t.bytes,
                3,
                false,
                &[],
                &[(b"\x03net\x00", 6, 30, &soa(30))],
            );
            f.reply(t.token, t.to, &r, 1, &mut rng);
            let a = answer(&mut f);
            assert_eq!(
                (a.clients.clone(), rcode_of(&a), a.rendered.ede),
                (vec![2], 2, Some(ede::NO_REACHABLE_AUTHORITY))
            );
            assert_eq!(f.in_flight(), 0);
            let hs = f.hosts();
            assert!(hs[0].answered && hs[0].addrs.is_empty());
            assert!(hs[1..].iter().all(|h| h.failures == 1 && !h.resolving));
        };
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(run)
            .unwrap()
            .join()
            .unwrap();
    }

    /// The question name of a transmitted query, as sent.
    fn t_name(t: &Transmit) -> Vec<u8> {
        Message::parse(&t.bytes).unwrap().question.unwrap().name
    }

    #[test]
    fn a_host_resolved_again_to_the_same_addresses_changes_no_generation() {
        let mut f = hosted(CacheConfig::default());
        let mut cfg = f.config().clone();
        cfg.do_ip6 = false;
        f.reconfigure(cfg);
        let mut rng = Seq(89);
        f.tick(0, &mut rng);
        let t = transmit(&mut f);
        let answer_with = |t: &Transmit, ips: &[[u8; 4]]| {
            let rrs: Vec<(&[u8], u16, u32, &[u8])> =
                ips.iter().map(|x| (NS_NET, 1u16, 10u32, &x[..])).collect();
            reply(&t.bytes, 0, false, &rrs, &[])
        };
        let g0 = f.generation();
        f.reply(
            t.token,
            up(1),
            &answer_with(&t, &[[198, 18, 0, 9], [198, 18, 0, 10]]),
            5,
            &mut rng,
        );
        let g = f.generation();
        assert!(g > g0, "the first addresses are a change");
        // At the TTL: asked again, answered with the same addresses in another order.
        // Nothing the caller publishes changed (the zones' upstreams, the hosts' addresses,
        // failures): the generation stays, and the caller republishes nothing.
        f.tick(10_000, &mut rng);
        let t = transmit(&mut f);
        assert_eq!(f.generation(), g, "starting a resolution is no change");
        f.reply(
            t.token,
            up(1),
            &answer_with(&t, &[[198, 18, 0, 10], [198, 18, 0, 9]]),
            10_005,
            &mut rng,
        );
        assert_eq!(f.generation(), g, "the same addresses are no change");
        assert_eq!(f.hosts()[0].next_ms, Some(20_000));
        // Another address is.
        f.tick(20_005, &mut rng);
        let t = transmit(&mut f);
        f.reply(
            t.token,
            up(1),
            &answer_with(&t, &[[198, 18, 0, 9]]),
            20_010,
            &mut rng,
        );
        let g2 = f.generation();
        assert!(g2 > g);
        // So is a failure (the caller logs it, and shows the failures in a row).
        f.tick(30_010, &mut rng);
        let t = transmit(&mut f);
        f.reply(
            t.token,
            up(1),
            &reply(&t.bytes, 2, false, &[], &[]),
            30_011,
            &mut rng,
        );
        while f.hosts()[0].resolving {
            let _ = transmits(&mut f);
            let now = f.next_timer().unwrap();
            f.tick(now, &mut rng);
        }
        assert_eq!(f.hosts()[0].failures, 1);
        assert!(f.generation() > g2);
    }

    #[test]
    fn zone_with_only_hosts_fails_fast_and_never_hangs() {
        let mut f = hosted(CacheConfig::default());
        let mut rng = Seq(47);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let _ = transmits(&mut f);
        // The upstream that should resolve ns.net. never answers: the waiting question
        // gets SERVFAIL with EDE 22 within the resolver's budget.
        let mut now = 0;
        let a = loop {
            match next(&mut f) {
                Some(Event::Answer(a)) => break a,
                Some(_) => {}
                None => {
                    now = f.next_timer().expect("a timer while the question waits");
                    assert!(now <= 5_000, "{now}");
                    f.tick(now, &mut rng);
                }
            }
        };
        assert_eq!(
            (a.clients.clone(), rcode_of(&a), a.rendered.ede),
            (vec![1], 2, Some(ede::NO_REACHABLE_AUTHORITY))
        );
        assert_eq!(f.in_flight(), 0);
        let st = &f.hosts()[0];
        assert!(!st.resolving && st.failures >= 1 && st.addrs.is_empty());
        // While the host waits for its retry, a question fails at once, without a query.
        let _ = f.resolve(q(WWW, 28), Some(2), now + 1, &mut rng);
        let a = answer(&mut f);
        assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![2], 2));
        assert_eq!(a.rendered.ede, Some(ede::NO_REACHABLE_AUTHORITY));
        assert!(next(&mut f).is_none());
        // The retry comes (1 s later) and succeeds: the zone works.
        let retry = f.next_timer().unwrap();
        assert_eq!(retry, st.next_ms.unwrap());
        f.tick(retry, &mut rng);
        let mut ts = transmits(&mut f);
        let t = take(&mut ts, NS_NET, rtype::A);
        let r = reply(
            &t.bytes,
            0,
            false,
            &[(NS_NET, 1, 300, &[198, 18, 0, 9])],
            &[],
        );
        f.reply(t.token, up(1), &r, retry + 5, &mut rng);
        let _ = f.resolve(q(WWW, 16), Some(3), retry + 6, &mut rng);
        assert_eq!(transmit(&mut f).to, v4([198, 18, 0, 9], 5353));
    }

    #[test]
    fn hosts_that_depend_on_themselves_are_loops() {
        let zones = vec![
            zone(b"\x00", ZoneKind::Forward, &[1], 1),
            // 1: its host is inside it, no other address.
            zone(b"\x04self\x00", ZoneKind::Forward, &[], 2),
            // 2 and 3: each one's host is in the other.
            zone(b"\x01a\x00", ZoneKind::Stub, &[], 3),
            zone(b"\x01b\x00", ZoneKind::Stub, &[], 4),
            // 4: a host inside it, and an address of its own.
            zone(b"\x04glue\x00", ZoneKind::Forward, &[5], 5),
            // 5: a host inside it and one outside: the outside one brings the first
            // address, through which the inside one is resolved.
            zone(b"\x04boot\x00", ZoneKind::Forward, &[], 6),
            // 6: no zone holds its host (there is no "." here, see below).
        ];
        let hosts = vec![
            host(b"\x04self\x00", b"\x02ns\x04self\x00", 53),
            host(b"\x01a\x00", b"\x02ns\x01b\x00", 53),
            host(b"\x01b\x00", b"\x02ns\x01a\x00", 53),
            host(b"\x04glue\x00", b"\x02ns\x04glue\x00", 53),
            host(b"\x04boot\x00", b"\x02ns\x04boot\x00", 53),
            host(b"\x04boot\x00", NS_NET, 53),
            host(b"\x07missing\x00", NS_NET, 53),
        ];
        let cfg = ForwardConfig {
            zones: zones.clone(),
            hosts: hosts.clone(),
            ..ForwardConfig::default()
        };
        assert_eq!(
            plan_hosts(&cfg),
            vec![
                HostPlan::Loop(1),
                HostPlan::Loop(3),
                HostPlan::Loop(2),
                HostPlan::Via(4),
                HostPlan::Via(5),
                HostPlan::Via(0),
                HostPlan::NoZone,
            ]
        );
        let mut no_root = cfg.clone();
        no_root.zones.remove(0);
        no_root.hosts = vec![host(b"\x04boot\x00", NS_NET, 53)];
        assert_eq!(plan_hosts(&no_root), vec![HostPlan::Outside]);

        // At work: a loop is never resolved, and its zone fails at once.
        #[allow(clippy::arc_with_non_send_sync)]
        let cache = Arc::new(TestCache::new(CacheConfig::default()));
        let mut f: Fwd = Forwarder::new(cfg, cache);
        let mut rng = Seq(53);
        let _ = f.resolve(q(b"\x01x\x04self\x00", 1), Some(1), 0, &mut rng);
        let mut ts = Vec::new();
        let a = loop {
            match f.poll_event() {
                Some(Event::Answer(a)) => break a,
                Some(Event::Transmit(t)) => ts.push(t),
                Some(Event::Cancel(_)) => {}
                None => panic!("no answer"),
            }
        };
        assert_eq!(
            (rcode_of(&a), a.rendered.ede),
            (2, Some(ede::NO_REACHABLE_AUTHORITY))
        );
        // What was due was started in the same call (the resolvable hosts), never a loop's
        // name.
        ts.extend(transmits(&mut f));
        assert!(
            ts.iter().all(|t| question_of(t).0 != b"\x02ns\x04self\x00"
                && question_of(t).0 != b"\x02ns\x01a\x00"),
            "{ts:?}"
        );
        let st = f.hosts();
        assert_eq!(st[0].next_ms, None);
        assert!(!st[0].resolving && !st[1].resolving);

        // The bootstrap: boot.'s outside host first, then its inside one through it.
        let t = take(&mut ts, NS_NET, rtype::A);
        assert_eq!(t.to, up(1));
        assert!(
            ts.iter().all(|t| question_of(t).0 != b"\x02ns\x04boot\x00"),
            "the inside host waits for boot.'s first address: {ts:?}"
        );
        // ns.glue. is asked of glue.'s own address.
        let g = take(&mut ts, b"\x02ns\x04glue\x00", rtype::A);
        assert_eq!(g.to, up(5));
        let r = reply(
            &t.bytes,
            0,
            false,
            &[(NS_NET, 1, 300, &[198, 18, 0, 9])],
            &[],
        );
        f.reply(t.token, up(1), &r, 10, &mut rng);
        let mut ts = transmits(&mut f);
        let inside = take(&mut ts, b"\x02ns\x04boot\x00", rtype::A);
        assert_eq!(inside.to, v4([198, 18, 0, 9], 53));
    }

    #[test]
    fn resolved_addresses_obey_do_not_query_localhost_and_are_deduplicated() {
        let mut f = fwd(
            vec![
                zone(b"\x00", ZoneKind::Forward, &[1], 1),
                zone(EXAMPLE, ZoneKind::Forward, &[7], 2),
            ],
            CacheConfig::default(),
        );
        let mut cfg = f.config().clone();
        cfg.do_ip6 = false;
        cfg.hosts = vec![host(EXAMPLE, NS_NET, 53)];
        f.reconfigure(cfg);
        let mut rng = Seq(59);
        f.tick(0, &mut rng);
        let t = transmit(&mut f);
        // The host resolves to the loopback, the zone's own address, a new one and the
        // unspecified address (four records of one RRset, built by hand).
        let mut m = reply(&t.bytes, 0, false, &[], &[]);
        m[7] = 4;
        for a in [
            [127, 0, 0, 1],
            [198, 18, 0, 7],
            [198, 18, 0, 9],
            [0, 0, 0, 0],
        ] {
            m.extend_from_slice(NS_NET);
            m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 1, 44, 0, 4]);
            m.extend_from_slice(&a);
        }
        f.reply(t.token, up(1), &m, 5, &mut rng);
        let st = &f.hosts()[0];
        // Sorted: the order of the answer does not matter.
        assert_eq!(
            st.refused,
            vec![
                (IpAddr::from([0, 0, 0, 0]), Refused::Unspecified),
                (IpAddr::from([127, 0, 0, 1]), Refused::Loopback)
            ]
        );
        assert_eq!(f.stats.host_addrs_refused, 2);
        assert_eq!(
            f.config().zones[1]
                .upstreams
                .iter()
                .map(|u| u.addr)
                .collect::<Vec<_>>(),
            vec![up(7), v4([198, 18, 0, 9], 53)],
            "the zone's own address first, the resolved one once, no loopback"
        );
        // With do-not-query-localhost: no, a reload re-resolves (from the cache) and
        // the loopback address is used.
        let mut cfg = f.config().clone();
        cfg.zones[1].upstreams = vec![Upstream {
            addr: up(7),
            tls_name: None,
        }];
        cfg.do_not_query_localhost = false;
        f.reconfigure(cfg);
        f.tick(10, &mut rng);
        assert!(next(&mut f).is_none(), "answered from the cache");
        let ups: Vec<SocketAddr> = f.config().zones[1]
            .upstreams
            .iter()
            .map(|u| u.addr)
            .collect();
        assert!(ups.contains(&v4([127, 0, 0, 1], 53)), "{ups:?}");
        assert!(f.hosts()[0].refused.is_empty());
    }

    #[test]
    fn what_can_be_an_upstream() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        for (addr, dnql, want) in [
            ("198.18.0.1:53", true, Ok(a("198.18.0.1:53"))),
            ("[2001:db8::1]:853", true, Ok(a("[2001:db8::1]:853"))),
            ("[::ffff:198.18.0.1]:53", true, Ok(a("198.18.0.1:53"))),
            ("127.0.0.1:53", true, Err(Refused::Loopback)),
            ("127.1.2.3:53", true, Err(Refused::Loopback)),
            ("[::1]:53", true, Err(Refused::Loopback)),
            ("[::ffff:127.0.0.1]:53", true, Err(Refused::Loopback)),
            ("0.0.0.0:53", true, Err(Refused::Unspecified)),
            ("[::]:53", true, Err(Refused::Unspecified)),
            ("[::ffff:0.0.0.0]:53", true, Err(Refused::Unspecified)),
            ("[::ffff:127.0.0.1]:53", false, Ok(a("127.0.0.1:53"))),
            ("[::]:53", false, Ok(a("[::]:53"))),
            ("224.0.0.251:53", false, Err(Refused::Multicast)),
            ("[ff02::fb]:53", false, Err(Refused::Multicast)),
            ("[::ffff:239.0.0.1]:53", false, Err(Refused::Multicast)),
            ("255.255.255.255:53", false, Err(Refused::Broadcast)),
            (
                "[::ffff:255.255.255.255]:53",
                false,
                Err(Refused::Broadcast),
            ),
            ("[fe80::1]:53", false, Err(Refused::LinkLocalWithoutScope)),
            ("[fe80::1%2]:53", true, Ok(a("[fe80::1%2]:53"))),
            // Not the limited broadcast: a directed broadcast cannot be told from a
            // unicast address without the netmask.
            ("198.18.255.255:53", true, Ok(a("198.18.255.255:53"))),
        ] {
            assert_eq!(upstream_addr(a(addr), dnql), want, "{addr} dnql {dnql}");
        }
        assert!(Refused::Loopback.is_localhost() && Refused::Unspecified.is_localhost());
        assert!(!Refused::Multicast.is_localhost() && !Refused::Broadcast.is_localhost());
    }

    #[test]
    fn resolved_addresses_that_cannot_be_upstreams_are_left_out() {
        // Even with do-not-query-localhost: no, a host's multicast, broadcast and
        // link-local (no interface to send it on) addresses are no upstreams; an
        // IPv4-mapped address is the IPv4 address.
        let mut f = fwd(
            vec![
                zone(b"\x00", ZoneKind::Forward, &[1], 1),
                zone(EXAMPLE, ZoneKind::Forward, &[], 2),
            ],
            CacheConfig::default(),
        );
        let mut cfg = f.config().clone();
        cfg.hosts = vec![host(EXAMPLE, NS_NET, 53)];
        cfg.do_not_query_localhost = false;
        f.reconfigure(cfg);
        let mut rng = Seq(83);
        f.tick(0, &mut rng);
        let mut ts = transmits(&mut f);
        let a = take(&mut ts, NS_NET, rtype::A);
        let aaaa = take(&mut ts, NS_NET, rtype::AAAA);
        let v4s: [[u8; 4]; 3] = [[224, 0, 0, 1], [255, 255, 255, 255], [198, 18, 0, 9]];
        let rrs: Vec<(&[u8], u16, u32, &[u8])> =
            v4s.iter().map(|x| (NS_NET, 1u16, 300u32, &x[..])).collect();
        f.reply(
            a.token,
            up(1),
            &reply(&a.bytes, 0, false, &rrs, &[]),
            5,
            &mut rng,
        );
        let v6s: Vec<[u8; 16]> = [
            "fe80::1",
            "ff02::1",
            "::ffff:198.18.0.9",
            "::ffff:224.0.0.2",
            "2001:db8::9",
        ]
        .iter()
        .map(|s| s.parse::<Ipv6Addr>().unwrap().octets())
        .collect();
        let rrs: Vec<(&[u8], u16, u32, &[u8])> = v6s
            .iter()
            .map(|x| (NS_NET, 28u16, 300u32, &x[..]))
            .collect();
        f.reply(
            aaaa.token,
            up(1),
            &reply(&aaaa.bytes, 0, false, &rrs, &[]),
            6,
            &mut rng,
        );
        let ups: Vec<SocketAddr> = f.config().zones[1]
            .upstreams
            .iter()
            .map(|u| u.addr)
            .collect();
        assert_eq!(
            ups,
            vec![
                v4([198, 18, 0, 9], 53),
                SocketAddr::new("2001:db8::9".parse().unwrap(), 53)
            ]
        );
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            f.hosts()[0].refused,
            vec![
                (ip("224.0.0.1"), Refused::Multicast),
                (ip("255.255.255.255"), Refused::Broadcast),
                (ip("224.0.0.2"), Refused::Multicast),
                (ip("fe80::1"), Refused::LinkLocalWithoutScope),
                (ip("ff02::1"), Refused::Multicast),
            ]
        );
        assert_eq!(f.stats.host_addrs_refused, 5);
        assert_eq!(f.hosts()[0].addrs, ups);
    }

    #[test]
    fn host_from_cache_tls_name_and_what_a_reload_keeps() {
        let mut f = fwd(
            vec![
                zone(b"\x00", ZoneKind::Forward, &[1], 1),
                zone(EXAMPLE, ZoneKind::Forward, &[], 2),
            ],
            CacheConfig::default(),
        );
        let mut rng = Seq(61);
        // ns.net.'s A and AAAA are in the cache already (a client asked).
        for (t, rd) in [
            (1u16, vec![198, 18, 0, 9]),
            (
                28,
                vec![0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9],
            ),
        ] {
            f.cache().offer(
                RrSet {
                    owner: NS_NET.to_vec(),
                    rtype: t,
                    class: 1,
                    ttl: 600,
                    rdatas: vec![rd],
                    rank: crate::rrset::Rank::AnswerNonAuth,
                },
                0,
            );
        }
        let mut cfg = f.config().clone();
        cfg.zones[1].tls = true;
        cfg.hosts = vec![HostConfig {
            tls_name: Some(Arc::from("ns.net")),
            ..host(EXAMPLE, NS_NET, 853)
        }];
        f.reconfigure(cfg.clone());
        f.tick(1_000, &mut rng);
        assert!(next(&mut f).is_none(), "both from the cache: nothing sent");
        let st = &f.hosts()[0];
        assert_eq!(st.addrs.len(), 2);
        assert_eq!(st.next_ms, Some(600_000));
        let _ = f.resolve(q(WWW, 1), Some(1), 1_001, &mut rng);
        let t = transmit(&mut f);
        assert_eq!(t.transport, Transport::Tls(Arc::from("ns.net")));
        assert_eq!(t.to.port(), 853);
        let r = reply(&t.bytes, 0, false, &[(WWW, 1, 60, &[192, 0, 2, 80])], &[]);
        f.reply(t.token, t.to, &r, 1_001, &mut rng);
        assert_eq!(answer(&mut f).clients, vec![1]);
        // A reload that leaves the host and the zone that resolved it (".") as they were
        // keeps its addresses (no new resolution) and their RTT records, whatever else
        // changes: the zone it serves, a new zone.
        let g = f.generation();
        cfg.zones[1].id = 12;
        cfg.zones
            .push(zone(b"\x05other\x00", ZoneKind::Forward, &[3], 13));
        f.reconfigure(cfg.clone());
        assert!(f.generation() > g);
        assert_eq!(f.next_timer(), Some(0));
        f.tick(1_002, &mut rng);
        assert!(f.poll_event().is_none(), "nothing to resolve, nothing sent");
        assert_eq!(f.hosts()[0].addrs.len(), 2);
        assert!(f.infra().hosts().iter().any(|h| h.addr == t.to));
        // A host given another port is a new host: resolved again (from the cache).
        cfg.hosts[0].port = 8853;
        f.reconfigure(cfg.clone());
        f.tick(1_003, &mut rng);
        assert!(f.poll_event().is_none(), "from the cache");
        let ups = &f.config().zones[1].upstreams;
        assert!(
            ups.len() == 2 && ups.iter().all(|u| u.addr.port() == 8853),
            "{ups:?}"
        );
        // A reload that changes the zone that resolved the host (another upstream for
        // "."): what it said is not trusted any more (its cache is dropped too), so the
        // host's addresses go at once and its name is asked again, of the new upstream.
        cfg.zones[0] = zone(b"\x00", ZoneKind::Forward, &[2], 9);
        f.reconfigure(cfg.clone());
        let st = &f.hosts()[0];
        assert!(st.addrs.is_empty() && !st.answered, "{st:?}");
        assert!(f.config().zones[1].upstreams.is_empty());
        f.tick(1_004, &mut rng);
        let mut ts = transmits(&mut f);
        let a = take(&mut ts, NS_NET, rtype::A);
        let aaaa = take(&mut ts, NS_NET, rtype::AAAA);
        assert_eq!((a.to, aaaa.to), (up(2), up(2)));
        let r = reply(
            &a.bytes,
            0,
            false,
            &[(NS_NET, 1, 300, &[198, 18, 0, 10])],
            &[],
        );
        f.reply(a.token, up(2), &r, 1_005, &mut rng);
        assert_eq!(
            f.config().zones[1]
                .upstreams
                .iter()
                .map(|u| u.addr)
                .collect::<Vec<_>>(),
            vec![v4([198, 18, 0, 10], 8853)]
        );
        // The same again: nothing changes, nothing is asked.
        f.reconfigure(cfg);
        f.tick(1_006, &mut rng);
        assert!(next(&mut f).is_none());
        assert_eq!(f.hosts()[0].addrs, vec![v4([198, 18, 0, 10], 8853)]);
    }

    // Issue 28: CNAME chains, per-link bailiwick, unwanted replies.

    /// `a{k}.example.` in wire form.
    fn link(k: usize) -> Vec<u8> {
        let label = alloc::format!("a{k}");
        let mut n = vec![label.len() as u8];
        n.extend_from_slice(label.as_bytes());
        n.extend_from_slice(EXAMPLE);
        n
    }

    /// The k of `a{k}.example.`.
    fn link_index(name: &[u8]) -> usize {
        let len = usize::from(name[0]);
        core::str::from_utf8(&name[2..1 + len])
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Drives `f` against an upstream that answers every `aK.example.` with
    /// `aK CNAME aK+1` and nothing else (NOERROR, no SOA: it "did not follow"), each
    /// `delay` ms after the query, until nothing is left to do or 60 s have passed: the
    /// upstream queries sent, and the answers (client, rcode, when).
    fn endless_chain(f: &mut Fwd, delay: u64, rng: &mut Seq) -> (u64, Vec<(u32, u16, u64)>) {
        let mut now = 0u64;
        let mut queries = 0u64;
        let mut answers = Vec::new();
        // Replies not yet due: (when, token, to, bytes).
        let mut pending: Vec<(u64, u64, SocketAddr, Vec<u8>)> = Vec::new();
        while now <= 60_000 {
            while let Some(e) = f.poll_event() {
                match e {
                    Event::Transmit(t) => {
                        queries += 1;
                        let (name, _) = question_of(&t);
                        let target = link(link_index(&name) + 1);
                        let r = reply(&t.bytes, 0, false, &[(&name, 5, 300, &target)], &[]);
                        pending.push((now + delay, t.token, t.to, r));
                    }
                    Event::Answer(a) => {
                        for c in &a.clients {
                            answers.push((*c, rcode_of(&a), now));
                        }
                    }
                    Event::Cancel(_) => {}
                }
            }
            let reply_at = pending.iter().map(|p| p.0).min();
            let Some(at) = [reply_at, f.next_timer()].into_iter().flatten().min() else {
                break;
            };
            now = now.max(at);
            if reply_at == Some(at) {
                let i = pending.iter().position(|p| p.0 == at).unwrap();
                let (_, token, to, r) = pending.remove(i);
                if f.is_outstanding(token) {
                    f.reply(token, to, &r, now, rng);
                }
            } else {
                f.tick(now, rng);
            }
        }
        (queries, answers)
    }

    #[test]
    fn an_endless_cname_chain_ends_after_max_restarts() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(71);
        assert_eq!(
            f.resolve(q(&link(0), 1), Some(1), 0, &mut rng),
            Start::Pending
        );
        let (queries, answers) = endless_chain(&mut f, 1, &mut rng);
        // The question and MAX_RESTARTS targets, one query each (the upstream answers at
        // once), then SERVFAIL: as Unbound's max-query-restarts.
        assert_eq!(queries, u64::from(MAX_RESTARTS) + 1);
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!((answers[0].0, answers[0].1), (1, 2));
        assert_eq!(f.in_flight(), 0);
        assert_eq!(f.next_timer(), None);
    }

    #[test]
    fn a_slow_cname_chain_ends_at_the_question_s_deadline() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(72);
        f.config.limits.budget_ms = 2_000;
        let _ = f.resolve(q(&link(0), 1), Some(1), 0, &mut rng);
        // Each link takes 300 ms: the restarts would allow 3.6 s of them, the question's
        // budget (2 s) ends the chain first, targets and all: a query at 0, 300, ...,
        // 1,800 ms.
        let (queries, answers) = endless_chain(&mut f, 300, &mut rng);
        assert_eq!(answers.len(), 1, "{answers:?}");
        let (client, rc, at) = answers[0];
        assert_eq!((client, rc), (1, 2));
        assert!(at <= 2_000, "SERVFAIL at {at} ms");
        assert_eq!(queries, 7);
        assert_eq!(f.in_flight(), 0);
        assert_eq!(f.next_timer(), None);
    }

    #[test]
    fn a_chain_target_nobody_waits_for_is_dropped() {
        let other: &[u8] = b"\x05other\x00";
        let target: &[u8] = b"\x01x\x05other\x00";
        let mut f = fwd(
            vec![
                zone(EXAMPLE, ZoneKind::Forward, &[1], 1),
                zone(other, ZoneKind::Forward, &[2], 2),
            ],
            CacheConfig::default(),
        );
        let mut rng = Seq(73);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        let r = reply(&t.bytes, 0, false, &[(WWW, 5, 300, target)], &[]);
        f.reply(t.token, up(1), &r, 10, &mut rng);
        let t2 = transmit(&mut f);
        assert_eq!(question_of(&t2).0, target);
        assert_eq!(f.in_flight(), 2);
        // A reload removes example.: its question fails; the target's flight, which only
        // it waited for, ends with it (its query cancelled), though other. is still there.
        let mut cfg = f.config().clone();
        cfg.zones.remove(0);
        f.reconfigure(cfg);
        f.tick(20, &mut rng);
        let mut cancelled = Vec::new();
        let mut answered = Vec::new();
        while let Some(e) = f.poll_event() {
            match e {
                Event::Cancel(c) => cancelled.push(c),
                Event::Answer(a) => answered.push((a.clients.clone(), rcode_of(&a))),
                Event::Transmit(t) => panic!("unexpected {t:?}"),
            }
        }
        assert_eq!(answered, vec![(vec![1], 2)]);
        assert!(cancelled.contains(&t2.token), "{cancelled:?}");
        assert_eq!(f.in_flight(), 0);
        assert!(!f.is_outstanding(t2.token));
    }

    #[test]
    fn a_chain_joining_a_full_question_fails_and_so_does_a_loop() {
        let other: &[u8] = b"\x05other\x00";
        let target: &[u8] = b"\x01x\x05other\x00";
        let mut f = fwd(
            vec![
                zone(EXAMPLE, ZoneKind::Forward, &[1], 1),
                zone(other, ZoneKind::Forward, &[2], 2),
            ],
            CacheConfig::default(),
        );
        f.config.limits.waiters = 2;
        let mut rng = Seq(74);
        // Two clients wait on x.other.: its waiters are full.
        let _ = f.resolve(q(target, 1), Some(1), 0, &mut rng);
        let tx = transmit(&mut f);
        let _ = f.resolve(q(target, 1), Some(2), 0, &mut rng);
        // A third question's chain leads there: it may not wait on it as a third waiter.
        let _ = f.resolve(q(WWW, 1), Some(3), 0, &mut rng);
        let t = transmit(&mut f);
        let r = reply(&t.bytes, 0, false, &[(WWW, 5, 300, target)], &[]);
        f.reply(t.token, up(1), &r, 10, &mut rng);
        let a = answer(&mut f);
        assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![3], 2));
        assert_eq!(f.in_flight(), 1);
        // x.other. answers: its two clients.
        let r = reply(
            &tx.bytes,
            0,
            false,
            &[(target, 1, 300, &[192, 0, 2, 9])],
            &[],
        );
        f.reply(tx.token, up(2), &r, 20, &mut rng);
        let a = answer(&mut f);
        assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![1, 2], 0));

        // A loop through two zones: y.example. -> y.other. -> y.example. is SERVFAIL at
        // once, not when the budget runs out.
        let ye: &[u8] = b"\x01y\x07example\x00";
        let yo: &[u8] = b"\x01y\x05other\x00";
        let _ = f.resolve(q(ye, 1), Some(4), 100, &mut rng);
        let t = transmit(&mut f);
        let r = reply(&t.bytes, 0, false, &[(ye, 5, 300, yo)], &[]);
        f.reply(t.token, up(1), &r, 110, &mut rng);
        let t = transmit(&mut f);
        assert_eq!(question_of(&t).0, yo);
        let r = reply(&t.bytes, 0, false, &[(yo, 5, 300, ye)], &[]);
        f.reply(t.token, up(2), &r, 120, &mut rng);
        let a = answer(&mut f);
        assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![4], 2));
        assert_eq!(f.in_flight(), 0);
    }

    #[test]
    fn a_chain_link_into_a_more_specific_zone_is_asked_there() {
        let corp: &[u8] = b"\x04corp\x00";
        let www_corp: &[u8] = b"\x03www\x04corp\x00";
        let evil: &[u8] = b"\x04evil\x03com\x00";
        let mut f = fwd(
            vec![
                zone(b"\x00", ZoneKind::Forward, &[1], 1),
                zone(corp, ZoneKind::Forward, &[2], 2),
            ],
            CacheConfig::default(),
        );
        let mut rng = Seq(75);
        let _ = f.resolve(q(evil, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        assert_eq!(t.to, up(1));
        // ".": evil.com CNAME www.corp., and an address for www.corp. that is corp.'s to
        // give.
        let r = reply(
            &t.bytes,
            0,
            false,
            &[(evil, 5, 300, www_corp), (www_corp, 1, 300, &[6, 6, 6, 6])],
            &[],
        );
        f.reply(t.token, up(1), &r, 10, &mut rng);
        assert!(f.cache().rrset(www_corp, 1, 1, 0).is_none());
        // The target is asked of corp.'s own upstream.
        let t2 = transmit(&mut f);
        assert_eq!((question_of(&t2).0, t2.to), (www_corp.to_vec(), up(2)));
        let r = reply(
            &t2.bytes,
            0,
            false,
            &[(www_corp, 1, 300, &[10, 0, 0, 1])],
            &[],
        );
        f.reply(t2.token, up(2), &r, 20, &mut rng);
        let a = answer(&mut f);
        assert_eq!((a.clients.clone(), rcode_of(&a)), (vec![1], 0));
        assert_eq!(a.rendered.body.counts, [0, 2, 0, 0, 0, 0]);
        assert!(a.rendered.body.tail.ends_with(&[10, 0, 0, 1]));
        let (set, _) = f.cache().rrset(www_corp, 1, 1, 0).unwrap();
        assert_eq!(set.rdatas, vec![vec![10, 0, 0, 1]]);
    }

    #[test]
    fn short_or_other_id_datagrams_leave_the_query_waiting() {
        let mut f = fwd(
            vec![zone(b"\x00", ZoneKind::Forward, &[1, 2], 1)],
            CacheConfig::default(),
        );
        let mut rng = Seq(76);
        let _ = f.resolve(q(WWW, 1), Some(1), 0, &mut rng);
        let t = transmit(&mut f);
        // From the upstream's own address and port (an off-path sender guessed the port):
        // shorter than a header, and garbage under another ID.
        f.reply(t.token, t.to, b"\x00\x01garbage", 5, &mut rng);
        let mut other_id = vec![0u8; 40];
        other_id[0] = t.bytes[0] ^ 0x5a;
        other_id[1] = t.bytes[1];
        other_id[2] = 0xff;
        f.reply(t.token, t.to, &other_id, 6, &mut rng);
        assert_eq!(f.stats.unwanted, 2);
        assert!(next(&mut f).is_none(), "nothing sent, nothing answered");
        assert!(f.is_outstanding(t.token));
        assert!(f.infra().hosts().iter().all(|h| h.errors == 0));
        let good = reply(&t.bytes, 0, false, &[(WWW, 1, 300, &[192, 0, 2, 1])], &[]);
        f.reply(t.token, t.to, &good, 7, &mut rng);
        let a = answer(&mut f);
        assert_eq!(rcode_of(&a), 0);
        assert!(a.rendered.body.tail.ends_with(&[192, 0, 2, 1]));
    }

    #[test]
    fn a_host_s_refresh_is_bounded_under_hostile_ttls() {
        let mut f = hosted(CacheConfig::default());
        f.config.do_ip6 = false;
        let cfg = f.config().clone();
        f.reconfigure(cfg);
        let mut rng = Seq(77);
        let max_ms = u64::from(CacheConfig::default().max_ttl) * 1000;
        let mut now = 0u64;
        // (TTL the upstream gives, when the host is asked again): the largest TTL is
        // capped by cache-max-ttl; one with the top bit set reads as 0 (RFC 2181 §8) and,
        // as 0 itself, gives the 5 s floor.
        for (ttl, after) in [
            (0x7fff_ffffu32, max_ms),
            (0x8000_0000, HOST_MIN_REFRESH_MS),
            (u32::MAX, HOST_MIN_REFRESH_MS),
            (0, HOST_MIN_REFRESH_MS),
        ] {
            f.tick(now, &mut rng);
            let t = transmit(&mut f);
            assert_eq!(question_of(&t), (NS_NET.to_vec(), rtype::A));
            let r = reply(
                &t.bytes,
                0,
                false,
                &[(NS_NET, 1, ttl, &[198, 18, 0, 9])],
                &[],
            );
            f.reply(t.token, up(1), &r, now, &mut rng);
            assert_eq!(f.hosts()[0].next_ms, Some(now + after), "TTL {ttl:#x}");
            assert_eq!(f.next_timer(), Some(now + after));
            now += after;
        }
    }
}
