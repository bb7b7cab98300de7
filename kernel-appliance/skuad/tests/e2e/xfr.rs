//! skuad as a primary on loopback (docs/zone-transfer.md): AXFR and IXFR over TCP with
//! TSIG, checked message by message with skua-xfr's verifier; the refusals (no key, a
//! wrong secret, an unknown key, a zone not served) and their answers; a flood of refused
//! requests in one `xfr-refused` audit entry; a reload that changes the zone without
//! bumping its serial served as serial + 1 with an IXFR of the difference; NOTIFY to a
//! scripted secondary, signed, retried until answered. The interop tests with NSD and Knot
//! are in xfr_interop.rs.

use crate::common::xfr::{SECRET, ZONE, b64, now, records};
use crate::common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use skua_engine::name::WireName;
use skua_engine::rr::Rr;
use skua_engine::text::parse_rr;
use skua_xfr::tsig::{self, Algorithm, Key, StreamVerifier};
use skua_xfr::wire::{self, MessageWriter, Section};

fn key(name: &str, secret: &[u8]) -> Key {
    Key::new(
        &WireName::parse(name, None).unwrap(),
        Algorithm::HmacSha256,
        secret.to_vec(),
    )
}

fn setup(dir: &Path, notify_port: u16) -> (String, u16, u16) {
    let secret = dir.join("xfr.key");
    std::fs::write(&secret, b64(&SECRET)).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&secret).unwrap().permissions(),
        0o600,
    );
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    std::fs::write(dir.join("audit.key"), "ab".repeat(32)).unwrap();
    std::fs::set_permissions(
        dir.join("audit.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(dir.join("example.org.zone"), ZONE).unwrap();
    let (dns, api) = (free_port(), free_port());
    let mut c = config(dns, api, dir, "");
    c.push_str(&format!(
        "tsig-key:\n  name: xfr.example.org.\n  secret: file:{}\n\
         auth-zone:\n  name: example.org.\n  zonefile: {}\n\
           provide-xfr: 127.0.0.0/8 xfr.example.org.\n\
           notify: 127.0.0.1@{notify_port} xfr.example.org.\n\
         audit:\n  log: {}\n  key: file:{}\n",
        secret.display(),
        dir.join("example.org.zone").display(),
        dir.join("audit.log").display(),
        dir.join("audit.key").display(),
    ));
    (c, dns, api)
}

/// A transfer request for example.org. (IXFR from `serial` when given), signed with `k`.
fn request(qtype: u16, serial: Option<u32>, k: Option<&Key>) -> (Vec<u8>, Vec<u8>) {
    let mut w = MessageWriter::new(0x5151, 0);
    w.question(&WireName::parse("example.org.", None).unwrap(), qtype, 1);
    if let Some(s) = serial {
        let soa = parse_rr(
            &format!("example.org. 300 IN SOA ns.example.org. admin.example.org. {s} 1 1 1 1"),
            None,
            0,
        )
        .unwrap();
        assert!(w.try_rr(Section::Authority, &soa, 65535));
    }
    let mut m = w.finish();
    let mac = k
        .map(|k| tsig::sign_request(&mut m, k, now()))
        .unwrap_or_default();
    (m, mac)
}

/// Sends `q` over TCP and reads messages until the transfer's closing SOA, a single-message
/// answer that is not a transfer, or the connection's end.
fn exchange(server: SocketAddr, q: &[u8]) -> Vec<Vec<u8>> {
    let mut s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(q);
    s.write_all(&framed).unwrap();
    let mut out = Vec::new();
    let mut soas = 0;
    loop {
        let mut len = [0u8; 2];
        if s.read_exact(&mut len).is_err() {
            break;
        }
        let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut m).unwrap();
        let recs = records(&m);
        soas += recs.iter().filter(|r| r.rtype == 6).count();
        // An error, the SOA alone (up to date), or the closing SOA.
        let done = m[3] & 0xf != 0
            || (out.is_empty() && recs.len() == 1)
            || (soas >= 2 && is_end(&out, &m));
        out.push(m);
        if done {
            break;
        }
    }
    out
}

/// Whether `m` ends the transfer: its last record is the SOA the first message started
/// with (AXFR), or the current SOA after the diffs (IXFR).
fn is_end(prev: &[Vec<u8>], m: &[u8]) -> bool {
    let first = prev.first().map_or_else(|| records(m), |p| records(p));
    let last = records(m);
    let (Some(a), Some(b)) = (first.first(), last.last()) else {
        return false;
    };
    let n: usize = prev.iter().map(|p| records(p).len()).sum::<usize>() + last.len();
    a == b && n > 1
}

fn serials(msgs: &[Vec<u8>]) -> Vec<u32> {
    msgs.iter()
        .flat_map(|m| records(m))
        .filter(|r| r.rtype == 6)
        .map(|r| wire::soa_serial(&r.rdata).unwrap())
        .collect()
}

fn audit_kinds(dir: &Path, kind: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["kind"] == kind)
        .collect()
}

/// Reads one NOTIFY from `sock`: (message, its serial, its MAC, sender).
fn recv_notify(sock: &UdpSocket, keys: &[Key]) -> (Vec<u8>, u32, Vec<u8>, SocketAddr) {
    let mut buf = [0u8; 4096];
    let (n, from) = sock.recv_from(&mut buf).expect("a NOTIFY");
    let m = buf[..n].to_vec();
    let r = skua_xfr::notify::parse(&m).unwrap();
    assert_eq!(r.zone.to_string(), "example.org.");
    let tsig::Checked::Signed(s) = tsig::check_request(&m, keys, now()).unwrap() else {
        panic!("NOTIFY not signed with the key")
    };
    (m, r.serial.unwrap(), s.mac, from)
}

#[test]
fn primary_axfr_ixfr_tsig_refusals_notify() {
    let _suite = crate::common::suite(module_path!());
    let dir = Dir::new("xfr");
    let notify_sock = UdpSocket::bind((LO, 0)).unwrap();
    notify_sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (conf, dns, api) = setup(&dir.0, notify_sock.local_addr().unwrap().port());
    let d = start(&dir.0, &conf, dns, api);
    let k = key("xfr.example.org.", &SECRET);
    let keys = [k.clone()];

    // NOTIFY at start (serial 10), signed; not answered: retried about 1 s later.
    let (_, serial, _, _) = recv_notify(&notify_sock, &keys);
    assert_eq!(serial, 10);
    let t0 = Instant::now();
    let (m, serial, mac, from) = recv_notify(&notify_sock, &keys);
    assert_eq!(serial, 10);
    assert!(
        t0.elapsed() >= Duration::from_millis(700),
        "{:?}",
        t0.elapsed()
    );
    // Answered (signed with the request's MAC): no more retries.
    let mut reply = m[..wire::HEADER_LEN].to_vec();
    reply[2] |= 0x80;
    reply[4..12].copy_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    let q_end = wire::read_question(&m, wire::HEADER_LEN).unwrap().3;
    reply.extend_from_slice(&m[wire::HEADER_LEN..q_end]);
    tsig::StreamSigner::new(&k, &mac, now()).sign(&mut reply);
    notify_sock.send_to(&reply, from).unwrap();
    notify_sock
        .set_read_timeout(Some(Duration::from_millis(2500)))
        .unwrap();
    let mut buf = [0u8; 512];
    assert!(
        notify_sock.recv_from(&mut buf).is_err(),
        "a NOTIFY came after the reply"
    );

    // AXFR, signed: every message verifies, SOA first and last, the zone between.
    let (q, mac) = request(252, None, Some(&k));
    let msgs = exchange(d.dns, &q);
    let mut v = StreamVerifier::new(&k, &mac);
    for m in &msgs {
        assert_eq!(v.verify(m, now()), Ok(true));
    }
    let recs: Vec<Rr> = msgs.iter().flat_map(|m| records(m)).collect();
    assert_eq!(recs.len(), 5, "SOA, NS, two A, SOA: {recs:?}");
    assert_eq!((recs[0].rtype, recs[4].rtype), (6, 6));
    assert_eq!(serials(&msgs), [10, 10]);

    // Refusals: unsigned (REFUSED), wrong secret (NOTAUTH/BADSIG), unknown key
    // (NOTAUTH/BADKEY), a zone not served (NOTAUTH).
    let rc = |m: &[Vec<u8>]| m[0][3] & 0xf;
    let (q, _) = request(252, None, None);
    assert_eq!(rc(&exchange(d.dns, &q)), 5);
    let (q, _) = request(
        252,
        None,
        Some(&key("xfr.example.org.", b"not the secret 16b")),
    );
    let r = exchange(d.dns, &q);
    assert_eq!(rc(&r), 9);
    assert_eq!(
        tsig::find(&r[0]).unwrap().unwrap().error,
        tsig::error::BADSIG
    );
    let (q, _) = request(252, None, Some(&key("stranger.", &SECRET)));
    let r = exchange(d.dns, &q);
    assert_eq!(
        tsig::find(&r[0]).unwrap().unwrap().error,
        tsig::error::BADKEY
    );
    let mut w = MessageWriter::new(9, 0);
    w.question(&WireName::parse("example.", None).unwrap(), 252, 1);
    let mut q = w.finish();
    tsig::sign_request(&mut q, &k, now());
    assert_eq!(rc(&exchange(d.dns, &q)), 9);

    // The audit log: the AXFR served, the first refusals of each actor; a flood adds nothing
    // until its minute ends.
    let out = wait_for(5, || {
        let v = audit_kinds(&dir.0, "xfr-out");
        (!v.is_empty()).then_some(v)
    })
    .expect("an xfr-out entry");
    assert_eq!(out[0]["detail"]["type"], "AXFR");
    assert_eq!(out[0]["detail"]["serial"], 10);
    assert_eq!(out[0]["actor"], "xfr.example.org.");
    let refused = wait_for(5, || {
        let v = audit_kinds(&dir.0, "xfr-refused");
        (v.len() >= 2).then_some(v)
    })
    .expect("xfr-refused entries");
    assert_eq!(refused[0]["actor"], "anonymous");
    assert_eq!(refused[0]["detail"]["reason"], "not-allowed");
    assert_eq!(refused[0]["source"], "127.0.0.1");
    assert_eq!(refused[1]["actor"], "xfr.example.org.", "a verified key");
    assert_eq!(refused[1]["detail"]["reason"], "not-authoritative");
    for _ in 0..50 {
        let (q, _) = request(
            252,
            None,
            Some(&key("xfr.example.org.", b"flood flood flood")),
        );
        assert_eq!(rc(&exchange(d.dns, &q)), 9, "NOTAUTH (BADSIG)");
    }
    // Every refusal handled by the control core (the four above and the flood), none lost
    // to a full queue: once the counter says so, the audit log has seen them all, and
    // holds no more entries than before.
    let metrics = || {
        let m = http(&d, "GET", "/metrics", Some(tok("read")), None).unwrap();
        assert_eq!(m.status, 200, "{}", m.body);
        (
            metric_value(&m.body, "skua_xfr_refused_total"),
            metric_value(&m.body, "skua_xfr_events_dropped_total"),
        )
    };
    let counted = wait_for(10, || {
        let (refused, dropped) = metrics();
        (refused >= 54 || dropped > 0).then_some((refused, dropped))
    });
    assert_eq!(counted, Some((54, 0)), "refusals handled, events dropped");
    assert_eq!(
        audit_kinds(&dir.0, "xfr-refused").len(),
        2,
        "the flood is counted, not logged"
    );

    // The zone changes without a serial bump; reload: serial 11, IXFR from 10 is the
    // difference, NOTIFY says 11.
    let zone = ZONE.replace(
        "www IN A 198.18.0.10",
        "www IN A 198.18.0.11\nnew IN A 198.18.0.12",
    );
    std::fs::write(dir.0.join("example.org.zone"), zone).unwrap();
    let r = http(&d, "POST", "/reload", Some(tok("operator")), Some("{}")).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    notify_sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (_, serial, _, _) = recv_notify(&notify_sock, &keys);
    assert_eq!(serial, 11);
    let (q, mac) = request(251, Some(10), Some(&k));
    let msgs = exchange(d.dns, &q);
    let mut v = StreamVerifier::new(&k, &mac);
    for m in &msgs {
        assert_eq!(v.verify(m, now()), Ok(true));
    }
    assert_eq!(serials(&msgs), [11, 10, 11, 11]);
    let recs: Vec<String> = msgs
        .iter()
        .flat_map(|m| records(m))
        .filter(|r| r.rtype == 1)
        .map(|r| skua_engine::text::rr_to_string(&r))
        .collect();
    assert_eq!(
        recs,
        [
            "www.example.org. 300 IN A 198.18.0.10",
            "new.example.org. 300 IN A 198.18.0.12",
            "www.example.org. 300 IN A 198.18.0.11",
        ]
    );
    // The engine serves serial 11 too.
    let (q, _) = request(251, Some(11), Some(&k));
    assert_eq!(
        serials(&exchange(d.dns, &q)),
        [11],
        "up to date: the SOA alone"
    );
    let (q, _) = request(251, Some(9), Some(&k));
    let full = exchange(d.dns, &q);
    assert_eq!(
        serials(&full),
        [11, 11],
        "from a serial the journal lacks: the whole zone"
    );
    drop(d);
}
