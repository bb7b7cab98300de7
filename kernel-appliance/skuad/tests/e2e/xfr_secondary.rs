//! skuad as a secondary on loopback (docs/zone-transfer.md, "Secondary"):
//!
//! - skuad primary → skuad secondary with TSIG: the first AXFR, an API write on the primary
//!   sent by NOTIFY and applied by IXFR (the secondary answers the new record), the
//!   secondary's own IXFR to a third party from the diffs it received (chained), API
//!   writes under the secondary zone refused, a restart with the primary gone serving the
//!   zone file at once, and the promotion: the configuration switched to primary and
//!   reloaded serves the latest serial, keeps the journal (IXFR from an older serial), and
//!   goes on from there.
//! - A scripted hostile primary: an IXFR whose diff deletes a record the secondary does
//!   not hold (AXFR fallback), garbage, a wrong TSIG, a transfer that never ends (the size
//!   bound), one that stalls (the timeout): the copy in force keeps serving, each failure
//!   is audited (`xfr-in-failed`, aggregated) with the zone and the primary; then the
//!   primary goes silent and the copy expires (SERVFAIL, `xfr-expired`).
//!
//! The interop with NSD and Knot as primaries is in xfr_interop.rs.

use crate::common::xfr::{SECRET, ZONE, b64, now, records};
use crate::common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use skua_engine::name::WireName;
use skua_engine::rr::Rr;
use skua_engine::text::parse_rr;
use skua_xfr::server::{Allow, Answer, KeyRule, ZoneRef};
use skua_xfr::tsig::{self, Algorithm, Key};
use skua_xfr::wire::{self, MessageWriter, Section};
use skua_xfr::zone::{Diff, Journal, Version};

const KEY: &str = "xfr.example.org.";

fn key(secret: &[u8]) -> Key {
    Key::new(
        &WireName::parse(KEY, None).unwrap(),
        Algorithm::HmacSha256,
        secret.to_vec(),
    )
}

fn private(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

/// The key file and audit key in `dir`; the `tsig-key:` and `audit:` clauses.
fn keys_and_audit(dir: &Path) -> String {
    private(&dir.join("xfr.key"), &b64(&SECRET));
    private(&dir.join("audit.key"), &"ab".repeat(32));
    format!(
        "tsig-key:\n  name: {KEY}\n  secret: file:{}\naudit:\n  log: {}\n  key: file:{}\n",
        dir.join("xfr.key").display(),
        dir.join("audit.log").display(),
        dir.join("audit.key").display()
    )
}

fn audit(dir: &Path, kind: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("audit.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == kind)
        .collect()
}

/// One UDP query: (RCODE, AA, answer records).
fn dig(server: SocketAddr, name: &str, qtype: u16) -> Option<(u8, bool, Vec<Rr>)> {
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut w = MessageWriter::new(0x7777, 0);
    w.question(&WireName::parse(name, None).unwrap(), qtype, 1);
    s.send_to(&w.finish(), server).ok()?;
    let mut b = [0u8; 4096];
    let (n, _) = s.recv_from(&mut b).ok()?;
    let m = &b[..n];
    Some((m[3] & 0xf, m[2] & 0x04 != 0, records(m)))
}

fn serial_at(server: SocketAddr) -> Option<u32> {
    let (rc, _, recs) = dig(server, "example.org.", 6)?;
    (rc == 0).then(|| recs.first().and_then(|r| wire::soa_serial(&r.rdata)))?
}

fn a_at(server: SocketAddr, name: &str) -> Option<String> {
    let (rc, aa, recs) = dig(server, name, 1)?;
    (rc == 0 && aa)
        .then(|| {
            recs.iter().find(|r| r.rtype == 1).map(|r| {
                format!(
                    "{}.{}.{}.{}",
                    r.rdata[0], r.rdata[1], r.rdata[2], r.rdata[3]
                )
            })
        })
        .flatten()
}

/// An IXFR from `serial`, signed, over TCP: the serials of its SOA records.
fn ixfr_serials(server: SocketAddr, serial: u32) -> Vec<u32> {
    let k = key(&SECRET);
    let mut w = MessageWriter::new(0x5151, 0);
    w.question(&WireName::parse("example.org.", None).unwrap(), 251, 1);
    let soa = parse_rr(
        &format!("example.org. 300 IN SOA ns.example.org. admin.example.org. {serial} 1 1 1 1"),
        None,
        0,
    )
    .unwrap();
    assert!(w.try_rr(Section::Authority, &soa, 65535));
    let mut q = w.finish();
    let mac = tsig::sign_request(&mut q, &k, now());
    let mut s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).unwrap();
    let mut inc = skua_xfr::client::Incoming::new(
        &WireName::parse("example.org.", None).unwrap(),
        0x5151,
        Some(serial),
        Default::default(),
        Some(tsig::StreamVerifier::new(&k, &mac)),
    );
    let mut serials = Vec::new();
    loop {
        let mut len = [0u8; 2];
        s.read_exact(&mut len).unwrap();
        let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut m).unwrap();
        serials.extend(
            records(&m)
                .iter()
                .filter(|r| r.rtype == 6)
                .map(|r| wire::soa_serial(&r.rdata).unwrap()),
        );
        if inc
            .feed(&m, now())
            .expect("a valid signed transfer")
            .is_some()
        {
            return serials;
        }
    }
}

fn sigterm(d: &mut Daemon) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &d.child.id().to_string()])
        .status();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if d.child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("skuad did not stop on SIGTERM");
}

#[test]
fn skuad_primary_to_skuad_secondary_notify_ixfr_chain_restart_promotion() {
    let _suite = crate::common::suite(module_path!());
    let pdir = Dir::new("xfr-primary");
    let sdir = Dir::new("xfr-secondary");
    let (pdns, papi, sdns, sapi) = (free_port(), free_port(), free_port(), free_port());
    std::fs::write(pdir.0.join("example.org.zone"), ZONE).unwrap();
    let mut pconf = config(pdns, papi, &pdir.0, "");
    pconf.push_str(&keys_and_audit(&pdir.0));
    pconf.push_str(&format!(
        "auth-zone:\n  name: example.org.\n  zonefile: {}\n  provide-xfr: 127.0.0.0/8 {KEY}\n  notify: 127.0.0.1@{sdns} {KEY}\n",
        pdir.0.join("example.org.zone").display()
    ));
    let primary = start(&pdir.0, &pconf, pdns, papi);
    assert_eq!(serial_at(primary.dns), Some(10));

    // The secondary: no zone file yet; it serves its copy to others too (chained).
    let zonefile = sdir.0.join("example.org.zone");
    let mut base = config(sdns, sapi, &sdir.0, "");
    base.push_str(&keys_and_audit(&sdir.0));
    let sconf = format!(
        "{base}auth-zone:\n  name: example.org.\n  zonefile: {}\n  primary: 127.0.0.1@{pdns} {KEY}\n  provide-xfr: 127.0.0.0/8 {KEY}\n",
        zonefile.display()
    );
    let t0 = Instant::now();
    let mut secondary = start(&sdir.0, &sconf, sdns, sapi);
    let got = wait_for(10, || a_at(secondary.dns, "www.example.org."));
    assert_eq!(got.as_deref(), Some("198.18.0.10"), "the first AXFR");
    eprintln!("first transfer served after {:?}", t0.elapsed());
    assert_eq!(serial_at(secondary.dns), Some(10));
    let xin = wait_for(5, || {
        let v = audit(&sdir.0, "xfr-in");
        (!v.is_empty()).then_some(v)
    })
    .expect("an xfr-in entry");
    let d = &xin[0]["detail"];
    assert_eq!(
        (d["type"].as_str(), d["serial"].as_u64()),
        (Some("AXFR"), Some(10))
    );
    assert_eq!(d["primary"], format!("127.0.0.1:{pdns}"));
    assert_eq!(
        (xin[0]["actor"].as_str(), xin[0]["source"].as_str()),
        (Some(KEY), Some("127.0.0.1"))
    );
    let text = std::fs::read_to_string(&zonefile).unwrap();
    assert!(
        text.contains(
            "example.org. 300 IN SOA ns.example.org. admin.example.org. 10 3600 600 86400 300"
        ),
        "{text}"
    );

    // An API write on the primary: serial 11, NOTIFY, IXFR; the secondary answers it.
    let r = http(
        &primary,
        "POST",
        "/records",
        Some(tok("dns")),
        Some(r#"{"rr":"api.example.org. 300 IN A 198.18.0.77"}"#),
    )
    .unwrap();
    assert!(r.status == 200 || r.status == 201, "{}", r.body);
    let t0 = Instant::now();
    let got = wait_for(10, || a_at(secondary.dns, "api.example.org."));
    assert_eq!(got.as_deref(), Some("198.18.0.77"), "NOTIFY then IXFR");
    eprintln!(
        "API write on the primary served by the secondary after {:?}",
        t0.elapsed()
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "NOTIFY, not the 3600 s REFRESH"
    );
    assert_eq!(serial_at(secondary.dns), Some(11));
    let xin = wait_for(5, || {
        let v = audit(&sdir.0, "xfr-in");
        (v.len() >= 2).then_some(v)
    })
    .unwrap();
    let d = &xin[1]["detail"];
    assert_eq!(
        (
            d["type"].as_str(),
            d["from_serial"].as_u64(),
            d["serial"].as_u64(),
            d["added"].as_u64()
        ),
        (Some("IXFR"), Some(10), Some(11), Some(1)),
        "{d}"
    );
    // The primary's side: the write (with the zone's new serial) and the IXFR it served.
    let writes = audit(&pdir.0, "api-write");
    assert_eq!(
        writes.last().map(|w| w["detail"]["zone_serials"].clone()),
        Some(serde_json::json!({"example.org.": 11}))
    );
    let out = wait_for(5, || {
        let v: Vec<_> = audit(&pdir.0, "xfr-out")
            .into_iter()
            .filter(|e| e["detail"]["type"] == "IXFR")
            .collect();
        (!v.is_empty()).then_some(v)
    })
    .expect("the primary's xfr-out IXFR");
    assert_eq!(out[0]["detail"]["from_serial"], 10);

    // Chained: the secondary answers IXFR from 10 with the diff it received.
    assert_eq!(ixfr_serials(secondary.dns, 10), [11, 10, 11, 11]);
    // API writes under a secondary zone: refused, the primary owns it.
    let r = http(
        &secondary,
        "POST",
        "/records",
        Some(tok("dns")),
        Some(r#"{"rr":"local.example.org. 300 IN A 198.18.0.5"}"#),
    )
    .unwrap();
    assert_eq!(r.status, 409, "{}", r.body);

    // The primary goes away; the secondary restarts and serves its zone file at once.
    drop(primary);
    sigterm(&mut secondary);
    drop(secondary);
    let secondary = start(&sdir.0, &sconf, sdns, sapi);
    assert_eq!(
        serial_at(secondary.dns),
        Some(11),
        "from the zone file, at start"
    );
    assert_eq!(
        a_at(secondary.dns, "api.example.org.").as_deref(),
        Some("198.18.0.77")
    );
    let failed = wait_for(10, || {
        let v = audit(&sdir.0, "xfr-in-failed");
        (!v.is_empty()).then_some(v)
    })
    .expect("the dead primary audited");
    assert_eq!(failed[0]["detail"]["zone"], "example.org.");
    assert_eq!(failed[0]["detail"]["type"], "SOA");
    assert_eq!(failed[0]["source"], "127.0.0.1");
    assert_eq!(serial_at(secondary.dns), Some(11), "still served");

    // Promotion: primary: removed, provide-xfr: kept, reload. The latest serial serves,
    // the journal it received is kept, and changes go on from there.
    let promoted = format!(
        "{base}auth-zone:\n  name: example.org.\n  zonefile: {}\n  provide-xfr: 127.0.0.0/8 {KEY}\n",
        zonefile.display()
    );
    std::fs::write(&secondary.conf, promoted).unwrap();
    let r = http(
        &secondary,
        "POST",
        "/reload",
        Some(tok("operator")),
        Some("{}"),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        serial_at(secondary.dns),
        Some(11),
        "the latest serial received"
    );
    let r = http(
        &secondary,
        "POST",
        "/records",
        Some(tok("dns")),
        Some(r#"{"rr":"after.example.org. 300 IN A 198.18.0.12"}"#),
    )
    .unwrap();
    assert!(r.status == 200 || r.status == 201, "{}", r.body);
    assert_eq!(serial_at(secondary.dns), Some(12));
    assert_eq!(ixfr_serials(secondary.dns, 11), [12, 11, 12, 12]);
    drop(secondary);
}

/// What the scripted primary does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Serial 1, AXFR and IXFR correct, signed.
    Good,
    /// SOA serial 2; the IXFR deletes a record the zone does not have; AXFR is garbage.
    BadDiffThenGarbage,
    /// Everything signed with another secret.
    WrongKey,
    /// SOA serial 2; the transfer never ends (records forever).
    Endless,
    /// SOA serial 2; the transfer stops after its first message.
    Stall,
    /// No answer at all.
    Silent,
}

struct Script {
    mode: Mutex<Mode>,
    transfers: AtomicUsize,
    stop: AtomicBool,
}

fn zone_version(serial: u32, expire: u32) -> Version {
    let apex = WireName::parse("example.org.", None).unwrap();
    let recs = [
        format!(
            "example.org. 300 IN SOA ns.example.org. admin.example.org. {serial} 3600 600 {expire} 300"
        ),
        "example.org. 300 IN NS ns.example.org.".into(),
        "ns.example.org. 300 IN A 198.18.0.1".into(),
        "www.example.org. 300 IN A 198.18.0.10".into(),
    ];
    Version::new(
        &apex,
        recs.iter()
            .map(|r| parse_rr(r, None, 300).unwrap())
            .collect(),
    )
    .unwrap()
}

/// The answer of the scripted primary to one request (UDP or TCP), as messages.
fn script_answer(script: &Script, q: &[u8], expire: u32) -> Vec<Vec<u8>> {
    let mode = *script.mode.lock().unwrap();
    let good = key(&SECRET);
    let wrong = key(b"not the secret, not the secret!!");
    let k = if mode == Mode::WrongKey {
        &wrong
    } else {
        &good
    };
    let serial = if mode == Mode::Good { 1 } else { 2 };
    let v1 = zone_version(1, expire);
    let v = zone_version(serial, expire);
    let mut journal = Journal::new(10, 1 << 20);
    if mode == Mode::BadDiffThenGarbage {
        // A diff from 1 that deletes a record serial 1 never had.
        let mut d = Diff::between(&v1, &v);
        d.removed
            .push(parse_rr("ghost.example.org. 300 IN A 198.18.0.66", None, 0).unwrap());
        journal.push(d);
    }
    let allow = [Allow {
        netblock: "127.0.0.0/8".parse().unwrap(),
        rule: KeyRule::NoKey,
    }];
    if skua_xfr::server::is_transfer_request(q) {
        script.transfers.fetch_add(1, Ordering::SeqCst);
        let is_axfr = q.len() > 14 && wire::read_question(q, 12).map(|x| x.1) == Ok(252);
        if mode == Mode::BadDiffThenGarbage && is_axfr {
            // The request's ID, a header that promises five records, the question, then
            // bytes that are no record.
            let mut m = q[..2].to_vec();
            m.extend_from_slice(&[0x84, 0, 0, 1, 0, 5, 0, 0, 0, 0]);
            m.extend_from_slice(b"\x07example\x03org\x00\x00\xfc\x00\x01");
            m.extend_from_slice(&[0xff; 40]);
            return vec![m];
        }
        if mode == Mode::Endless {
            // The first message of a transfer that never closes: the SOA and a record,
            // signed; the caller goes on with more records.
            let (name, qt, qc, _) = wire::read_question(q, 12).unwrap();
            let mut w = MessageWriter::new(u16::from_be_bytes([q[0], q[1]]), 0x8400);
            w.question(&name, qt, qc);
            assert!(w.try_rr(Section::Answer, v.soa(), 65535));
            assert!(w.try_rr(Section::Answer, &v.records()[0], 65535));
            return vec![w.finish()];
        }
    }
    // A signed SOA query or transfer: answered by skua-xfr's primary code, with `k`.
    let keys = [k.clone()];
    if skua_xfr::server::is_transfer_request(q) {
        let sign_key = keys.clone();
        let msgs: Vec<Vec<u8>> =
            match skua_xfr::server::answer(q, "127.0.0.1".parse().unwrap(), &keys, now(), |_| {
                Some(ZoneRef {
                    version: &v,
                    journal: &journal,
                    allow: &allow,
                })
            }) {
                Answer::Transfer(t) => t.messages.collect(),
                Answer::Refused { message, .. } => vec![message],
            };
        drop(sign_key);
        return msgs;
    }
    // SOA query: the SOA, signed with the request's MAC when it verifies with `k`.
    let t = tsig::find(q).ok().flatten();
    let (name, qt, qc, _) = wire::read_question(q, 12).unwrap();
    let mut w = MessageWriter::new(u16::from_be_bytes([q[0], q[1]]), 0x8400);
    w.question(&name, qt, qc);
    assert!(w.try_rr(Section::Answer, v.soa(), 512));
    let mut m = w.finish();
    if let Some(t) = t {
        tsig::StreamSigner::new(k, &t.mac, now()).sign(&mut m);
    }
    vec![m]
}

/// A primary that answers as `script` says, until `script.stop`: its port (UDP and TCP,
/// bound here: a port only looked up could be taken, by a daemon's random source port
/// say, before it is bound) and its threads.
fn scripted_primary(script: Arc<Script>, expire: u32) -> (u16, Vec<std::thread::JoinHandle<()>>) {
    let (udp, tcp) = (0..100)
        .find_map(|_| {
            let udp = UdpSocket::bind((LO, 0)).ok()?;
            let port = udp.local_addr().ok()?.port();
            let tcp = TcpListener::bind((LO, port)).ok()?;
            Some((udp, tcp))
        })
        .expect("a port free for UDP and TCP");
    let port = udp.local_addr().unwrap().port();
    udp.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    tcp.set_nonblocking(true).unwrap();
    let s1 = script.clone();
    let u = std::thread::spawn(move || {
        let mut b = [0u8; 4096];
        while !s1.stop.load(Ordering::SeqCst) {
            let Ok((n, from)) = udp.recv_from(&mut b) else {
                continue;
            };
            if *s1.mode.lock().unwrap() == Mode::Silent {
                continue;
            }
            for m in script_answer(&s1, &b[..n], expire) {
                let _ = udp.send_to(&m, from);
            }
        }
    });
    let s2 = script;
    let t = std::thread::spawn(move || {
        while !s2.stop.load(Ordering::SeqCst) {
            let Ok((mut c, _)) = tcp.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            let s3 = s2.clone();
            std::thread::spawn(move || {
                c.set_nonblocking(false).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut len = [0u8; 2];
                if c.read_exact(&mut len).is_err() {
                    return;
                }
                let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                if c.read_exact(&mut q).is_err() {
                    return;
                }
                let mode = *s3.mode.lock().unwrap();
                if mode == Mode::Silent {
                    std::thread::sleep(Duration::from_secs(20));
                    return;
                }
                let msgs = script_answer(&s3, &q, expire);
                let send = |c: &mut TcpStream, m: &[u8]| {
                    let mut f = (m.len() as u16).to_be_bytes().to_vec();
                    f.extend_from_slice(m);
                    c.write_all(&f)
                };
                match mode {
                    Mode::Endless if skua_xfr::server::is_transfer_request(&q) => {
                        // The first message (SOA and a record), then records forever,
                        // every message signed as a stream (RFC 8945 §5.3.1).
                        let mac = tsig::find(&q).unwrap().unwrap().mac;
                        let k = key(&SECRET);
                        let mut signer = tsig::StreamSigner::new(&k, &mac, now());
                        let mut first = msgs[0].clone();
                        signer.sign(&mut first);
                        let _ = send(&mut c, &first);
                        let mut i = 0u32;
                        loop {
                            let mut w =
                                MessageWriter::new(u16::from_be_bytes([q[0], q[1]]), 0x8400);
                            for _ in 0..100 {
                                i += 1;
                                let r = parse_rr(
                                    &format!("h{i}.example.org. 300 IN TXT \"endless {i}\""),
                                    None,
                                    0,
                                )
                                .unwrap();
                                w.try_rr(Section::Answer, &r, 60000);
                            }
                            let mut m = w.finish();
                            signer.sign(&mut m);
                            if send(&mut c, &m).is_err() || s3.stop.load(Ordering::SeqCst) {
                                return;
                            }
                        }
                    }
                    Mode::Stall if skua_xfr::server::is_transfer_request(&q) => {
                        // Half of the first message, then nothing.
                        let m = &msgs[0];
                        let mut f = (m.len() as u16).to_be_bytes().to_vec();
                        f.extend_from_slice(&m[..m.len() / 2]);
                        let _ = c.write_all(&f);
                        std::thread::sleep(Duration::from_secs(25));
                    }
                    _ => {
                        for m in msgs {
                            if send(&mut c, &m).is_err() {
                                return;
                            }
                        }
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
            });
        }
    });
    (port, vec![u, t])
}

/// Sends a NOTIFY for example.org., signed with the key, to `server`; waits for its
/// answer (RCODE).
fn send_notify(server: SocketAddr) -> u8 {
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut m = skua_xfr::notify::message(
        0x3131,
        &WireName::parse("example.org.", None).unwrap(),
        None,
    );
    tsig::sign_request(&mut m, &key(&SECRET), now());
    s.send_to(&m, server).unwrap();
    let mut b = [0u8; 512];
    let (n, _) = s.recv_from(&mut b).expect("a NOTIFY response");
    assert_eq!(b[2] & 0x80, 0x80);
    assert_eq!((b[2] >> 3) & 0xf, 4, "opcode NOTIFY");
    b[..n][3] & 0xf
}

#[test]
fn a_hostile_primary_never_replaces_the_copy_and_an_expired_copy_is_not_served() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("xfr-hostile");
    let (dns, api) = (free_port(), free_port());
    // EXPIRE 60 s from the last good refresh: the failures below stay within it.
    let expire = 60;
    let script = Arc::new(Script {
        mode: Mutex::new(Mode::Good),
        transfers: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    });
    let (pport, threads) = scripted_primary(script.clone(), expire);
    let mut conf = config(dns, api, &dir.0, "");
    conf.push_str(&keys_and_audit(&dir.0));
    conf.push_str(&format!(
        "auth-zone:\n  name: example.org.\n  zonefile: {}\n  request-xfr: 127.0.0.1@{pport} {KEY}\n  size-limit-xfr: 64k\n",
        dir.0.join("example.org.zone").display()
    ));
    let t_good = Instant::now();
    let mut d = start(&dir.0, &conf, dns, api);
    assert_eq!(
        wait_for(10, || a_at(d.dns, "www.example.org.")).as_deref(),
        Some("198.18.0.10"),
        "the good AXFR"
    );
    assert_eq!(serial_at(d.dns), Some(1));

    // Each hostile answer, set off by a NOTIFY; the copy of serial 1 keeps serving.
    let phases = [
        (
            Mode::BadDiffThenGarbage,
            2,
            "IXFR whose diff does not apply, then garbage",
        ),
        (Mode::WrongKey, 0, "a wrong TSIG"),
        (Mode::Endless, 1, "a transfer that never ends"),
        (Mode::Stall, 1, "a transfer that stalls"),
    ];
    for (mode, transfers, what) in phases {
        *script.mode.lock().unwrap() = mode;
        let before = script.transfers.load(Ordering::SeqCst);
        assert_eq!(send_notify(d.dns), 0, "{what}: NOTIFY accepted");
        // The transfers the secondary asks for, then its failure (an SOA check after the
        // NOTIFY and the transfer(s) it makes).
        let ok = wait_for(20, || {
            (script.transfers.load(Ordering::SeqCst) >= before + transfers).then_some(())
        });
        assert!(ok.is_some(), "{what}: the secondary asked");
        std::thread::sleep(Duration::from_millis(if mode == Mode::Stall {
            11_000
        } else {
            1500
        }));
        assert_eq!(
            serial_at(d.dns),
            Some(1),
            "{what}: the copy held still serves"
        );
        assert_eq!(
            a_at(d.dns, "www.example.org.").as_deref(),
            Some("198.18.0.10"),
            "{what}"
        );
        assert!(
            d.child.try_wait().unwrap().is_none(),
            "{what}: skuad is alive"
        );
    }
    // A NOTIFY from an unknown key: refused and audited.
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut m = skua_xfr::notify::message(
        0x3232,
        &WireName::parse("example.org.", None).unwrap(),
        None,
    );
    tsig::sign_request(
        &mut m,
        &Key::new(
            &WireName::parse("stranger.", None).unwrap(),
            Algorithm::HmacSha256,
            SECRET.to_vec(),
        ),
        now(),
    );
    s.send_to(&m, d.dns).unwrap();
    let mut b = [0u8; 512];
    let (n, _) = s.recv_from(&mut b).unwrap();
    assert_eq!(b[..n][3] & 0xf, 9, "NOTAUTH");
    assert_eq!(
        tsig::find(&b[..n]).unwrap().unwrap().error,
        tsig::error::BADKEY
    );

    // Silent: no refresh succeeds; at EXPIRE after the good one the zone is SERVFAIL.
    *script.mode.lock().unwrap() = Mode::Silent;
    let left = Duration::from_secs(u64::from(expire) + 3).saturating_sub(t_good.elapsed());
    std::thread::sleep(left);
    let (rc, aa, _) = dig(d.dns, "www.example.org.", 1).unwrap();
    assert_eq!((rc, aa), (2, false), "expired: SERVFAIL");
    let expired = audit(&dir.0, "xfr-expired");
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0]["detail"]["zone"], "example.org.");

    // The audit log after a clean stop: the failures, aggregated, each named.
    sigterm(&mut d);
    let failed = audit(&dir.0, "xfr-in-failed");
    assert!(!failed.is_empty());
    assert!(
        failed.iter().all(|e| e["source"] == "127.0.0.1"),
        "{failed:?}"
    );
    let mut reasons = String::new();
    for e in &failed {
        reasons.push_str(&e["detail"].to_string());
    }
    for want in [
        "ixfr-does-not-apply",
        "malformed",
        "tsig",
        "too-large",
        "timeout",
        "example.org.",
    ] {
        assert!(reasons.contains(want), "{want} not in {reasons}");
    }
    let refused = audit(&dir.0, "xfr-refused");
    assert!(
        refused.iter().any(|e| e["detail"]["type"] == "NOTIFY"
            && e["detail"]["reason"]
                .as_str()
                .unwrap_or("")
                .contains("tsig-badkey")),
        "{refused:?}"
    );
    let xin = audit(&dir.0, "xfr-in");
    assert_eq!(xin.len(), 1, "only the good transfer: {xin:?}");
    script.stop.store(true, Ordering::SeqCst);
    for t in threads {
        let _ = t.join();
    }
}
