//! The engine: access control, then the hot path or the general path.
//!
//! [`Engine::handle_query`] is the one entry point of every dataplane. It is `&self`: an
//! engine is immutable once built, shared by all workers (behind an `Arc` in the daemon) and
//! replaced wholesale on reload, so the hot path takes no lock and writes no shared memory.

use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::acl::{Acl, AclAction};
pub use crate::exchange::{
    AnswerCache, Cached, DropReason, EngineConfig, NoCache, Outcome, ReplyInfo, Request, Transport,
};
use crate::exchange::{Found, Tables};
use crate::general;
use crate::localzone::{LocalZoneType, default_zones};
use crate::name::WireName;
use crate::rr::{Rr, class, rtype};
use crate::rrl::{AccountName, AnswerRrl, Limit, Response, ResponseClass, Rrl};
use crate::store::{self, AnsRef, Answer, AuthZoneSpec, BuildError, LocalZoneSpec, Tree};
use crate::wire::{self, HEADER_LEN, OPT_RR_LEN, Query, flags, rcode};

/// Collects configuration, then compiles an [`Engine`].
pub struct EngineBuilder {
    config: EngineConfig,
    acl: Acl,
    local_zones: Vec<LocalZoneSpec>,
    local_data: Vec<(Rr, u32)>,
    auth: Vec<AuthZoneSpec>,
    unavailable: Vec<WireName>,
    default_zones: bool,
    rrl: Option<Arc<Rrl>>,
}

impl Default for EngineBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl EngineBuilder {
    /// An empty configuration: Unbound's default ACL (localhost only) and default zones.
    pub fn new() -> Self {
        Self {
            config: EngineConfig::default(),
            acl: Acl::unbound_default(),
            local_zones: Vec::new(),
            local_data: Vec::new(),
            auth: Vec::new(),
            unavailable: Vec::new(),
            default_zones: true,
            rrl: None,
        }
    }

    /// Server options.
    pub fn config_mut(&mut self) -> &mut EngineConfig {
        &mut self.config
    }

    /// The access-control list (starts with Unbound's defaults).
    pub fn acl_mut(&mut self) -> &mut Acl {
        &mut self.acl
    }

    /// Adds a `local-zone`.
    pub fn local_zone(&mut self, name: WireName, zone_type: LocalZoneType) -> &mut Self {
        self.local_zones.push(LocalZoneSpec { name, zone_type });
        self
    }

    /// Adds a `local-data` record; `tag` comes back in errors about it.
    pub fn local_data(&mut self, rr: Rr, tag: u32) -> &mut Self {
        self.local_data.push((rr, tag));
        self
    }

    /// Adds an authoritative zone (`auth-zone:` with `for-downstream: yes`).
    pub fn auth_zone(&mut self, zone: AuthZoneSpec) -> &mut Self {
        self.auth.push(zone);
        self
    }

    /// Adds an authoritative zone that has no data to serve (a secondary zone before its
    /// first transfer, or whose copy expired): SERVFAIL at and under its apex.
    pub fn unavailable_auth_zone(&mut self, name: WireName) -> &mut Self {
        self.unavailable.push(name);
        self
    }

    /// Whether to add Unbound's default zones (localhost, AS112...). On by default.
    pub fn default_zones(&mut self, on: bool) -> &mut Self {
        self.default_zones = on;
        self
    }

    /// Rate-limits UDP responses with this table (shared: a reload may hand the old
    /// engine's table to the new one, state included).
    pub fn rrl(&mut self, rrl: Arc<Rrl>) -> &mut Self {
        self.rrl = Some(rrl);
        self
    }

    /// Compiles every answer. Fails without side effects: the caller keeps its old engine.
    pub fn build(mut self) -> Result<Engine, BuildError> {
        let ra = self.config.recursion_available;
        if self.default_zones {
            // A configured zone of the same name (any type, `nodefault` included) replaces
            // the default one (unbound.conf(5)).
            let configured: Vec<WireName> = self
                .local_zones
                .iter()
                .map(|z| z.name.to_lowercase())
                .collect();
            for dz in default_zones() {
                let Ok(name) = WireName::parse(&dz.name, None) else {
                    continue;
                };
                if configured.contains(&name.to_lowercase()) {
                    continue;
                }
                for line in &dz.data {
                    if let Ok(rr) = crate::text::parse_rr(line, None, 3600) {
                        self.local_data.push((rr, u32::MAX));
                    }
                }
                self.local_zones.push(LocalZoneSpec {
                    name,
                    zone_type: dz.zone_type,
                });
            }
        }
        // `nodefault` only switches a default zone off; it creates no zone (observed in
        // Unbound 1.17: its local data falls into the enclosing zone).
        self.local_zones
            .retain(|z| z.zone_type != LocalZoneType::NoDefault);
        let local = store::build_local(&self.local_zones, self.local_data, ra)?;
        let auth = store::build_auth_with(self.auth, &self.unavailable, ra)?;
        Ok(Engine {
            acl: self.acl,
            local,
            auth,
            config: self.config,
            rrl: self.rrl,
        })
    }
}

/// The compiled, immutable engine.
pub struct Engine {
    acl: Acl,
    local: Tree,
    auth: Tree,
    config: EngineConfig,
    rrl: Option<Arc<Rrl>>,
}

/// What the rate limiter charges a reply to.
struct Subject {
    rrl: AnswerRrl,
    /// [`store::name_hash`] of the lower-cased query name (the empty name when unreadable).
    qname_hash: u64,
    qtype: u16,
    qclass: u16,
    /// The query's DO bit, when it had an OPT record (the slip reply keeps an OPT).
    edns_do: Option<bool>,
}

impl Engine {
    /// Server options in force.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Names compiled (local zones and data, authoritative zones).
    pub fn name_count(&self) -> usize {
        self.local.len() + self.auth.len()
    }

    /// Heap bytes held by the compiled answer tables.
    pub fn heap_bytes(&self) -> usize {
        self.local.heap_bytes() + self.auth.heap_bytes()
    }

    /// The rate-limiting table, when rate limiting is on.
    pub fn rrl(&self) -> Option<&Arc<Rrl>> {
        self.rrl.as_ref()
    }

    /// Sets or removes the rate-limiting table (before the engine is shared).
    pub fn set_rrl(&mut self, rrl: Option<Arc<Rrl>>) {
        self.rrl = rrl;
    }

    /// Answers one query. Writes the reply into `out` (which should be at least 512 bytes
    /// for UDP, 65535 for TCP) and says how long it is, or says to drop the query.
    ///
    /// Never panics on any input. Malformed queries with a readable header get FORMERR;
    /// shorter datagrams and responses are dropped.
    ///
    /// With a rate-limiting table ([`EngineBuilder::rrl`]), every UDP reply is charged to
    /// its account at `req.now` and may come back as [`DropReason::RateLimited`] or slipped
    /// ([`ReplyInfo::slipped`]).
    #[inline]
    pub fn handle_query(&self, req: &Request, query: &[u8], out: &mut [u8]) -> Outcome {
        self.handle_query_with(req, query, out, &NoCache)
    }

    /// [`Engine::handle_query`] with the resolver's cache: with [`EngineConfig::resolve`],
    /// a question outside local data is answered from `cache` when it holds an answer
    /// (TTLs counted down, [`ReplyInfo::cached`]), and is [`Outcome::Resolve`] otherwise.
    /// As Unbound: RD=0 questions are resolved only for `allow_snoop` (and `allow_setrd`,
    /// which sets RD); `allow` refuses them.
    #[inline]
    pub fn handle_query_with<C: AnswerCache>(
        &self,
        req: &Request,
        query: &[u8],
        out: &mut [u8],
        cache: &C,
    ) -> Outcome {
        let acl = self.acl.check(req.src);
        match acl {
            AclAction::Deny => {
                return Outcome::Drop {
                    reason: DropReason::Acl,
                    inform: false,
                };
            }
            AclAction::Refuse => {
                let o = general::refuse(self, query, out);
                return self.after_general(req, query, o, general::Meta::default(), out);
            }
            _ => {}
        }
        let q = match Query::parse(query) {
            Ok(q) if is_hot(&q) => q,
            _ => {
                let mut meta = general::Meta::default();
                let o = general::handle(self, req, acl, query, out, &mut meta);
                if meta.not_local
                    && self.config.resolve
                    && query.len() > 3
                    && resolvable(acl, u16::from_be_bytes([query[2], query[3]]))
                {
                    return Outcome::Resolve;
                }
                return self.after_general(req, query, o, meta, out);
            }
        };
        let mut key = [0u8; crate::name::MAX_NAME_LEN];
        let qname = q.qname();
        let key = &mut key[..qname.len()];
        for (k, b) in key.iter_mut().zip(qname) {
            *k = b.to_ascii_lowercase();
        }
        let hash = store::name_hash(key);
        match self.find_hashed(key, hash, q.qtype) {
            Found::Answer(a) => match self.rrl.as_deref() {
                None => self.emit(&q, acl, &a, req.transport, out, true),
                // Decided before the reply is built: a dropped or slipped answer costs less
                // than a sent one, which is what a flood needs.
                Some(table) => {
                    let rrl = a.rrl();
                    let resp = Response::new(rrl, hash, q.qtype, q.qclass);
                    let tcp = req.transport == Transport::Tcp;
                    let verdict = table.check(req.now, req.src, tcp, &resp);
                    self.emit_limited(table, verdict, rrl.class, &q, acl, &a, req.transport, out)
                }
            },
            Found::Drop { inform } => Outcome::Drop {
                reason: DropReason::Zone,
                inform,
            },
            Found::NotLocal if self.config.resolve && resolvable(acl, q.flags()) => cache
                .lookup(key, hash, q.qtype, q.qclass, req.now, |c| {
                    self.emit_cached(req, &q, acl, hash, c, out)
                })
                .unwrap_or(Outcome::Resolve),
            Found::NotLocal => {
                let o = self.not_local(&q, acl, out, true);
                let Some(table) = self.rrl.as_deref() else {
                    return o;
                };
                let s = Subject {
                    rrl: AnswerRrl {
                        class: ResponseClass::Error,
                        name: AccountName::Qname,
                    },
                    qname_hash: hash,
                    qtype: q.qtype,
                    qclass: q.qclass,
                    edns_do: q.edns.map(|e| e.dnssec_ok),
                };
                self.rate_limit(table, req, o, &s, out)
            }
        }
    }

    /// Answers `query` with an answer of the resolver (for the clients that waited on an
    /// upstream): as a cache hit would be, with the client's ID, case, flags, EDNS and size
    /// limit, and rate limiting.
    pub fn answer_cached(
        &self,
        req: &Request,
        query: &[u8],
        out: &mut [u8],
        c: &Cached<'_>,
    ) -> Outcome {
        let acl = self.acl.check(req.src);
        match acl {
            AclAction::Deny => Outcome::Drop {
                reason: DropReason::Acl,
                inform: false,
            },
            AclAction::Refuse => {
                let o = general::refuse(self, query, out);
                self.after_general(req, query, o, general::Meta::default(), out)
            }
            _ => match Query::parse(query) {
                Ok(q) => {
                    let mut key = [0u8; crate::name::MAX_NAME_LEN];
                    let qname = q.qname();
                    let key = &mut key[..qname.len()];
                    for (k, b) in key.iter_mut().zip(qname) {
                        *k = b.to_ascii_lowercase();
                    }
                    let hash = store::name_hash(key);
                    self.emit_cached(req, &q, acl, hash, c, out)
                }
                // The query was read once already; if it no longer parses, the general path
                // says what it is.
                Err(_) => self.handle_query(req, query, out),
            },
        }
    }

    /// Builds a reply from a cached answer: copied like a compiled one (truncated at an
    /// RRset boundary when too large, rate-limited), then each TTL written from its RRset's
    /// expiry (or the stale TTL) and the Extended DNS Error appended to our OPT record.
    fn emit_cached(
        &self,
        req: &Request,
        q: &Query<'_>,
        acl: AclAction,
        hash: u64,
        c: &Cached<'_>,
        out: &mut [u8],
    ) -> Outcome {
        let a = Answer::rendered(c.flags, c.counts, c.bounds, c.tail, c.class);
        let o = match self.rrl.as_deref() {
            None => self.emit(q, acl, &a, req.transport, out, true),
            Some(table) => {
                let resp = Response::new(a.rrl(), hash, q.qtype, q.qclass);
                let tcp = req.transport == Transport::Tcp;
                let verdict = table.check(req.now, req.src, tcp, &resp);
                self.emit_limited(table, verdict, c.class, q, acl, &a, req.transport, out)
            }
        };
        let Outcome::Reply { mut len, mut info } = o else {
            return o;
        };
        info.cached = true;
        info.refresh = c.refresh;
        let head = HEADER_LEN + q.question().len();
        let opt = if q.edns.is_some() { OPT_RR_LEN } else { 0 };
        let tail_len = len.saturating_sub(head + opt);
        if let Some(tail) = out.get_mut(head..head + tail_len) {
            crate::exchange::patch_ttls(tail, c.ttls, req.now, c.fixed_ttl);
        }
        // RFC 8914 §3: an EDE option in our OPT record (4 octets of option header, 2 of
        // INFO-CODE), when the client speaks EDNS and the reply has room for it.
        if let (Some(code), true) = (c.ede, opt != 0) {
            let limit = self.size_limit(q, req.transport).min(out.len());
            if len + 6 <= limit && len >= OPT_RR_LEN {
                let rdlen_at = len - 2;
                wire::put16(out, rdlen_at, 6);
                out[len..len + 2].copy_from_slice(&15u16.to_be_bytes());
                out[len + 2..len + 4].copy_from_slice(&2u16.to_be_bytes());
                out[len + 4..len + 6].copy_from_slice(&code.to_be_bytes());
                len += 6;
            }
        }
        Outcome::Reply { len, info }
    }

    /// Builds a compiled answer as rate limiting decided: sent, dropped, or slipped (a
    /// truncated empty reply, or for errors the answer itself); with `log-only`, sent with
    /// the decision in [`ReplyInfo::rrl_would`].
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn emit_limited(
        &self,
        table: &Rrl,
        verdict: Option<Limit>,
        class: ResponseClass,
        q: &Query<'_>,
        acl: AclAction,
        a: &Answer<'_>,
        transport: Transport,
        out: &mut [u8],
    ) -> Outcome {
        let Some(limit) = verdict else {
            return self.emit(q, acl, a, transport, out, true);
        };
        let (o, slipped, would) = match limit {
            _ if table.log_only() => (self.emit(q, acl, a, transport, out, true), false, true),
            Limit::Drop => {
                return Outcome::Drop {
                    reason: DropReason::RateLimited,
                    inform: a.inform,
                };
            }
            Limit::Slip if class == ResponseClass::Error => {
                (self.emit(q, acl, a, transport, out, true), true, false)
            }
            Limit::Slip => {
                let empty = Answer::empty(a.flags | flags::TC);
                match self.emit(q, acl, &empty, transport, out, true) {
                    Outcome::Reply { len, mut info } => {
                        info.truncated = true;
                        info.inform = a.inform;
                        (Outcome::Reply { len, info }, true, false)
                    }
                    d => (d, false, false),
                }
            }
        };
        match o {
            Outcome::Reply { len, mut info } => {
                info.slipped = slipped;
                if would {
                    info.rrl_would = Some(limit);
                }
                Outcome::Reply { len, info }
            }
            d => d,
        }
    }

    /// Completes a general-path reply: its question type, then rate limiting.
    fn after_general(
        &self,
        req: &Request,
        query: &[u8],
        o: Outcome,
        meta: general::Meta,
        out: &mut [u8],
    ) -> Outcome {
        let Outcome::Reply { len, mut info } = o else {
            return o;
        };
        let question = wire::first_question(query);
        info.qtype = question.map_or(0, |(_, t, _)| t);
        let o = Outcome::Reply { len, info };
        let Some(table) = self.rrl.as_deref() else {
            return o;
        };
        let mut lower = [0u8; crate::name::MAX_NAME_LEN];
        let qname: &[u8] = match question {
            Some((end, _, _)) => {
                let name = &query[HEADER_LEN..end];
                let l = &mut lower[..name.len()];
                for (d, b) in l.iter_mut().zip(name) {
                    *d = b.to_ascii_lowercase();
                }
                &lower[..name.len()]
            }
            None => &[],
        };
        let rrl = meta.rrl.unwrap_or_else(|| {
            let f = wire::be16(out, 2);
            AnswerRrl {
                class: ResponseClass::classify(
                    info.rcode,
                    wire::be16(out, 6),
                    f & flags::AA != 0,
                    false,
                ),
                name: AccountName::Qname,
            }
        });
        let s = Subject {
            rrl,
            qname_hash: store::name_hash(qname),
            qtype: info.qtype,
            qclass: question.map_or(0, |(_, _, c)| c),
            edns_do: meta.edns_do,
        };
        self.rate_limit(table, req, o, &s, out)
    }

    /// Charges a reply to its account; drops it, slips it or lets it through.
    #[inline(always)]
    fn rate_limit(
        &self,
        table: &Rrl,
        req: &Request,
        o: Outcome,
        s: &Subject,
        out: &mut [u8],
    ) -> Outcome {
        let Outcome::Reply { len, mut info } = o else {
            return o;
        };
        let resp = Response::new(s.rrl, s.qname_hash, s.qtype, s.qclass);
        let tcp = req.transport == Transport::Tcp;
        let Some(limit) = table.check(req.now, req.src, tcp, &resp) else {
            return o;
        };
        if table.log_only() {
            info.rrl_would = Some(limit);
            return Outcome::Reply { len, info };
        }
        match limit {
            Limit::Drop => Outcome::Drop {
                reason: DropReason::RateLimited,
                inform: info.inform,
            },
            // Errors are not truncated but "leaked" as they are (BIND).
            Limit::Slip if s.rrl.class == ResponseClass::Error => {
                info.slipped = true;
                Outcome::Reply { len, info }
            }
            Limit::Slip => {
                info.slipped = true;
                info.truncated = true;
                Outcome::Reply {
                    len: self.slip(out, len, s.edns_do),
                    info,
                }
            }
        }
    }

    /// Cuts the reply in `out[..len]` to header, question and (when the query had one) OPT,
    /// with TC=1: BIND's slip, an invitation to retry over TCP. Returns the new length.
    #[cold]
    fn slip(&self, out: &mut [u8], len: usize, edns_do: Option<bool>) -> usize {
        let len = len.min(out.len());
        if len < HEADER_LEN {
            return len;
        }
        let (qd, end) = match wire::first_question(&out[..len]) {
            Some((name_end, _, _)) => (1, name_end + 4),
            None => (0, HEADER_LEN),
        };
        let f = wire::be16(out, 2) | flags::TC;
        wire::put16(out, 2, f);
        wire::put16(out, 4, qd);
        wire::put16(out, 6, 0);
        wire::put16(out, 8, 0);
        match edns_do {
            Some(d) if end + OPT_RR_LEN <= out.len() => {
                wire::write_opt(out, end, self.config.edns_buffer_size, 0, d);
                wire::put16(out, 10, 1);
                end + OPT_RR_LEN
            }
            _ => {
                wire::put16(out, 10, 0);
                end
            }
        }
    }

    /// The (lower-cased wire name, qtype) pairs that have an answer of their own in the
    /// compiled tables (plus A and AAAA at every name, for their NODATA answers), local
    /// zones first. Candidates only: a dataplane that caches answers asks
    /// [`Engine::handle_query`] for each and checks what it gets.
    pub fn answer_keys(&self) -> impl Iterator<Item = (&[u8], u16)> + '_ {
        const EXTRA: &[u16] = &[rtype::A, rtype::AAAA];
        self.local
            .exact_keys(EXTRA)
            .chain(self.auth.exact_keys(EXTRA))
    }

    /// The access-control list in force.
    pub fn acl(&self) -> &Acl {
        &self.acl
    }

    /// The general path alone, for differential testing of the hot path against it. Never
    /// rate limited.
    #[doc(hidden)]
    pub fn handle_query_general(&self, req: &Request, query: &[u8], out: &mut [u8]) -> Outcome {
        let acl = self.acl.check(req.src);
        let o = match acl {
            AclAction::Deny => Outcome::Drop {
                reason: DropReason::Acl,
                inform: false,
            },
            AclAction::Refuse => general::refuse(self, query, out),
            _ => general::handle(self, req, acl, query, out, &mut general::Meta::default()),
        };
        match o {
            Outcome::Reply { len, mut info } => {
                info.qtype = wire::first_question(query).map_or(0, |(_, t, _)| t);
                Outcome::Reply { len, info }
            }
            d => d,
        }
    }

    /// Local zones first, then authoritative zones (Unbound's order).
    #[inline]
    pub(crate) fn find(&self, lower: &[u8], qtype: u16) -> Found<'_> {
        self.find_hashed(lower, store::name_hash(lower), qtype)
    }

    /// [`Engine::find`] with the name's [`store::name_hash`] computed once for both trees.
    #[inline(always)]
    fn find_hashed(&self, lower: &[u8], hash: u64, qtype: u16) -> Found<'_> {
        for tree in [&self.local, &self.auth] {
            match tree.lookup_hashed(lower, hash, qtype) {
                None | Some(AnsRef::NOT_LOCAL) => continue,
                Some(AnsRef::DROP) => return Found::Drop { inform: false },
                Some(AnsRef::DROP_INFORM) => return Found::Drop { inform: true },
                Some(r) => {
                    if let Some(a) = tree.answer(r) {
                        return Found::Answer(a);
                    }
                }
            }
        }
        Found::NotLocal
    }

    /// The qtypes with data at this name, for RFC 8482 ANY handling.
    pub(crate) fn first_positive_type(&self, lower: &[u8]) -> Option<u16> {
        // Prefer the types clients asking ANY usually want (RFC 8482 §4.1 lets us pick).
        const PREF: [u16; 6] = [
            rtype::A,
            rtype::AAAA,
            rtype::MX,
            rtype::TXT,
            rtype::CNAME,
            rtype::NS,
        ];
        PREF.into_iter().find(|&t| match self.find(lower, t) {
            Found::Answer(a) => {
                a.flags & flags::RCODE_MASK == 0
                    && a.counts[..2] != [0, 0]
                    && self.answer_owner_type(&a) == Some(t)
            }
            _ => false,
        })
    }

    fn answer_owner_type(&self, a: &Answer<'_>) -> Option<u16> {
        // The first answer record's type sits after its owner (always a 2-byte pointer to
        // the question in answers to the query name).
        (a.tail.len() >= 4 && a.tail[0] & 0xc0 == 0xc0)
            .then(|| u16::from_be_bytes([a.tail[2], a.tail[3]]))
    }

    /// A name outside local data that is not resolved here (no forward or stub zone, or a
    /// client that may not have it resolved, [`resolvable`]): REFUSED, as from Unbound (or
    /// drop for `deny_non_local`).
    pub(crate) fn not_local(
        &self,
        q: &Query<'_>,
        acl: AclAction,
        out: &mut [u8],
        hot: bool,
    ) -> Outcome {
        if acl == AclAction::DenyNonLocal {
            return Outcome::Drop {
                reason: DropReason::NonLocal,
                inform: false,
            };
        }
        let f = flags::QR | self.ra_flag() | u16::from(rcode::REFUSED);
        self.emit_header_only(q, acl, f, out, hot)
    }

    pub(crate) fn ra_flag(&self) -> u16 {
        if self.config.recursion_available {
            flags::RA
        } else {
            0
        }
    }

    /// Copies a compiled answer behind the query's header and question.
    pub(crate) fn emit(
        &self,
        q: &Query<'_>,
        acl: AclAction,
        a: &Answer<'_>,
        transport: Transport,
        out: &mut [u8],
        hot: bool,
    ) -> Outcome {
        let question = q.question();
        let head = HEADER_LEN + question.len();
        let opt = if q.edns.is_some() { OPT_RR_LEN } else { 0 };
        let limit = self.size_limit(q, transport).min(out.len());
        let full = head + a.tail.len() + opt;
        let (tail_len, counts, tc) = if full <= limit {
            let mut c = [0u8; 6];
            c.copy_from_slice(a.counts);
            (a.tail.len(), c, false)
        } else {
            a.truncate(limit.saturating_sub(head + opt))
        };
        let len = head + tail_len + opt;
        if len > out.len() {
            return Outcome::Drop {
                reason: DropReason::Buffer,
                inform: a.inform,
            };
        }
        let mut f = a.flags | (q.flags() & (flags::RD | flags::CD));
        if acl == AclAction::AllowSetRd {
            f |= flags::RD;
        }
        if tc {
            f |= flags::TC;
        }
        out[0..2].copy_from_slice(&q.id().to_be_bytes());
        wire::put16(out, 2, f);
        wire::put16(out, 4, 1);
        out[6..12].copy_from_slice(&counts);
        if opt != 0 {
            let ar = wire::be16(out, 10).saturating_add(1);
            wire::put16(out, 10, ar);
        }
        out[HEADER_LEN..head].copy_from_slice(question);
        out[head..head + tail_len].copy_from_slice(&a.tail[..tail_len]);
        for (off, ptr) in a.patches(q.qname().len()) {
            if off + 2 <= tail_len {
                wire::put16(out, head + off, ptr);
            }
        }
        if let Some(e) = q.edns {
            wire::write_opt(
                out,
                head + tail_len,
                self.config.edns_buffer_size,
                0,
                e.dnssec_ok,
            );
        }
        Outcome::Reply {
            len,
            info: ReplyInfo {
                rcode: f & flags::RCODE_MASK,
                hot,
                truncated: tc,
                inform: a.inform,
                qtype: q.qtype,
                slipped: false,
                rrl_would: None,
                cached: false,
                refresh: false,
            },
        }
    }

    /// A reply with no records: header, question, OPT.
    pub(crate) fn emit_header_only(
        &self,
        q: &Query<'_>,
        acl: AclAction,
        f: u16,
        out: &mut [u8],
        hot: bool,
    ) -> Outcome {
        let empty = Answer::empty(f);
        match self.emit(q, acl, &empty, Transport::Tcp, out, hot) {
            Outcome::Reply { len, mut info } => {
                info.rcode = f & flags::RCODE_MASK;
                Outcome::Reply { len, info }
            }
            d => d,
        }
    }

    /// The reply size limit this query gets over `transport` (512 when the query does not
    /// parse). Dataplanes with fixed-size buffers use it to tell a truncation due to the
    /// client's limit from one due to their buffer.
    pub fn reply_limit(&self, query: &[u8], transport: Transport) -> usize {
        match Query::parse(query) {
            Ok(q) => self.size_limit(&q, transport),
            Err(_) => 512,
        }
    }

    /// Largest reply: 65535 over TCP; over UDP 512 without EDNS, else the client's size
    /// (at least 512, RFC 6891 §6.2.5) capped by `max-udp-size`.
    pub(crate) fn size_limit(&self, q: &Query<'_>, transport: Transport) -> usize {
        match (transport, q.edns) {
            (Transport::Tcp, _) => wire::MAX_MESSAGE_LEN,
            (Transport::Udp, None) => 512,
            (Transport::Udp, Some(e)) => {
                usize::from(e.udp_size.max(512).min(self.config.max_udp_size.max(512)))
            }
        }
    }
}

/// Whether a question outside local data may be resolved for a client with this access:
/// `allow` only with RD=1 (Unbound refuses cache snooping), `allow_snoop` always,
/// `allow_setrd` always (it sets RD); `*_non_local` never.
#[inline]
fn resolvable(acl: AclAction, query_flags: u16) -> bool {
    match acl {
        AclAction::Allow => query_flags & flags::RD != 0,
        AclAction::AllowSnoop | AclAction::AllowSetRd => true,
        _ => false,
    }
}

/// The hot path takes class IN, EDNS version 0, and ordinary qtypes. ANY (RFC 8482), zone
/// transfers and the meta-types OPT, TKEY, TSIG, MAILA, MAILB go to the general path.
#[inline]
fn is_hot(q: &Query<'_>) -> bool {
    q.qclass == class::IN
        && q.edns.is_none_or(|e| e.version == 0)
        && !matches!(q.qtype, rtype::OPT | 249..=255)
}

/// The general path reaches the tables through this interface only.
impl Tables for Engine {
    fn config(&self) -> &EngineConfig {
        Engine::config(self)
    }

    fn find(&self, lower: &[u8], qtype: u16) -> Found<'_> {
        Engine::find(self, lower, qtype)
    }

    fn first_positive_type(&self, lower: &[u8]) -> Option<u16> {
        Engine::first_positive_type(self, lower)
    }

    fn emit(
        &self,
        q: &Query<'_>,
        acl: AclAction,
        a: &Answer<'_>,
        transport: Transport,
        out: &mut [u8],
        hot: bool,
    ) -> Outcome {
        Engine::emit(self, q, acl, a, transport, out, hot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_rr;
    use alloc::vec;

    fn engine() -> Engine {
        let mut b = EngineBuilder::new();
        b.local_zone(
            WireName::parse("example.", None).unwrap(),
            LocalZoneType::Static,
        );
        for l in [
            "example. 3600 IN SOA ns.example. host.example. 1 3600 600 86400 300",
            "www.example. 300 IN A 198.18.0.1",
            "www.example. 300 IN AAAA fd00::1",
        ] {
            b.local_data(parse_rr(l, None, 3600).unwrap(), 0);
        }
        for i in 0..60 {
            b.local_data(
                parse_rr(
                    &alloc::format!("big.example. 300 IN A 198.18.1.{i}"),
                    None,
                    3600,
                )
                .unwrap(),
                0,
            );
        }
        b.build().unwrap()
    }

    fn query(name: &str, qtype: u16, edns: Option<(u16, bool)>) -> Vec<u8> {
        let mut p = vec![
            0xab,
            0xcd,
            0x01,
            0x00,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            u8::from(edns.is_some()),
        ];
        p.extend_from_slice(WireName::parse(name, None).unwrap().as_bytes());
        p.extend_from_slice(&qtype.to_be_bytes());
        p.extend_from_slice(&[0, 1]);
        if let Some((size, d)) = edns {
            p.extend_from_slice(&[0, 0, 0x29]);
            p.extend_from_slice(&size.to_be_bytes());
            p.extend_from_slice(&[0, 0, if d { 0x80 } else { 0 }, 0, 0, 0]);
        }
        p
    }

    const LOCAL: Request = Request {
        src: core::net::IpAddr::V4(core::net::Ipv4Addr::LOCALHOST),
        transport: Transport::Udp,
        now: 0,
    };

    #[test]
    fn hot_path_answers_with_case_echo_and_edns() {
        let e = engine();
        let q = query("WwW.ExAmple.", rtype::A, Some((4096, true)));
        let mut out = [0u8; 1500];
        let Outcome::Reply { len, info } = e.handle_query(&LOCAL, &q, &mut out) else {
            panic!()
        };
        assert!(info.hot);
        let r = &out[..len];
        assert_eq!(&r[..4], &[0xab, 0xcd, 0x85, 0x80]); // QR AA RD RA
        assert_eq!(&r[4..12], &[0, 1, 0, 1, 0, 0, 0, 1]);
        assert_eq!(&r[12..12 + 13], b"\x03WwW\x07ExAmple\x00");
        // OPT echoes DO and advertises 1232.
        assert_eq!(
            &r[len - 11..],
            b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00"
        );
    }

    #[test]
    fn an_unavailable_auth_zone_answers_servfail_and_general_agrees() {
        let mut b = EngineBuilder::new();
        b.unavailable_auth_zone(WireName::parse("secondary.example.", None).unwrap());
        let e = b.build().unwrap();
        for name in ["secondary.example.", "www.Secondary.example."] {
            let q = query(name, rtype::A, Some((1232, false)));
            let mut out = [0u8; 512];
            let Outcome::Reply { len, .. } = e.handle_query(&LOCAL, &q, &mut out) else {
                panic!()
            };
            let mut general = [0u8; 512];
            let Outcome::Reply { len: glen, .. } = e.handle_query_general(&LOCAL, &q, &mut general)
            else {
                panic!()
            };
            let r = &out[..len];
            assert_eq!(r[3] & 0xf, 2, "{name}: SERVFAIL");
            assert_eq!(r[2] & 0x04, 0, "{name}: not authoritative");
            assert_eq!(&r[6..10], &[0, 0, 0, 0], "{name}: no records");
            assert_eq!(
                crate::testing::compare_replies(r, &general[..glen]),
                Ok(()),
                "{name}"
            );
        }
    }

    #[test]
    fn truncation_without_edns_and_tcp() {
        let e = engine();
        let q = query("big.example.", rtype::A, None);
        let mut out = [0u8; 65535];
        let Outcome::Reply { len, info } = e.handle_query(&LOCAL, &q, &mut out) else {
            panic!()
        };
        assert!(info.truncated);
        assert!(len <= 512);
        assert_eq!(out[2] & 0x02, 0x02);
        assert_eq!(&out[6..8], &[0, 0]);
        let tcp = Request {
            transport: Transport::Tcp,
            ..LOCAL
        };
        let Outcome::Reply { len, info } = e.handle_query(&tcp, &q, &mut out) else {
            panic!()
        };
        assert!(!info.truncated);
        assert_eq!(&out[6..8], &[0, 60]);
        assert_eq!(len, 12 + 17 + 60 * 16);
        // EDNS 4096 but max-udp-size 1232: fits (990 bytes).
        let q = query("big.example.", rtype::A, Some((4096, false)));
        let Outcome::Reply { info, .. } = e.handle_query(&LOCAL, &q, &mut out) else {
            panic!()
        };
        assert!(!info.truncated);
    }

    #[test]
    fn refused_outside_zones_and_acl() {
        let e = engine();
        let q = query("elsewhere.", rtype::A, None);
        let mut out = [0u8; 512];
        let Outcome::Reply { info, .. } = e.handle_query(&LOCAL, &q, &mut out) else {
            panic!()
        };
        assert_eq!(info.rcode, 5);
        let far = Request {
            src: "198.18.0.9".parse().unwrap(),
            transport: Transport::Udp,
            now: 0,
        };
        let Outcome::Reply { info, .. } =
            e.handle_query(&far, &query("www.example.", 1, None), &mut out)
        else {
            panic!()
        };
        assert_eq!(info.rcode, 5);
    }
}
