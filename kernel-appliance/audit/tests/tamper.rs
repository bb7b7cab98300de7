//! A log of a few hundred entries with rotations and checkpoints verifies, and each kind of
//! tampering is reported at the entry it affects.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::json;
use skua_audit::{AuditKey, AuditLog, BadEntry, Entry, OpenOptions, Reason, Report, kind, verify};
use tempfile::TempDir;

fn key(n: u8) -> AuditKey {
    AuditKey::with_id(format!("k{n}"), vec![n; 32]).unwrap()
}

fn keys() -> Vec<AuditKey> {
    vec![key(1), key(2), key(3)]
}

struct Fixture {
    _dir: TempDir,
    log: PathBuf,
    side: PathBuf,
    lines: Vec<String>,
}

/// 310 API entries; rotations k1 → k2 before the 100th and k2 → k3 before the 200th; a
/// checkpoint every 50 entries and one on demand before the 150th.
fn build() -> Fixture {
    let dir = TempDir::new().unwrap();
    let log_path = dir.path().join("audit.log");
    let log = AuditLog::open(&log_path, key(1), OpenOptions::new().checkpoint_every(50)).unwrap();
    let kinds = [
        kind::API_WRITE,
        kind::RELOAD,
        kind::AUTH_FAILURE,
        kind::START,
    ];
    for i in 0..310u32 {
        match i {
            100 => drop(log.rotate(key(2)).unwrap()),
            150 => drop(log.checkpoint().unwrap()),
            200 => drop(log.rotate(key(3)).unwrap()),
            _ => {}
        }
        let source: Option<IpAddr> =
            (i % 3 != 0).then(|| format!("192.0.2.{}", i % 250).parse().unwrap());
        log.append(
            kinds[i as usize % 4],
            if i % 5 == 0 { "system" } else { "ops" },
            source,
            json!({"i": i, "zone": format!("z{i}.example."), "note": "a \"quoted\" ü"}),
        )
        .unwrap();
    }
    drop(log);
    let lines = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    Fixture {
        side: dir.path().join("audit.log.checkpoint"),
        _dir: dir,
        log: log_path,
        lines,
    }
}

impl Fixture {
    /// Writes `lines` as the log and verifies it with `keys`, and with the checkpoint file
    /// when `with_checkpoint`.
    fn check(&self, lines: &[String], keys: &[AuditKey], with_checkpoint: bool) -> Report {
        write_lines(&self.log, lines);
        verify(
            &self.log,
            keys,
            with_checkpoint.then_some(self.side.as_path()),
        )
        .unwrap()
    }

    /// The index of the first line containing `needle`.
    fn index_of(&self, needle: &str) -> usize {
        self.lines.iter().position(|l| l.contains(needle)).unwrap()
    }
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut s = lines.join("\n");
    s.push('\n');
    std::fs::write(path, s).unwrap();
}

fn first_bad(r: &Report) -> &BadEntry {
    r.first_bad
        .as_ref()
        .unwrap_or_else(|| panic!("tampering not detected: {r:?}"))
}

fn entry(line: &str) -> Entry {
    Entry::parse_line(line.as_bytes()).unwrap().0
}

#[test]
fn untouched_log_verifies_with_rotations_and_checkpoints() {
    let f = build();
    let checkpoints = f
        .lines
        .iter()
        .filter(|l| l.contains("\"kind\":\"checkpoint\""))
        .count();
    // 312 entries besides checkpoints: one after every 50, plus the one on demand.
    assert_eq!(checkpoints, 7);
    assert_eq!(f.lines.len(), 310 + 2 + 7);
    for with_checkpoint in [false, true] {
        let r = f.check(&f.lines, &keys(), with_checkpoint);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(r.entries_verified, f.lines.len() as u64);
        assert_eq!(r.last_seq, Some(f.lines.len() as u64 - 1));
        assert_eq!(r.rotations, 2);
        assert_eq!(r.checkpoints, 7);
        assert_eq!(r.key_ids, ["k1", "k2", "k3"]);
        assert_eq!(r.partial_tail, None);
    }
    let last_cp = f
        .lines
        .iter()
        .rposition(|l| l.contains("\"kind\":\"checkpoint\""))
        .unwrap();
    let r = f.check(&f.lines, &keys(), true);
    assert_eq!(r.checkpoint_file_seq, Some(last_cp as u64));
    let cp = skua_audit::CheckpointFile::read(&f.side).unwrap();
    assert_eq!(cp.mac, entry(&f.lines[last_cp]).mac);
    assert_eq!(cp.key_id, "k3");
}

#[test]
fn edited_fields_are_detected_at_their_entry() {
    let f = build();
    let i = 41; // seq 41: the 42nd API entry, under k1
    let line = &f.lines[i];
    let e = entry(line);
    assert_eq!(e.seq, 41);
    let edits: [(&str, String, String); 6] = [
        ("detail", "\"i\":41".into(), "\"i\":14".into()),
        (
            "ts",
            format!("\"ts\":\"{}", &e.ts[..4]),
            "\"ts\":\"1999".into(),
        ),
        (
            "actor",
            format!("\"actor\":\"{}\"", e.actor),
            "\"actor\":\"root\"".into(),
        ),
        (
            "kind",
            format!("\"kind\":\"{}\"", e.kind),
            "\"kind\":\"start\"".into(),
        ),
        (
            "source",
            "\"source\":\"192.0.2.41\"".into(),
            "\"source\":\"192.0.2.42\"".into(),
        ),
        (
            "prev",
            format!("\"prev\":\"{}", &e.prev[..2]),
            "\"prev\":\"ff".into(),
        ),
    ];
    for (field, from, to) in edits {
        assert!(line.contains(&from), "{field}: {from} not in {line}");
        let mut lines = f.lines.clone();
        lines[i] = line.replacen(&from, &to, 1);
        assert_ne!(lines[i], *line);
        let r = f.check(&lines, &keys(), true);
        let bad = first_bad(&r);
        assert_eq!((bad.line, bad.seq), (i as u64 + 1, Some(41)), "{field}");
        assert_eq!(
            bad.reason,
            Reason::MacMismatch {
                key_id: "k1".into()
            },
            "{field}"
        );
        assert_eq!(r.entries_verified, 41);
    }
}

#[test]
fn edited_mac_is_detected_at_its_entry() {
    let f = build();
    let mut lines = f.lines.clone();
    let l = &mut lines[60];
    let flip = if l.ends_with("0\"}") { "1\"}" } else { "0\"}" };
    l.replace_range(l.len() - 3.., flip);
    let r = f.check(&lines, &keys(), false);
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.seq), (61, Some(60)));
    assert_eq!(
        bad.reason,
        Reason::MacMismatch {
            key_id: "k1".into()
        }
    );
}

#[test]
fn deleted_swapped_and_duplicated_lines_are_detected() {
    let f = build();
    // Deleting seq 40: the line where it was holds seq 41.
    let mut lines = f.lines.clone();
    lines.remove(40);
    let r = f.check(&lines, &keys(), true);
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.seq), (41, Some(41)));
    assert_eq!(
        bad.reason,
        Reason::SeqGap {
            expected: 40,
            found: 41
        }
    );

    // Deleting the first line.
    let r = f.check(&f.lines[1..], &keys(), false);
    let bad = first_bad(&r);
    assert_eq!(
        (bad.line, bad.reason.clone()),
        (
            1,
            Reason::SeqGap {
                expected: 0,
                found: 1
            }
        )
    );

    // Swapping seq 40 and 41.
    let mut lines = f.lines.clone();
    lines.swap(40, 41);
    let r = f.check(&lines, &keys(), true);
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.seq), (41, Some(41)));
    assert_eq!(
        bad.reason,
        Reason::SeqGap {
            expected: 40,
            found: 41
        }
    );

    // Duplicating seq 40.
    let mut lines = f.lines.clone();
    lines.insert(41, f.lines[40].clone());
    let r = f.check(&lines, &keys(), true);
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.seq), (42, Some(40)));
    assert_eq!(
        bad.reason,
        Reason::SeqBack {
            expected: 41,
            found: 40
        }
    );
    assert_eq!(r.entries_verified, 41);
}

#[test]
fn inserted_forged_lines_are_detected() {
    let f = build();
    let before = entry(&f.lines[40]);
    let mut forged = Entry {
        seq: 41,
        ts: before.ts.clone(),
        kind: kind::API_WRITE.into(),
        actor: "ops".into(),
        source: None,
        detail: json!({"zone": "evil.example."}),
        key_id: String::new(),
        prev: before.mac.clone(),
        mac: String::new(),
    };
    // Under the right key id but a guessed secret.
    forged.seal(&AuditKey::with_id("k1", vec![99; 32]).unwrap());
    let mut lines = f.lines.clone();
    lines.insert(41, forged.to_line());
    let r = f.check(&lines, &keys(), true);
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.seq), (42, Some(41)));
    assert_eq!(
        bad.reason,
        Reason::MacMismatch {
            key_id: "k1".into()
        }
    );

    // Under the forger's own key.
    forged.seal(&AuditKey::with_id("evil", vec![99; 32]).unwrap());
    lines[41] = forged.to_line();
    let r = f.check(&lines, &keys(), true);
    let bad = first_bad(&r);
    assert_eq!(bad.line, 42);
    assert_eq!(
        bad.reason,
        Reason::UnknownKey {
            key_id: "evil".into()
        }
    );
}

#[test]
fn resealed_entries_break_the_links_they_claim() {
    // What someone holding a key could do, entry by entry: each is still caught where the
    // chain does not hold.
    let f = build();
    let mut e = entry(&f.lines[40]);
    e.prev = skua_audit::GENESIS.into();
    e.seal(&key(1));
    let mut lines = f.lines.clone();
    lines[40] = e.to_line();
    let r = f.check(&lines, &keys(), false);
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.reason.clone()), (41, Reason::PrevMismatch));

    // A checkpoint whose running hash was rewritten.
    let c = f.index_of("\"kind\":\"checkpoint\"");
    let mut cp = entry(&f.lines[c]);
    cp.detail["chain_hash"] = json!("00".repeat(32));
    cp.seal(&key(1));
    let mut lines = f.lines.clone();
    lines[c] = cp.to_line();
    let r = f.check(&lines, &keys(), false);
    let bad = first_bad(&r);
    assert_eq!(bad.line, c as u64 + 1);
    assert!(matches!(bad.reason, Reason::BadCheckpoint { .. }), "{bad}");
}

#[test]
fn truncated_tail_is_detected_only_with_the_checkpoint_file() {
    let f = build();
    let last_cp = f
        .lines
        .iter()
        .rposition(|l| l.contains("\"kind\":\"checkpoint\""))
        .unwrap();
    assert!(last_cp + 3 < f.lines.len());

    // Cut at the last checkpoint: the chain alone cannot tell (documented).
    let cut = &f.lines[..last_cp];
    let r = f.check(cut, &keys(), false);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.entries_verified, last_cp as u64);
    // The checkpoint file can.
    let r = f.check(cut, &keys(), true);
    let bad = first_bad(&r);
    assert_eq!(
        (bad.line, bad.seq),
        (last_cp as u64 + 1, Some(last_cp as u64))
    );
    assert_eq!(
        bad.reason,
        Reason::Truncated {
            checkpoint_seq: last_cp as u64,
            last_seq: Some(last_cp as u64 - 1)
        }
    );
    // An empty log, too.
    let r = f.check(&[], &keys(), true);
    assert!(matches!(
        first_bad(&r).reason,
        Reason::Truncated { last_seq: None, .. }
    ));
    // Cutting only entries after the last checkpoint is not detectable (documented).
    let r = f.check(&f.lines[..last_cp + 3], &keys(), true);
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn checkpoint_file_of_another_log_is_detected() {
    let f = build();
    let other = f._dir.path().join("other.log");
    let log = AuditLog::open(&other, key(1), OpenOptions::new()).unwrap();
    for i in 0..10 {
        log.append(kind::API_WRITE, "ops", None, json!({"other": i}))
            .unwrap();
    }
    assert_eq!(log.checkpoint().unwrap(), 10);
    drop(log);
    write_lines(&f.log, &f.lines);
    let other_side = f._dir.path().join("other.log.checkpoint");
    let r = verify(&f.log, &keys(), Some(&other_side)).unwrap();
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.seq), (11, Some(10)));
    assert_eq!(
        bad.reason,
        Reason::CheckpointMismatch { checkpoint_seq: 10 }
    );
}

#[test]
fn partial_last_line_is_a_warning_and_the_rest_verifies() {
    let f = build();
    let mut content = f.lines.join("\n");
    content.push('\n');
    let last = f.lines.last().unwrap();
    let cut_at = content.len() - last.len() / 2;
    std::fs::write(&f.log, &content.as_bytes()[..cut_at]).unwrap();
    let r = verify(&f.log, &keys(), Some(&f.side)).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.entries_verified, f.lines.len() as u64 - 1);
    let p = r.partial_tail.unwrap();
    assert_eq!(p.line, f.lines.len() as u64);
    assert_eq!(p.bytes, (cut_at - (content.len() - last.len() - 1)) as u64);

    // Zeros where a crash lost the data, newline or not, are a partial line too...
    for tail in ["\0\0\0\0\n", "\0\0\0\0"] {
        std::fs::write(&f.log, format!("{content}{tail}")).unwrap();
        let r = verify(&f.log, &keys(), Some(&f.side)).unwrap();
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(r.entries_verified, f.lines.len() as u64);
        assert_eq!(r.partial_tail.unwrap().line, f.lines.len() as u64 + 1);
    }
    // ...but not in the middle of the log.
    let mut lines = f.lines.clone();
    lines.insert(30, "\0\0\0\0".into());
    let r = f.check(&lines, &keys(), false);
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.seq), (31, None));
    assert!(matches!(bad.reason, Reason::BadJson { .. }));
}

#[test]
fn removed_rotation_and_unannounced_keys_are_detected() {
    let f = build();
    let rot = f.index_of("\"kind\":\"key-rotation\"");
    assert_eq!(entry(&f.lines[rot]).key_id, "k1");
    let mut lines = f.lines.clone();
    lines.remove(rot);
    let r = f.check(&lines, &keys(), false);
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.seq), (rot as u64 + 1, Some(rot as u64 + 1)));
    assert_eq!(
        bad.reason,
        Reason::UnannouncedKey {
            key_id: "k2".into(),
            expected: "k1".into()
        }
    );

    // An entry in the k1 part sealed under k3, a key the verifier knows.
    let mut e = entry(&f.lines[50]);
    e.seal(&key(3));
    let mut lines = f.lines.clone();
    lines[50] = e.to_line();
    let r = f.check(&lines, &keys(), false);
    let bad = first_bad(&r);
    assert_eq!((bad.line, bad.seq), (51, Some(50)));
    assert_eq!(
        bad.reason,
        Reason::UnannouncedKey {
            key_id: "k3".into(),
            expected: "k1".into()
        }
    );
}

#[test]
fn wrong_or_missing_keys_are_reported() {
    let f = build();
    write_lines(&f.log, &f.lines);
    let rot = f.index_of("\"kind\":\"key-rotation\"") as u64;

    // Without the first key.
    let r = verify(&f.log, &[key(2), key(3)], None).unwrap();
    let bad = first_bad(&r);
    assert_eq!(
        (bad.line, bad.reason.clone()),
        (
            1,
            Reason::UnknownKey {
                key_id: "k1".into()
            }
        )
    );
    // A wrong secret under the right id.
    let wrong = AuditKey::with_id("k1", vec![9; 32]).unwrap();
    let r = verify(&f.log, &[wrong, key(2), key(3)], None).unwrap();
    let bad = first_bad(&r);
    assert_eq!(
        (bad.line, bad.reason.clone()),
        (
            1,
            Reason::MacMismatch {
                key_id: "k1".into()
            }
        )
    );
    // A k2 that is not the key the rotation announced.
    let wrong = AuditKey::with_id("k2", vec![9; 32]).unwrap();
    let r = verify(&f.log, &[key(1), wrong, key(3)], None).unwrap();
    let bad = first_bad(&r);
    assert_eq!(bad.line, rot + 1);
    assert!(matches!(bad.reason, Reason::BadRotation { .. }), "{bad}");
    // Only the first key: verified up to the rotation.
    let r = verify(&f.log, &[key(1)], None).unwrap();
    let bad = first_bad(&r);
    assert_eq!(
        (bad.line, bad.reason.clone()),
        (
            rot + 2,
            Reason::UnknownKey {
                key_id: "k2".into()
            }
        )
    );
    assert_eq!(r.entries_verified, rot + 1);
    // Two different secrets under one id are refused outright.
    let wrong = AuditKey::with_id("k1", vec![9; 32]).unwrap();
    assert!(verify(&f.log, &[key(1), wrong], None).is_err());
}
