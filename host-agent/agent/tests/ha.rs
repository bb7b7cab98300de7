//! The two-node failover tests (`tests/ha/ha.py`) and the keepalived interop tests
//! (`tests/ha/keepalived.py`), run as root in network namespaces they create. They need
//! skuad next to skua-agent in the target directory (`cargo test --workspace` builds it;
//! alone, this test builds it first).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn bindir() -> PathBuf {
    let agent = Path::new(env!("CARGO_BIN_EXE_skua-agent"));
    let dir = agent.parent().expect("binary directory").to_path_buf();
    if !dir.join("skuad").exists() {
        let st = Command::new(env!("CARGO"))
            .args(["build", "-p", "skuad", "--bin", "skuad"])
            .status()
            .expect("cargo build -p skuad");
        assert!(st.success(), "building skuad failed");
    }
    assert!(dir.join("skuad").exists(), "no skuad in {}", dir.display());
    dir
}

/// One script at a time: failover timing must not compete with the other script for the
/// machine's cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_script(script: &str, args: &[&str], limit: Duration) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let uid = Command::new("id").arg("-u").output().expect("id -u");
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "{script} needs root (network namespaces, raw sockets); CI runs as root"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work = std::env::temp_dir().join(format!("skua-{script}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let start = Instant::now();
    let mut child = Command::new("/usr/bin/python3")
        .arg(root.join("tests/ha").join(script))
        .arg(bindir())
        .arg(&work)
        .args(args)
        .spawn()
        .expect("python3");
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let logs = [
                "n1/agent.log",
                "n2/agent.log",
                "sk/agent.log",
                "ka/keepalived.log",
            ]
            .iter()
            .filter_map(|l| {
                std::fs::read_to_string(work.join(l))
                    .ok()
                    .map(|t| format!("--- {l}\n{t}"))
            })
            .collect::<Vec<_>>()
            .join("\n");
            assert!(st.success(), "{script} failed ({st}); logs:\n{logs}");
            let _ = std::fs::remove_dir_all(&work);
            return;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{script} took longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn two_nodes_fail_over_without_ever_answering_twice() {
    run_script("ha.py", &["all"], Duration::from_secs(300));
}

/// With skuad's AF_XDP dataplane attached (its program answers the node's own address in
/// the driver): the VIP is still answered only under the lease.
#[test]
fn with_xdp_the_vip_is_still_answered_only_under_the_lease() {
    run_script(
        "ha.py",
        &["--xdp", "kill-agent", "partition"],
        Duration::from_secs(180),
    );
}

#[test]
fn keepalived_interop_both_roles_v4_v6_multicast_unicast() {
    run_script("keepalived.py", &[], Duration::from_secs(300));
}
