//! The writer: reopening, crash recovery, refusing a tail that does not verify, key
//! changes, checkpoints, batched fsync, locking, threads, `tail`; and the line format
//! against lines made by an independent implementation (Python's hmac/hashlib).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};
use skua_audit::{
    AuditKey, AuditLog, CheckpointFile, Entry, Error, FsyncPolicy, GENESIS, OpenOptions, Reason,
    kind, tail, verify,
};
use tempfile::TempDir;

fn key(n: u8) -> AuditKey {
    AuditKey::with_id(format!("k{n}"), vec![n; 32]).unwrap()
}

fn setup() -> (TempDir, PathBuf) {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("audit.log");
    (dir, path)
}

fn append_n(log: &AuditLog, n: u32) -> Vec<u64> {
    (0..n)
        .map(|i| {
            log.append(kind::API_WRITE, "ops", None, json!({"i": i}))
                .unwrap()
        })
        .collect()
}

fn entries(path: &Path) -> Vec<Entry> {
    tail(path, usize::MAX).unwrap()
}

fn kinds(path: &Path) -> Vec<String> {
    entries(path).into_iter().map(|e| e.kind).collect()
}

fn append_raw(path: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn lines_match_an_independent_implementation() {
    // Made by Python's hmac and hashlib from the format in docs/audit.md, key 0x01 x 32.
    let golden = [
        r#"{"seq":0,"ts":"2026-05-01T12:00:00.123Z","kind":"start","actor":"system","source":null,"detail":{"version":"0.1.0"},"key_id":"k1","prev":"0000000000000000000000000000000000000000000000000000000000000000","mac":"61c104164c9057db1df7f93aff0b0e3e6d42a2fabe19a2348363e0dd6a6c2f3e"}"#,
        r#"{"seq":1,"ts":"2026-05-01T12:00:01.000Z","kind":"api-write","actor":"ops","source":"192.0.2.7","detail":{"zone":"example."},"key_id":"k1","prev":"61c104164c9057db1df7f93aff0b0e3e6d42a2fabe19a2348363e0dd6a6c2f3e","mac":"7f1af77e1cfcd9779c84f12a5fd0d09c2ffa844bf6de0762aa1112b6b6430ce2"}"#,
        r#"{"seq":2,"ts":"2026-05-01T12:00:02.000Z","kind":"checkpoint","actor":"system","source":null,"detail":{"chain_hash":"8a29ba047bdeb7df38e81dfabd020e7d4b952c6d334539dedbf788544508a02f","entries":2,"since":0},"key_id":"k1","prev":"7f1af77e1cfcd9779c84f12a5fd0d09c2ffa844bf6de0762aa1112b6b6430ce2","mac":"e2d951aa0bcddde78d7f4c16bd1fa1e2a757784ba93f3ba3bac7339a6c1bfc79"}"#,
    ];
    let k = key(1);
    let mut prev = GENESIS.to_string();
    let made = [
        (
            0,
            "2026-05-01T12:00:00.123Z",
            "start",
            "system",
            None,
            json!({"version": "0.1.0"}),
        ),
        (
            1,
            "2026-05-01T12:00:01.000Z",
            "api-write",
            "ops",
            Some("192.0.2.7"),
            json!({"zone": "example."}),
        ),
        (
            2,
            "2026-05-01T12:00:02.000Z",
            "checkpoint",
            "system",
            None,
            json!({"since": 0, "entries": 2, "chain_hash": "8a29ba047bdeb7df38e81dfabd020e7d4b952c6d334539dedbf788544508a02f"}),
        ),
    ];
    for ((seq, ts, kind, actor, source, detail), want) in made.into_iter().zip(golden) {
        let mut e = Entry {
            seq,
            ts: ts.into(),
            kind: kind.into(),
            actor: actor.into(),
            source: source.map(|s| s.parse().unwrap()),
            detail,
            key_id: String::new(),
            prev: prev.clone(),
            mac: String::new(),
        };
        e.seal(&k);
        assert_eq!(e.to_line(), want);
        prev = e.mac;
    }
    let (_dir, path) = setup();
    std::fs::write(&path, golden.join("\n") + "\n").unwrap();
    let r = verify(&path, &[k], None).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!((r.entries_verified, r.checkpoints), (3, 1));
}

#[test]
fn reopening_continues_the_chain() {
    let (_dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    assert_eq!(log.opened().next_seq, 0);
    assert_eq!(append_n(&log, 5), [0, 1, 2, 3, 4]);
    drop(log);
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    assert_eq!(log.opened().next_seq, 5);
    assert_eq!(log.opened().recovered, None);
    assert_eq!(append_n(&log, 3), [5, 6, 7]);
    drop(log);
    let r = verify(&path, &[key(1)], None).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.entries_verified, 8);
}

#[test]
fn reopening_after_a_crash_cuts_the_partial_line_and_records_it() {
    let (_dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    append_n(&log, 3);
    drop(log);
    let len = std::fs::metadata(&path).unwrap().len();
    let partial = br#"{"seq":3,"ts":"2026-05-01T12:"#;
    append_raw(&path, partial);
    // Before the reopen the verifier warns and verifies what is complete.
    let r = verify(&path, &[key(1)], None).unwrap();
    assert!(r.is_ok() && r.partial_tail.is_some(), "{r:?}");
    assert_eq!(r.entries_verified, 3);

    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    let rec = log.opened().recovered.clone().unwrap();
    assert_eq!(
        (rec.offset, rec.dropped_bytes, rec.seq),
        (len, partial.len() as u64, 3)
    );
    assert_eq!(append_n(&log, 1), [4]);
    drop(log);
    let all = entries(&path);
    assert_eq!(all[3].kind, kind::RECOVERED);
    assert_eq!(all[3].detail["dropped_bytes"], partial.len());
    assert_eq!(
        all[3].detail["dropped_sha256"],
        hex::encode(Sha256::digest(partial))
    );
    let r = verify(&path, &[key(1)], None).unwrap();
    assert!(r.is_ok() && r.partial_tail.is_none(), "{r:?}");
    assert_eq!(r.entries_verified, 5);

    // Zeros ending in a newline (data that never reached the disk) are cut as well.
    append_raw(&path, b"\0\0\0\0\0\0\n");
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    let rec = log.opened().recovered.clone().unwrap();
    assert_eq!((rec.dropped_bytes, rec.seq), (7, 5));
    assert!(rec.reason.contains("not an entry"), "{}", rec.reason);
    drop(log);
    assert!(verify(&path, &[key(1)], None).unwrap().is_ok());
}

#[test]
fn a_tail_that_does_not_verify_is_refused_unless_a_new_segment_is_asked_for() {
    let (_dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    append_n(&log, 5);
    drop(log);
    let text = std::fs::read_to_string(&path).unwrap();
    // The last entry edited, and a partial line after it.
    let tampered = text.replacen("{\"i\":4}", "{\"i\":5}", 1) + "{\"seq\":5,";
    assert_ne!(text, tampered);
    std::fs::write(&path, &tampered).unwrap();

    match AuditLog::open(&path, key(1), OpenOptions::new()) {
        Err(Error::TailUnverified { problem, .. }) => {
            assert!(problem.contains("does not verify"), "{problem}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("appending after a tampered entry"),
    }
    // Nothing was written or cut.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), tampered);

    let log = AuditLog::open(
        &path,
        key(1),
        OpenOptions::new().new_segment("operator: tail damaged, see ticket 42"),
    )
    .unwrap();
    assert!(log.opened().new_segment.is_some());
    assert_eq!(log.opened().recovered.as_ref().unwrap().dropped_bytes, 9);
    assert_eq!(append_n(&log, 1), [7]);
    drop(log);
    let all = entries(&path);
    assert_eq!(all[5].kind, kind::SEGMENT_START);
    assert_eq!(
        all[5].detail["reason"],
        "operator: tail damaged, see ticket 42"
    );
    assert_eq!(all[6].kind, kind::RECOVERED);
    // The damage is still reported.
    let r = verify(&path, &[key(1)], None).unwrap();
    let bad = r.first_bad.unwrap();
    assert_eq!(
        (bad.line, bad.reason),
        (
            5,
            Reason::MacMismatch {
                key_id: "k1".into()
            }
        )
    );
}

#[test]
fn a_changed_key_is_rotated_in_the_chain_when_the_old_one_is_given() {
    let (_dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    append_n(&log, 3);
    drop(log);
    // The key file changed while the daemon was down, the old key is gone: refuse.
    assert!(matches!(
        AuditLog::open(&path, key(2), OpenOptions::new()),
        Err(Error::TailUnverified { .. })
    ));
    // With the old key: the chain records the rotation.
    let log = AuditLog::open(&path, key(2), OpenOptions::new().previous_key(key(1))).unwrap();
    assert_eq!(log.opened().rotated_from.as_deref(), Some("k1"));
    assert_eq!(log.key_id().unwrap(), "k2");
    append_n(&log, 1);
    drop(log);
    assert_eq!(kinds(&path)[3], kind::KEY_ROTATION);
    let r = verify(&path, &[key(1), key(2)], None).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        (r.rotations, r.key_ids.clone()),
        (1, vec!["k1".into(), "k2".into()])
    );

    // Rotating on request, then reopening before any entry under the new key.
    let log = AuditLog::open(&path, key(2), OpenOptions::new()).unwrap();
    log.rotate(key(3)).unwrap();
    assert!(log.rotate(key(3)).is_err());
    drop(log);
    assert!(AuditLog::open(&path, key(3), OpenOptions::new()).is_err());
    let log = AuditLog::open(&path, key(3), OpenOptions::new().previous_key(key(2))).unwrap();
    assert_eq!(log.opened().rotated_from, None);
    append_n(&log, 1);
    drop(log);
    assert!(
        verify(&path, &[key(1), key(2), key(3)], None)
            .unwrap()
            .is_ok()
    );
}

#[test]
fn a_lost_key_can_be_replaced_by_a_new_segment() {
    let (_dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    append_n(&log, 3);
    drop(log);
    let log = AuditLog::open(&path, key(2), OpenOptions::new().new_segment("k1 lost")).unwrap();
    append_n(&log, 2);
    drop(log);
    assert_eq!(kinds(&path)[3], kind::SEGMENT_START);
    // Whoever still has k1 can verify it all; the segment start may bring in k2.
    let r = verify(&path, &[key(1), key(2)], None).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!((r.segments, r.entries_verified), (1, 6));
    // Without k1 the first segment cannot be verified, and that is what is reported.
    let r = verify(&path, &[key(2)], None).unwrap();
    assert_eq!(
        r.first_bad.unwrap().reason,
        Reason::UnknownKey {
            key_id: "k1".into()
        }
    );
}

#[test]
fn checkpoints_are_written_every_n_entries_and_survive_reopening() {
    let (dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new().checkpoint_every(10)).unwrap();
    append_n(&log, 25);
    drop(log);
    let k = kinds(&path);
    assert_eq!(k.len(), 27);
    assert_eq!(
        (k[10].as_str(), k[21].as_str()),
        (kind::CHECKPOINT, kind::CHECKPOINT)
    );
    let side = dir.path().join("audit.log.checkpoint");
    let cp = CheckpointFile::read(&side).unwrap();
    assert_eq!(
        (cp.seq, cp.mac.as_str()),
        (21, entries(&path)[21].mac.as_str())
    );

    // Reopening picks up the count since the last checkpoint (5) and the running hash.
    let log = AuditLog::open(&path, key(1), OpenOptions::new().checkpoint_every(10)).unwrap();
    append_n(&log, 5);
    drop(log);
    assert_eq!(kinds(&path)[32], kind::CHECKPOINT);
    assert_eq!(CheckpointFile::read(&side).unwrap().seq, 32);

    // Reopening after every entry, with the log ending on a checkpoint, a rotation, a
    // recovered line: every checkpoint still matches the verifier's running hash.
    for i in 0..30u8 {
        let log = AuditLog::open(&path, key(1), OpenOptions::new().checkpoint_every(3)).unwrap();
        append_n(&log, 1);
        if i % 7 == 0 {
            append_raw(&path, b"{\"partial");
        }
        if i == 11 {
            log.checkpoint().unwrap();
        }
    }
    let r = verify(&path, &[key(1)], Some(&side)).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert!(r.checkpoints >= 12, "{r:?}");
    assert_eq!(
        r.checkpoint_file_seq,
        Some(CheckpointFile::read(&side).unwrap().seq)
    );
    assert_eq!(
        kinds(&path)
            .iter()
            .filter(|k| *k == kind::RECOVERED)
            .count(),
        5
    );
}

#[test]
fn batched_fsync_syncs_after_max_entries_and_after_max_delay() {
    let (_dir, path) = setup();
    let batch = |max_entries, max_delay| {
        OpenOptions::new().fsync(FsyncPolicy::Batch {
            max_entries,
            max_delay,
        })
    };
    // The count bound, with a delay too long to matter (dropping must not wait for it).
    let log = AuditLog::open(&path, key(1), batch(4, Duration::from_secs(3600))).unwrap();
    append_n(&log, 3);
    assert_eq!(log.unsynced().unwrap(), 3);
    append_n(&log, 1);
    assert_eq!(log.unsynced().unwrap(), 0);
    append_n(&log, 2);
    assert_eq!(log.unsynced().unwrap(), 2);
    log.sync().unwrap();
    assert_eq!(log.unsynced().unwrap(), 0);
    append_n(&log, 1);
    drop(log);

    // The time bound.
    let log = AuditLog::open(&path, key(1), batch(1000, Duration::from_millis(50))).unwrap();
    append_n(&log, 2);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(log.unsynced().unwrap(), 0);
    drop(log);

    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    append_n(&log, 1);
    assert_eq!(log.unsynced().unwrap(), 0);
    drop(log);
    let r = verify(&path, &[key(1)], None).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.entries_verified, 10);
}

#[test]
fn a_second_writer_is_refused() {
    let (_dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    assert!(matches!(
        AuditLog::open(&path, key(1), OpenOptions::new()),
        Err(Error::Locked { .. })
    ));
    drop(log);
    assert!(AuditLog::open(&path, key(1), OpenOptions::new()).is_ok());
}

#[test]
fn threads_share_one_log() {
    let (_dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new().checkpoint_every(37)).unwrap();
    let mut seqs: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let log = &log;
                s.spawn(move || {
                    (0..50)
                        .map(|i| {
                            log.append(kind::API_WRITE, "ops", None, json!({"t": t, "i": i}))
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    drop(log);
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 400);
    let r = verify(&path, &[key(1)], None).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.entries_verified, 400 + 400 / 37);
}

#[test]
fn append_refuses_reserved_kinds_and_bad_entries() {
    let (_dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    for kind in [kind::CHECKPOINT, kind::KEY_ROTATION, "", "Upper", "a b"] {
        assert!(
            log.append(kind, "ops", None, json!({})).is_err(),
            "{kind:?}"
        );
    }
    assert!(log.append(kind::RELOAD, "", None, json!({})).is_err());
    assert!(log.append(kind::RELOAD, "ops", None, json!([1])).is_err());
    let huge = "x".repeat(skua_audit::MAX_LINE);
    assert!(
        log.append(kind::RELOAD, "ops", None, json!({"x": huge}))
            .is_err()
    );
    // None of them was written, and the log goes on.
    assert_eq!(log.append(kind::RELOAD, "ops", None, json!({})).unwrap(), 0);
    drop(log);
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
}

#[test]
fn tail_returns_the_last_entries_in_order() {
    let (_dir, path) = setup();
    let log = AuditLog::open(&path, key(1), OpenOptions::new()).unwrap();
    append_n(&log, 20);
    drop(log);
    append_raw(&path, b"{\"seq\":20,");
    let last: Vec<u64> = tail(&path, 5).unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(last, [15, 16, 17, 18, 19]);
    assert_eq!(tail(&path, 100).unwrap().len(), 20);
    assert!(tail(&path, 0).unwrap().is_empty());
    assert_eq!(tail(&path, 1).unwrap()[0].detail, json!({"i": 19}));
}

#[test]
fn a_failed_checkpoint_names_the_entry_that_was_written() {
    let (dir, path) = setup();
    // A directory where the checkpoint file goes: the rename onto it fails.
    std::fs::create_dir(dir.path().join("audit.log.checkpoint")).unwrap();
    let log = AuditLog::open(&path, key(1), OpenOptions::new().checkpoint_every(2)).unwrap();
    assert_eq!(append_n(&log, 1), [0]);
    match log.append(kind::RELOAD, "ops", None, json!({})) {
        Err(Error::CheckpointFailed { seq: 1, .. }) => {}
        other => panic!("{other:?}"),
    }
    // The entry and the checkpoint entry are in the log, and appending goes on.
    assert_eq!(append_n(&log, 1), [3]);
    drop(log);
    assert_eq!(kinds(&path)[2], kind::CHECKPOINT);
    let r = verify(&path, &[key(1)], None).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert_eq!((r.entries_verified, r.checkpoints), (4, 1));
}

/// The log and its checkpoint file are private (0600), an older 0644 log is made private at
/// open, the log is never opened through a symbolic link, and the checkpoint's temporary
/// never follows one planted under its old fixed name.
#[test]
fn files_are_private_and_links_are_not_followed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("skua-audit-perm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let key = skua_audit::AuditKey::from_hex(&"44".repeat(32)).unwrap();
    let path = dir.join("audit.log");
    let victim = dir.join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("audit.log.checkpoint.tmp")).unwrap();
    {
        let log = skua_audit::AuditLog::open(
            &path,
            key.clone(),
            skua_audit::OpenOptions::new().checkpoint_every(2),
        )
        .unwrap();
        for i in 0..5 {
            log.append("test", "t", None, serde_json::json!({ "i": i }))
                .unwrap();
        }
        assert_eq!(log.opened().tightened_from, None);
    }
    assert_eq!(mode(&path), 0o600);
    let mut cp = path.as_os_str().to_owned();
    cp.push(".checkpoint");
    assert_eq!(mode(std::path::Path::new(&cp)), 0o600);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    // An old world-readable log is tightened.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    {
        let log =
            skua_audit::AuditLog::open(&path, key.clone(), skua_audit::OpenOptions::new()).unwrap();
        assert_eq!(log.opened().tightened_from, Some(0o644));
    }
    assert_eq!(mode(&path), 0o600);
    // A link in place of the log is refused.
    let link = dir.join("link.log");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    assert!(skua_audit::AuditLog::open(&link, key, skua_audit::OpenOptions::new()).is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    let _ = std::fs::remove_dir_all(dir);
}
