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
//!
//! The parts, one file each under `forward/`: `config` (the settings: zones, upstreams,
//! limits, how hosts are to be resolved, and which addresses can be upstreams), `hosts`
//! (upstreams given by name, resolved through the forwarder), `flight` (questions in
//! flight: upstream queries sent, replies matched and scrubbed, answers cached and handed to
//! the waiters), `chain` (CNAME/DNAME chains that go on in another zone), `stale` (RFC 8767
//! stale answers) and `stats` (the counters). This file holds the [`Forwarder`] itself with
//! the state it keeps (each part's methods read and write the same fields, and no part
//! depends on another), its events and its entry points; the public items of the parts are
//! re-exported here, so their paths stay `skua_resolver::forward::X`.

mod chain;
mod config;
mod flight;
mod hosts;
mod stale;
mod stats;

pub use self::chain::MAX_RESTARTS;
pub use self::config::{
    ForwardConfig, HostConfig, HostPlan, Limits, Refused, Upstream, ZoneConfig, ZoneKind,
    plan_hosts, upstream_addr,
};
pub use self::flight::build_query;
pub use self::hosts::{HOST_MAX_RETRY_MS, HOST_MIN_REFRESH_MS, HostStatus, MAX_HOST_ADDRS};
pub use self::stats::ForwardStats;

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::net::{IpAddr, SocketAddr};

use skua_engine::rr::rtype;

use self::config::zone_for_name;
use crate::cache::{Cache, Key, Kind, MsgShard, Rendered, SetShard, ShardLock};
use crate::infra::Infra;
use crate::render::Section;
use crate::rrset::RrSet;

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
    /// are not its upstreams' to answer ([`Bailiwick`](crate::scrub::Bailiwick)).
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
}

#[cfg(test)]
mod tests;
