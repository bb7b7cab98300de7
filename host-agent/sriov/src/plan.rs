//! From what is configured and what is observed to the steps that close the gap, in the
//! only safe order:
//!
//! 1. `sriov_drivers_autoprobe` = 0 when VFs are about to be created (else igbvf, iavf, ...
//!    bind to a VF before its MAC is set, and the guest or host sees a random MAC);
//! 2. `sriov_numvfs`, through 0 when both counts are non-zero (drivers/pci/iov.c refuses a
//!    change between two non-zero counts with -EBUSY);
//! 3. VF attributes through the PF (mac, vlan, spoofchk, trust, link_state);
//! 4. vfio-pci binding;
//! 5. `sriov_drivers_autoprobe` = 1 and a probe of the other new VFs, when configured.
//!
//! [`plan`] is pure: same input, same steps; the steps of a second run after a successful
//! [`crate::apply`] are none.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::config::PfConfig;
use crate::netlink::{VfAttr, VfLinkInfo};
use crate::observe::Observed;

/// One step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Write `sriov_drivers_autoprobe`.
    SetAutoprobe {
        /// The value.
        enabled: bool,
    },
    /// Write `sriov_numvfs` and wait until exactly `to` VFs exist.
    SetNumVfs {
        /// The count before.
        from: u16,
        /// The count after.
        to: u16,
    },
    /// Set one attribute of a VF through the PF (rtnetlink).
    SetVf {
        /// VF index.
        vf: u16,
        /// The attribute and its value.
        attr: VfAttr,
    },
    /// Bind a VF to vfio-pci.
    BindVfio {
        /// VF index.
        vf: u16,
    },
    /// Let the host driver take a VF created while autoprobe was off.
    ProbeHostDriver {
        /// VF index.
        vf: u16,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::SetAutoprobe { enabled } => {
                write!(f, "sriov_drivers_autoprobe = {}", u8::from(*enabled))
            }
            Action::SetNumVfs { from, to } => write!(f, "sriov_numvfs {from} -> {to}"),
            Action::SetVf { vf, attr } => write!(f, "VF {vf} {} {}", attr.name(), attr.value()),
            Action::BindVfio { vf } => write!(f, "bind VF {vf} to vfio-pci"),
            Action::ProbeHostDriver { vf } => write!(f, "probe the host driver for VF {vf}"),
        }
    }
}

/// Options of [`plan`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOptions {
    /// Change `sriov_numvfs` even when VFs are bound to vfio-pci. The kernel removes every
    /// VF on a change; a VF held by a running VM makes the write wait until the VM lets go.
    pub force: bool,
}

/// The steps from `observed` to `desired`. Refuses (rather than plans) what must not or
/// cannot be done: more VFs than `sriov_totalvfs`, a count change while VFs are on
/// vfio-pci (unless `force`), VF attributes on a PF without a netdev, vfio binding with the
/// IOMMU off or vfio-pci not loaded.
///
/// Attributes left out of the configuration are not managed. VFs configured with
/// `vfio = false` keep whatever driver they have.
pub fn plan(
    desired: &PfConfig,
    observed: &Observed,
    opts: PlanOptions,
) -> Result<Vec<Action>, Error> {
    let label = observed.label();
    if desired.numvfs > observed.total_vfs {
        return Err(Error::TooManyVfs {
            pf: label,
            pci: observed.pci,
            want: desired.numvfs,
            total: observed.total_vfs,
        });
    }
    let changing = desired.numvfs != observed.num_vfs;
    if changing && !opts.force {
        let held: Vec<String> = observed
            .vfs
            .iter()
            .filter(|v| v.driver.as_deref() == Some("vfio-pci"))
            .map(|v| {
                let group = v
                    .iommu_group
                    .map_or("no IOMMU group".to_string(), |g| format!("IOMMU group {g}"));
                let users = if v.users.is_empty() {
                    "no process seen holding it".to_string()
                } else {
                    v.users
                        .iter()
                        .map(|u| format!("{} open by pid {} ({})", u.path, u.pid, u.comm))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!(
                    "VF {} ({}) is bound to vfio-pci ({group}, {users})",
                    v.index, v.pci
                )
            })
            .collect();
        if !held.is_empty() {
            return Err(Error::VfsInUse {
                pf: label,
                pci: observed.pci,
                from: observed.num_vfs,
                to: desired.numvfs,
                users: held.join("; "),
            });
        }
    }

    let mut steps = Vec::new();
    let mut autoprobe = observed.autoprobe;
    if autoprobe && (changing || !desired.autoprobe) {
        steps.push(Action::SetAutoprobe { enabled: false });
        autoprobe = false;
    }
    if changing {
        if observed.num_vfs != 0 && desired.numvfs != 0 {
            steps.push(Action::SetNumVfs {
                from: observed.num_vfs,
                to: 0,
            });
            steps.push(Action::SetNumVfs {
                from: 0,
                to: desired.numvfs,
            });
        } else {
            steps.push(Action::SetNumVfs {
                from: observed.num_vfs,
                to: desired.numvfs,
            });
        }
    }

    let mut vfs: Vec<_> = desired.vfs.iter().collect();
    vfs.sort_by_key(|v| v.index);
    let mut attrs = 0;
    for vf in &vfs {
        // New VFs start from the driver's defaults: set everything configured.
        let now: Option<&VfLinkInfo> = if changing {
            None
        } else {
            observed.links.iter().find(|l| l.vf == u32::from(vf.index))
        };
        let mut want = Vec::new();
        if let Some(mac) = vf.mac
            && now.and_then(|l| l.mac) != Some(mac)
        {
            want.push(VfAttr::Mac(mac));
        }
        if let Some(vlan) = vf.vlan {
            let qos = vf.qos.unwrap_or(0);
            if now.map(|l| (l.vlan, l.qos)) != Some((Some(vlan), qos)) {
                want.push(VfAttr::Vlan { vlan, qos });
            }
        }
        if let Some(on) = vf.spoofchk
            && now.and_then(|l| l.spoofchk) != Some(on)
        {
            want.push(VfAttr::Spoofchk(on));
        }
        if let Some(on) = vf.trust
            && now.and_then(|l| l.trust) != Some(on)
        {
            want.push(VfAttr::Trust(on));
        }
        if let Some(state) = vf.link_state
            && now.and_then(|l| l.link_state) != Some(state)
        {
            want.push(VfAttr::LinkState(state));
        }
        attrs += want.len();
        steps.extend(
            want.into_iter()
                .map(|attr| Action::SetVf { vf: vf.index, attr }),
        );
    }
    if attrs > 0 && observed.ifname.is_none() {
        return Err(Error::NoNetdev { pci: observed.pci });
    }

    let mut binds = 0;
    for vf in vfs.iter().filter(|v| v.vfio) {
        let bound = !changing
            && observed
                .vf(vf.index)
                .is_some_and(|o| o.driver.as_deref() == Some("vfio-pci"));
        if !bound {
            steps.push(Action::BindVfio { vf: vf.index });
            binds += 1;
        }
    }
    if binds > 0 {
        let pf = format!("{label} ({})", observed.pci);
        if observed.iommu_group.is_none() {
            return Err(Error::IommuOff { dev: pf });
        }
        if !observed.vfio_pci_loaded {
            return Err(Error::VfioNotLoaded { dev: pf });
        }
    }

    if desired.autoprobe && !autoprobe {
        steps.push(Action::SetAutoprobe { enabled: true });
        if changing {
            for index in 0..desired.numvfs {
                if !vfs.iter().any(|v| v.index == index && v.vfio) {
                    steps.push(Action::ProbeHostDriver { vf: index });
                }
            }
        }
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LinkState, MacAddr, PciAddr, PfRef, VfConfig};
    use crate::observe::ObservedVf;
    use crate::sysfs::GroupUser;

    fn pci(s: &str) -> PciAddr {
        s.parse().unwrap()
    }

    fn vf_cfg(index: u16) -> VfConfig {
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

    fn desired(numvfs: u16, vfs: Vec<VfConfig>) -> PfConfig {
        PfConfig {
            pf: PfRef::Iface("enp3s0".into()),
            numvfs,
            autoprobe: false,
            vfs,
        }
    }

    /// A PF with `n` VFs on `driver`, autoprobe on (the kernel's default), default links.
    fn observed(n: u16, driver: Option<&str>) -> Observed {
        Observed {
            pf: PfRef::Iface("enp3s0".into()),
            pci: pci("0000:03:00.0"),
            ifname: Some("enp3s0".into()),
            total_vfs: 7,
            num_vfs: n,
            autoprobe: true,
            iommu_group: Some(4),
            vfio_pci_loaded: true,
            vfs: (0..n)
                .map(|i| ObservedVf {
                    index: i,
                    pci: PciAddr {
                        domain: 0,
                        bus: 3,
                        device: 0x10 + (i / 4) as u8,
                        function: ((2 * i) % 8) as u8,
                    },
                    driver: driver.map(str::to_string),
                    driver_override: None,
                    iommu_group: Some(5 + u32::from(i)),
                    users: Vec::new(),
                })
                .collect(),
            links: (0..n)
                .map(|i| VfLinkInfo {
                    vf: u32::from(i),
                    mac: Some(MacAddr([0; 6])),
                    vlan: None,
                    qos: 0,
                    spoofchk: Some(true),
                    trust: Some(false),
                    link_state: Some(LinkState::Auto),
                })
                .collect(),
        }
    }

    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0x53, 1]);

    fn full_vf() -> VfConfig {
        VfConfig {
            mac: Some(MAC),
            vlan: Some(100),
            qos: Some(2),
            spoofchk: Some(false),
            trust: Some(true),
            link_state: Some(LinkState::Enable),
            vfio: true,
            ..vf_cfg(0)
        }
    }

    #[test]
    fn creation_goes_autoprobe_off_numvfs_attrs_bind() {
        let steps = plan(
            &desired(2, vec![full_vf()]),
            &observed(0, None),
            PlanOptions::default(),
        )
        .unwrap();
        assert_eq!(
            steps,
            vec![
                Action::SetAutoprobe { enabled: false },
                Action::SetNumVfs { from: 0, to: 2 },
                Action::SetVf {
                    vf: 0,
                    attr: VfAttr::Mac(MAC)
                },
                Action::SetVf {
                    vf: 0,
                    attr: VfAttr::Vlan { vlan: 100, qos: 2 }
                },
                Action::SetVf {
                    vf: 0,
                    attr: VfAttr::Spoofchk(false)
                },
                Action::SetVf {
                    vf: 0,
                    attr: VfAttr::Trust(true)
                },
                Action::SetVf {
                    vf: 0,
                    attr: VfAttr::LinkState(LinkState::Enable)
                },
                Action::BindVfio { vf: 0 },
            ]
        );
    }

    #[test]
    fn a_count_change_between_non_zero_counts_goes_through_zero() {
        let steps = plan(
            &desired(4, vec![]),
            &observed(2, Some("igbvf")),
            PlanOptions::default(),
        )
        .unwrap();
        assert_eq!(
            steps,
            vec![
                Action::SetAutoprobe { enabled: false },
                Action::SetNumVfs { from: 2, to: 0 },
                Action::SetNumVfs { from: 0, to: 4 },
            ]
        );
        let steps = plan(
            &desired(0, vec![]),
            &observed(2, Some("igbvf")),
            PlanOptions::default(),
        )
        .unwrap();
        assert_eq!(
            steps,
            vec![
                Action::SetAutoprobe { enabled: false },
                Action::SetNumVfs { from: 2, to: 0 }
            ]
        );
    }

    #[test]
    fn converged_state_plans_nothing() {
        let mut obs = observed(2, Some("igbvf"));
        obs.autoprobe = false;
        obs.vfs[0].driver = Some("vfio-pci".into());
        obs.links[0] = VfLinkInfo {
            vf: 0,
            mac: Some(MAC),
            vlan: Some(100),
            qos: 2,
            spoofchk: Some(false),
            trust: Some(true),
            link_state: Some(LinkState::Enable),
        };
        let want = desired(2, vec![full_vf(), vf_cfg(1)]);
        assert_eq!(plan(&want, &obs, PlanOptions::default()).unwrap(), vec![]);
        // One attribute off: one step, nothing else.
        obs.links[0].qos = 0;
        assert_eq!(
            plan(&want, &obs, PlanOptions::default()).unwrap(),
            vec![Action::SetVf {
                vf: 0,
                attr: VfAttr::Vlan { vlan: 100, qos: 2 }
            }]
        );
    }

    #[test]
    fn unmanaged_attributes_and_drivers_are_left_alone() {
        let mut obs = observed(2, Some("igbvf"));
        obs.autoprobe = false;
        obs.links[1].mac = Some(MacAddr([2, 9, 9, 9, 9, 9]));
        obs.links[1].vlan = Some(7);
        assert_eq!(
            plan(&desired(2, vec![vf_cfg(1)]), &obs, PlanOptions::default()).unwrap(),
            vec![]
        );
    }

    #[test]
    fn count_change_refused_while_a_vf_is_on_vfio_pci_unless_forced() {
        let mut obs = observed(2, Some("igbvf"));
        obs.vfs[1].driver = Some("vfio-pci".into());
        obs.vfs[1].users = vec![GroupUser {
            pid: 4242,
            comm: "qemu-system-x86".into(),
            path: "/dev/vfio/6".into(),
        }];
        let err = plan(&desired(3, vec![]), &obs, PlanOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("refusing to change sriov_numvfs of enp3s0 (0000:03:00.0) from 2 to 3"),
            "{err}"
        );
        assert!(
            err.contains("VF 1 (0000:03:10.2) is bound to vfio-pci (IOMMU group 6, /dev/vfio/6 open by pid 4242 (qemu-system-x86))"),
            "{err}"
        );
        let steps = plan(&desired(3, vec![]), &obs, PlanOptions { force: true }).unwrap();
        assert!(
            steps.contains(&Action::SetNumVfs { from: 2, to: 0 }),
            "{steps:?}"
        );
        // Same count: no refusal, the VFs stay.
        obs.autoprobe = false;
        assert_eq!(
            plan(&desired(2, vec![]), &obs, PlanOptions::default()).unwrap(),
            vec![]
        );
    }

    #[test]
    fn refusals_name_the_cause() {
        let err = plan(
            &desired(8, vec![]),
            &observed(0, None),
            PlanOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "enp3s0 (0000:03:00.0): numvfs = 8 but the device offers at most 7 (sriov_totalvfs)"
        );

        let mut obs = observed(0, None);
        obs.iommu_group = None;
        let want = desired(
            1,
            vec![VfConfig {
                vfio: true,
                ..vf_cfg(0)
            }],
        );
        let err = plan(&want, &obs, PlanOptions::default())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "enp3s0 (0000:03:00.0) has no IOMMU group: IOMMU is off (boot with intel_iommu=on iommu=pt / amd_iommu=on)"
        );

        let mut obs = observed(0, None);
        obs.vfio_pci_loaded = false;
        let err = plan(&want, &obs, PlanOptions::default())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "vfio-pci not loaded: modprobe vfio-pci (needed for enp3s0 (0000:03:00.0))"
        );

        let mut obs = observed(0, None);
        obs.ifname = None;
        let want = desired(
            1,
            vec![VfConfig {
                mac: Some(MAC),
                ..vf_cfg(0)
            }],
        );
        let err = plan(&want, &obs, PlanOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("0000:03:00.0 has no network interface"),
            "{err}"
        );
    }

    #[test]
    fn autoprobe_on_probes_the_new_vfs_not_given_to_vfio() {
        let mut want = desired(
            3,
            vec![VfConfig {
                vfio: true,
                ..vf_cfg(1)
            }],
        );
        want.autoprobe = true;
        let steps = plan(&want, &observed(0, None), PlanOptions::default()).unwrap();
        assert_eq!(
            steps,
            vec![
                Action::SetAutoprobe { enabled: false },
                Action::SetNumVfs { from: 0, to: 3 },
                Action::BindVfio { vf: 1 },
                Action::SetAutoprobe { enabled: true },
                Action::ProbeHostDriver { vf: 0 },
                Action::ProbeHostDriver { vf: 2 },
            ]
        );
        // Converged: autoprobe on, count right, VF 1 on vfio-pci.
        let mut obs = observed(3, Some("igbvf"));
        obs.vfs[1].driver = Some("vfio-pci".into());
        assert_eq!(plan(&want, &obs, PlanOptions::default()).unwrap(), vec![]);
    }

    #[test]
    fn actions_display_and_serialize() {
        assert_eq!(
            Action::SetVf {
                vf: 1,
                attr: VfAttr::Spoofchk(true)
            }
            .to_string(),
            "VF 1 spoofchk on"
        );
        assert_eq!(
            Action::SetNumVfs { from: 2, to: 0 }.to_string(),
            "sriov_numvfs 2 -> 0"
        );
        let json = serde_json::to_string(&Action::SetVf {
            vf: 0,
            attr: VfAttr::Mac(MAC),
        })
        .unwrap();
        assert_eq!(
            json,
            r#"{"action":"set_vf","vf":0,"attr":{"mac":"02:00:00:00:53:01"}}"#
        );
    }
}
