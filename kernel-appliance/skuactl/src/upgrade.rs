//! Installing a bundle into the inactive slot (the job systemd-sysupdate does on newer
//! systems; the appliance's Debian 12 guest ships systemd 252, which has no sysupdate).
//!
//! Order, so that a crash or a bad bundle at any step leaves the running version bootable and
//! no boot entry pointing at half-written data:
//! 1. boot entries (UKIs) that do not boot the running slot are deleted: the inactive slot's
//!    old version is about to be overwritten;
//! 2. the inactive slot is labelled `_empty` in the partition table;
//! 3. root and verity images are written into it, the UKI to a temporary file on the ESP,
//!    all hashed as they stream (bundle.rs);
//! 4. only when every hash matched: the slot's UUIDs/labels name the new version, then the
//!    UKI is renamed to `skua_N+T.efi`, which is the commit: systemd-boot now prefers it
//!    (highest version) and counts down `T` tries; the boot health gate (skua-health.service,
//!    `skuactl health`) must reach boot-complete.target for systemd-bless-boot to drop the
//!    counter, else the entry ends at `+0` and systemd-boot falls back to the old version.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::bundle::{Bundle, BundleError, Role};
use crate::slots::{Disk, EMPTY_LABEL, Guid, Slot, SlotError};

/// Where to install.
#[derive(Debug, Clone)]
pub struct Target {
    /// The disk holding the slots (a block device, or a disk image in tests).
    pub disk: PathBuf,
    /// The ESP's mount point (holds `EFI/Linux`).
    pub esp: PathBuf,
    /// The running version's root partition UUID (first half of `roothash=`).
    pub booted_root: Guid,
    /// Boot attempts systemd-boot grants the new version before it falls back; 0 = no
    /// counting (the new version is trusted at once).
    pub tries: u32,
}

/// What was installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The new version.
    pub version: u64,
    /// The version that was running, if its slot was labelled.
    pub previous: Option<u64>,
    /// The slot written.
    pub slot: char,
    /// The boot entry created.
    pub uki: PathBuf,
    /// Boot entries deleted (they booted the overwritten slot).
    pub removed: Vec<PathBuf>,
}

/// Why an upgrade did not happen.
#[derive(Debug)]
pub enum UpgradeError {
    /// The bundle is unusable (nothing was committed; the target slot may be `_empty`).
    Bundle(BundleError),
    /// The partition table.
    Slots(SlotError),
    /// I/O on the disk or the ESP.
    Io(String, io::Error),
    /// Refused before anything was written.
    Refused(String),
}

impl fmt::Display for UpgradeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpgradeError::Bundle(e) => write!(f, "bundle: {e}"),
            UpgradeError::Slots(e) => write!(f, "{e}"),
            UpgradeError::Io(what, e) => write!(f, "{what}: {e}"),
            UpgradeError::Refused(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for UpgradeError {}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> UpgradeError {
    let what = what.into();
    move |e| UpgradeError::Io(what, e)
}

/// The directory of type #2 boot entries (UKIs) on the ESP.
pub fn uki_dir(esp: &Path) -> PathBuf {
    esp.join("EFI/Linux")
}

/// The root partition UUID a UKI boots: the first half of the `roothash=` on its embedded
/// command line (the `.cmdline` PE section is plain ASCII).
pub fn uki_root(uki: &[u8]) -> Option<Guid> {
    let key = b"roothash=";
    let at = uki.windows(key.len()).position(|w| w == key)? + key.len();
    let hash = uki.get(at..at + 64)?;
    Guid::from_roothash(std::str::from_utf8(hash).ok()?).map(|(root, _)| root)
}

/// [`uki_root`] of a UKI file, read in 1 MiB chunks until the command line is found: ukify
/// places `.cmdline` before the kernel and initrd, so this reads the first chunk of a 48 MB
/// file, not all of it.
pub fn uki_file_root(path: &Path) -> Option<Guid> {
    const CHUNK: usize = 1 << 20;
    // Enough overlap between chunks for `roothash=` and its 64 hex digits.
    const KEEP: usize = 9 + 64;
    let mut f = File::open(path).ok()?;
    let mut buf = Vec::with_capacity(CHUNK + KEEP);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = f.read(&mut chunk).ok()?;
        buf.extend_from_slice(&chunk[..n]);
        if let Some(root) = uki_root(&buf) {
            return Some(root);
        }
        if n == 0 {
            return None;
        }
        let drop = buf.len().saturating_sub(KEEP);
        buf.drain(..drop);
    }
}

/// A boot entry's name split as systemd-boot reads it: `skua_2+1-2.efi` is version 2 with
/// 1 try left and 2 done (Boot Loader Specification, "Boot counting").
pub fn parse_entry(file: &str) -> Option<(u64, Option<(u32, u32)>)> {
    let stem = file.strip_prefix("skua_")?.strip_suffix(".efi")?;
    let (version, counter) = match stem.split_once('+') {
        Some((v, c)) => (v, Some(c)),
        None => (stem, None),
    };
    let version = version.parse().ok()?;
    let counter = match counter {
        None => None,
        Some(c) => {
            let (left, done) = c.split_once('-').unwrap_or((c, "0"));
            Some((left.parse().ok()?, done.parse().ok()?))
        }
    };
    Some((version, counter))
}

/// Writes into one partition of the disk, never past its end.
struct PartWriter<'a> {
    disk: &'a File,
    offset: u64,
    size: u64,
    pos: u64,
}

impl Write for PartWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.pos + buf.len() as u64 > self.size {
            return Err(io::Error::other("image larger than the partition"));
        }
        self.disk.write_all_at(buf, self.offset + self.pos)?;
        self.pos += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Installs `bundle` into the slot that is not running; see the module docs for the order.
pub fn install(bundle: Bundle, t: &Target) -> Result<Installed, UpgradeError> {
    let m = bundle.manifest.clone();
    let dev = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&t.disk)
        .map_err(io_err(format!("open {}", t.disk.display())))?;
    let mut disk = Disk::read(&mut &dev).map_err(UpgradeError::Slots)?;
    let booted = disk.slot_of(t.booted_root).cloned().ok_or_else(|| {
        UpgradeError::Refused(format!(
            "the running root ({}) is not a slot of {}",
            t.booted_root,
            t.disk.display()
        ))
    })?;
    let previous = booted.version();
    // The manifest parser requires both UUIDs.
    let (root_uuid, verity_uuid) = (
        m.root.uuid.expect("manifest root line carries a UUID"),
        m.verity.uuid.expect("manifest verity line carries a UUID"),
    );
    if root_uuid == booted.root.uuid {
        return Err(UpgradeError::Refused(format!(
            "version {} is the one running",
            m.version
        )));
    }
    if let Some(p) = previous.filter(|&p| m.version <= p) {
        return Err(UpgradeError::Refused(format!(
            "version {} is not newer than the running version {p} (systemd-boot boots the highest version)",
            m.version
        )));
    }
    let target: Slot = disk
        .slots
        .iter()
        .find(|s| s.name != booted.name)
        .cloned()
        .ok_or_else(|| UpgradeError::Refused("no inactive slot".into()))?;
    for (what, member, uuid, part) in [
        ("root", &m.root, root_uuid, &target.root),
        ("verity", &m.verity, verity_uuid, &target.verity),
    ] {
        if member.size > part.size {
            return Err(UpgradeError::Refused(format!(
                "{what} image is {} bytes, slot {} has {}",
                member.size, target.name, part.size
            )));
        }
        if disk.uuid_in_use(uuid, target.name) {
            return Err(UpgradeError::Refused(format!(
                "{what} UUID {uuid} is already used on {}",
                t.disk.display()
            )));
        }
    }

    // 1. Boot entries that do not boot the running slot go first.
    let dir = uki_dir(&t.esp);
    fs::create_dir_all(&dir).map_err(io_err(format!("create {}", dir.display())))?;
    let mut removed = Vec::new();
    for entry in fs::read_dir(&dir).map_err(io_err(format!("list {}", dir.display())))? {
        let path = entry.map_err(io_err("ESP"))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let stale_tmp = name.starts_with(".skua_");
        if !stale_tmp && parse_entry(name).is_none() {
            continue;
        }
        let keep = !stale_tmp && uki_file_root(&path) == Some(booted.root.uuid);
        if !keep {
            fs::remove_file(&path).map_err(io_err(format!("remove {}", path.display())))?;
            removed.push(path);
        }
    }

    // 2. The target slot is empty from now until the commit.
    let (old_root, old_verity) = (target.root.uuid, target.verity.uuid);
    disk.set_slot(
        &mut &dev,
        target.name,
        (old_root, EMPTY_LABEL),
        (old_verity, EMPTY_LABEL),
    )
    .map_err(UpgradeError::Slots)?;
    dev.sync_all().map_err(io_err("sync disk"))?;

    // 3. Stream the members. The destination follows the member's role (the manifest line
    // that named it), never its name: names are only how the tar entries are found, and a
    // name shared by two members must not send one member's bytes to the other's place.
    let tmp = dir.join(format!(".skua_{}.efi.tmp", m.version));
    let streamed = bundle.stream(|role, _member| -> io::Result<Box<dyn Write + '_>> {
        Ok(match role {
            Role::Root => Box::new(PartWriter {
                disk: &dev,
                offset: target.root.offset,
                size: target.root.size,
                pos: 0,
            }),
            Role::Verity => Box::new(PartWriter {
                disk: &dev,
                offset: target.verity.offset,
                size: target.verity.size,
                pos: 0,
            }),
            Role::Uki => Box::new(io::BufWriter::new(File::create(&tmp)?)),
        })
    });
    if let Err(e) = streamed {
        let _ = fs::remove_file(&tmp);
        return Err(UpgradeError::Bundle(e));
    }
    dev.sync_all().map_err(io_err("sync disk"))?;
    File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(io_err("sync UKI"))?;

    // 4. Commit: the partition table names the version, then the boot entry appears.
    disk.set_slot(
        &mut &dev,
        target.name,
        (root_uuid, &format!("skua_{}", m.version)),
        (verity_uuid, &format!("skua_{}_verity", m.version)),
    )
    .map_err(UpgradeError::Slots)?;
    dev.sync_all().map_err(io_err("sync disk"))?;
    let uki = dir.join(if t.tries > 0 {
        format!("skua_{}+{}.efi", m.version, t.tries)
    } else {
        format!("skua_{}.efi", m.version)
    });
    fs::rename(&tmp, &uki).map_err(io_err(format!("rename to {}", uki.display())))?;
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync ESP"))?;
    Ok(Installed {
        version: m.version,
        previous,
        slot: target.name,
        uki,
        removed,
    })
}
