//! Questions in flight: a question started or joined, its upstream queries sent, replies
//! matched, scrubbed and cached, and the answers handed to its waiters.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::net::SocketAddr;

use skua_engine::rr::rtype;
use skua_engine::wire::{HEADER_LEN, flags, rcode};

use super::{
    Answer, Begin, Done, Entropy, Event, Flight, Forwarder, Outstanding, Question, Transmit,
    Transport, Waiter, ZoneKind, ede, secs,
};
use crate::cache::{Kind, MsgShard, Rendered, SetShard, ShardLock};
use crate::msg::Message;
use crate::render::{Section, render};
use crate::rrset::RrSet;
use crate::scrub::{self, Asked, Bailiwick, Verdict};

impl<C: Clone, M: ShardLock<MsgShard>, S: ShardLock<SetShard>> Forwarder<C, M, S> {
    /// Starts resolving `q` for `waiter` (or joins the flight of `q` in progress). `chain`
    /// gives a chain target's restarts and deadline (those of the question it continues).
    pub(super) fn begin(
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
    pub(super) fn send(
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
    pub(super) fn drop_flight_queries(&mut self, q: &Question, keep: Option<u64>) {
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

    /// Query `token` (outstanding) ended in an error: the upstream is charged with it, and
    /// the question goes to the next upstream unless it was a late query (the current one
    /// goes on). Its I/O is cancelled (the daemon forgets its socket or connection ID).
    pub(super) fn query_failed(&mut self, token: u64, now: u64, rng: &mut impl Entropy) {
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

    /// [`Forwarder::reply`], without running the work it queued.
    pub(super) fn take_reply(
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

    /// SERVFAIL for `q` (or a stale answer, RFC 8767 §4, when the cache may serve one).
    pub(super) fn fail(&mut self, q: &Question, now: u64) {
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
    pub(super) fn finish(&mut self, q: &Question, done: Done, now: u64) {
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
    pub(super) fn answer_waiters(
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
