//! Precompiled answers for the XDP program: the replies it may send itself (`XDP_TX`),
//! without waking the AF_XDP worker.
//!
//! The program (`answer()` in `bpf/skua_xdp.bpf.c`) builds a reply from a map entry by a
//! fixed recipe (see `bpf/skua_xdp_abi.h`): the query's ID, RD and CD bits and question, then
//! the entry's flags, counts and record bytes, then an OPT record when the query had one.
//! [`compile`] asks the engine for each candidate answer and keeps it only when the engine's
//! own reply follows that recipe, checked on several query shapes (case, flags, EDNS with and
//! without DO and options): [`render`] is the recipe in Rust and must reproduce the engine's
//! bytes exactly. `tests/bpf_prog.rs` then checks the program against the engine on frames.
//!
//! What is never precompiled: replies that depend on the client (inform zones, REFUSED,
//! which `deny_non_local` turns into a drop), replies that could be truncated (everything
//! longer than 512 bytes with OPT), names longer than [`ANSWER_NAME_MAX`], and clients whose
//! access-control rule is anything but allow, allow_snoop, deny_non_local or
//! refuse_non_local (the [`MAP_ACL`](crate::abi::MAP_ACL) trie says so per prefix).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv6Addr};

use skua_engine::acl::AclAction;
use skua_engine::{Engine, Outcome, Request, Transport};

use crate::abi::{
    ANSWER_MSG_MAX, ANSWER_NAME_MAX, ANSWER_TAIL_MAX, AclKey, AnswerKey, AnswerValue,
};

const HEADER: usize = 12;
const OPT_LEN: usize = 11;
const RD: u16 = 0x0100;
const CD: u16 = 0x0010;
const RCODE_NOERROR: u16 = 0;
const RCODE_NXDOMAIN: u16 = 3;

/// Whether a client with this access-control action gets the same local answer as any
/// other allowed client (so the program may answer it).
pub fn answerable(action: AclAction) -> bool {
    matches!(
        action,
        AclAction::Allow
            | AclAction::AllowSnoop
            | AclAction::DenyNonLocal
            | AclAction::RefuseNonLocal
    )
}

/// The [`MAP_ACL`](crate::abi::MAP_ACL) value for a client with this access-control
/// action: which answers the program may send it. Local answers as [`answerable`] says;
/// cached answers as the engine's `resolvable()`: with RD for `allow` and `allow_snoop`,
/// without RD for `allow_snoop` only. Never for `allow_setrd` (the engine sets RD in its
/// reply, the program would not) nor for the `*_non_local` actions (no resolution).
pub fn acl_bits(action: AclAction) -> u8 {
    let mut bits = 0;
    if answerable(action) {
        bits |= crate::abi::ACL_LOCAL;
    }
    if matches!(action, AclAction::Allow | AclAction::AllowSnoop) {
        bits |= crate::abi::ACL_CACHED_RD;
    }
    if action == AclAction::AllowSnoop {
        bits |= crate::abi::ACL_CACHED;
    }
    bits
}

/// What [`compile`] produced.
#[derive(Debug, Default)]
pub struct Compiled {
    /// The answer map's entries.
    pub answers: Vec<(AnswerKey, AnswerValue)>,
    /// The ACL trie's entries ([`acl_bits`]).
    pub acl: Vec<(AclKey, u8)>,
    /// Candidates left to the engine, by reason.
    pub skipped: Skipped,
}

/// Why candidates were left out.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    /// Name longer than [`ANSWER_NAME_MAX`] or reply longer than 512 bytes with OPT.
    pub too_long: usize,
    /// Dropped, logged (inform), REFUSED or another client-dependent reply.
    pub client_dependent: usize,
    /// The engine's reply does not follow the program's recipe on some query shape.
    pub not_reproducible: usize,
    /// Beyond the map's capacity.
    pub over_capacity: usize,
}

/// Compiles the answer map and the ACL trie for `engine`, at most `capacity` answers.
///
/// No answers at all when no access-control rule lets anyone get them, nor when the engine
/// rate-limits responses (the program cannot: every query must reach the engine, and asking
/// the engine for each answer here would charge its rate-limiting accounts).
pub fn compile(engine: &Engine, capacity: usize) -> Compiled {
    let mut out = Compiled {
        acl: engine
            .acl()
            .rules()
            .map(|(addr, prefix, action)| {
                (
                    AclKey {
                        prefixlen: u32::from(prefix),
                        addr: addr.to_be_bytes(),
                    },
                    acl_bits(action),
                )
            })
            .collect(),
        ..Compiled::default()
    };
    if engine.rrl().is_some() {
        return out;
    }
    // The answer does not depend on which allowed client asks; one of them asks for all.
    let Some(client) = answerable_clients(engine).next() else {
        return out;
    };
    let req = Request {
        src: client,
        transport: Transport::Udp,
        now: 0,
    };
    let mut seen = HashSet::new();
    let mut buf = vec![0u8; 65535];
    for (name, qtype) in engine.answer_keys() {
        if !seen.insert((name, qtype)) {
            continue;
        }
        if name.len() > ANSWER_NAME_MAX {
            out.skipped.too_long += 1;
            continue;
        }
        if out.answers.len() >= capacity {
            out.skipped.over_capacity += 1;
            continue;
        }
        match entry(engine, &req, name, qtype, &mut buf) {
            Ok(e) => out.answers.push(e),
            Err(Skip::TooLong) => out.skipped.too_long += 1,
            Err(Skip::ClientDependent) => out.skipped.client_dependent += 1,
            Err(Skip::NotReproducible) => out.skipped.not_reproducible += 1,
        }
    }
    out
}

enum Skip {
    TooLong,
    ClientDependent,
    NotReproducible,
}

fn to_ip(addr: u128) -> IpAddr {
    let v6 = Ipv6Addr::from(addr);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

fn entry(
    engine: &Engine,
    req: &Request,
    name: &[u8],
    qtype: u16,
    buf: &mut [u8],
) -> Result<(AnswerKey, AnswerValue), Skip> {
    let q = query(0, 0, name, qtype, None);
    let reply = match engine.handle_query(req, &q, buf) {
        Outcome::Reply { len, info } if !info.inform && !info.truncated => &buf[..len],
        _ => return Err(Skip::ClientDependent),
    };
    let head = HEADER + name.len() + 4;
    let flags = be16(reply, 2);
    let rcode = flags & 0x000f;
    if rcode != RCODE_NOERROR && rcode != RCODE_NXDOMAIN {
        return Err(Skip::ClientDependent);
    }
    let tail = reply.get(head..).ok_or(Skip::NotReproducible)?;
    if tail.len() > ANSWER_TAIL_MAX || head + tail.len() + OPT_LEN > ANSWER_MSG_MAX {
        return Err(Skip::TooLong);
    }
    let mut value = AnswerValue {
        flags,
        ancount: be16(reply, 6),
        nscount: be16(reply, 8),
        arcount: be16(reply, 10),
        // Cannot truncate: at most ANSWER_TAIL_MAX.
        tail_len: tail.len() as u16,
        edns_size: engine.config().edns_buffer_size,
        tail_csum: crate::abi::tail_csum(tail),
        pad: 0,
        tail: [0; ANSWER_TAIL_MAX],
    };
    value.tail[..tail.len()].copy_from_slice(tail);
    let key = key(name, qtype).ok_or(Skip::TooLong)?;
    // The shapes a client sends: other IDs and case, RD/CD/AD set, EDNS with and without
    // DO, with a cookie option. The engine must give exactly what the program would.
    let upper: Vec<u8> = name.iter().map(u8::to_ascii_uppercase).collect();
    let mixed: Vec<u8> = name
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if i % 2 == 0 {
                b.to_ascii_uppercase()
            } else {
                *b
            }
        })
        .collect();
    let cookie = [0u8, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
    let shapes: [(u16, u16, &[u8], Option<Edns<'_>>); 4] = [
        (0xbeef, RD | CD | 0x0020, &upper, Some((1232, true, &[]))),
        (0x0102, RD, &mixed, None),
        (0xfffe, 0x0400, name, Some((512, false, &cookie))),
        (0x7e57, RD, &upper, Some((4096, false, &[]))),
    ];
    for (id, f, n, edns) in shapes {
        let q = query(id, f, n, qtype, edns);
        let got = match engine.handle_query(req, &q, buf) {
            Outcome::Reply { len, .. } => &buf[..len],
            Outcome::Drop { .. } | Outcome::Resolve => return Err(Skip::NotReproducible),
        };
        if render(&value, &q).as_deref() != Some(got) {
            return Err(Skip::NotReproducible);
        }
    }
    Ok((key, value))
}

/// The program's key for a lower-cased wire name and type, if the name fits.
pub fn key(name: &[u8], qtype: u16) -> Option<AnswerKey> {
    if name.is_empty() || name.len() > ANSWER_NAME_MAX {
        return None;
    }
    let mut key = AnswerKey {
        qtype,
        // Cannot truncate: at most ANSWER_NAME_MAX.
        name_len: name.len() as u8,
        pad: 0,
        name: [0; ANSWER_NAME_MAX],
    };
    key.name[..name.len()].copy_from_slice(name);
    Some(key)
}

/// The question of a DNS message as the program reads it: the wire name (uncompressed,
/// case as sent, root label included), QTYPE and QCLASS; `None` for anything else.
pub fn question(q: &[u8]) -> Option<(&[u8], u16, u16)> {
    let mut pos = HEADER;
    loop {
        let l = usize::from(*q.get(pos)?);
        if l > 63 {
            return None;
        }
        pos += l + 1;
        if l == 0 {
            break;
        }
    }
    let t = q.get(pos..pos + 4)?;
    Some((q.get(HEADER..pos)?, be16(t, 0), be16(t, 2)))
}

/// EDNS of a test query: payload size, DO, option bytes.
pub type Edns<'a> = (u16, bool, &'a [u8]);

/// A query: header with `id` and `flags`, one question (`name` in wire form, class IN),
/// and an OPT record (payload size, DO, option bytes) when `edns` is given.
pub fn query(id: u16, flags: u16, name: &[u8], qtype: u16, edns: Option<Edns<'_>>) -> Vec<u8> {
    let mut q = Vec::with_capacity(HEADER + name.len() + 4 + OPT_LEN + 16);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&flags.to_be_bytes());
    q.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, u8::from(edns.is_some())]);
    q.extend_from_slice(name);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    if let Some((size, dnssec_ok, options)) = edns {
        q.extend_from_slice(&[0, 0, 41]);
        q.extend_from_slice(&size.to_be_bytes());
        q.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0]);
        // Cannot truncate: test options are short.
        q.extend_from_slice(&(options.len() as u16).to_be_bytes());
        q.extend_from_slice(options);
    }
    q
}

/// The program's recipe in Rust: the reply it builds from `value` for the DNS message
/// `query`, or `None` where it would leave the query to the engine. (The key lookup is the
/// caller's business: `value` is taken to be the entry for this name and type.)
pub fn render(value: &AnswerValue, query: &[u8]) -> Option<Vec<u8>> {
    if query.len() < HEADER + 5 || query.len() > ANSWER_MSG_MAX {
        return None;
    }
    // QR, opcode, TC clear; QDCOUNT 1, AN/NS 0, AR at most 1.
    if query[2] & 0xfa != 0 || query[4..10] != [0, 1, 0, 0, 0, 0] || query[10] != 0 {
        return None;
    }
    let ar = query[11];
    if ar > 1 {
        return None;
    }
    let mut pos = HEADER;
    loop {
        let l = usize::from(*query.get(pos)?);
        if l == 0 {
            break;
        }
        if l > 63 {
            return None;
        }
        pos += l + 1;
        if pos >= HEADER + ANSWER_NAME_MAX {
            return None;
        }
    }
    let qend = pos + 1;
    if qend + 4 > query.len() || query[qend + 2..qend + 4] != [0, 1] {
        return None;
    }
    let mut opt = None;
    if ar == 1 {
        let p = qend + 4;
        let rr = query.get(p..p + OPT_LEN)?;
        if rr[0..3] != [0, 0, 41] || rr[6] != 0 {
            return None;
        }
        let rdlen = usize::from(be16(rr, 9));
        let options = query.get(p + OPT_LEN..p + OPT_LEN + rdlen)?;
        if rdlen != 0 && (rdlen < 4 || 4 + usize::from(be16(options, 2)) != rdlen) {
            return None;
        }
        opt = Some(rr[7] & 0x80 != 0);
    }
    let tail = value.tail.get(..usize::from(value.tail_len))?;
    let len = qend + 4 + tail.len() + if opt.is_some() { OPT_LEN } else { 0 };
    if len > ANSWER_MSG_MAX {
        return None;
    }
    let mut r = Vec::with_capacity(len);
    r.extend_from_slice(&query[0..2]);
    let flags = value.flags | (be16(query, 2) & (RD | CD));
    r.extend_from_slice(&flags.to_be_bytes());
    r.extend_from_slice(&[0, 1]);
    r.extend_from_slice(&value.ancount.to_be_bytes());
    r.extend_from_slice(&value.nscount.to_be_bytes());
    r.extend_from_slice(&(value.arcount + u16::from(opt.is_some())).to_be_bytes());
    r.extend_from_slice(&query[HEADER..qend + 4]);
    r.extend_from_slice(tail);
    if let Some(dnssec_ok) = opt {
        r.extend_from_slice(&[0, 0, 41]);
        r.extend_from_slice(&value.edns_size.to_be_bytes());
        r.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
    }
    Some(r)
}

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// An address of the family asked for (IPv6 or IPv4) that `engine` lets get answers in
/// the program. For self-tests.
pub fn allowed_client(engine: &Engine, v6: bool) -> Option<IpAddr> {
    answerable_clients(engine).find(|ip| ip.is_ipv6() == v6)
}

/// The first address of every rule whose client may get answers in the program, most
/// specific rule first. The action is checked on the address itself: a more specific rule
/// of another kind may cover the first address of a block.
///
/// Only addresses a query may come from: the program and `skua-fastpath` never answer an
/// unspecified, broadcast or multicast source (`Drop::NotUnicastSource`), so a self-test
/// frame from one would fail. For a block whose first address is unspecified (`0.0.0.0/0`,
/// `::/0`) the second one is taken.
fn answerable_clients(engine: &Engine) -> impl Iterator<Item = IpAddr> + '_ {
    clients_where(engine, answerable)
}

/// The first usable source address of every rule whose action passes `ok` and whose address
/// itself gets such an action (see [`answerable_clients`]).
pub(crate) fn clients_where(
    engine: &Engine,
    ok: fn(AclAction) -> bool,
) -> impl Iterator<Item = IpAddr> + '_ {
    engine
        .acl()
        .rules()
        .filter(move |r| ok(r.2))
        .filter_map(|(addr, prefix, _)| {
            let second = (prefix < 128).then(|| addr.wrapping_add(1));
            [Some(addr), second]
                .into_iter()
                .flatten()
                .map(to_ip)
                .find(|ip| can_be_source(*ip))
        })
        .filter(move |ip| ok(engine.acl().check(*ip)))
}

/// False for a source skua-fastpath refuses to answer (its `never_unicast`): IPv4 0.0.0.0
/// and 224.0.0.0 up, IPv6 `::` and ff00::/8.
fn can_be_source(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => !a.is_unspecified() && a.octets()[0] < 224,
        IpAddr::V6(a) => !a.is_unspecified() && !a.is_multicast(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skua_engine::EngineBuilder;
    use skua_engine::acl::Netblock;
    use skua_engine::localzone::LocalZoneType;
    use skua_engine::name::WireName;
    use skua_engine::text::parse_rr;

    fn engine(acl: &[(&str, AclAction)]) -> Engine {
        let mut b = EngineBuilder::new();
        for (nb, a) in acl {
            b.acl_mut().insert(nb.parse::<Netblock>().unwrap(), *a);
        }
        b.local_zone(
            WireName::parse("example.", None).unwrap(),
            LocalZoneType::Static,
        );
        b.local_zone(
            WireName::parse("log.example.", None).unwrap(),
            LocalZoneType::Inform,
        );
        for l in [
            "example. 3600 IN SOA ns.example. host.example. 1 3600 600 86400 300",
            "www.example. 300 IN A 198.18.0.1",
            "www.example. 300 IN AAAA fd00::1",
            "big.example. 300 IN TXT \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
            "x.log.example. 300 IN A 198.18.0.2",
        ] {
            b.local_data(parse_rr(l, None, 3600).unwrap(), 0);
        }
        b.build().unwrap()
    }

    fn key(name: &str, qtype: u16) -> (Vec<u8>, u16) {
        (
            WireName::parse(name, None).unwrap().as_bytes().to_vec(),
            qtype,
        )
    }

    fn find<'a>(c: &'a Compiled, name: &str, qtype: u16) -> Option<&'a AnswerValue> {
        let (n, t) = key(name, qtype);
        c.answers
            .iter()
            .find(|(k, _)| k.qtype == t && k.name[..usize::from(k.name_len)] == n[..])
            .map(|(_, v)| v)
    }

    #[test]
    fn compiles_positive_nodata_and_nxdomain_answers() {
        let e = engine(&[]);
        let c = compile(&e, 1000);
        let a = find(&c, "www.example.", 1).expect("www A");
        assert_eq!((a.ancount, a.nscount, a.arcount), (1, 0, 0));
        assert_eq!(a.flags & 0x8400, 0x8400, "QR and AA");
        // NODATA for MX is not a candidate (not in the table), A and AAAA are everywhere.
        let soa_nodata = find(&c, "example.", 1).expect("apex A (NODATA)");
        assert_eq!((soa_nodata.ancount, soa_nodata.nscount), (0, 1));
        assert!(find(&c, "www.example.", 15).is_none());
        // Too long: a 500-byte TXT answer plus OPT exceeds 512.
        assert!(find(&c, "big.example.", 16).is_none());
        assert!(c.skipped.too_long >= 1);
        // Inform zones log the client: never answered in the program.
        assert!(find(&c, "x.log.example.", 1).is_none());
        assert!(c.skipped.client_dependent >= 1);
        assert_eq!(c.skipped.not_reproducible, 0);
    }

    #[test]
    fn nothing_is_compiled_when_the_engine_rate_limits() {
        use skua_engine::rrl::{Rrl, RrlConfig};
        let mut e = engine(&[]);
        assert!(!compile(&e, 1000).answers.is_empty());
        let rrl = std::sync::Arc::new(Rrl::new(
            RrlConfig {
                responses_per_second: 1,
                ..RrlConfig::default()
            },
            1,
        ));
        e.set_rrl(Some(rrl.clone()));
        let c = compile(&e, 1000);
        assert!(c.answers.is_empty());
        assert_eq!(rrl.accounts(), 0, "compiling charged no account");
    }

    #[test]
    fn every_answer_reproduces_the_engine() {
        let e = engine(&[]);
        let c = compile(&e, 1000);
        let req = Request {
            src: allowed_client(&e, false).unwrap(),
            transport: Transport::Udp,
            now: 0,
        };
        let mut buf = vec![0u8; 4096];
        for (k, v) in &c.answers {
            let name = &k.name[..usize::from(k.name_len)];
            for edns in [
                None,
                Some((4096, true, &[][..])),
                Some((1400, false, &[0u8, 10, 0, 0][..])),
            ] {
                let q = query(0x4242, RD, name, k.qtype, edns);
                let Outcome::Reply { len, .. } = e.handle_query(&req, &q, &mut buf) else {
                    panic!("engine dropped a precompiled query");
                };
                assert_eq!(render(v, &q).unwrap(), &buf[..len]);
            }
        }
    }

    #[test]
    fn render_declines_what_the_program_declines() {
        let e = engine(&[]);
        let c = compile(&e, 1000);
        let v = find(&c, "www.example.", 1).unwrap();
        let name = WireName::parse("www.example.", None).unwrap();
        let ok = query(1, RD, name.as_bytes(), 1, None);
        assert!(render(v, &ok).is_some());
        for (at, val) in [
            (2usize, 0x80u8),
            (2, 0x08),
            (2, 0x02),
            (5, 2),
            (7, 1),
            (9, 1),
            (11, 2),
        ] {
            let mut q = ok.clone();
            q[at] |= val;
            assert!(render(v, &q).is_none(), "byte {at} |= {val:#x}");
        }
        // Class CH, EDNS version 1, two options, an option overrunning RDLEN.
        let mut ch = ok.clone();
        let n = ch.len();
        ch[n - 1] = 3;
        assert!(render(v, &ch).is_none());
        let mut v1 = query(1, 0, name.as_bytes(), 1, Some((512, false, &[])));
        let n = v1.len();
        v1[n - 5] = 1;
        assert!(render(v, &v1).is_none());
        let two = query(
            1,
            0,
            name.as_bytes(),
            1,
            Some((512, false, &[0, 10, 0, 0, 0, 12, 0, 0])),
        );
        assert!(render(v, &two).is_none());
        let over = query(1, 0, name.as_bytes(), 1, Some((512, false, &[0, 10, 0, 9])));
        assert!(render(v, &over).is_none());
        // A compression pointer in the question.
        let mut ptr = ok[..12].to_vec();
        ptr.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
        assert!(render(v, &ptr).is_none());
    }

    #[test]
    fn acl_trie_mirrors_the_rules() {
        let e = engine(&[
            ("198.18.0.0/15", AclAction::Allow),
            ("198.18.5.0/24", AclAction::Refuse),
            ("fd00::/8", AclAction::DenyNonLocal),
            ("fd00:1::/32", AclAction::AllowSetRd),
        ]);
        let c = compile(&e, 10);
        let get = |p: &str| {
            let mut one = skua_engine::acl::Acl::empty();
            one.insert(p.parse::<Netblock>().unwrap(), AclAction::Allow);
            let (addr, prefix, _) = one.rules().next().unwrap();
            c.acl
                .iter()
                .find(|(k, _)| k.prefixlen == u32::from(prefix) && k.addr == addr.to_be_bytes())
                .map(|(_, v)| *v)
        };
        // Local answers (1) and cached answers to RD queries (2) for allow; no cached
        // answers for deny_non_local and allow_setrd; nothing for refuse.
        assert_eq!(get("198.18.0.0/15"), Some(3));
        assert_eq!(get("198.18.5.0/24"), Some(0));
        assert_eq!(get("fd00::/8"), Some(1));
        assert_eq!(get("fd00:1::/32"), Some(0));
        // Unbound's defaults are there too: 0.0.0.0/0 refuse, 127.0.0.0/8 allow.
        assert_eq!(get("0.0.0.0/0"), Some(0));
        assert_eq!(get("127.0.0.0/8"), Some(3));
        assert_eq!(acl_bits(AclAction::AllowSnoop), 7);
        assert_eq!(acl_bits(AclAction::RefuseNonLocal), 1);
        assert!(!c.answers.is_empty());
    }

    #[test]
    fn nothing_without_an_allowed_client() {
        let mut b = EngineBuilder::new();
        *b.acl_mut() = skua_engine::acl::Acl::empty();
        b.acl_mut()
            .insert("0.0.0.0/0".parse().unwrap(), AclAction::AllowSetRd);
        b.local_data(parse_rr("a.test. 60 IN A 198.18.0.1", None, 60).unwrap(), 0);
        let e = b.build().unwrap();
        let c = compile(&e, 10);
        assert!(c.answers.is_empty());
        assert_eq!(c.acl.len(), 1);
    }

    #[test]
    fn self_test_clients_can_be_sources() {
        let mut b = EngineBuilder::new();
        *b.acl_mut() = skua_engine::acl::Acl::empty();
        for nb in ["0.0.0.0/0", "::/0", "224.0.0.0/4", "ff00::/8"] {
            b.acl_mut().insert(nb.parse().unwrap(), AclAction::Allow);
        }
        b.local_data(parse_rr("a.test. 60 IN A 198.18.0.1", None, 60).unwrap(), 0);
        let e = b.build().unwrap();
        // The first address of 0.0.0.0/0 and ::/0 is no source: the second one is taken.
        assert_eq!(allowed_client(&e, false), Some("0.0.0.1".parse().unwrap()));
        assert_eq!(allowed_client(&e, true), Some("::1".parse().unwrap()));
        // Multicast blocks give no client at all.
        assert!(answerable_clients(&e).all(can_be_source));
        assert!(!compile(&e, 10).answers.is_empty());
        // A probe from that client is answered by the fast path.
        let q = query(1, RD, b"\x01a\x04test\x00", 1, None);
        let mut f = vec![0u8; 512];
        let len = skua_fastpath::build_udp_frame(
            &mut f,
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            None,
            std::net::SocketAddr::new(allowed_client(&e, false).unwrap(), 5353),
            "198.18.0.53:53".parse().unwrap(),
            &q,
        )
        .unwrap();
        let mut scratch = vec![0u8; 512];
        assert!(matches!(
            skua_fastpath::handle_frame(&e, 0, &mut f, len, &mut scratch),
            skua_fastpath::Verdict::Reply { .. }
        ));
    }

    #[test]
    fn capacity_is_respected() {
        let e = engine(&[]);
        let c = compile(&e, 2);
        assert_eq!(c.answers.len(), 2);
        assert!(c.skipped.over_capacity > 0);
    }
}
