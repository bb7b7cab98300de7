//! A serialisable view of the configured PFs (for the agent's API and `skuactl --json`),
//! and the lines that hand a VF to a VM.

use serde::{Deserialize, Serialize};

use crate::config::{PciAddr, PfConfig, VfConfig};
use crate::netlink::VfLinkInfo;
use crate::observe::{Host, Observed, observe};
use crate::plan::{Action, PlanOptions, plan};
use crate::sysfs::GroupUser;

/// The QEMU argument giving the VF at `pci` to a guest:
/// `-device vfio-pci,host=0000:03:10.0,id=skua-vf0`.
pub fn qemu_device_arg(pci: PciAddr, id: &str) -> String {
    format!("-device vfio-pci,host={pci},id={id}")
}

/// The Proxmox VE command giving the VF at `pci` to VM `vmid` in slot `hostpci<slot>`:
/// `qm set 120 -hostpci0 0000:03:10.0`.
pub fn proxmox_command(vmid: u32, slot: u8, pci: PciAddr) -> String {
    format!("qm set {vmid} -hostpci{slot} {pci}")
}

/// How one configured vfio VF reaches a VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passthrough {
    /// VF index.
    pub vf: u16,
    /// Its PCI address.
    pub pci: PciAddr,
    /// The QEMU `-device` argument.
    pub qemu: String,
    /// The `qm set` command, when `proxmox` is configured.
    pub proxmox: Option<String>,
}

fn passthrough(vf: &VfConfig, pci: PciAddr) -> Passthrough {
    Passthrough {
        vf: vf.index,
        pci,
        qemu: qemu_device_arg(pci, &vf.qemu_device_id()),
        proxmox: vf.proxmox.map(|p| proxmox_command(p.vmid, p.slot, pci)),
    }
}

/// The passthrough lines of every `vfio = true` VF of `pf` that exists.
pub fn passthrough_lines(pf: &PfConfig, observed: &Observed) -> Vec<Passthrough> {
    pf.vfs
        .iter()
        .filter(|v| v.vfio)
        .filter_map(|v| Some(passthrough(v, observed.vf(v.index)?.pci)))
        .collect()
}

/// One PF: what is there, what a reconcile would do, or why it cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfStatus {
    /// The PF as configured.
    pub pf: String,
    /// Its PCI address.
    pub pci: Option<PciAddr>,
    /// Its network interface.
    pub ifname: Option<String>,
    /// `sriov_totalvfs`.
    pub total_vfs: Option<u16>,
    /// `sriov_numvfs`.
    pub num_vfs: Option<u16>,
    /// Configured `numvfs`.
    pub want_vfs: u16,
    /// `sriov_drivers_autoprobe`.
    pub autoprobe: Option<bool>,
    /// The PF has an IOMMU group (the IOMMU is on).
    pub iommu: Option<bool>,
    /// vfio-pci is loaded.
    pub vfio_pci_loaded: Option<bool>,
    /// The existing VFs.
    pub vfs: Vec<VfStatus>,
    /// What a reconcile would do now (empty: converged).
    pub pending: Vec<Action>,
    /// Why the PF cannot be read, or why the plan is refused.
    pub error: Option<String>,
}

/// One existing VF.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VfStatus {
    /// VF index.
    pub index: u16,
    /// PCI address.
    pub pci: PciAddr,
    /// Bound driver.
    pub driver: Option<String>,
    /// IOMMU group.
    pub iommu_group: Option<u32>,
    /// Processes holding its vfio device.
    pub users: Vec<GroupUser>,
    /// Attributes from rtnetlink.
    pub link: Option<VfLinkInfo>,
    /// It has a `[[sriov.vf]]` table.
    pub configured: bool,
    /// How to hand it to a VM (configured `vfio = true` VFs).
    pub passthrough: Option<Passthrough>,
}

/// The status of every configured PF; never fails as a whole (a PF that cannot be read
/// carries its error).
pub fn status(host: &Host, config: &[PfConfig], opts: PlanOptions) -> Vec<PfStatus> {
    config.iter().map(|pf| pf_status(host, pf, opts)).collect()
}

fn pf_status(host: &Host, pf: &PfConfig, opts: PlanOptions) -> PfStatus {
    let mut out = PfStatus {
        pf: pf.pf.to_string(),
        pci: None,
        ifname: None,
        total_vfs: None,
        num_vfs: None,
        want_vfs: pf.numvfs,
        autoprobe: None,
        iommu: None,
        vfio_pci_loaded: None,
        vfs: Vec::new(),
        pending: Vec::new(),
        error: None,
    };
    let obs = match observe(host, pf) {
        Ok(o) => o,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    match plan(pf, &obs, opts) {
        Ok(p) => out.pending = p,
        Err(e) => out.error = Some(e.to_string()),
    }
    out.pci = Some(obs.pci);
    out.ifname = obs.ifname.clone();
    out.total_vfs = Some(obs.total_vfs);
    out.num_vfs = Some(obs.num_vfs);
    out.autoprobe = Some(obs.autoprobe);
    out.iommu = Some(obs.iommu_group.is_some());
    out.vfio_pci_loaded = Some(obs.vfio_pci_loaded);
    out.vfs = obs
        .vfs
        .iter()
        .map(|v| {
            let cfg = pf.vfs.iter().find(|c| c.index == v.index);
            VfStatus {
                index: v.index,
                pci: v.pci,
                driver: v.driver.clone(),
                iommu_group: v.iommu_group,
                users: v.users.clone(),
                link: obs
                    .links
                    .iter()
                    .find(|l| l.vf == u32::from(v.index))
                    .cloned(),
                configured: cfg.is_some(),
                passthrough: cfg.filter(|c| c.vfio).map(|c| passthrough(c, v.pci)),
            }
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emitted_lines() {
        let pci: PciAddr = "0000:03:10.0".parse().unwrap();
        assert_eq!(
            qemu_device_arg(pci, "skua-wan"),
            "-device vfio-pci,host=0000:03:10.0,id=skua-wan"
        );
        assert_eq!(
            proxmox_command(120, 1, pci),
            "qm set 120 -hostpci1 0000:03:10.0"
        );
    }
}
