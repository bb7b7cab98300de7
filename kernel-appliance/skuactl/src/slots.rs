//! The appliance disk's A/B slots: GPT root and root-verity partition pairs.
//!
//! Layout (image/mkosi.repart): ESP, root A, verity A, root B, verity B. A slot is the i-th
//! root partition paired with the i-th root-verity partition. Like systemd-sysupdate, an
//! installed version is recorded only in the partition table: the slot's root and verity
//! partition UUIDs are the two halves of the version's dm-verity root hash (which is what
//! systemd's veritysetup-generator looks for, `roothash=` on the UKI's command line), and the
//! labels are `skua_N` / `skua_N_verity`. An empty or half-written slot is labelled `_empty`.

use std::fmt;
use std::io::{Read, Seek, Write};

use gptman::{GPT, GPTPartitionEntry};

/// GPT type of an x86-64 root partition (Discoverable Partitions Specification).
pub const ROOT_X86_64: Guid = Guid::from_str_const("4f68bce3-e8cd-4db1-96e7-fbcaf984b709");
/// GPT type of an x86-64 root-verity partition.
pub const ROOT_VERITY_X86_64: Guid = Guid::from_str_const("2c7357ed-ebd2-46d9-aec1-23d437ec2bf5");
/// The label of a slot that holds no bootable version.
pub const EMPTY_LABEL: &str = "_empty";

/// A partition UUID as text shows it (RFC 4122 byte order, big-endian fields).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` or 32 hex digits (dashes optional).
    pub fn parse(s: &str) -> Option<Guid> {
        let hex: Vec<u8> = s.bytes().filter(|&b| b != b'-').collect();
        if hex.len() != 32 || s.len() - hex.len() > 4 {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Some(Guid(out))
    }

    const fn from_str_const(s: &str) -> Guid {
        let b = s.as_bytes();
        let mut out = [0u8; 16];
        let (mut i, mut n) = (0, 0);
        while i < b.len() {
            if b[i] != b'-' {
                let d = match b[i] {
                    b'0'..=b'9' => b[i] - b'0',
                    b'a'..=b'f' => b[i] - b'a' + 10,
                    _ => panic!("bad GUID literal"),
                };
                out[n / 2] |= if n % 2 == 0 { d << 4 } else { d };
                n += 1;
            }
            i += 1;
        }
        Guid(out)
    }

    /// The GPT's on-disk form: the first three fields are little-endian (UEFI 2.10 App. A).
    pub fn to_disk(self) -> [u8; 16] {
        let mut d = self.0;
        d[0..4].reverse();
        d[4..6].reverse();
        d[6..8].reverse();
        d
    }

    /// From the GPT's on-disk form.
    pub fn from_disk(d: [u8; 16]) -> Guid {
        // The swap is its own inverse.
        Guid(Guid(d).to_disk())
    }

    /// The two partition UUIDs a dm-verity root hash names: systemd's veritysetup-generator
    /// (and systemd-repart, which wrote them) take the first and last 128 bits of the hash.
    pub fn from_roothash(hash: &str) -> Option<(Guid, Guid)> {
        if hash.len() != 64 {
            return None;
        }
        Some((Guid::parse(&hash[..32])?, Guid::parse(&hash[32..])?))
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// One partition of a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// GPT partition number (1-based, as in `/dev/vdaN`).
    pub number: u32,
    /// The partition's unique UUID.
    pub uuid: Guid,
    /// The partition's label.
    pub label: String,
    /// Byte offset on the disk.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A root + root-verity pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// `A`, `B`... in disk order.
    pub name: char,
    /// The root (erofs) partition.
    pub root: Part,
    /// Its dm-verity hash partition.
    pub verity: Part,
}

impl Slot {
    /// The version this slot holds, from its label (`skua_N`); `None` for an empty slot.
    pub fn version(&self) -> Option<u64> {
        let v = self.root.label.strip_prefix("skua_")?.parse().ok()?;
        (self.verity.label == format!("skua_{v}_verity")).then_some(v)
    }
}

/// The slots of a disk and its partition table.
pub struct Disk {
    gpt: GPT,
    /// Slots in disk order.
    pub slots: Vec<Slot>,
}

/// Errors reading or changing the partition table.
#[derive(Debug)]
pub enum SlotError {
    /// No valid GPT.
    Gpt(gptman::Error),
    /// The root and verity partitions do not pair up.
    Layout(String),
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotError::Gpt(e) => write!(f, "partition table: {e}"),
            SlotError::Layout(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for SlotError {}

impl Disk {
    /// Reads the GPT of `dev` (a disk or a disk image) and pairs its slots.
    pub fn read<D: Read + Seek>(dev: &mut D) -> Result<Disk, SlotError> {
        let gpt = GPT::find_from(dev).map_err(SlotError::Gpt)?;
        let ss = gpt.sector_size;
        let part = |(n, e): (u32, &GPTPartitionEntry)| Part {
            number: n,
            uuid: Guid::from_disk(e.unique_partition_guid),
            label: e.partition_name.as_str().to_string(),
            offset: e.starting_lba * ss,
            size: (e.ending_lba + 1 - e.starting_lba) * ss,
        };
        let of_type = |t: Guid| -> Vec<Part> {
            gpt.iter()
                .filter(|(_, e)| e.is_used() && e.partition_type_guid == t.to_disk())
                .map(part)
                .collect()
        };
        let (roots, verities) = (of_type(ROOT_X86_64), of_type(ROOT_VERITY_X86_64));
        if roots.len() != verities.len() || roots.len() < 2 {
            return Err(SlotError::Layout(format!(
                "expected two or more root + root-verity partition pairs, found {} root and {} verity partitions",
                roots.len(),
                verities.len()
            )));
        }
        let slots = roots
            .into_iter()
            .zip(verities)
            .zip('A'..)
            .map(|((root, verity), name)| Slot { name, root, verity })
            .collect();
        Ok(Disk { gpt, slots })
    }

    /// The slot whose root partition has this UUID.
    pub fn slot_of(&self, root: Guid) -> Option<&Slot> {
        self.slots.iter().find(|s| s.root.uuid == root)
    }

    /// Whether a partition other than `except`'s has this UUID.
    pub fn uuid_in_use(&self, uuid: Guid, except: char) -> bool {
        self.gpt.iter().filter(|(_, e)| e.is_used()).any(|(n, e)| {
            Guid::from_disk(e.unique_partition_guid) == uuid
                && !self
                    .slots
                    .iter()
                    .any(|s| s.name == except && (s.root.number == n || s.verity.number == n))
        })
    }

    /// Records what slot `name` holds: UUIDs and labels of its two partitions. Written to the
    /// primary and the backup table; the kernel's view changes at the next boot.
    pub fn set_slot<D: Write + Seek>(
        &mut self,
        dev: &mut D,
        name: char,
        root: (Guid, &str),
        verity: (Guid, &str),
    ) -> Result<(), SlotError> {
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.name == name)
            .ok_or_else(|| SlotError::Layout(format!("no slot {name}")))?;
        for (part, (uuid, label)) in [(&mut slot.root, root), (&mut slot.verity, verity)] {
            let e = &mut self.gpt[part.number];
            e.unique_partition_guid = uuid.to_disk();
            e.partition_name = label.into();
            part.uuid = uuid;
            part.label = label.to_string();
        }
        self.gpt.write_into(dev).map_err(SlotError::Gpt)?;
        dev.flush().map_err(|e| SlotError::Gpt(e.into()))
    }
}
