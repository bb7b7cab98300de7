//! The host handle ([`Host`]: sysfs root, /proc root, writer, rtnetlink) and what it sees
//! of one PF ([`observe`] → [`Observed`]).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::config::{PciAddr, PfConfig, PfRef};
use crate::netlink::{Rtnetlink, VfControl, VfLinkInfo};
use crate::sysfs::{GroupUser, KernelWriter, Sysfs, SysfsWriter, vfio_users};

/// Where the kernel is: sysfs and /proc roots, how sysfs is written, how VF attributes are
/// read and set, and how long VFs may take to appear. `Send + Sync`: the agent may share
/// one across threads (calls are independent; serialise [`crate::apply`] per PF yourself).
pub struct Host {
    pub(crate) sys: Sysfs,
    pub(crate) proc_root: PathBuf,
    pub(crate) net: Box<dyn VfControl>,
    pub(crate) vf_timeout: Duration,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("sysfs", &self.sys.root)
            .field("proc", &self.proc_root)
            .field("vf_timeout", &self.vf_timeout)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// The running kernel: `/sys`, `/proc`, real writes, rtnetlink in the caller's network
    /// namespace; VFs may take 30 s to appear.
    pub fn system() -> Host {
        Host::new(
            "/sys",
            "/proc",
            Box::new(KernelWriter),
            Box::new(Rtnetlink::new()),
        )
    }

    /// Any roots and backends (tests: a fake tree, a logging writer, an in-memory rtnetlink).
    pub fn new(
        sysfs_root: impl Into<PathBuf>,
        proc_root: impl Into<PathBuf>,
        writer: Box<dyn SysfsWriter>,
        net: Box<dyn VfControl>,
    ) -> Host {
        Host {
            sys: Sysfs {
                root: sysfs_root.into(),
                writer,
            },
            proc_root: proc_root.into(),
            net,
            vf_timeout: Duration::from_secs(30),
        }
    }

    /// How long to wait for the `virtfnN` links after writing `sriov_numvfs`.
    pub fn with_vf_timeout(mut self, timeout: Duration) -> Host {
        self.vf_timeout = timeout;
        self
    }
}

/// One PF as the kernel has it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    /// The PF as configured.
    pub pf: PfRef,
    /// Its PCI address.
    pub pci: PciAddr,
    /// Its network interface, if its driver made one.
    pub ifname: Option<String>,
    /// `sriov_totalvfs`.
    pub total_vfs: u16,
    /// `sriov_numvfs`.
    pub num_vfs: u16,
    /// `sriov_drivers_autoprobe`.
    pub autoprobe: bool,
    /// The PF's IOMMU group (`None`: the IOMMU is off).
    pub iommu_group: Option<u32>,
    /// `/sys/bus/pci/drivers/vfio-pci` exists.
    pub vfio_pci_loaded: bool,
    /// The VFs that exist (`virtfnN`), by index.
    pub vfs: Vec<ObservedVf>,
    /// Their attributes as rtnetlink reports them (empty without VFs or without a netdev).
    pub links: Vec<VfLinkInfo>,
}

impl Observed {
    /// The PF's name for messages: its interface, else its address.
    pub fn label(&self) -> String {
        self.ifname.clone().unwrap_or_else(|| self.pci.to_string())
    }

    /// The VF with this index, if it exists.
    pub fn vf(&self, index: u16) -> Option<&ObservedVf> {
        self.vfs.iter().find(|v| v.index == index)
    }
}

/// One VF as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedVf {
    /// VF index (`virtfnN`).
    pub index: u16,
    /// Its PCI address.
    pub pci: PciAddr,
    /// The bound driver (`igbvf`, `vfio-pci`, ...).
    pub driver: Option<String>,
    /// `driver_override`, when set.
    pub driver_override: Option<String>,
    /// Its IOMMU group.
    pub iommu_group: Option<u32>,
    /// Processes holding its vfio device open (`/dev/vfio/GROUP`, or its iommufd cdev).
    pub users: Vec<GroupUser>,
}

/// Reads one PF: its SR-IOV files, VFs, their drivers and groups, who holds them, and
/// (through rtnetlink, when the PF has an interface and VFs) their attributes.
pub fn observe(host: &Host, pf: &PfConfig) -> Result<Observed, Error> {
    let sys = &host.sys;
    let (pci, ifname) = sys.resolve_pf(&pf.pf)?;
    let label = ifname.clone().unwrap_or_else(|| pci.to_string());
    let Some(total_vfs) = sys.total_vfs(pci)? else {
        return Err(Error::NoSriov { pf: label, pci });
    };
    let dev = sys.pci_dev(pci);
    let num_vfs = sys.read_num(&dev.join("sriov_numvfs"))?;
    let autoprobe = sys.read(&dev.join("sriov_drivers_autoprobe"))? == "1";
    let mut vfs: Vec<ObservedVf> = sys
        .vfs(pci)?
        .into_iter()
        .map(|(index, vf)| ObservedVf {
            index,
            pci: vf,
            driver: sys.driver(vf),
            driver_override: sys.driver_override(vf),
            iommu_group: sys.iommu_group(vf),
            users: Vec::new(),
        })
        .collect();
    // /proc is scanned only when something is on vfio-pci.
    if vfs.iter().any(|v| v.driver.as_deref() == Some("vfio-pci")) {
        let users = vfio_users(&host.proc_root);
        for vf in &mut vfs {
            let mut files: Vec<String> = vf
                .iommu_group
                .map(|g| format!("/dev/vfio/{g}"))
                .into_iter()
                .collect();
            files.extend(
                sys.vfio_cdevs(vf.pci)
                    .into_iter()
                    .map(|c| format!("/dev/vfio/devices/{c}")),
            );
            for f in files {
                vf.users.extend(users.get(&f).cloned().unwrap_or_default());
            }
        }
    }
    let links = match &ifname {
        Some(name) if num_vfs > 0 => host.net.vf_list(name)?,
        _ => Vec::new(),
    };
    Ok(Observed {
        pf: pf.pf.clone(),
        pci,
        ifname,
        total_vfs,
        num_vfs,
        autoprobe,
        iommu_group: sys.iommu_group(pci),
        vfio_pci_loaded: sys.vfio_loaded(),
        vfs,
        links,
    })
}
