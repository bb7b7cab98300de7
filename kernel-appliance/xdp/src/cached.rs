//! Cached answers for the XDP program: the resolver's answers it may send itself
//! (`XDP_TX`), TTLs counting down, without waking the AF_XDP worker.
//!
//! The recipe is the one of local answers ([`crate::answers`]) plus one step: each
//! record's TTL is written as its expiry minus the program's clock second (the engine's
//! [`skua_engine::patch_ttls`]), and from `valid_until` on (the answer's expiry, or its
//! prefetch point) the program leaves the question to the engine. [`compile`] builds a
//! recipe from what the cache holds and keeps it only when the engine's replies, at the
//! first and the last second the recipe is valid, are byte for byte what [`render_cached`]
//! (the recipe in Rust) builds; `tests/answers_bpf.rs` then checks the program against the
//! engine at several ages.
//!
//! What is never pushed: stale answers (fixed TTL, EDE), SERVFAIL and other error answers,
//! answers with an EDE, answers longer than 512 bytes with OPT, more than
//! [`CACHED_TTLS`] records, names longer than [`ANSWER_NAME_MAX`](crate::abi::ANSWER_NAME_MAX), answers valid for less
//! than two more seconds. Which names are pushed, and when they go, is the daemon's call.

use std::net::IpAddr;

use skua_engine::acl::AclAction;
use skua_engine::{AnswerCache, Cached, Engine, Outcome, Request, Transport};

use crate::abi::{
    ANSWER_MSG_MAX, ANSWER_TAIL_MAX, AnswerValue, CACHED_NO_TTL, CACHED_TTLS, CachedValue,
};
use crate::answers::{Edns, be16, clients_where, key, query, render};

const HEADER: usize = 12;
const OPT_LEN: usize = 11;
const RD: u16 = 0x0100;
const CD: u16 = 0x0010;

/// Why an answer is not pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Name longer than [`ANSWER_NAME_MAX`](crate::abi::ANSWER_NAME_MAX), reply longer than 512 bytes with OPT, or more
    /// than [`CACHED_TTLS`] records.
    TooLong,
    /// Stale, an error, an EDE, or a refresh pending: the engine must see each query.
    NotPlain,
    /// Valid for less than two more seconds.
    Expiring,
    /// No client may get it in the program (no `allow` or `allow_snoop` rule), or rate
    /// limiting is on.
    NoClient,
    /// The engine's reply does not follow the recipe on some query shape or second.
    NotReproducible,
}

/// Clients to check recipes with, found once per engine: one allowed to get cached
/// answers to queries with RD (the first, and the first of each family, for self-tests
/// against an address of that family), one (if any) without.
#[derive(Clone, Copy, Debug)]
pub struct Clients {
    rd: Option<IpAddr>,
    rd_v4: Option<IpAddr>,
    rd_v6: Option<IpAddr>,
    snoop: Option<IpAddr>,
}

impl Clients {
    /// The first usable source addresses of rules letting them get cached answers with RD
    /// (`allow`, `allow_snoop`) and of one letting it without (`allow_snoop`).
    pub fn of(engine: &Engine) -> Self {
        let rd = || {
            clients_where(engine, |a| {
                matches!(a, AclAction::Allow | AclAction::AllowSnoop)
            })
        };
        Clients {
            rd: rd().next(),
            rd_v4: rd().find(IpAddr::is_ipv4),
            rd_v6: rd().find(IpAddr::is_ipv6),
            snoop: clients_where(engine, |a| a == AclAction::AllowSnoop).next(),
        }
    }

    /// A client that gets cached answers to queries with RD, if any.
    pub fn with_rd(&self) -> Option<IpAddr> {
        self.rd
    }

    /// Such a client of one family (IPv6 or IPv4), if any.
    pub fn with_rd_of(&self, v6: bool) -> Option<IpAddr> {
        if v6 { self.rd_v6 } else { self.rd_v4 }
    }
}

/// The cache as the engine sees it, holding one answer (the one being compiled).
struct One<'a> {
    name: &'a [u8],
    qtype: u16,
    cached: Cached<'a>,
}

impl AnswerCache for One<'_> {
    fn lookup<R>(
        &self,
        lower: &[u8],
        _: u64,
        qtype: u16,
        qclass: u16,
        _: u32,
        f: impl FnOnce(&Cached<'_>) -> R,
    ) -> Option<R> {
        (lower == self.name && qtype == self.qtype && qclass == 1).then(|| f(&self.cached))
    }
}

/// A query shape to check: ID, flags, name, EDNS, the client asking.
type Shape<'a> = (u16, u16, &'a [u8], Option<Edns<'a>>, Option<IpAddr>);

/// Builds the recipe of the cached answer `cached` for `name` (lower-cased wire form) and
/// `qtype`, answered by the program from second `now` until `valid_until` (exclusive),
/// and proves it against `engine` for `clients`.
pub fn compile(
    engine: &Engine,
    clients: &Clients,
    name: &[u8],
    qtype: u16,
    cached: &Cached<'_>,
    valid_until: u32,
    now: u32,
) -> Result<CachedValue, Skip> {
    let Some(rd_client) = clients.rd else {
        return Err(Skip::NoClient);
    };
    if engine.rrl().is_some() {
        return Err(Skip::NoClient);
    }
    let key = key(name, qtype).ok_or(Skip::TooLong)?;
    let rcode = cached.flags & 0x000f;
    if cached.fixed_ttl.is_some()
        || cached.ede.is_some()
        || cached.refresh
        || !(rcode == 0 || rcode == 3)
    {
        return Err(Skip::NotPlain);
    }
    if valid_until < now.saturating_add(2) {
        return Err(Skip::Expiring);
    }
    let tail = cached.tail;
    if tail.len() > ANSWER_TAIL_MAX
        || HEADER + name.len() + 4 + tail.len() + OPT_LEN > ANSWER_MSG_MAX
        || cached.ttls.len() / 6 > CACHED_TTLS
        || cached.counts.len() != 6
    {
        return Err(Skip::TooLong);
    }
    let mut value = CachedValue {
        key,
        valid_until,
        flags: cached.flags,
        ancount: be16(cached.counts, 0),
        nscount: be16(cached.counts, 2),
        arcount: be16(cached.counts, 4),
        // Cannot truncate: at most ANSWER_TAIL_MAX.
        tail_len: tail.len() as u16,
        edns_size: engine.config().edns_buffer_size,
        nttl: 0,
        pad: [0; 3],
        ttl_off: [CACHED_NO_TTL; CACHED_TTLS],
        ttl_exp: [valid_until; CACHED_TTLS],
        tail: [0; ANSWER_TAIL_MAX],
    };
    value.tail[..tail.len()].copy_from_slice(tail);
    for (i, t) in cached.ttls.chunks_exact(6).enumerate() {
        let off = u16::from_le_bytes([t[0], t[1]]);
        let exp = u32::from_le_bytes([t[2], t[3], t[4], t[5]]);
        // The program writes expiry - now unchecked: every expiry must outlast the recipe.
        if usize::from(off) + 4 > tail.len() || exp < valid_until {
            return Err(Skip::NotReproducible);
        }
        value.ttl_off[i] = off;
        value.ttl_exp[i] = exp;
        value.tail[usize::from(off)..usize::from(off) + 4].fill(0);
        // Cannot truncate: at most CACHED_TTLS entries (checked above).
        value.nttl = (i + 1) as u8;
    }
    let one = One {
        name,
        qtype,
        cached: Cached {
            refresh: false,
            ..*cached
        },
    };
    // A reply that follows the recipe fits ANSWER_MSG_MAX; a longer one is cut short by
    // the engine and then differs, which is the refusal wanted.
    let mut buf = [0u8; 2 * ANSWER_MSG_MAX];
    // The shapes a client sends (as for local answers), at the first and the last second
    // the recipe is used; without RD only when some client may snoop.
    let upper: Vec<u8> = name.iter().map(u8::to_ascii_uppercase).collect();
    let cookie = [0u8, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
    let shapes: [Shape<'_>; 4] = [
        (
            0xbeef,
            RD | CD | 0x0020,
            &upper,
            Some((1232, true, &[])),
            Some(rd_client),
        ),
        (0x0102, RD, name, None, Some(rd_client)),
        (
            0xfffe,
            RD,
            name,
            Some((512, false, &cookie)),
            Some(rd_client),
        ),
        (0x7e57, 0, &upper, Some((4096, false, &[])), clients.snoop),
    ];
    for at in [now, valid_until - 1] {
        for (id, f, n, edns, client) in shapes {
            let Some(src) = client else { continue };
            let q = query(id, f, n, qtype, edns);
            let req = Request {
                src,
                transport: Transport::Udp,
                now: at,
            };
            let got = match engine.handle_query_with(&req, &q, &mut buf, &one) {
                Outcome::Reply { len, .. } => &buf[..len],
                Outcome::Drop { .. } | Outcome::Resolve => return Err(Skip::NotReproducible),
            };
            if render_cached(&value, &q, at).as_deref() != Some(got) {
                return Err(Skip::NotReproducible);
            }
        }
    }
    Ok(value)
}

/// The program's recipe in Rust: the reply it builds from `value` for the DNS message
/// `query` at second `now`, or `None` where it leaves the query to the engine (the key
/// lookup and the client's access rule are the caller's business).
pub fn render_cached(value: &CachedValue, query: &[u8], now: u32) -> Option<Vec<u8>> {
    if now >= value.valid_until {
        return None;
    }
    let mut local = AnswerValue {
        flags: value.flags,
        ancount: value.ancount,
        nscount: value.nscount,
        arcount: value.arcount,
        tail_len: value.tail_len,
        edns_size: value.edns_size,
        tail_csum: 0,
        pad: 0,
        tail: value.tail,
    };
    for i in 0..usize::from(value.nttl).min(CACHED_TTLS) {
        let off = usize::from(value.ttl_off[i]);
        let ttl = value.ttl_exp[i].wrapping_sub(now);
        local
            .tail
            .get_mut(off..off + 4)?
            .copy_from_slice(&ttl.to_be_bytes());
    }
    render(&local, query)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skua_engine::EngineBuilder;
    use skua_engine::name::WireName;
    use skua_engine::rrl::ResponseClass;
    use skua_engine::text::parse_rr;

    fn engine(acl: &[(&str, AclAction)]) -> Engine {
        let mut b = EngineBuilder::new();
        for (nb, a) in acl {
            b.acl_mut().insert(nb.parse().unwrap(), *a);
        }
        b.config_mut().resolve = true;
        b.local_data(
            parse_rr("local.test. 60 IN A 198.18.0.1", None, 60).unwrap(),
            0,
        );
        b.build().unwrap()
    }

    fn wire(name: &str) -> Vec<u8> {
        WireName::parse(name, None).unwrap().as_bytes().to_vec()
    }

    /// A cached "name A 198.18.0.9" (ttl offset 6 in the record), expiring at `exp`.
    fn a_answer(exp: u32) -> (Vec<u8>, Vec<u8>) {
        // Owner: pointer to the question; type A, class IN, TTL 0, rdlength 4, address.
        let tail = vec![0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 198, 18, 0, 9];
        let mut ttls = 6u16.to_le_bytes().to_vec();
        ttls.extend_from_slice(&exp.to_le_bytes());
        (tail, ttls)
    }

    fn cached<'a>(tail: &'a [u8], ttls: &'a [u8], counts: &'a [u8]) -> Cached<'a> {
        Cached {
            flags: 0x8180,
            counts,
            bounds: &[],
            tail,
            ttls,
            fixed_ttl: None,
            ede: None,
            refresh: false,
            class: ResponseClass::Response,
        }
    }

    #[test]
    fn recipe_counts_ttls_down_and_matches_the_engine() {
        let e = engine(&[("198.18.0.0/15", AclAction::Allow)]);
        let clients = Clients::of(&e);
        assert!(clients.with_rd().is_some());
        // Self-tests need a client of the family of the address tried.
        assert!(clients.with_rd_of(false).is_some_and(|c| c.is_ipv4()));
        assert!(clients.with_rd_of(true).is_none_or(|c| c.is_ipv6()));
        let name = wire("www.example.");
        let (tail, ttls) = a_answer(1300);
        let counts = [0, 1, 0, 0, 0, 0];
        let c = cached(&tail, &ttls, &counts);
        let v = compile(&e, &clients, &name, 1, &c, 1300, 1000).expect("compiles");
        assert_eq!((v.nttl, v.ttl_off[0], v.ttl_exp[0]), (1, 6, 1300));
        assert_eq!(v.ttl_off[1], CACHED_NO_TTL);
        let q = query(7, RD, &name, 1, None);
        for (now, ttl) in [(1000u32, 300u32), (1150, 150), (1299, 1)] {
            let r = render_cached(&v, &q, now).unwrap();
            let at = r.len() - 4 - 2 - 4;
            assert_eq!(r[at..at + 4], ttl.to_be_bytes(), "at {now}");
        }
        assert!(render_cached(&v, &q, 1300).is_none(), "expired");
    }

    #[test]
    fn what_is_not_pushed() {
        let e = engine(&[("198.18.0.0/15", AclAction::Allow)]);
        let clients = Clients::of(&e);
        let name = wire("www.example.");
        let (tail, ttls) = a_answer(1300);
        let counts = [0, 1, 0, 0, 0, 0];
        let c = cached(&tail, &ttls, &counts);
        let stale = Cached {
            fixed_ttl: Some(30),
            ede: Some(3),
            ..c
        };
        assert_eq!(
            compile(&e, &clients, &name, 1, &stale, 1300, 1000),
            Err(Skip::NotPlain)
        );
        let servfail = Cached { flags: 0x8182, ..c };
        assert_eq!(
            compile(&e, &clients, &name, 1, &servfail, 1300, 1000),
            Err(Skip::NotPlain)
        );
        assert_eq!(
            compile(&e, &clients, &name, 1, &c, 1001, 1000),
            Err(Skip::Expiring)
        );
        // An expiry before valid_until would count below zero in the program.
        assert_eq!(
            compile(&e, &clients, &name, 1, &c, 1400, 1000),
            Err(Skip::NotReproducible)
        );
        // Local data wins in the engine: the recipe is not what it sends.
        assert_eq!(
            compile(&e, &clients, &wire("local.test."), 1, &c, 1300, 1000),
            Err(Skip::NotReproducible)
        );
        // 17 records.
        let mut many = Vec::new();
        let mut many_ttls = Vec::new();
        for i in 0..17u16 {
            many.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 198, 18, 0, i as u8]);
            many_ttls.extend_from_slice(&(i * 16 + 6).to_le_bytes());
            many_ttls.extend_from_slice(&1300u32.to_le_bytes());
        }
        let counts17 = [0, 17, 0, 0, 0, 0];
        let c17 = cached(&many, &many_ttls, &counts17);
        assert_eq!(
            compile(&e, &clients, &name, 1, &c17, 1300, 1000),
            Err(Skip::TooLong)
        );
        // No client may get cached answers: allow_setrd and refuse only.
        let e2 = engine(&[("198.18.0.0/15", AclAction::AllowSetRd)]);
        let mut b = EngineBuilder::new();
        *b.acl_mut() = skua_engine::acl::Acl::empty();
        b.acl_mut()
            .insert("0.0.0.0/0".parse().unwrap(), AclAction::AllowSetRd);
        let e3 = b.build().unwrap();
        assert!(Clients::of(&e3).with_rd().is_none());
        assert_eq!(
            compile(&e3, &Clients::of(&e3), &name, 1, &c, 1300, 1000),
            Err(Skip::NoClient)
        );
        // Default rules (127.0.0.0/8 allow) are still there in e2.
        assert!(Clients::of(&e2).with_rd().is_some());
    }
}
