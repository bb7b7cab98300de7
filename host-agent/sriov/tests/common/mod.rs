//! A fake kernel for the tests: a sysfs tree of real files and symlinks in a temporary
//! directory, shaped like the kernel's, a writer that logs every write and reacts to it
//! as the kernel does (drivers/pci/iov.c for `sriov_numvfs`, drivers/pci/pci-driver.c and
//! drivers/base/bus.c for `unbind` and `drivers_probe`), and an in-memory rtnetlink.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use skua_sriov::{
    Error, Host, KernelWriter, LinkState, MacAddr, PciAddr, SysfsWriter, VfAttr, VfControl,
    VfLinkInfo,
};

const BRIDGE: &str = "devices/pci0000:00/0000:00:01.0";

/// The fake kernel. Every write, sysfs or netlink, lands in `log` in order.
pub struct FakeKernel {
    dir: tempfile::TempDir,
    pub root: PathBuf,
    pub proc: PathBuf,
    log: Mutex<Vec<String>>,
    links: Mutex<BTreeMap<(String, u32), VfLinkInfo>>,
    /// `sriov_drivers_autoprobe` as it was each time VFs were created.
    pub autoprobe_at_creation: Mutex<Vec<String>>,
    /// VFs removed while bound to vfio-pci (the real kernel would wait for the VM).
    pub removed_on_vfio: Mutex<Vec<String>>,
    /// vfio-pci's probe fails (as with a broken group).
    pub vfio_refuses: Mutex<bool>,
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// igb's VF routing: offset 0x80, stride 2 from the PF's devfn.
pub fn vf_addr(pf: PciAddr, i: u16) -> PciAddr {
    let devfn = u32::from(pf.device) * 8 + u32::from(pf.function) + 0x80 + 2 * u32::from(i);
    PciAddr {
        domain: pf.domain,
        bus: pf.bus,
        device: (devfn / 8) as u8,
        function: (devfn % 8) as u8,
    }
}

impl FakeKernel {
    /// A tree with the PCI bus, igb and igbvf drivers, no vfio-pci, no devices.
    pub fn new() -> Arc<FakeKernel> {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sys");
        let proc = dir.path().join("proc");
        for d in [
            BRIDGE,
            "bus/pci/devices",
            "bus/pci/drivers/igb",
            "bus/pci/drivers/igbvf",
            "class/net",
            "devices/virtual/net",
            "kernel/iommu_groups",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::create_dir_all(&proc).unwrap();
        fs::write(root.join("bus/pci/drivers_probe"), "").unwrap();
        for drv in ["igb", "igbvf"] {
            fs::write(root.join("bus/pci/drivers").join(drv).join("unbind"), "").unwrap();
            fs::write(root.join("bus/pci/drivers").join(drv).join("bind"), "").unwrap();
        }
        Arc::new(FakeKernel {
            dir,
            root,
            proc,
            log: Mutex::new(Vec::new()),
            links: Mutex::new(BTreeMap::new()),
            autoprobe_at_creation: Mutex::new(Vec::new()),
            removed_on_vfio: Mutex::new(Vec::new()),
            vfio_refuses: Mutex::new(false),
        })
    }

    /// A host on this tree; VFs must appear within 200 ms.
    pub fn host(self: &Arc<Self>) -> Host {
        Host::new(
            &self.root,
            &self.proc,
            Box::new(Arc::clone(self)),
            Box::new(Arc::clone(self)),
        )
        .with_vf_timeout(std::time::Duration::from_millis(200))
    }

    /// A host on this tree whose writes are plain file writes (nothing reacts).
    pub fn inert_host(self: &Arc<Self>) -> Host {
        Host::new(
            &self.root,
            &self.proc,
            Box::new(KernelWriter),
            Box::new(Arc::clone(self)),
        )
        .with_vf_timeout(std::time::Duration::from_millis(100))
    }

    pub fn load_vfio(&self) {
        let d = self.root.join("bus/pci/drivers/vfio-pci");
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("unbind"), "").unwrap();
        fs::write(d.join("bind"), "").unwrap();
    }

    fn dev_dir(&self, addr: PciAddr) -> PathBuf {
        self.root.join(BRIDGE).join(addr.to_string())
    }

    fn set_group(&self, addr: PciAddr, group: u32) {
        fs::create_dir_all(self.root.join(format!("kernel/iommu_groups/{group}"))).unwrap();
        let link = self.dev_dir(addr).join("iommu_group");
        let _ = fs::remove_file(&link);
        symlink(format!("../../../../kernel/iommu_groups/{group}"), link).unwrap();
    }

    pub fn remove_group(&self, addr: PciAddr) {
        fs::remove_file(self.dev_dir(addr).join("iommu_group")).unwrap();
    }

    /// Points `driver` at `drv` (or removes it).
    pub fn set_driver(&self, addr: PciAddr, drv: Option<&str>) {
        let link = self.dev_dir(addr).join("driver");
        let _ = fs::remove_file(&link);
        if let Some(drv) = drv {
            symlink(format!("../../../../bus/pci/drivers/{drv}"), link).unwrap();
        }
    }

    /// A PF on igb. `total`: `sriov_totalvfs` (None: no SR-IOV capability). `group`: its
    /// IOMMU group (None: IOMMU off). Autoprobe on, no VFs, as after boot.
    pub fn add_pf(
        &self,
        ifname: &str,
        pci: &str,
        total: Option<u16>,
        group: Option<u32>,
    ) -> PciAddr {
        let addr: PciAddr = pci.parse().unwrap();
        let dev = self.dev_dir(addr);
        fs::create_dir_all(dev.join("net").join(ifname)).unwrap();
        symlink(
            format!("../../../{addr}"),
            dev.join("net").join(ifname).join("device"),
        )
        .unwrap();
        symlink(
            format!("../../{BRIDGE}/{addr}/net/{ifname}"),
            self.root.join("class/net").join(ifname),
        )
        .unwrap();
        symlink(
            format!("../../../{BRIDGE}/{addr}"),
            self.root.join("bus/pci/devices").join(addr.to_string()),
        )
        .unwrap();
        fs::write(dev.join("driver_override"), "(null)\n").unwrap();
        self.set_driver(addr, Some("igb"));
        if let Some(total) = total {
            fs::write(dev.join("sriov_totalvfs"), format!("{total}\n")).unwrap();
            fs::write(dev.join("sriov_numvfs"), "0\n").unwrap();
            fs::write(dev.join("sriov_drivers_autoprobe"), "1\n").unwrap();
        }
        if let Some(g) = group {
            self.set_group(addr, g);
        }
        addr
    }

    /// A virtual interface (no `device` link), like veth.
    pub fn add_virtual(&self, ifname: &str) {
        fs::create_dir_all(self.root.join("devices/virtual/net").join(ifname)).unwrap();
        symlink(
            format!("../../devices/virtual/net/{ifname}"),
            self.root.join("class/net").join(ifname),
        )
        .unwrap();
    }

    /// Sets up VFs as if created at boot (not logged): `n` VFs, each on `drv`.
    pub fn boot_with_vfs(&self, pf: PciAddr, n: u16, drv: Option<&str>) {
        self.create_vfs(pf, n);
        for i in 0..n {
            self.set_driver(vf_addr(pf, i), drv);
        }
    }

    /// A process holding `path` (e.g. /dev/vfio/101) open.
    pub fn add_holder(&self, pid: u32, comm: &str, path: &str) {
        let d = self.proc.join(pid.to_string());
        fs::create_dir_all(d.join("fd")).unwrap();
        fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
        symlink("/dev/null", d.join("fd/0")).unwrap();
        symlink(path, d.join("fd/9")).unwrap();
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn clear_log(&self) {
        self.log.lock().unwrap().clear();
    }

    pub fn driver_of(&self, addr: PciAddr) -> Option<String> {
        fs::read_link(self.dev_dir(addr).join("driver"))
            .ok()
            .map(|t| t.file_name().unwrap().to_string_lossy().into_owned())
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn link(&self, ifname: &str, vf: u32) -> VfLinkInfo {
        self.links.lock().unwrap()[&(ifname.to_string(), vf)].clone()
    }

    /// Every file's content and every link's target, to show that nothing changed.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
            for e in fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let ty = e.file_type().unwrap();
                let p = e.path();
                if ty.is_symlink() {
                    out.insert(
                        p.clone(),
                        format!("-> {}", fs::read_link(&p).unwrap().display()),
                    );
                } else if ty.is_dir() {
                    out.insert(p.clone(), "dir".into());
                    walk(&p, out);
                } else {
                    let meta = e.metadata().unwrap();
                    let content = fs::read_to_string(&p).unwrap();
                    out.insert(
                        p.clone(),
                        format!("{content:?} {:?}", meta.modified().unwrap()),
                    );
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(self.dir.path(), &mut out);
        out
    }

    fn pf_of_ifname(&self, ifname: &str) -> Option<PciAddr> {
        let dev = fs::canonicalize(self.root.join("class/net").join(ifname).join("device")).ok()?;
        dev.file_name()?.to_str()?.parse().ok()
    }

    fn ifname_of_pf(&self, pf: PciAddr) -> Option<String> {
        let mut d = fs::read_dir(self.dev_dir(pf).join("net")).ok()?;
        Some(d.next()?.ok()?.file_name().to_string_lossy().into_owned())
    }

    fn existing_vfs(&self, pf: PciAddr) -> Vec<(String, PciAddr)> {
        let mut out = Vec::new();
        for e in fs::read_dir(self.dev_dir(pf)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("virtfn") {
                let t = fs::read_link(e.path()).unwrap();
                out.push((
                    name,
                    t.file_name().unwrap().to_str().unwrap().parse().unwrap(),
                ));
            }
        }
        out
    }

    /// drivers/pci/iov.c: remove every VF, or create `n` (each probed by igbvf when
    /// autoprobe is on, each in its own IOMMU group when the PF has one).
    fn create_vfs(&self, pf: PciAddr, n: u16) {
        let dev = self.dev_dir(pf);
        if n == 0 {
            for (link, vf) in self.existing_vfs(pf) {
                if self.driver_of(vf).as_deref() == Some("vfio-pci") {
                    self.removed_on_vfio.lock().unwrap().push(vf.to_string());
                }
                fs::remove_dir_all(self.dev_dir(vf)).unwrap();
                fs::remove_file(self.root.join("bus/pci/devices").join(vf.to_string())).unwrap();
                fs::remove_file(dev.join(link)).unwrap();
            }
        } else {
            let autoprobe = fs::read_to_string(dev.join("sriov_drivers_autoprobe")).unwrap();
            self.autoprobe_at_creation
                .lock()
                .unwrap()
                .push(autoprobe.trim().to_string());
            let pf_group = fs::read_link(dev.join("iommu_group")).ok();
            for i in 0..n {
                let vf = vf_addr(pf, i);
                let vd = self.dev_dir(vf);
                fs::create_dir_all(&vd).unwrap();
                fs::write(vd.join("driver_override"), "(null)\n").unwrap();
                symlink(format!("../{pf}"), vd.join("physfn")).unwrap();
                symlink(format!("../{vf}"), dev.join(format!("virtfn{i}"))).unwrap();
                symlink(
                    format!("../../../{BRIDGE}/{vf}"),
                    self.root.join("bus/pci/devices").join(vf.to_string()),
                )
                .unwrap();
                if pf_group.is_some() {
                    self.set_group(vf, 100 + u32::from(i));
                }
                if autoprobe.trim() == "1" {
                    self.set_driver(vf, Some("igbvf"));
                }
            }
        }
        fs::write(dev.join("sriov_numvfs"), format!("{n}\n")).unwrap();
        if let Some(ifname) = self.ifname_of_pf(pf) {
            let mut links = self.links.lock().unwrap();
            links.retain(|(i, _), _| *i != ifname);
            for i in 0..u32::from(n) {
                links.insert(
                    (ifname.clone(), i),
                    VfLinkInfo {
                        vf: i,
                        mac: Some(MacAddr([0; 6])),
                        vlan: None,
                        qos: 0,
                        spoofchk: Some(true),
                        trust: Some(false),
                        link_state: Some(LinkState::Auto),
                    },
                );
            }
        }
    }

    fn react(&self, path: &Path, value: &str) -> io::Result<()> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parent = fs::canonicalize(path.parent().unwrap())?;
        let root = fs::canonicalize(&self.root)?;
        match name {
            "sriov_numvfs" => {
                let pf: PciAddr = parent
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                let want: u16 = value.trim().parse().map_err(|_| errno(libc_einval()))?;
                let now: u16 = fs::read_to_string(path)?.trim().parse().unwrap();
                let total: u16 = fs::read_to_string(parent.join("sriov_totalvfs"))?
                    .trim()
                    .parse()
                    .unwrap();
                if self.driver_of(pf).is_none() {
                    return Err(errno(2)); // ENOENT: no PF driver
                }
                if want == now {
                    return Ok(());
                }
                if want > total {
                    return Err(errno(34)); // ERANGE
                }
                if now != 0 && want != 0 {
                    return Err(errno(16)); // EBUSY
                }
                self.create_vfs(pf, want);
                Ok(())
            }
            "unbind" => {
                let drv = parent.file_name().unwrap().to_str().unwrap().to_string();
                let dev: PciAddr = value.trim().parse().map_err(|_| errno(19))?;
                if self.driver_of(dev).as_deref() != Some(drv.as_str()) {
                    return Err(errno(19)); // ENODEV
                }
                self.set_driver(dev, None);
                Ok(())
            }
            "drivers_probe" if parent == root.join("bus/pci") => {
                let dev: PciAddr = value.trim().parse().map_err(|_| errno(19))?;
                if self.driver_of(dev).is_some() {
                    return Ok(());
                }
                let ov = fs::read_to_string(self.dev_dir(dev).join("driver_override"))?;
                let drv = match ov.trim() {
                    "(null)" | "" => {
                        if self.dev_dir(dev).join("physfn").exists() {
                            "igbvf".to_string()
                        } else {
                            "igb".to_string()
                        }
                    }
                    o => o.to_string(),
                };
                if !self.root.join("bus/pci/drivers").join(&drv).is_dir() {
                    return Ok(());
                }
                if drv == "vfio-pci" {
                    if !self.dev_dir(dev).join("iommu_group").exists() {
                        return Err(errno(22)); // vfio-pci: -EINVAL without a group
                    }
                    if *self.vfio_refuses.lock().unwrap() {
                        return Ok(()); // probe failed: the bus swallows it
                    }
                }
                self.set_driver(dev, Some(&drv));
                Ok(())
            }
            _ => KernelWriter.write(path, value),
        }
    }
}

fn libc_einval() -> i32 {
    22
}

impl SysfsWriter for FakeKernel {
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        self.log
            .lock()
            .unwrap()
            .push(format!("{} = {value}", rel.display()));
        self.react(path, value)
    }
}

impl VfControl for FakeKernel {
    fn vf_list(&self, ifname: &str) -> Result<Vec<VfLinkInfo>, Error> {
        if self.pf_of_ifname(ifname).is_none() {
            panic!("vf_list of unknown interface {ifname}");
        }
        Ok(self
            .links
            .lock()
            .unwrap()
            .iter()
            .filter(|((i, _), _)| i == ifname)
            .map(|(_, v)| v.clone())
            .collect())
    }

    fn set_vf(&self, ifname: &str, vf: u16, attr: &VfAttr) -> Result<(), Error> {
        self.log.lock().unwrap().push(format!(
            "netlink {ifname} vf {vf} {} {}",
            attr.name(),
            attr.value()
        ));
        let mut links = self.links.lock().unwrap();
        let Some(l) = links.get_mut(&(ifname.to_string(), u32::from(vf))) else {
            return Err(Error::NoVfs {
                ifname: ifname.into(),
            });
        };
        match *attr {
            VfAttr::Mac(m) => l.mac = Some(m),
            VfAttr::Vlan { vlan, qos } => {
                l.vlan = Some(vlan);
                l.qos = qos;
            }
            VfAttr::Spoofchk(b) => l.spoofchk = Some(b),
            VfAttr::Trust(b) => l.trust = Some(b),
            VfAttr::LinkState(s) => l.link_state = Some(s),
        }
        Ok(())
    }
}
