//! Every sysfs path of the control path on a fake tree (tests/common): the errors an
//! operator can meet, the order of writes, and idempotence.

mod common;

use std::io;
use std::path::Path;

use common::{FakeKernel, vf_addr};
use skua_sriov::{
    Action, Error, LinkState, MacAddr, PfConfig, PfRef, PlanOptions, SysfsWriter, VfAttr, VfConfig,
    observe, plan, reconcile, reconcile_pf, status,
};

const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0x53, 1]);

fn vf(index: u16) -> VfConfig {
    VfConfig {
        index,
        mac: None,
        vlan: None,
        qos: None,
        spoofchk: None,
        trust: None,
        link_state: None,
        vfio: false,
        qemu_id: None,
        proxmox: None,
    }
}

fn pf(name: &str, numvfs: u16, vfs: Vec<VfConfig>) -> PfConfig {
    PfConfig {
        pf: name.parse().unwrap(),
        numvfs,
        autoprobe: false,
        vfs,
    }
}

/// VF 0: MAC, VLAN 100, spoof checking off, trusted, link forced up, on vfio-pci.
fn wan_vf() -> VfConfig {
    VfConfig {
        mac: Some(MAC),
        vlan: Some(100),
        qos: None,
        spoofchk: Some(false),
        trust: Some(true),
        link_state: Some(LinkState::Enable),
        vfio: true,
        qemu_id: Some("skua-wan".into()),
        proxmox: Some(skua_sriov::ProxmoxTarget { vmid: 120, slot: 0 }),
        ..vf(0)
    }
}

#[test]
fn create_configure_bind_in_order_then_nothing_to_do() {
    let k = FakeKernel::new();
    k.load_vfio();
    let pf_addr = k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    let host = k.host();
    let cfg = vec![pf("enp3s0", 2, vec![wan_vf()])];

    let out = reconcile(&host, &cfg, PlanOptions::default()).unwrap();
    let done = out[0].result.as_ref().unwrap();
    assert_eq!(done.len(), 8, "{done:?}");
    let vf0 = vf_addr(pf_addr, 0).to_string();
    assert_eq!(vf0, "0000:03:10.0");
    assert_eq!(
        k.log(),
        vec![
            "bus/pci/devices/0000:03:00.0/sriov_drivers_autoprobe = 0".to_string(),
            "bus/pci/devices/0000:03:00.0/sriov_numvfs = 2".into(),
            "netlink enp3s0 vf 0 mac 02:00:00:00:53:01".into(),
            "netlink enp3s0 vf 0 vlan 100 qos 0".into(),
            "netlink enp3s0 vf 0 spoofchk off".into(),
            "netlink enp3s0 vf 0 trust on".into(),
            "netlink enp3s0 vf 0 link_state enable".into(),
            format!("bus/pci/devices/{vf0}/driver_override = vfio-pci"),
            format!("bus/pci/drivers_probe = {vf0}"),
        ]
    );
    // The VFs were created while autoprobe was 0: no igbvf on them before the MAC was set.
    assert_eq!(*k.autoprobe_at_creation.lock().unwrap(), vec!["0"]);
    assert_eq!(
        k.driver_of(vf_addr(pf_addr, 0)).as_deref(),
        Some("vfio-pci")
    );
    assert_eq!(k.driver_of(vf_addr(pf_addr, 1)), None);
    assert_eq!(k.link("enp3s0", 0).mac, Some(MAC));

    // Second run: nothing planned, nothing written, the tree unchanged.
    let before = k.snapshot();
    k.clear_log();
    let out = reconcile(&host, &cfg, PlanOptions::default()).unwrap();
    assert_eq!(out[0].result.as_ref().unwrap(), &Vec::<Action>::new());
    assert_eq!(k.log(), Vec::<String>::new());
    assert_eq!(k.snapshot(), before);

    // Status: converged, and the lines that give VF 0 to the appliance.
    let st = status(&host, &cfg, PlanOptions::default());
    let json = serde_json::to_value(&st).unwrap();
    let pf0 = &json[0];
    assert_eq!(pf0["pci"], "0000:03:00.0");
    assert_eq!(pf0["ifname"], "enp3s0");
    assert_eq!(pf0["num_vfs"], 2);
    assert_eq!(pf0["pending"], serde_json::json!([]));
    assert_eq!(pf0["error"], serde_json::Value::Null);
    assert_eq!(pf0["vfs"][0]["driver"], "vfio-pci");
    assert_eq!(pf0["vfs"][0]["iommu_group"], 100);
    assert_eq!(pf0["vfs"][0]["link"]["mac"], "02:00:00:00:53:01");
    assert_eq!(
        pf0["vfs"][0]["passthrough"]["qemu"],
        "-device vfio-pci,host=0000:03:10.0,id=skua-wan"
    );
    assert_eq!(
        pf0["vfs"][0]["passthrough"]["proxmox"],
        "qm set 120 -hostpci0 0000:03:10.0"
    );
    assert_eq!(pf0["vfs"][1]["configured"], false);
    assert_eq!(pf0["vfs"][1]["passthrough"], serde_json::Value::Null);
    // And it reads back.
    let back: Vec<skua_sriov::PfStatus> = serde_json::from_value(json).unwrap();
    assert_eq!(back, st);
}

#[test]
fn no_sriov_capability() {
    let k = FakeKernel::new();
    k.add_pf("eno1", "0000:00:19.0", None, Some(1));
    let host = k.host();
    let cfg = vec![pf("eno1", 2, vec![])];
    let err = observe(&host, &cfg[0]).unwrap_err();
    assert!(matches!(err, Error::NoSriov { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "eno1 (0000:00:19.0) has no SR-IOV capability"
    );
    let st = status(&host, &cfg, PlanOptions::default());
    assert_eq!(
        st[0].error.as_deref(),
        Some("eno1 (0000:00:19.0) has no SR-IOV capability")
    );
    assert_eq!(k.log(), Vec::<String>::new());
}

#[test]
fn pf_that_is_not_there_or_not_pci() {
    let k = FakeKernel::new();
    k.add_virtual("veth0");
    let host = k.host();
    let err = observe(&host, &pf("veth0", 1, vec![]))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("veth0 is not a PCI device ("), "{err}");
    let err = observe(&host, &pf("eth9", 1, vec![]))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("eth9: no such network interface ("),
        "{err}"
    );
    let err = observe(&host, &pf("0000:09:00.0", 1, vec![]))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("no PCI device 0000:09:00.0 ("), "{err}");
}

#[test]
fn pf_by_pci_address_finds_its_interface() {
    let k = FakeKernel::new();
    k.load_vfio();
    k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    let host = k.host();
    let cfg = pf(
        "0000:03:00.0",
        1,
        vec![VfConfig {
            mac: Some(MAC),
            ..vf(0)
        }],
    );
    let obs = observe(&host, &cfg).unwrap();
    assert_eq!(obs.ifname.as_deref(), Some("enp3s0"));
    assert_eq!(obs.pf, PfRef::Pci("0000:03:00.0".parse().unwrap()));
    reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap();
    assert_eq!(k.link("enp3s0", 0).mac, Some(MAC));
}

#[test]
fn iommu_off_is_refused_before_anything_is_written() {
    let k = FakeKernel::new();
    k.load_vfio();
    k.add_pf("enp3s0", "0000:03:00.0", Some(7), None);
    let host = k.host();
    let cfg = pf(
        "enp3s0",
        2,
        vec![VfConfig {
            vfio: true,
            ..vf(1)
        }],
    );
    let err = reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap_err();
    assert!(matches!(err, Error::IommuOff { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "enp3s0 (0000:03:00.0) has no IOMMU group: IOMMU is off (boot with intel_iommu=on iommu=pt / amd_iommu=on)"
    );
    assert_eq!(k.log(), Vec::<String>::new());
    // Without vfio, the same PF is fine.
    reconcile_pf(&host, &pf("enp3s0", 2, vec![]), PlanOptions::default()).unwrap();
    assert_eq!(k.read("bus/pci/devices/0000:03:00.0/sriov_numvfs"), "2");
}

#[test]
fn vf_without_iommu_group_is_refused_at_bind() {
    let k = FakeKernel::new();
    k.load_vfio();
    let pf_addr = k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    k.boot_with_vfs(pf_addr, 2, Some("igbvf"));
    k.remove_group(vf_addr(pf_addr, 1));
    let host = k.host();
    let cfg = pf(
        "enp3s0",
        2,
        vec![VfConfig {
            vfio: true,
            ..vf(1)
        }],
    );
    let err = reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("(bind VF 1 to vfio-pci) failed"), "{text}");
    assert!(
        text.ends_with(
            "VF 1 (0000:03:10.2) of enp3s0 has no IOMMU group: IOMMU is off (boot with intel_iommu=on iommu=pt / amd_iommu=on)"
        ),
        "{text}"
    );
    let Error::Step { source, .. } = err else {
        panic!("{err:?}")
    };
    assert!(matches!(*source, Error::IommuOff { .. }));
    // Only the autoprobe write happened (the plan turns it off, as configured).
    assert_eq!(
        k.log(),
        vec!["bus/pci/devices/0000:03:00.0/sriov_drivers_autoprobe = 0"]
    );
    assert_eq!(k.driver_of(vf_addr(pf_addr, 1)).as_deref(), Some("igbvf"));
}

#[test]
fn vfio_pci_not_loaded() {
    let k = FakeKernel::new();
    k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    let host = k.host();
    let cfg = pf(
        "enp3s0",
        1,
        vec![VfConfig {
            vfio: true,
            ..vf(0)
        }],
    );
    let err = reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap_err();
    assert!(matches!(err, Error::VfioNotLoaded { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "vfio-pci not loaded: modprobe vfio-pci (needed for enp3s0 (0000:03:00.0))"
    );
    assert_eq!(k.log(), Vec::<String>::new());
}

#[test]
fn vf_on_another_driver_is_unbound_and_rebound() {
    let k = FakeKernel::new();
    k.load_vfio();
    let pf_addr = k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    k.boot_with_vfs(pf_addr, 2, Some("igbvf"));
    fs_write(
        &k.root
            .join("bus/pci/devices/0000:03:00.0/sriov_drivers_autoprobe"),
        "0",
    );
    let host = k.host();
    let cfg = pf(
        "enp3s0",
        2,
        vec![VfConfig {
            vfio: true,
            ..vf(1)
        }],
    );
    let done = reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap();
    assert_eq!(done, vec![Action::BindVfio { vf: 1 }]);
    assert_eq!(
        k.log(),
        vec![
            "bus/pci/devices/0000:03:10.2/driver_override = vfio-pci",
            "bus/pci/devices/0000:03:10.2/driver/unbind = 0000:03:10.2",
            "bus/pci/drivers_probe = 0000:03:10.2",
        ]
    );
    assert_eq!(
        k.driver_of(vf_addr(pf_addr, 1)).as_deref(),
        Some("vfio-pci")
    );
    assert_eq!(k.driver_of(vf_addr(pf_addr, 0)).as_deref(), Some("igbvf"));
}

fn fs_write(path: &Path, value: &str) {
    std::fs::write(path, value).unwrap();
}

#[test]
fn vf_already_on_vfio_pci_gets_no_write() {
    let k = FakeKernel::new();
    k.load_vfio();
    let pf_addr = k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    k.boot_with_vfs(pf_addr, 2, Some("vfio-pci"));
    fs_write(
        &k.root
            .join("bus/pci/devices/0000:03:00.0/sriov_drivers_autoprobe"),
        "0",
    );
    let host = k.host();
    let cfg = pf(
        "enp3s0",
        2,
        vec![
            VfConfig {
                vfio: true,
                ..vf(0)
            },
            VfConfig {
                vfio: true,
                ..vf(1)
            },
        ],
    );
    let before = k.snapshot();
    let done = reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap();
    assert_eq!(done, vec![]);
    assert_eq!(k.log(), Vec::<String>::new());
    assert_eq!(k.snapshot(), before, "files or links changed");
    // A stale plan (the VF was bound after it was made) binds nothing either.
    let obs = observe(&host, &cfg).unwrap();
    skua_sriov::apply(
        &host,
        &obs,
        &[Action::BindVfio { vf: 0 }, Action::BindVfio { vf: 1 }],
    )
    .unwrap();
    assert_eq!(k.log(), Vec::<String>::new());
    assert_eq!(k.snapshot(), before, "files or links changed");
}

#[test]
fn bind_that_does_not_take_is_reported() {
    let k = FakeKernel::new();
    k.load_vfio();
    *k.vfio_refuses.lock().unwrap() = true;
    let pf_addr = k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    k.boot_with_vfs(pf_addr, 1, Some("igbvf"));
    let host = k.host();
    let cfg = pf(
        "enp3s0",
        1,
        vec![VfConfig {
            vfio: true,
            ..vf(0)
        }],
    );
    let err = reconcile_pf(&host, &cfg, PlanOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with(
            "binding VF 0 (0000:03:10.0) of enp3s0 to vfio-pci failed: its driver is now none (the kernel log says why: dmesg | tail)"
        ),
        "{err}"
    );
}

#[test]
fn numvfs_change_refused_while_a_vf_is_on_vfio_pci() {
    let k = FakeKernel::new();
    k.load_vfio();
    let pf_addr = k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    k.boot_with_vfs(pf_addr, 2, Some("igbvf"));
    k.set_driver(vf_addr(pf_addr, 1), Some("vfio-pci"));
    k.add_holder(4242, "qemu-system-x86", "/dev/vfio/101");
    k.add_holder(777, "bash", "/dev/null");
    let host = k.host();
    let cfg = pf("enp3s0", 4, vec![]);
    let before = k.snapshot();
    let err = reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap_err();
    assert!(matches!(err, Error::VfsInUse { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("refusing to change sriov_numvfs of enp3s0 (0000:03:00.0) from 2 to 4"),
        "{text}"
    );
    assert!(
        text.contains(
            "VF 1 (0000:03:10.2) is bound to vfio-pci (IOMMU group 101, /dev/vfio/101 open by pid 4242 (qemu-system-x86))"
        ),
        "{text}"
    );
    assert!(!text.contains("bash"), "{text}");
    assert_eq!(k.log(), Vec::<String>::new());
    assert_eq!(k.snapshot(), before);
    // Status shows the refusal too.
    let st = status(&host, std::slice::from_ref(&cfg), PlanOptions::default());
    assert!(
        st[0].error.as_deref().unwrap().starts_with("refusing"),
        "{st:?}"
    );
    assert_eq!(st[0].vfs[1].users[0].pid, 4242);

    // Forced: through 0, and the VF on vfio-pci is removed.
    let done = reconcile_pf(&host, &cfg, PlanOptions { force: true }).unwrap();
    assert_eq!(
        done,
        vec![
            Action::SetAutoprobe { enabled: false },
            Action::SetNumVfs { from: 2, to: 0 },
            Action::SetNumVfs { from: 0, to: 4 },
        ]
    );
    assert_eq!(*k.removed_on_vfio.lock().unwrap(), vec!["0000:03:10.2"]);
}

#[test]
fn numvfs_from_n_to_m_goes_through_zero() {
    let k = FakeKernel::new();
    let pf_addr = k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    k.boot_with_vfs(pf_addr, 2, Some("igbvf"));
    // The fake refuses 2 -> 3 as the kernel does (drivers/pci/iov.c: -EBUSY).
    let direct = k
        .as_ref()
        .write(
            &k.root.join("bus/pci/devices/0000:03:00.0/sriov_numvfs"),
            "3",
        )
        .unwrap_err();
    assert_eq!(direct.raw_os_error(), Some(16));
    k.clear_log();

    let host = k.host();
    let cfg = pf(
        "enp3s0",
        3,
        vec![VfConfig {
            mac: Some(MAC),
            ..vf(2)
        }],
    );
    reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap();
    assert_eq!(
        k.log(),
        vec![
            "bus/pci/devices/0000:03:00.0/sriov_drivers_autoprobe = 0",
            "bus/pci/devices/0000:03:00.0/sriov_numvfs = 0",
            "bus/pci/devices/0000:03:00.0/sriov_numvfs = 3",
            "netlink enp3s0 vf 2 mac 02:00:00:00:53:01",
        ]
    );
    assert_eq!(k.read("bus/pci/devices/0000:03:00.0/sriov_numvfs"), "3");
    assert_eq!(k.link("enp3s0", 2).mac, Some(MAC));
    assert!(k.root.join("bus/pci/devices/0000:03:00.0/virtfn2").exists());
}

#[test]
fn autoprobe_on_lets_host_drivers_in_after_configuration() {
    let k = FakeKernel::new();
    k.load_vfio();
    let pf_addr = k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    let host = k.host();
    let mut cfg = pf(
        "enp3s0",
        2,
        vec![
            VfConfig {
                mac: Some(MAC),
                ..vf(0)
            },
            VfConfig {
                vfio: true,
                ..vf(1)
            },
        ],
    );
    cfg.autoprobe = true;
    reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap();
    assert_eq!(
        k.log(),
        vec![
            "bus/pci/devices/0000:03:00.0/sriov_drivers_autoprobe = 0",
            "bus/pci/devices/0000:03:00.0/sriov_numvfs = 2",
            "netlink enp3s0 vf 0 mac 02:00:00:00:53:01",
            "bus/pci/devices/0000:03:10.2/driver_override = vfio-pci",
            "bus/pci/drivers_probe = 0000:03:10.2",
            "bus/pci/devices/0000:03:00.0/sriov_drivers_autoprobe = 1",
            "bus/pci/drivers_probe = 0000:03:10.0",
        ]
    );
    assert_eq!(k.driver_of(vf_addr(pf_addr, 0)).as_deref(), Some("igbvf"));
    assert_eq!(
        k.driver_of(vf_addr(pf_addr, 1)).as_deref(),
        Some("vfio-pci")
    );
    k.clear_log();
    assert_eq!(
        reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap(),
        vec![]
    );
    assert_eq!(k.log(), Vec::<String>::new());
}

#[test]
fn vfs_that_never_appear_time_out() {
    let k = FakeKernel::new();
    k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    // Plain file writes: nothing creates virtfnN.
    let host = k.inert_host();
    let err = reconcile_pf(&host, &pf("enp3s0", 2, vec![]), PlanOptions::default()).unwrap_err();
    let Error::Step {
        step,
        total,
        source,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((*step, *total), (2, 2));
    assert!(
        matches!(
            **source,
            Error::VfsTimeout {
                want: 2,
                seen: 0,
                ..
            }
        ),
        "{source:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("step 2/2 (sriov_numvfs 0 -> 2) failed after 1 done: enp3s0 (0000:03:00.0): 2 VFs expected after writing sriov_numvfs, 0 present after"),
        "{text}"
    );
}

#[test]
fn sysfs_write_errors_say_what_they_mean() {
    let k = FakeKernel::new();
    let pf_addr = k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    k.set_driver(pf_addr, None); // PF without driver: sriov_numvfs -> ENOENT
    let host = k.host();
    let err = reconcile_pf(
        &host,
        &pf("0000:03:00.0", 2, vec![]),
        PlanOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("writing \"2\" to ") && err.contains("sriov_numvfs: the PF has no driver, or its driver does not support SR-IOV configuration through sysfs: "),
        "{err}"
    );
}

#[test]
fn too_many_vfs() {
    let k = FakeKernel::new();
    k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    let host = k.host();
    let obs = observe(&host, &pf("enp3s0", 8, vec![])).unwrap();
    let err = plan(&pf("enp3s0", 8, vec![]), &obs, PlanOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "enp3s0 (0000:03:00.0): numvfs = 8 but the device offers at most 7 (sriov_totalvfs)"
    );
}

#[test]
fn invalid_configuration_is_refused_by_reconcile() {
    let k = FakeKernel::new();
    let host = k.host();
    let err = reconcile(
        &host,
        &[pf("enp3s0", 1, vec![vf(1)])],
        PlanOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains(
            "sriov[0].vf[0] (pf = \"enp3s0\", index = 1): index must be below numvfs = 1"
        ),
        "{err}"
    );
}

#[test]
fn attributes_already_right_are_not_set_again() {
    let k = FakeKernel::new();
    k.load_vfio();
    k.add_pf("enp3s0", "0000:03:00.0", Some(7), Some(4));
    let host = k.host();
    let mut want = wan_vf();
    want.vfio = false;
    want.qemu_id = None;
    want.proxmox = None;
    let cfg = pf("enp3s0", 1, vec![want.clone()]);
    reconcile_pf(&host, &cfg, PlanOptions::default()).unwrap();
    // Change one attribute: exactly one netlink call.
    want.vlan = Some(200);
    k.clear_log();
    let done = reconcile_pf(&host, &pf("enp3s0", 1, vec![want]), PlanOptions::default()).unwrap();
    assert_eq!(
        done,
        vec![Action::SetVf {
            vf: 0,
            attr: VfAttr::Vlan { vlan: 200, qos: 0 }
        }]
    );
    assert_eq!(k.log(), vec!["netlink enp3s0 vf 0 vlan 200 qos 0"]);
}

/// The real /sys, read only: every interface of this machine is either an SR-IOV PF, or
/// refused with the message for its case. Nothing is written (a writer that fails).
#[test]
fn real_sysfs_is_read_without_surprises() {
    struct NoWrites;
    impl SysfsWriter for NoWrites {
        fn write(&self, path: &Path, _: &str) -> io::Result<()> {
            panic!("write to {} in a read-only test", path.display())
        }
    }
    let host = skua_sriov::Host::new(
        "/sys",
        "/proc",
        Box::new(NoWrites),
        Box::new(skua_sriov::Rtnetlink::new()),
    );
    let mut seen = 0;
    for e in std::fs::read_dir("/sys/class/net").unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let cfg = pf(&name, 0, vec![]);
        seen += 1;
        let has_device = Path::new("/sys/class/net")
            .join(&name)
            .join("device")
            .exists();
        match observe(&host, &cfg) {
            Ok(obs) => {
                assert!(has_device, "{name}: observed without a device link");
                assert!(obs.num_vfs <= obs.total_vfs, "{obs:?}");
                assert_eq!(obs.vfs.len(), usize::from(obs.num_vfs), "{obs:?}");
            }
            Err(Error::NotPci { pf, .. }) => {
                assert_eq!(pf, name);
                // Virtual devices have no device link; some (virtio under a non-PCI
                // transport) have one that leads to no PCI function.
                let real = std::fs::canonicalize(Path::new("/sys/class/net").join(&name)).unwrap();
                assert!(
                    !has_device || !real.starts_with("/sys/devices/pci"),
                    "{name}: {real:?}"
                );
            }
            Err(e @ Error::NoSriov { .. }) => {
                assert!(has_device, "{name}");
                let text = e.to_string();
                assert!(text.starts_with(&format!("{name} (")), "{text}");
                assert!(text.ends_with(") has no SR-IOV capability"), "{text}");
            }
            Err(e) => panic!("{name}: unexpected {e:?}"),
        }
    }
    assert!(seen > 0, "no interfaces in /sys/class/net (not even lo)");
}
