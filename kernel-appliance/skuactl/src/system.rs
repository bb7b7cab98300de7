//! What the running appliance is: booted root (from `roothash=`), its disk, the ESP, the boot
//! entry systemd-boot selected. Only reads `/proc`, `/sys`, `/dev` and efivarfs.

use std::fs;
use std::path::{Path, PathBuf};

use crate::slots::Guid;

/// systemd-boot's vendor GUID for the Boot Loader Interface variables.
const LOADER_VENDOR: &str = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";

/// The running root's partition UUIDs from a kernel command line's `roothash=`.
pub fn roothash_of(cmdline: &str) -> Option<(Guid, Guid)> {
    cmdline
        .split_whitespace()
        .find_map(|a| a.strip_prefix("roothash="))
        .and_then(Guid::from_roothash)
}

/// The running root's partition UUIDs, from `/proc/cmdline`.
pub fn booted_root() -> Result<Guid, String> {
    let cmdline =
        fs::read_to_string("/proc/cmdline").map_err(|e| format!("read /proc/cmdline: {e}"))?;
    roothash_of(&cmdline).map(|(root, _)| root).ok_or_else(|| {
        "no roothash= on the kernel command line: not running from a verity slot".to_string()
    })
}

/// The whole disk holding the partition with this UUID (`/dev/vda` for `/dev/vda2`).
pub fn disk_of(part: Guid) -> Result<PathBuf, String> {
    let link = format!("/dev/disk/by-partuuid/{part}");
    let dev = fs::canonicalize(&link).map_err(|e| format!("{link}: {e}"))?;
    let name = dev.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let sys = fs::canonicalize(format!("/sys/class/block/{name}"))
        .map_err(|e| format!("/sys/class/block/{name}: {e}"))?;
    if !sys.join("partition").exists() {
        return Err(format!("{} is not a partition", dev.display()));
    }
    let parent = sys
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("no parent disk for {}", dev.display()))?;
    Ok(PathBuf::from("/dev").join(parent))
}

/// The ESP's mount point: the first of /efi, /boot, /boot/efi that holds `EFI/Linux`
/// (systemd's gpt-auto-generator automounts the ESP at /efi on the appliance).
pub fn esp() -> Result<PathBuf, String> {
    for p in ["/efi", "/boot", "/boot/efi"] {
        // Touching the path triggers the automount.
        if Path::new(p).join("EFI/Linux").is_dir() {
            return Ok(PathBuf::from(p));
        }
    }
    Err("no ESP with EFI/Linux under /efi, /boot or /boot/efi".into())
}

/// An EFI variable of systemd-boot as text (UTF-16LE after the 4 attribute bytes).
pub fn loader_var(name: &str) -> Option<String> {
    let raw = fs::read(format!("/sys/firmware/efi/efivars/{name}-{LOADER_VENDOR}")).ok()?;
    let units: Vec<u16> = raw
        .get(4..)?
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|&u| u != 0)
        .collect();
    String::from_utf16(&units).ok()
}

/// Whether this boot is a counted trial (systemd-boot set `LoaderBootCountPath`): only then
/// does a failed health check mean "roll back".
pub fn trial_boot() -> bool {
    loader_var("LoaderBootCountPath").is_some()
}
