//! The sysfs side: finding the PF, its SR-IOV files, its VFs (`virtfnN` links), their
//! drivers and IOMMU groups, and the vfio-pci binding sequence. The root is injectable, so
//! tests run on a tree of real files and symlinks shaped like the kernel's
//! (Documentation/ABI/testing/sysfs-bus-pci):
//!
//! ```text
//! class/net/enp3s0 -> ../../devices/pci0000:00/0000:00:01.0/0000:03:00.0/net/enp3s0
//! bus/pci/devices/0000:03:00.0 -> ../../../devices/pci0000:00/0000:00:01.0/0000:03:00.0
//! .../0000:03:00.0/{sriov_totalvfs,sriov_numvfs,sriov_drivers_autoprobe}
//! .../0000:03:00.0/virtfn0 -> ../0000:03:10.0
//! .../0000:03:10.0/driver -> ../../../../bus/pci/drivers/igbvf
//! .../0000:03:10.0/iommu_group -> ../../../../kernel/iommu_groups/5
//! .../0000:03:10.0/driver_override
//! bus/pci/drivers/vfio-pci/, bus/pci/drivers_probe
//! ```
//!
//! Every write goes through a [`SysfsWriter`], so a test can log writes and act as the
//! kernel does on them (create `virtfnN` on `sriov_numvfs`, move the `driver` link on
//! `unbind`/`drivers_probe`).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::config::{PciAddr, PfRef};

/// Writes one value to one sysfs file.
pub trait SysfsWriter: Send + Sync {
    /// Writes `value` to the existing file `path` (never creates it).
    fn write(&self, path: &Path, value: &str) -> io::Result<()>;
}

/// The kernel's sysfs: one `write(2)` per value, on a file that must exist.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelWriter;

impl SysfsWriter for KernelWriter {
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        // No O_CREAT: a missing attribute must fail, not become a regular file. O_TRUNC is
        // ignored by sysfs and makes the same code right on a test tree of regular files.
        let mut f = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)?;
        f.write_all(value.as_bytes())
    }
}

impl<T: SysfsWriter + ?Sized> SysfsWriter for std::sync::Arc<T> {
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        (**self).write(path, value)
    }
}

/// A process holding a VF's vfio device open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupUser {
    /// Its pid.
    pub pid: u32,
    /// Its `comm` (e.g. `qemu-system-x86`).
    pub comm: String,
    /// The device file it holds (`/dev/vfio/5` or `/dev/vfio/devices/vfio0`).
    pub path: String,
}

/// The sysfs root and the writer.
pub(crate) struct Sysfs {
    pub(crate) root: PathBuf,
    pub(crate) writer: Box<dyn SysfsWriter>,
}

/// The name of a symlink's target (`driver -> .../igbvf` → `igbvf`).
fn link_name(path: &Path) -> Option<String> {
    fs::read_link(path)
        .ok()?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

impl Sysfs {
    pub(crate) fn pci_dev(&self, addr: PciAddr) -> PathBuf {
        self.root.join("bus/pci/devices").join(addr.to_string())
    }

    fn drivers(&self) -> PathBuf {
        self.root.join("bus/pci/drivers")
    }

    /// The PF's PCI address and network interface (if its driver made one).
    pub(crate) fn resolve_pf(&self, pf: &PfRef) -> Result<(PciAddr, Option<String>), Error> {
        match pf {
            PfRef::Pci(addr) => {
                let dev = self.pci_dev(*addr);
                if !dev.exists() {
                    return Err(Error::NoSuchPciDevice {
                        pci: *addr,
                        path: dev,
                    });
                }
                // A PF may own several netdevs (one per port on some NICs); the first by
                // name is the one rtnetlink is asked about.
                let ifname = fs::read_dir(dev.join("net")).ok().and_then(|d| {
                    let mut names: Vec<String> = d
                        .filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect();
                    names.sort();
                    names.into_iter().next()
                });
                Ok((*addr, ifname))
            }
            PfRef::Iface(name) => {
                let net = self.root.join("class/net").join(name);
                if fs::symlink_metadata(&net).is_err() {
                    return Err(Error::NoSuchInterface {
                        pf: name.clone(),
                        path: net,
                    });
                }
                let device = net.join("device");
                let not_pci = || Error::NotPci {
                    pf: name.clone(),
                    path: device.clone(),
                };
                // `device` is the PCI function for most NICs, a child of it for some
                // (virtio-net: .../0000:00:03.0/virtio2): take the nearest PCI ancestor.
                let real = fs::canonicalize(&device).map_err(|_| not_pci())?;
                let root = fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
                let addr = real
                    .ancestors()
                    .take_while(|p| p.starts_with(&root) && *p != root)
                    .find_map(|p| p.file_name()?.to_str()?.parse::<PciAddr>().ok())
                    .ok_or_else(not_pci)?;
                if !self.pci_dev(addr).exists() {
                    return Err(not_pci());
                }
                Ok((addr, Some(name.clone())))
            }
        }
    }

    pub(crate) fn read(&self, path: &Path) -> Result<String, Error> {
        fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| Error::read(path, e))
    }

    pub(crate) fn read_num(&self, path: &Path) -> Result<u16, Error> {
        let text = self.read(path)?;
        text.parse().map_err(|_| {
            Error::read(
                path,
                io::Error::new(io::ErrorKind::InvalidData, format!("not a count: {text:?}")),
            )
        })
    }

    pub(crate) fn write(&self, path: &Path, value: &str) -> Result<(), Error> {
        self.writer
            .write(path, value)
            .map_err(|e| Error::write(path, value, e))
    }

    /// `sriov_totalvfs`, or `None` when the device has no SR-IOV capability.
    pub(crate) fn total_vfs(&self, pf: PciAddr) -> Result<Option<u16>, Error> {
        let path = self.pci_dev(pf).join("sriov_totalvfs");
        if !path.exists() {
            return Ok(None);
        }
        self.read_num(&path).map(Some)
    }

    /// The VFs that exist now, by index: `virtfnN` links of the PF.
    pub(crate) fn vfs(&self, pf: PciAddr) -> Result<BTreeMap<u16, PciAddr>, Error> {
        let dir = self.pci_dev(pf);
        let entries = fs::read_dir(&dir).map_err(|e| Error::read(&dir, e))?;
        let mut out = BTreeMap::new();
        for entry in entries.filter_map(|e| e.ok()) {
            let name = entry.file_name();
            let Some(index) = name
                .to_str()
                .and_then(|n| n.strip_prefix("virtfn"))
                .and_then(|n| n.parse::<u16>().ok())
            else {
                continue;
            };
            if let Some(addr) = link_name(&entry.path()).and_then(|t| t.parse().ok()) {
                out.insert(index, addr);
            }
        }
        Ok(out)
    }

    pub(crate) fn driver(&self, dev: PciAddr) -> Option<String> {
        link_name(&self.pci_dev(dev).join("driver"))
    }

    pub(crate) fn iommu_group(&self, dev: PciAddr) -> Option<u32> {
        link_name(&self.pci_dev(dev).join("iommu_group"))?
            .parse()
            .ok()
    }

    /// `driver_override`; the kernel shows "(null)" when unset.
    pub(crate) fn driver_override(&self, dev: PciAddr) -> Option<String> {
        let text = fs::read_to_string(self.pci_dev(dev).join("driver_override")).ok()?;
        let text = text.trim();
        (!text.is_empty() && text != "(null)").then(|| text.to_string())
    }

    /// The iommufd character devices of a device (`vfio-dev/vfio0`), kernels ≥ 6.2.
    pub(crate) fn vfio_cdevs(&self, dev: PciAddr) -> Vec<String> {
        fs::read_dir(self.pci_dev(dev).join("vfio-dev"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn vfio_loaded(&self) -> bool {
        self.drivers().join("vfio-pci").is_dir()
    }

    /// Polls the `virtfnN` links until exactly `want` VFs exist, at most `timeout`. The
    /// kernel creates them while the `sriov_numvfs` write runs, but drivers that configure
    /// VFs through firmware may take seconds.
    pub(crate) fn wait_for_vfs(
        &self,
        pf: PciAddr,
        label: &str,
        want: u16,
        timeout: Duration,
    ) -> Result<BTreeMap<u16, PciAddr>, Error> {
        let start = Instant::now();
        loop {
            let vfs = self.vfs(pf)?;
            let complete = vfs.len() == usize::from(want) && vfs.keys().all(|&i| i < want);
            if complete {
                return Ok(vfs);
            }
            if start.elapsed() >= timeout {
                return Err(Error::VfsTimeout {
                    pf: label.into(),
                    pci: pf,
                    want,
                    seen: vfs.len() as u16,
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Binds `vf` to vfio-pci: `driver_override`, unbind from the current driver,
    /// `drivers_probe`, then check the `driver` link. Returns false, having written
    /// nothing, when it is on vfio-pci already.
    pub(crate) fn bind_vfio(&self, vf: PciAddr, label: &str) -> Result<bool, Error> {
        let dev = self.pci_dev(vf);
        if !dev.exists() {
            return Err(Error::NoSuchPciDevice { pci: vf, path: dev });
        }
        let before = self.driver(vf);
        if before.as_deref() == Some("vfio-pci") {
            return Ok(false);
        }
        if !self.vfio_loaded() {
            return Err(Error::VfioNotLoaded { dev: label.into() });
        }
        // Without an IOMMU group vfio-pci's probe fails with -EINVAL: say why first.
        if self.iommu_group(vf).is_none() {
            return Err(Error::IommuOff { dev: label.into() });
        }
        let addr = vf.to_string();
        // driver_override first, so that nothing else can bind between unbind and probe
        // (Documentation/ABI/testing/sysfs-bus-pci, driver_override).
        self.write(&dev.join("driver_override"), "vfio-pci")?;
        if before.is_some() {
            self.write(&dev.join("driver/unbind"), &addr)?;
        }
        self.write(&self.root.join("bus/pci/drivers_probe"), &addr)?;
        match self.driver(vf) {
            Some(d) if d == "vfio-pci" => Ok(true),
            now => Err(Error::BindFailed {
                dev: label.into(),
                now: now.unwrap_or_else(|| "none".into()),
            }),
        }
    }

    /// Lets the host driver take a VF that has none (after `sriov_drivers_autoprobe` was
    /// 0 while it was created).
    pub(crate) fn probe(&self, vf: PciAddr) -> Result<(), Error> {
        if self.driver(vf).is_some() {
            return Ok(());
        }
        self.write(&self.root.join("bus/pci/drivers_probe"), &vf.to_string())
    }
}

/// Who holds which vfio device file open: `/proc/PID/fd/*` links into `/dev/vfio/`. Other
/// users' processes are only visible to root; unreadable ones are skipped.
pub(crate) fn vfio_users(proc_root: &Path) -> BTreeMap<String, Vec<GroupUser>> {
    let mut out: BTreeMap<String, Vec<GroupUser>> = BTreeMap::new();
    let Ok(procs) = fs::read_dir(proc_root) else {
        return out;
    };
    for p in procs.filter_map(|e| e.ok()) {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let mut held: Vec<String> = fds
            .filter_map(|e| e.ok())
            .filter_map(|fd| fs::read_link(fd.path()).ok())
            .filter_map(|t| t.to_str().map(str::to_string))
            .filter(|t| t.starts_with("/dev/vfio/") && t != "/dev/vfio/vfio")
            .collect();
        held.sort();
        held.dedup();
        if held.is_empty() {
            continue;
        }
        let comm = fs::read_to_string(p.path().join("comm"))
            .map(|c| c.trim().to_string())
            .unwrap_or_default();
        for path in held {
            out.entry(path.clone()).or_default().push(GroupUser {
                pid,
                comm: comm.clone(),
                path,
            });
        }
    }
    out
}
