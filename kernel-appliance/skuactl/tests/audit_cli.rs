//! `skuactl audit verify` on good, tampered, cut and crashed logs: output and exit codes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use skua_audit::serde_json::json;
use skua_audit::{AuditKey, AuditLog, OpenOptions, kind};

const SECRET_1: &str = "0101010101010101010101010101010101010101010101010101010101010101";
const SECRET_2: &str = "0202020202020202020202020202020202020202020202020202020202020202";

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("skuactl-audit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Setup {
    dir: TempDir,
    log: PathBuf,
    key1: PathBuf,
    key2: PathBuf,
    checkpoint: PathBuf,
}

/// 40 entries under key 1, a rotation, 20 under key 2; a checkpoint every 15.
fn setup(name: &str) -> Setup {
    let dir = TempDir::new(name);
    let log = dir.path().join("audit.log");
    let key_file = |name: &str, secret: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("{secret}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    };
    let (key1, key2) = (key_file("k1.key", SECRET_1), key_file("k2.key", SECRET_2));
    let w = AuditLog::open(
        &log,
        AuditKey::from_hex(SECRET_1).unwrap(),
        OpenOptions::new().checkpoint_every(15),
    )
    .unwrap();
    for i in 0..60 {
        if i == 40 {
            w.rotate(AuditKey::from_hex(SECRET_2).unwrap()).unwrap();
        }
        w.append(
            kind::API_WRITE,
            "ops",
            Some("192.0.2.1".parse().unwrap()),
            json!({"i": i}),
        )
        .unwrap();
    }
    drop(w);
    Setup {
        checkpoint: dir.path().join("audit.log.checkpoint"),
        dir,
        log,
        key1,
        key2,
    }
}

fn skuactl(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skuactl"))
        .args(args.iter().map(|a| a.as_ref()))
        .env_remove("SKUA_AUDIT_KEY")
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn verify_all(s: &Setup, log: &Path) -> Output {
    skuactl(&[
        &"audit",
        &"verify",
        &log,
        &"--key-file",
        &s.key1,
        &"--key-file",
        &s.key2,
        &"--checkpoint",
        &s.checkpoint,
    ])
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_good_log_verifies() {
    let s = setup("a_good_log_verifies");
    let o = verify_all(&s, &s.log);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    // 60 entries and a rotation, a checkpoint after every 15 of them: the last one is
    // followed by one entry.
    assert!(out.contains("OK, 65 entries verified (seq 0..64)"), "{out}");
    assert!(out.contains("1 rotations, 4 checkpoints"), "{out}");
    assert!(out.contains("checkpoint file's seq 63 found"), "{out}");

    // The JSON report, one key from the environment.
    let o = Command::new(env!("CARGO_BIN_EXE_skuactl"))
        .args(["audit", "verify", "--json", "--key-env", "AUDIT_K1"])
        .arg(&s.log)
        .arg(format!("--key-file={}", s.key2.display()))
        .env("AUDIT_K1", SECRET_1)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("\"entries_verified\": 65"), "{out}");
    assert!(out.contains("\"first_bad\": null"), "{out}");
    assert!(err.contains("without --checkpoint"), "{err}");
}

#[test]
fn a_tampered_log_fails_with_the_first_bad_entry() {
    let s = setup("a_tampered_log_fails");
    let mut l = lines(&s.log);
    assert!(l[4].contains("{\"i\":4}"));
    l[4] = l[4].replace("{\"i\":4}", "{\"i\":5}");
    let tampered = s.dir.path().join("tampered.log");
    write_lines(&tampered, &l);
    let o = verify_all(&s, &tampered);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        out.contains("line 5, seq 4: MAC mismatch under key"),
        "{out}"
    );
    assert!(out.contains("4 entries verified before it"), "{out}");

    // A deleted line.
    let mut l = lines(&s.log);
    l.remove(20);
    write_lines(&tampered, &l);
    let o = verify_all(&s, &tampered);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        out.contains("line 21, seq 21: seq 21 where 20 was expected"),
        "{out}"
    );

    // Entries cut off the end: only the checkpoint file tells.
    let l = lines(&s.log);
    write_lines(&tampered, &l[..50]);
    let o = verify_all(&s, &tampered);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        out.contains("line 51, seq 50: the log ends at seq 49"),
        "{out}"
    );
    let o = skuactl(&[
        &"audit",
        &"verify",
        &tampered,
        &"--key-file",
        &s.key1,
        &"--key-file",
        &s.key2,
    ]);
    assert_eq!(o.status.code(), Some(0));

    // A missing key.
    let o = skuactl(&[&"audit", &"verify", &s.log, &"--key-file", &s.key1]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(out.contains("which the verifier was not given"), "{out}");
}

#[test]
fn a_partial_last_line_is_a_warning() {
    let s = setup("a_partial_last_line_");
    let mut content = std::fs::read(&s.log).unwrap();
    content.extend_from_slice(b"{\"seq\":65,\"ts\":");
    let crashed = s.dir.path().join("crashed.log");
    std::fs::write(&crashed, content).unwrap();
    let o = verify_all(&s, &crashed);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("OK, 65 entries verified"), "{out}");
    assert!(
        err.contains("warning") && err.contains("line 66 (15 bytes)"),
        "{err}"
    );
}

#[test]
fn usage_and_io_errors_exit_2() {
    let s = setup("usage_and_io_errors_");
    let cases: [&[&dyn AsRef<std::ffi::OsStr>]; 7] = [
        &[&"audit"],
        &[&"audit", &"frobnicate"],
        &[&"audit", &"verify", &s.log],
        &[&"audit", &"verify", &"--key-file", &s.key1],
        &[
            &"audit",
            &"verify",
            &s.log,
            &"--key-file",
            &s.key1,
            &"--bogus",
        ],
        &[
            &"audit",
            &"verify",
            &s.dir.path().join("missing.log"),
            &"--key-file",
            &s.key1,
        ],
        &[&"audit", &"verify", &s.log, &"--key-env", &"SKUA_AUDIT_KEY"],
    ];
    for args in cases {
        let o = skuactl(args);
        assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    }
    // A key file others can read is refused.
    std::fs::set_permissions(&s.key1, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = skuactl(&[&"audit", &"verify", &s.log, &"--key-file", &s.key1]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("chmod 600"), "{err}");
    let o = skuactl(&[&"audit", &"--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o).0.contains("skuactl audit verify FILE"));
}
