//! What to believe of an upstream reply.
//!
//! A reply is read against the question that was asked and the zone it was asked in (the
//! `forward-zone`/`stub-zone` name: the bailiwick, [`Bailiwick`]). The bailiwick is the
//! names whose most specific configured zone is the one asked: a more specific
//! `forward-zone`/`stub-zone` below it (`corp.` under `.`) is cut out, its names are its
//! own upstreams' to answer. Only what answers the question is kept, as Unbound's scrubber
//! (`iterator/iter_scrub.c`) and RFC 2181 §5.4.1 want:
//!
//! - the answer section is followed from the question name: the RRset of the asked type
//!   at the current name, or a CNAME there (the chain goes on at its target), or a DNAME
//!   above it (RFC 6672: a CNAME is synthesised from it and the chain goes on). Every
//!   other answer record is dropped. A chain that reaches a name outside the bailiwick
//!   stops there: what follows in the reply is dropped and the caller resolves that name
//!   through its own zone; so does a NOERROR chain that ends at a name the reply has
//!   neither data nor an SOA for (the upstream did not follow it). A CNAME question
//!   below a DNAME is answered by the DNAME and the CNAME synthesised from it;
//! - the authority section keeps only the SOA of a negative answer, when its owner is an
//!   ancestor of the last name of the chain inside the bailiwick (RFC 2308 §3); NS records
//!   and everything else there, and the additional section, are dropped (the answers we
//!   send are minimal, as Unbound's `minimal-responses: yes` default), except the
//!   addresses of the name servers of an NS answer ([`ns_addresses`]), which Unbound
//!   sends too;
//! - records of another class than the question's are dropped.
//!
//! The result says what the reply is (answer, NODATA, NXDOMAIN, a chain to follow
//! elsewhere, or unusable) with the RRsets to cache.

use alloc::vec::Vec;

use skua_engine::name::is_subdomain;
use skua_engine::rr::rtype;

use crate::msg::{Message, Record};
use crate::rrset::{Rank, RrSet, group};

/// Longest CNAME/DNAME chain followed (Unbound restarts a query at most 8 times for
/// CNAMEs before it gives up: `MAX_RESTART_COUNT`).
pub const MAX_CHAIN: usize = 8;

/// What a reply turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Data for the question (possibly at the end of a chain).
    Answer {
        /// The chain's CNAMEs (synthesised from DNAMEs where needed) and the final RRset(s), in order.
        answer: Vec<RrSet>,
    },
    /// The name exists (at the end of the chain) with no data of the type (RFC 2308 §2.2).
    NoData {
        /// The chain, if any.
        answer: Vec<RrSet>,
        /// The SOA that gives the negative TTL, if the reply had a usable one.
        soa: Option<RrSet>,
    },
    /// The name at the end of the chain does not exist (RFC 2308 §2.1).
    NxDomain {
        /// The chain, if any.
        answer: Vec<RrSet>,
        /// The SOA, if usable.
        soa: Option<RrSet>,
    },
    /// The chain leaves the zone: resolve `target` (lower case) elsewhere and append.
    Chain {
        /// The in-bailiwick part of the chain.
        answer: Vec<RrSet>,
        /// The next name to resolve.
        target: Vec<u8>,
    },
    /// A referral, a reply that answers another question, or nothing usable: the
    /// upstream is lame for this question.
    Lame,
}

/// The names an upstream of one zone speaks for: those under [`Bailiwick::zone`] but under
/// none of [`Bailiwick::cuts`], the configured zones below it (each resolved by its own
/// upstreams). Stricter than Unbound, whose scrubber keeps every name under the zone of
/// the delegation point asked (a `.` forwarder speaks for all names, those of a more
/// specific forward or stub zone included): here those names come from their own zone's
/// upstreams only, whatever a reply of the outer zone carries.
#[derive(Clone, Copy, Debug)]
pub struct Bailiwick<'a> {
    /// The zone asked, lower-cased wire name.
    pub zone: &'a [u8],
    /// The configured zones strictly below it, lower-cased wire names.
    pub cuts: &'a [Vec<u8>],
}

impl<'a> Bailiwick<'a> {
    /// All of `zone`: no zone configured below it.
    pub fn whole(zone: &'a [u8]) -> Self {
        Bailiwick { zone, cuts: &[] }
    }

    /// Whether `name` (lower case) is this zone's: under it and under none of the cuts.
    pub fn holds(&self, name: &[u8]) -> bool {
        is_subdomain(name, self.zone) && !self.cuts.iter().any(|c| is_subdomain(name, c))
    }

    /// Whether a question for `name` (lower case) of type `qtype` is this zone's: for DS,
    /// the parent's name decides (DS lives on the parent side of a zone cut, RFC 4035
    /// §2.4), as the forwarder picks the zone of a question.
    pub fn holds_question(&self, name: &[u8], qtype: u16) -> bool {
        match name.first() {
            Some(&len) if qtype == rtype::DS && len != 0 => {
                self.holds(name.get(1 + usize::from(len)..).unwrap_or(b"\x00"))
            }
            _ => self.holds(name),
        }
    }
}

/// The asked question: lower-cased name, type, class.
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    /// Lower-cased wire name.
    pub name: &'a [u8],
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
}

fn lower(n: &[u8]) -> Vec<u8> {
    n.to_ascii_lowercase()
}

/// A DNAME at `owner` -> `target` applied to `sname` (RFC 6672 §2.2): the new name, or
/// `None` when the result would be too long (the answer is then YXDOMAIN's case).
fn substitute(sname: &[u8], owner: &[u8], target: &[u8]) -> Option<Vec<u8>> {
    let keep = sname.len() - owner.len();
    let mut n = Vec::with_capacity(keep + target.len());
    n.extend_from_slice(&sname[..keep]);
    n.extend_from_slice(target);
    (n.len() <= skua_engine::name::MAX_NAME_LEN).then_some(n)
}

/// Reads a reply (already matched to the question) asked in zone `zone` (lower case), with
/// no other zone configured below it: [`scrub_in`] with [`Bailiwick::whole`].
pub fn scrub(m: &Message, asked: Asked<'_>, zone: &[u8]) -> Verdict {
    scrub_in(m, asked, &Bailiwick::whole(zone))
}

/// Reads a reply (already matched to the question) asked of an upstream of `bw.zone`.
pub fn scrub_in(m: &Message, asked: Asked<'_>, bw: &Bailiwick<'_>) -> Verdict {
    let aa = m.flags & 0x0400 != 0;
    let rcode = m.rcode();
    let in_class = |r: &&Record| r.class == asked.qclass;
    let answers: Vec<Record> = m.answer.iter().filter(in_class).cloned().collect();
    let rank = Rank::of(0, aa);
    let sets = group(&answers, rank);

    let mut chain: Vec<RrSet> = Vec::new();
    let mut sname = asked.name.to_vec();
    let mut steps = 0usize;
    let mut final_sets: Vec<RrSet> = Vec::new();
    loop {
        if !bw.holds_question(&sname, asked.qtype) {
            // Out of the bailiwick: what the upstream says about this name is not ours to
            // believe (RFC 2181 §5.4.1); resolve it in its own zone. That includes a name
            // of a zone configured below the one asked (`www.corp.` in a reply of `.`'s
            // upstream when `corp.` has upstreams of its own): the chain ends there and
            // corp.'s upstreams are asked.
            return if chain.is_empty() {
                Verdict::Lame
            } else {
                Verdict::Chain {
                    answer: chain,
                    target: sname,
                }
            };
        }
        let here = |s: &&RrSet| s.owner.eq_ignore_ascii_case(&sname);
        // A DNAME above the current name (RFC 6672 §3.2: it wins over a CNAME at the name,
        // which a correct zone cannot have anyway).
        let dname = sets.iter().find(|s| {
            s.rtype == rtype::DNAME
                && s.owner.len() < sname.len()
                && is_subdomain(&sname, &lower(&s.owner))
                && bw.holds(&lower(&s.owner))
                && s.rdatas.len() == 1
        });
        // The CNAME synthesised from it (RFC 6672 §3.1), TTL of the DNAME.
        let synthesise = |d: &RrSet| -> Option<RrSet> {
            let target = substitute(&sname, &lower(&d.owner), &d.rdatas[0])?;
            Some(RrSet {
                owner: sname.clone(),
                rtype: rtype::CNAME,
                class: asked.qclass,
                ttl: d.ttl,
                rdatas: alloc::vec![target],
                rank,
            })
        };
        if asked.qtype == rtype::CNAME
            && let Some(d) = dname
        {
            // A CNAME question below a DNAME: the answer is the DNAME and the CNAME
            // synthesised from it, not that CNAME alone (RFC 6672 §3.1).
            let Some(cname) = synthesise(d) else {
                return Verdict::Lame;
            };
            chain.push(d.clone());
            final_sets.push(cname);
            break;
        }
        if asked.qtype == rtype::ANY {
            final_sets.extend(
                sets.iter()
                    .filter(here)
                    .filter(|s| s.rtype != rtype::CNAME)
                    .cloned(),
            );
            if !final_sets.is_empty() {
                break;
            }
        } else if let Some(s) = sets.iter().filter(here).find(|s| s.rtype == asked.qtype) {
            final_sets.push(s.clone());
            break;
        }
        if asked.qtype == rtype::CNAME {
            break;
        }
        let next = if let Some(d) = dname {
            let Some(cname) = synthesise(d) else {
                return Verdict::Lame;
            };
            let target = cname.rdatas[0].clone();
            chain.push(d.clone());
            chain.push(cname);
            target
        } else if let Some(c) = sets
            .iter()
            .filter(here)
            .find(|s| s.rtype == rtype::CNAME && s.rdatas.len() == 1)
        {
            chain.push(c.clone());
            c.rdatas[0].clone()
        } else {
            break;
        };
        steps += 1;
        if steps > MAX_CHAIN {
            return Verdict::Lame;
        }
        sname = lower(&next);
        if sname == asked.name
            || chain
                .iter()
                .any(|c| c.rtype == rtype::CNAME && lower(&c.owner) == sname)
        {
            // A loop.
            return Verdict::Lame;
        }
    }

    let soa = || {
        let auth: Vec<Record> = m
            .authority
            .iter()
            .filter(|r| r.class == asked.qclass && r.rtype == rtype::SOA)
            .cloned()
            .collect();
        group(&auth, Rank::of(1, aa)).into_iter().find(|s| {
            let o = lower(&s.owner);
            s.rdatas.len() == 1 && is_subdomain(&sname, &o) && bw.holds(&o)
        })
    };
    match rcode {
        0 if !final_sets.is_empty() => {
            chain.extend(final_sets);
            Verdict::Answer { answer: chain }
        }
        0 => {
            // NOERROR with nothing for the question. A referral (NS in authority, no SOA,
            // no chain) means the upstream is not a recursive server for this name.
            let soa = soa();
            let referral = chain.is_empty()
                && soa.is_none()
                && m.authority.iter().any(|r| r.rtype == rtype::NS);
            if referral {
                Verdict::Lame
            } else if !chain.is_empty() && soa.is_none() {
                // The chain stops at a name the reply says nothing more about: no data and
                // no SOA. The upstream did not follow it (an authoritative server that does
                // not hold the target's zone, or a forwarder that gave up): resolve the
                // target, as Unbound does (`iter_resptype.c`: a CNAME response, the query
                // restarts at the target). A NODATA after a chain carries the SOA of the
                // target's zone.
                Verdict::Chain {
                    answer: chain,
                    target: sname,
                }
            } else {
                Verdict::NoData { answer: chain, soa }
            }
        }
        3 => Verdict::NxDomain {
            answer: chain,
            soa: soa(),
        },
        _ => Verdict::Lame,
    }
}

/// The addresses of the name servers in `ns` (an NS RRset answering an NS question) that
/// the reply carried in its additional section: A and AAAA RRsets owned by one of the NS
/// targets, inside the bailiwick `bw` (RFC 2181 §5.4.1), in the reply's order. Unbound
/// sends them with a positive NS answer even with `minimal-responses: yes`
/// (`positive_answer` in `util/data/msgencode.c`: "for priming queries, type NS, include
/// addresses"); every other answer stays minimal.
pub fn ns_addresses(m: &Message, ns: &RrSet, bw: &Bailiwick<'_>) -> Vec<RrSet> {
    let aa = m.flags & 0x0400 != 0;
    let wanted = |r: &&Record| {
        (r.rtype == rtype::A || r.rtype == rtype::AAAA)
            && r.class == ns.class
            && bw.holds(&lower(&r.owner))
            && ns.rdatas.iter().any(|t| t.eq_ignore_ascii_case(&r.owner))
    };
    let records: Vec<Record> = m.additional.iter().filter(wanted).cloned().collect();
    group(&records, Rank::of(2, aa))
}

/// The negative TTL an SOA gives (RFC 2308 §5): the smaller of its TTL and MINIMUM.
pub fn negative_ttl(soa: &RrSet) -> u32 {
    let rd = &soa.rdatas[0];
    let min = rd
        .len()
        .checked_sub(4)
        .and_then(|at| rd.get(at..))
        .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    soa.ttl.min(min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn rec(owner: &[u8], rt: u16, ttl: u32, rd: &[u8]) -> Record {
        Record {
            owner: owner.to_vec(),
            rtype: rt,
            class: 1,
            ttl,
            rdata: rd.to_vec(),
        }
    }

    const WWW: &[u8] = b"\x03www\x07example\x00";
    const EX: &[u8] = b"\x07example\x00";
    const ROOT: &[u8] = b"\x00";

    fn soa_rd(minimum: u32) -> Vec<u8> {
        let mut v = b"\x02ns\x07example\x00\x05admin\x07example\x00".to_vec();
        for x in [1u32, 2, 3, 4, minimum] {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v
    }

    fn msg(
        rcode: u16,
        answer: Vec<Record>,
        authority: Vec<Record>,
        additional: Vec<Record>,
    ) -> Message {
        Message {
            id: 1,
            flags: 0x8180 | rcode,
            question: None,
            answer,
            authority,
            additional,
            opt: None,
        }
    }

    fn asked(name: &[u8], qtype: u16) -> Asked<'_> {
        Asked {
            name,
            qtype,
            qclass: 1,
        }
    }

    #[test]
    fn keeps_the_chain_drops_the_rest() {
        let m = msg(
            0,
            vec![
                rec(WWW, rtype::CNAME, 300, b"\x04host\x07example\x00"),
                rec(b"\x04host\x07example\x00", rtype::A, 60, &[192, 0, 2, 1]),
                rec(b"\x04host\x07example\x00", rtype::A, 90, &[192, 0, 2, 2]),
                // Unrelated: dropped.
                rec(b"\x04evil\x07example\x00", rtype::A, 60, &[6, 6, 6, 6]),
                rec(WWW, rtype::AAAA, 60, &[0; 16]),
            ],
            vec![rec(EX, rtype::NS, 300, b"\x04evil\x03net\x00")],
            vec![rec(b"\x04evil\x03net\x00", rtype::A, 300, &[6, 6, 6, 6])],
        );
        let Verdict::Answer { answer } = scrub(&m, asked(WWW, rtype::A), ROOT) else {
            panic!()
        };
        assert_eq!(answer.len(), 2);
        assert_eq!(answer[0].rtype, rtype::CNAME);
        assert_eq!(answer[1].rdatas.len(), 2);
        // RRset TTL = smallest record TTL.
        assert_eq!(answer[1].ttl, 60);
    }

    #[test]
    fn chain_leaving_the_zone_stops_at_the_border() {
        let m = msg(
            0,
            vec![
                rec(WWW, rtype::CNAME, 300, b"\x03cdn\x05other\x00"),
                rec(b"\x03cdn\x05other\x00", rtype::A, 60, &[6, 6, 6, 6]),
            ],
            vec![],
            vec![],
        );
        let v = scrub(&m, asked(WWW, rtype::A), EX);
        assert_eq!(
            v,
            Verdict::Chain {
                answer: vec![group(&m.answer[..1], Rank::AnswerNonAuth).remove(0)],
                target: b"\x03cdn\x05other\x00".to_vec()
            }
        );
        // Asked in "." the same reply is a whole answer.
        assert!(matches!(
            scrub(&m, asked(WWW, rtype::A), ROOT),
            Verdict::Answer { .. }
        ));
        // A reply about a name outside the zone at all: lame.
        let other = b"\x01x\x05other\x00";
        assert_eq!(scrub(&m, asked(other, rtype::A), EX), Verdict::Lame);
    }

    #[test]
    fn dname_synthesises_cname() {
        let m = msg(
            0,
            vec![
                rec(EX, rtype::DNAME, 100, b"\x07example\x03net\x00"),
                rec(
                    b"\x03www\x07example\x03net\x00",
                    rtype::A,
                    50,
                    &[192, 0, 2, 9],
                ),
            ],
            vec![],
            vec![],
        );
        let Verdict::Answer { answer } = scrub(&m, asked(WWW, rtype::A), ROOT) else {
            panic!()
        };
        assert_eq!(answer.len(), 3);
        assert_eq!(answer[1].rtype, rtype::CNAME);
        assert_eq!(answer[1].rdatas[0], b"\x03www\x07example\x03net\x00");
        assert_eq!(answer[1].ttl, 100);
    }

    #[test]
    fn negative_answers_and_their_soa() {
        let nx = msg(
            3,
            vec![],
            vec![rec(EX, rtype::SOA, 3600, &soa_rd(300))],
            vec![],
        );
        let Verdict::NxDomain { answer, soa } = scrub(&nx, asked(WWW, rtype::A), ROOT) else {
            panic!()
        };
        assert!(answer.is_empty());
        assert_eq!(negative_ttl(soa.as_ref().unwrap()), 300);
        // An SOA not above the name is not believed.
        let wrong = msg(
            3,
            vec![],
            vec![rec(b"\x05other\x00", rtype::SOA, 3600, &soa_rd(300))],
            vec![],
        );
        assert_eq!(
            scrub(&wrong, asked(WWW, rtype::A), ROOT),
            Verdict::NxDomain {
                answer: vec![],
                soa: None
            }
        );
        let nodata = msg(
            0,
            vec![],
            vec![rec(EX, rtype::SOA, 60, &soa_rd(300))],
            vec![],
        );
        let Verdict::NoData { soa, .. } = scrub(&nodata, asked(WWW, rtype::A), ROOT) else {
            panic!()
        };
        assert_eq!(negative_ttl(soa.as_ref().unwrap()), 60);
        // A referral from a forwarder: lame.
        let referral = msg(
            0,
            vec![],
            vec![rec(EX, rtype::NS, 60, b"\x02ns\x07example\x00")],
            vec![],
        );
        assert_eq!(scrub(&referral, asked(WWW, rtype::A), ROOT), Verdict::Lame);
        // SERVFAIL: lame.
        assert_eq!(
            scrub(&msg(2, vec![], vec![], vec![]), asked(WWW, rtype::A), ROOT),
            Verdict::Lame
        );
    }

    #[test]
    fn chain_without_data_or_soa_is_followed() {
        // An authoritative upstream asked in "." answers with a CNAME into a zone it does
        // not serve: nothing about the target, no SOA. The target must be resolved (a
        // NOERROR with the CNAME alone would be an incomplete answer).
        let target: &[u8] = b"\x03www\x07nowhere\x00";
        let m = msg(0, vec![rec(WWW, rtype::CNAME, 300, target)], vec![], vec![]);
        assert_eq!(
            scrub(&m, asked(WWW, rtype::A), ROOT),
            Verdict::Chain {
                answer: vec![group(&m.answer, Rank::AnswerNonAuth).remove(0)],
                target: target.to_vec()
            }
        );
        // With the SOA of the target's zone it is a NODATA after the chain.
        let nodata = msg(
            0,
            vec![rec(WWW, rtype::CNAME, 300, target)],
            vec![rec(b"\x07nowhere\x00", rtype::SOA, 60, &soa_rd(30))],
            vec![],
        );
        let Verdict::NoData { answer, soa } = scrub(&nodata, asked(WWW, rtype::A), ROOT) else {
            panic!()
        };
        assert_eq!(answer.len(), 1);
        assert!(soa.is_some());
        // The CNAME question itself is answered by the CNAME.
        assert!(matches!(
            scrub(&m, asked(WWW, rtype::CNAME), ROOT),
            Verdict::Answer { .. }
        ));
    }

    #[test]
    fn cname_question_below_a_dname_keeps_the_dname() {
        // RFC 6672 §3.1: the DNAME and the CNAME synthesised from it; the upstream's copy
        // of that CNAME is not the whole answer.
        let m = msg(
            0,
            vec![
                rec(EX, rtype::DNAME, 100, b"\x07example\x03net\x00"),
                rec(WWW, rtype::CNAME, 100, b"\x03www\x07example\x03net\x00"),
            ],
            vec![],
            vec![],
        );
        let Verdict::Answer { answer } = scrub(&m, asked(WWW, rtype::CNAME), ROOT) else {
            panic!()
        };
        assert_eq!(answer.len(), 2);
        assert_eq!(answer[0].rtype, rtype::DNAME);
        assert_eq!(answer[1].rtype, rtype::CNAME);
        assert_eq!(answer[1].owner, WWW);
        assert_eq!(answer[1].rdatas[0], b"\x03www\x07example\x03net\x00");
        assert_eq!(answer[1].ttl, 100);
    }

    #[test]
    fn ns_answer_keeps_in_bailiwick_addresses_of_its_targets() {
        let ns1: &[u8] = b"\x03ns1\x07example\x00";
        let ns2: &[u8] = b"\x03ns2\x05other\x00";
        let m = msg(
            0,
            vec![rec(EX, rtype::NS, 300, ns1), rec(EX, rtype::NS, 300, ns2)],
            vec![],
            vec![
                rec(b"\x03NS1\x07example\x00", rtype::A, 300, &[192, 0, 2, 1]),
                rec(
                    ns1,
                    rtype::AAAA,
                    300,
                    &[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                ),
                // Not a target, another type, out of the bailiwick: dropped.
                rec(b"\x03www\x07example\x00", rtype::A, 300, &[6, 6, 6, 6]),
                rec(ns1, rtype::TXT, 300, b"\x01x"),
                rec(ns2, rtype::A, 300, &[6, 6, 6, 7]),
            ],
        );
        let Verdict::Answer { answer } = scrub(&m, asked(EX, rtype::NS), EX) else {
            panic!()
        };
        let glue = ns_addresses(&m, &answer[0], &Bailiwick::whole(EX));
        assert_eq!(glue.len(), 2);
        assert_eq!((glue[0].rtype, glue[1].rtype), (rtype::A, rtype::AAAA));
        assert!(glue.iter().all(|g| g.rank == Rank::Additional));
        // Asked in ".", the other zone's server address is in the bailiwick too...
        assert_eq!(
            ns_addresses(&m, &answer[0], &Bailiwick::whole(ROOT)).len(),
            3
        );
        // ...unless other. is a zone of its own.
        let cuts = [b"\x05other\x00".to_vec()];
        let bw = Bailiwick {
            zone: ROOT,
            cuts: &cuts,
        };
        assert_eq!(ns_addresses(&m, &answer[0], &bw).len(), 2);
    }

    #[test]
    fn a_chain_ends_where_a_zone_configured_below_begins() {
        let corp: &[u8] = b"\x04corp\x00";
        let www_corp: &[u8] = b"\x03www\x04corp\x00";
        let cuts = [corp.to_vec()];
        let bw = Bailiwick {
            zone: ROOT,
            cuts: &cuts,
        };
        // ".": www.example. CNAME www.corp., www.corp. A, and an SOA and a DNAME of corp.
        let m = msg(
            0,
            vec![
                rec(WWW, rtype::CNAME, 300, www_corp),
                rec(www_corp, rtype::A, 300, &[6, 6, 6, 6]),
            ],
            vec![],
            vec![],
        );
        let Verdict::Chain { answer, target } = scrub_in(&m, asked(WWW, rtype::A), &bw) else {
            panic!("{:?}", scrub_in(&m, asked(WWW, rtype::A), &bw))
        };
        assert_eq!((answer.len(), &target[..]), (1, www_corp));
        // Without the cut, "." speaks for www.corp.
        assert!(matches!(
            scrub(&m, asked(WWW, rtype::A), ROOT),
            Verdict::Answer { .. }
        ));
        // A DNAME into corp.: the CNAME synthesised from it is the last link from ".".
        let m = msg(
            0,
            vec![
                rec(EX, rtype::DNAME, 300, corp),
                rec(www_corp, rtype::A, 300, &[6, 6, 6, 6]),
            ],
            vec![],
            vec![],
        );
        let Verdict::Chain { answer, target } = scrub_in(&m, asked(WWW, rtype::A), &bw) else {
            panic!()
        };
        assert_eq!(answer.len(), 2);
        assert_eq!(
            (answer[0].rtype, answer[1].rtype),
            (rtype::DNAME, rtype::CNAME)
        );
        assert_eq!(target, www_corp);
        // A DS question at the cut is the parent's: answered by ".", its SOA ".".
        let m = msg(
            0,
            vec![],
            vec![
                rec(ROOT, rtype::SOA, 300, &soa_rd(60)),
                rec(corp, rtype::SOA, 300, &soa_rd(60)),
            ],
            vec![],
        );
        let Verdict::NoData { soa: Some(soa), .. } = scrub_in(&m, asked(corp, rtype::DS), &bw)
        else {
            panic!()
        };
        assert_eq!(soa.owner, ROOT);
    }

    #[test]
    fn cname_loop_is_lame() {
        let m = msg(
            0,
            vec![
                rec(WWW, rtype::CNAME, 300, b"\x01a\x07example\x00"),
                rec(b"\x01a\x07example\x00", rtype::CNAME, 300, WWW),
            ],
            vec![],
            vec![],
        );
        assert_eq!(scrub(&m, asked(WWW, rtype::A), ROOT), Verdict::Lame);
    }
}
