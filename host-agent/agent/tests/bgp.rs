//! Anycast through an existing BGP daemon, end to end: runs `tests/ha/bgp.py` (two BIRD 2
//! instances in network namespaces, skuad and skua-agent on the node; the route to the
//! service address disappears at the router when skuad stops answering, within the
//! health-check bound, and comes back when it answers again).
//!
//! Needs root (network namespaces) and BIRD 2 (`bird`, `birdc`: Debian's `bird2`, which
//! tests/run.sh installs); CI runs as root, so a missing privilege is a failure, not a
//! skip. Builds skuad (same profile as this test) when it is missing or stale.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The script's own bounds are a few seconds per step; this only stops a hung run.
const TIMEOUT: Duration = Duration::from_secs(300);

fn euid() -> u32 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .expect("an Uid: line with the effective uid")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// skuad next to skua-agent, built with the same profile (cargo does nothing when it is
/// up to date, and rebuilds it when its sources changed since).
fn skuad(bin: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace())
        .args(["build", "--quiet", "-p", "skuad"]);
    if bin.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let st = cmd.status().expect("running cargo build -p skuad");
    assert!(st.success(), "cargo build -p skuad failed: {st}");
    let skuad = bin.join("skuad");
    assert!(
        skuad.exists(),
        "{} is missing after cargo build -p skuad (another --target-dir?)",
        skuad.display()
    );
    skuad
}

#[test]
fn the_route_follows_the_health_checks() {
    assert_eq!(
        euid(),
        0,
        "this test needs root (network namespaces); CI runs as root"
    );
    let agent = Path::new(env!("CARGO_BIN_EXE_skua-agent"));
    let bin = agent.parent().expect("the binary's directory");
    skuad(bin);
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bgp");
    std::fs::create_dir_all(&work).expect("the work directory");
    let log_path = work.join("bgp.out");
    let log = std::fs::File::create(&log_path).expect("the log file");
    let mut child = Command::new("python3")
        .arg(workspace().join("tests/ha/bgp.py"))
        .arg(bin)
        .arg(&work)
        .arg("--json")
        .arg(work.join("bgp.json"))
        .stdout(log.try_clone().expect("the log file"))
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .expect("python3 tests/ha/bgp.py");
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting for bgp.py") {
            break Some(st);
        }
        if start.elapsed() > TIMEOUT {
            // SIGTERM first: the script then removes its namespaces and processes.
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM);
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(20) {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = std::fs::read_to_string(&log_path).unwrap_or_default();
    println!("{out}");
    match status {
        Some(st) => assert!(st.success(), "tests/ha/bgp.py failed ({st}):\n{out}"),
        None => panic!("tests/ha/bgp.py took more than {TIMEOUT:?}:\n{out}"),
    }
}
