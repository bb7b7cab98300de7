//! The one error type of the crate: every message names the interface, the PCI address and
//! what to do about it, because an operator reads it in the agent's log or in `skuactl`.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::PciAddr;

/// The boot parameters that turn the IOMMU on; repeated in every IOMMU error.
pub const IOMMU_HINT: &str = "IOMMU is off (boot with intel_iommu=on iommu=pt / amd_iommu=on)";

/// Everything that can go wrong between the configuration and the kernel.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid (each problem names its field).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),

    /// `pf` names an interface that does not exist.
    #[error("{pf}: no such network interface ({path} is missing)", path = path.display())]
    NoSuchInterface {
        /// The interface name from the configuration.
        pf: String,
        /// The sysfs path looked at.
        path: PathBuf,
    },

    /// `pf` names a PCI address that does not exist.
    #[error("no PCI device {pci} ({path} is missing)", path = path.display())]
    NoSuchPciDevice {
        /// The address from the configuration.
        pci: PciAddr,
        /// The sysfs path looked at.
        path: PathBuf,
    },

    /// The interface is not on a PCI device (veth, bridge, loopback, ...).
    #[error("{pf} is not a PCI device ({path} does not lead to one)", path = path.display())]
    NotPci {
        /// The interface name.
        pf: String,
        /// The `device` link looked at.
        path: PathBuf,
    },

    /// The device has no `sriov_totalvfs`: no SR-IOV capability (or the driver hides it).
    #[error("{pf} ({pci}) has no SR-IOV capability")]
    NoSriov {
        /// The interface name (or the address when the PF has none).
        pf: String,
        /// The PF's address.
        pci: PciAddr,
    },

    /// More VFs asked for than the device offers.
    #[error("{pf} ({pci}): numvfs = {want} but the device offers at most {total} (sriov_totalvfs)")]
    TooManyVfs {
        /// The interface name.
        pf: String,
        /// The PF's address.
        pci: PciAddr,
        /// Configured `numvfs`.
        want: u16,
        /// `sriov_totalvfs`.
        total: u16,
    },

    /// Changing `sriov_numvfs` would destroy VFs that are bound to vfio-pci.
    #[error(
        "refusing to change sriov_numvfs of {pf} ({pci}) from {from} to {to}: the kernel removes every VF \
         first, and {users}; stop the VM(s) holding them, or force the change (the write then waits until \
         the VM lets go of the device)"
    )]
    VfsInUse {
        /// The interface name.
        pf: String,
        /// The PF's address.
        pci: PciAddr,
        /// Current count.
        from: u16,
        /// Wanted count.
        to: u16,
        /// What holds them, e.g. "VF 0 (0000:03:10.0) is bound to vfio-pci (group 5, /dev/vfio/5 open by pid 42 qemu)".
        users: String,
    },

    /// A VF (or the PF) has no `iommu_group`: the IOMMU is off, vfio-pci cannot take it.
    #[error("{dev} has no IOMMU group: {IOMMU_HINT}")]
    IommuOff {
        /// The device, e.g. "VF 0 (0000:03:10.0)".
        dev: String,
    },

    /// `/sys/bus/pci/drivers/vfio-pci` is missing.
    #[error("vfio-pci not loaded: modprobe vfio-pci (needed for {dev})")]
    VfioNotLoaded {
        /// The device that was to be bound.
        dev: String,
    },

    /// After `drivers_probe` the VF is not on vfio-pci.
    #[error(
        "binding {dev} to vfio-pci failed: its driver is now {now} (the kernel log says why: dmesg | tail)"
    )]
    BindFailed {
        /// The VF.
        dev: String,
        /// The driver it has now, or "none".
        now: String,
    },

    /// The VFs did not appear (or disappear) after writing `sriov_numvfs`.
    #[error(
        "{pf} ({pci}): {want} VFs expected after writing sriov_numvfs, {seen} present after {waited:?}"
    )]
    VfsTimeout {
        /// The interface name.
        pf: String,
        /// The PF's address.
        pci: PciAddr,
        /// Expected count.
        want: u16,
        /// `virtfnN` links present at the deadline.
        seen: u16,
        /// How long we waited.
        waited: Duration,
    },

    /// A VF index that does not exist (yet).
    #[error("{pf} ({pci}) has no VF {vf} (virtfn{vf} is missing)")]
    NoSuchVf {
        /// The interface name.
        pf: String,
        /// The PF's address.
        pci: PciAddr,
        /// The VF index.
        vf: u16,
    },

    /// VF attributes are set through the PF's network interface, and it has none.
    #[error(
        "{pci} has no network interface (no driver bound to the PF?): mac, vlan, spoofchk, trust and \
         link_state of its VFs are set through it"
    )]
    NoNetdev {
        /// The PF's address.
        pci: PciAddr,
    },

    /// A sysfs file could not be read or written.
    #[error("{op} {path}: {hint}{source}", path = path.display())]
    Sysfs {
        /// "reading", or "writing \"1\" to".
        op: String,
        /// The file.
        path: PathBuf,
        /// What the errno means here, ending in ": " (or empty).
        hint: String,
        /// The error.
        #[source]
        source: io::Error,
    },

    /// The interface has no VFs, or fewer than the index asked for (rtnetlink's view).
    #[error(
        "{ifname} has no VFs (netlink reports none: sriov_numvfs is 0, or it is not an SR-IOV PF)"
    )]
    NoVfs {
        /// The interface.
        ifname: String,
    },

    /// The VF index is beyond what rtnetlink reports for the PF.
    #[error("{ifname} has {count} VFs, there is no VF {vf}")]
    VfOutOfRange {
        /// The interface.
        ifname: String,
        /// The reported count.
        count: u32,
        /// The index asked for.
        vf: u16,
    },

    /// The kernel refused an rtnetlink request.
    #[error("{message}")]
    Netlink {
        /// The interface.
        ifname: String,
        /// The positive errno.
        errno: i32,
        /// The message for the operator, naming the driver/interface and the attribute.
        message: String,
    },

    /// The netlink socket itself failed, or the kernel's reply could not be read.
    #[error("rtnetlink ({what}): {detail}")]
    NetlinkIo {
        /// What we were doing.
        what: String,
        /// Why it failed.
        detail: String,
    },

    /// One step of an apply failed; the steps before it are done.
    #[error("step {step}/{total} ({action}) failed after {done} done: {source}", done = step - 1)]
    Step {
        /// 1-based number of the failing step.
        step: usize,
        /// Number of steps planned.
        total: usize,
        /// The action, as displayed.
        action: String,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// A sysfs read error.
    pub(crate) fn read(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Sysfs {
            op: "reading".into(),
            path: path.into(),
            hint: String::new(),
            source,
        }
    }

    /// A sysfs write error, with what the errno means for that file.
    pub(crate) fn write(path: impl Into<PathBuf>, value: &str, source: io::Error) -> Self {
        let path = path.into();
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        let hint = match (file, source.raw_os_error()) {
            // drivers/pci/iov.c sriov_numvfs_store: -ENOENT when the PF has no driver or the
            // driver has no sriov_configure, -EBUSY when VFs exist and the count differs,
            // -ERANGE above sriov_totalvfs.
            ("sriov_numvfs", Some(2)) => {
                "the PF has no driver, or its driver does not support SR-IOV configuration through sysfs: "
            }
            ("sriov_numvfs", Some(16)) => "VFs exist already; the count must go through 0: ",
            ("sriov_numvfs", Some(34)) => "more than sriov_totalvfs: ",
            // These sysfs files are mode 0200/0644, owned by root; no capability check.
            (_, Some(13)) | (_, Some(1)) => "only root may write it: ",
            ("drivers_probe", Some(22)) => {
                "probe refused (for vfio-pci: is the IOMMU on? intel_iommu=on iommu=pt / amd_iommu=on): "
            }
            _ => "",
        };
        Error::Sysfs {
            op: format!("writing {value:?} to"),
            path,
            hint: hint.into(),
            source,
        }
    }
}
