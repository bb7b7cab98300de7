//! Transfer responses: the records of an AXFR (RFC 5936 §2.2) or IXFR (RFC 1995 §4), cut
//! into messages and signed one by one.
//!
//! [`Records`] is what to send, in order: the whole zone between two copies of its SOA, the
//! diffs of an IXFR between two copies of the current SOA, or the current SOA alone.
//! [`Responder`] yields the messages: each up to [`MESSAGE_TARGET`] bytes (a record larger
//! than that gets a message of its own, up to 65535 bytes), the question in the first one
//! only, every message TSIG-signed when the request was (RFC 8945 §5.3.1).

use alloc::vec::Vec;

use skua_engine::name::WireName;
use skua_engine::rr::Rr;

use crate::tsig::{self, StreamSigner};
use crate::wire::{self, MessageWriter, Section, flags};
use crate::zone::{Diff, Version};

/// Bytes of records per message before a new one starts (BIND's and NSD's choice is
/// 16 KiB: small enough for the client to process as it arrives, large enough to amortise
/// headers and signatures).
pub const MESSAGE_TARGET: usize = 16 * 1024;

/// The records of a transfer, in the order they are sent.
#[derive(Clone, Debug)]
pub enum Records<'a> {
    /// AXFR, or an IXFR answered with the whole zone: SOA, every record, SOA.
    Full(&'a Version),
    /// IXFR (RFC 1995 §4): current SOA, then for each diff its old SOA, removed records,
    /// new SOA, added records; then the current SOA.
    Incremental {
        /// The current version's SOA.
        current: &'a Rr,
        /// The diffs, oldest first.
        diffs: Vec<&'a Diff>,
    },
    /// The client is up to date (RFC 1995 §2): the current SOA alone.
    UpToDate(&'a Rr),
}

impl<'a> Records<'a> {
    /// The records, in order.
    pub fn iter(&self) -> alloc::boxed::Box<dyn Iterator<Item = &'a Rr> + Send + 'a> {
        match self {
            Records::Full(v) => {
                let v: &'a Version = v;
                alloc::boxed::Box::new(v.iter().chain(core::iter::once(v.soa())))
            }
            Records::Incremental { current, diffs } => {
                let current: &'a Rr = current;
                let diffs = diffs.clone();
                alloc::boxed::Box::new(
                    core::iter::once(current)
                        .chain(diffs.into_iter().flat_map(|d| {
                            core::iter::once(&d.from)
                                .chain(d.removed.iter())
                                .chain(core::iter::once(&d.to))
                                .chain(d.added.iter())
                        }))
                        .chain(core::iter::once(current)),
                )
            }
            Records::UpToDate(soa) => {
                let soa: &'a Rr = soa;
                alloc::boxed::Box::new(core::iter::once(soa))
            }
        }
    }

    /// How many records go out.
    pub fn count(&self) -> usize {
        match self {
            Records::Full(v) => v.records().len() + 2,
            Records::Incremental { diffs, .. } => {
                2 + diffs
                    .iter()
                    .map(|d| 2 + d.removed.len() + d.added.len())
                    .sum::<usize>()
            }
            Records::UpToDate(_) => 1,
        }
    }
}

/// The question a transfer answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The request's ID.
    pub id: u16,
    /// The name as the client wrote it (its case is echoed).
    pub name: WireName,
    /// AXFR or IXFR.
    pub qtype: u16,
    /// Class (IN).
    pub qclass: u16,
    /// The request's RD bit (RFC 5936 §2.2.1: copied).
    pub rd: bool,
}

/// Yields the messages of a transfer.
pub struct Responder<'a> {
    question: Question,
    records: core::iter::Peekable<alloc::boxed::Box<dyn Iterator<Item = &'a Rr> + Send + 'a>>,
    signer: Option<StreamSigner<'a>>,
    first: bool,
    failed: bool,
}

impl core::fmt::Debug for Responder<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Responder")
            .field("question", &self.question)
            .field("signed", &self.signer.is_some())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl<'a> Responder<'a> {
    /// A responder for `records`, signing with `signer` when the request was signed.
    pub fn new(
        question: Question,
        records: &Records<'a>,
        signer: Option<StreamSigner<'a>>,
    ) -> Self {
        Responder {
            question,
            records: records.iter().peekable(),
            signer,
            first: true,
            failed: false,
        }
    }

    /// True when a record could not be sent (larger than a message can hold): the stream
    /// ended early, without its closing SOA, and the client will discard it.
    pub fn failed(&self) -> bool {
        self.failed
    }

    fn header_flags(&self) -> u16 {
        flags::QR | flags::AA | if self.question.rd { flags::RD } else { 0 }
    }
}

impl Iterator for Responder<'_> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        if self.failed || (!self.first && self.records.peek().is_none()) {
            return None;
        }
        let reserve = self
            .signer
            .as_ref()
            .map_or(0, |s| tsig::record_len(s.key()));
        let mut w = MessageWriter::new(self.question.id, self.header_flags());
        if self.first {
            w.question(
                &self.question.name,
                self.question.qtype,
                self.question.qclass,
            );
        }
        let empty_len = w.len();
        while let Some(rr) = self.records.peek() {
            if w.try_rr(Section::Answer, rr, MESSAGE_TARGET - reserve) {
                self.records.next();
                continue;
            }
            // Does not fit: next message, unless this one is empty, when it may grow up to
            // the largest message.
            if w.len() == empty_len {
                if w.try_rr(Section::Answer, rr, wire::MAX_MESSAGE_LEN - reserve) {
                    self.records.next();
                } else {
                    self.failed = true;
                    return None;
                }
            }
            break;
        }
        self.first = false;
        let mut msg = w.finish();
        if let Some(s) = &mut self.signer {
            s.sign(&mut msg);
        }
        Some(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsig::{Algorithm, Key, StreamVerifier};
    use crate::wire::{counts, read_owned_rr, read_question};
    use alloc::format;
    use alloc::string::ToString;
    use alloc::vec;
    use skua_engine::text::parse_rr;

    fn zone(n: usize) -> Version {
        let apex = WireName::parse("example.", None).unwrap();
        let mut recs = vec![
            parse_rr(
                "example. 3600 IN SOA ns.example. admin.example. 9 3600 600 86400 300",
                None,
                0,
            )
            .unwrap(),
        ];
        for i in 0..n {
            recs.push(
                parse_rr(
                    &format!(
                        "host{i}.example. 300 IN TXT \"record number {i} with some padding text\""
                    ),
                    None,
                    0,
                )
                .unwrap(),
            );
        }
        Version::new(&apex, recs).unwrap()
    }

    fn question() -> Question {
        Question {
            id: 77,
            name: WireName::parse("EXAMPLE.", None).unwrap(),
            qtype: 252,
            qclass: 1,
            rd: false,
        }
    }

    /// Reads back the records of a message stream.
    fn records(msgs: &[Vec<u8>]) -> Vec<Rr> {
        let mut out = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            let [qd, an, _, _] = counts(m).unwrap();
            assert_eq!(qd, u16::from(i == 0), "question in the first message only");
            let mut off = wire::HEADER_LEN;
            if qd == 1 {
                let (name, qt, _, o) = read_question(m, off).unwrap();
                assert_eq!((name.to_string().as_str(), qt), ("EXAMPLE.", 252));
                off = o;
            }
            for _ in 0..an {
                let (r, o) = read_owned_rr(m, off).unwrap();
                out.push(r);
                off = o;
            }
        }
        out
    }

    #[test]
    fn axfr_is_soa_records_soa_in_bounded_messages() {
        let z = zone(2000);
        let recs = Records::Full(&z);
        let msgs: Vec<Vec<u8>> = Responder::new(question(), &recs, None).collect();
        assert!(msgs.len() > 3, "{} messages", msgs.len());
        assert!(msgs.iter().all(|m| m.len() <= MESSAGE_TARGET));
        let got = records(&msgs);
        assert_eq!(got.len(), recs.count());
        assert_eq!(got.first(), Some(z.soa()));
        assert_eq!(got.last(), Some(z.soa()));
        assert_eq!(&got[1..got.len() - 1], z.records());
        for m in &msgs {
            assert_eq!(u16::from_be_bytes([m[0], m[1]]), 77);
            assert_eq!(u16::from_be_bytes([m[2], m[3]]), flags::QR | flags::AA);
        }
    }

    #[test]
    fn every_message_is_signed_and_verifies_as_a_stream() {
        let key = Key::new(
            &WireName::parse("k.", None).unwrap(),
            Algorithm::HmacSha256,
            b"0123456789abcdef".to_vec(),
        );
        let z = zone(1500);
        let recs = Records::Full(&z);
        let request_mac = [7u8; 32];
        let signer = StreamSigner::new(&key, &request_mac, 1000);
        let msgs: Vec<Vec<u8>> = Responder::new(question(), &recs, Some(signer)).collect();
        assert!(msgs.len() > 2);
        let mut v = StreamVerifier::new(&key, &request_mac);
        for m in &msgs {
            assert!(m.len() <= MESSAGE_TARGET);
            assert_eq!(v.verify(m, 1001), Ok(true));
        }
        // Out of order: the second message does not verify first.
        let mut v = StreamVerifier::new(&key, &request_mac);
        assert!(v.verify(&msgs[1], 1001).is_err());
    }

    #[test]
    fn ixfr_layout_and_up_to_date() {
        let a = zone(3);
        let mut recs = a.records().to_vec();
        recs.remove(1);
        recs.push(parse_rr("new.example. 60 IN A 198.18.0.9", None, 0).unwrap());
        recs.push(a.soa().clone());
        let b = Version::new(a.apex(), recs).unwrap().with_serial(10);
        let d = Diff::between(&a, &b);
        let r = Records::Incremental {
            current: b.soa(),
            diffs: vec![&d],
        };
        let msgs: Vec<Vec<u8>> = Responder::new(question(), &r, None).collect();
        let got = records(&msgs);
        let mut want = vec![b.soa().clone(), a.soa().clone()];
        want.extend(d.removed.iter().cloned());
        want.push(b.soa().clone());
        want.extend(d.added.iter().cloned());
        want.push(b.soa().clone());
        assert_eq!(got, want);
        assert_eq!(got.len(), r.count());

        let r = Records::UpToDate(b.soa());
        let msgs: Vec<Vec<u8>> = Responder::new(question(), &r, None).collect();
        assert_eq!(records(&msgs), vec![b.soa().clone()]);
    }

    #[test]
    fn a_record_too_large_for_any_message_ends_the_stream_marked_failed() {
        let apex = WireName::parse("example.", None).unwrap();
        let soa = parse_rr(
            "example. 3600 IN SOA ns.example. admin.example. 9 3600 600 86400 300",
            None,
            0,
        )
        .unwrap();
        let big = Rr {
            owner: WireName::parse("big.example.", None).unwrap(),
            rtype: 65280,
            class: 1,
            ttl: 1,
            rdata: vec![0u8; 65530],
        };
        let z = Version::new(&apex, vec![soa, big]).unwrap();
        let recs = Records::Full(&z);
        let mut r = Responder::new(question(), &recs, None);
        let msgs: Vec<Vec<u8>> = r.by_ref().collect();
        assert!(r.failed());
        assert_eq!(records(&msgs).len(), 1, "the SOA went, the stream stopped");
    }
}
