//! rtnetlink against the running kernel, in a network namespace of our own holding a veth
//! pair (no VFs, no SR-IOV): the VF list parses as empty, setting a VF attribute gets the
//! "no VFs" error, the kernel's own refusal is mapped, and a missing interface is named.
//! Needs root (CI runs as root); it does not skip.

use std::fs::File;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sched::{CloneFlags, setns};
use skua_sriov::{Error, MacAddr, Rtnetlink, VfAttr, VfControl};

fn euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    // Uid: real effective saved fs
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// Runs a command, at most 10 s; panics with its stderr when it fails.
fn run(args: &[&str]) {
    let mut child = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            assert!(status.success(), "{args:?}: {status}: {err}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{args:?} took more than 10 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn veth_without_vfs() {
    assert_eq!(
        euid(),
        0,
        "this test needs root (network namespace); it does not skip"
    );
    let ns = Netns(format!("skua-sriov-{}", std::process::id()));
    let _ = Command::new("ip")
        .args(["netns", "del", &ns.0])
        .stderr(Stdio::null())
        .status();
    run(&["ip", "netns", "add", &ns.0]);
    run(&[
        "ip", "-n", &ns.0, "link", "add", "sv0", "type", "veth", "peer", "name", "sv1",
    ]);
    run(&["ip", "-n", &ns.0, "link", "set", "sv0", "up"]);

    // A socket belongs to the namespace it is created in: do the netlink work on a thread
    // that has entered the test namespace; the test's own thread never moves.
    let (tx, rx) = mpsc::channel();
    let path = format!("/run/netns/{}", ns.0);
    std::thread::spawn(move || {
        let f = File::open(&path).unwrap();
        setns(&f, CloneFlags::CLONE_NEWNET).unwrap();
        let nl = Rtnetlink::new();
        let mac = VfAttr::Mac(MacAddr([2, 0, 0, 0, 0x53, 1]));
        let _ = tx.send((
            nl.vf_list("sv0"),
            nl.num_vfs("sv0"),
            nl.set_vf("sv0", 0, &mac),
            nl.send_vf_attr("sv0", 0, &mac),
            nl.send_vf_attr("sv0", 0, &VfAttr::Trust(true)),
            nl.vf_list("nosuch0"),
            nl.vf_list("lo"),
        ));
    });
    let (list, count, checked, raw_mac, raw_trust, missing, lo) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("netlink calls took more than 20 s");

    assert_eq!(list.unwrap(), vec![], "a veth has no VF list");
    assert_eq!(count.unwrap(), 0);
    assert_eq!(lo.unwrap(), vec![]);

    let err = checked.unwrap_err();
    assert!(matches!(err, Error::NoVfs { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "sv0 has no VFs (netlink reports none: sriov_numvfs is 0, or it is not an SR-IOV PF)"
    );

    // Sent anyway, the kernel refuses (veth has no ndo_set_vf_mac): net/core/rtnetlink.c
    // do_setvfinfo returns -EOPNOTSUPP.
    let err = raw_mac.unwrap_err();
    assert!(matches!(err, Error::Netlink { errno: 95, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "driver of sv0 does not support setting VF mac"
    );
    assert_eq!(
        raw_trust.unwrap_err().to_string(),
        "driver of sv0 does not support setting VF trust"
    );

    let err = missing.unwrap_err();
    assert!(matches!(err, Error::Netlink { errno: 19, .. }), "{err:?}");
    assert_eq!(err.to_string(), "no such network interface nosuch0");
}
