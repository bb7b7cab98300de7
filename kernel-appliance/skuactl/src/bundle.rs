//! Update bundles: one file per image version, `skua_N.update`.
//!
//! A bundle is a tar archive (zstd-compressed or not; image/build.sh compresses it, which
//! also squeezes out the zeros at the end of the fixed-size root partition) whose first member
//! is `manifest`, then the members it names, in its order:
//!
//! ```text
//! skua-update 1
//! version 2
//! root skua_2.root.raw 134217728 <sha256> 7e2395c6-ced1-6048-2748-a39f678be6f7
//! verity skua_2.root-verity.raw 8388608 <sha256> 16f90874-63f9-5433-a9f4-bee3baf82644
//! uki skua_2.efi 47931904 <sha256>
//! ```
//!
//! The UUIDs are the halves of the version's dm-verity root hash (the split artifact names of
//! mkosi/systemd-repart). Every member is streamed straight to its destination while hashed;
//! the caller commits the version only after every hash matched.
//!
//! Each line appears once and the three member names are distinct. Names only identify tar
//! entries: where a member goes is decided by its [`Role`] (the manifest line that named it),
//! which [`Bundle::stream`] hands to its sink.

use std::fmt;
use std::io::{self, BufReader, Read};

use sha2::{Digest, Sha256};

use crate::slots::Guid;

/// What a bundle holds, from its manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The image version (`ImageVersion=` of the build).
    pub version: u64,
    /// The root partition image.
    pub root: Member,
    /// The root's dm-verity hash partition image.
    pub verity: Member,
    /// The unified kernel image.
    pub uki: Member,
}

/// What a member is, i.e. which manifest line named it: decides where it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The root partition image (`root` line).
    Root = 0,
    /// The dm-verity hash partition image (`verity` line).
    Verity = 1,
    /// The unified kernel image (`uki` line).
    Uki = 2,
}

/// The roles in bundle order; a role's discriminant is its index here.
const ROLES: [Role; 3] = [Role::Root, Role::Verity, Role::Uki];

impl Role {
    /// The keyword of the manifest line.
    pub fn keyword(self) -> &'static str {
        match self {
            Role::Root => "root",
            Role::Verity => "verity",
            Role::Uki => "uki",
        }
    }
}

/// One member named by the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// File name inside the archive.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256, hex.
    pub sha256: String,
    /// Partition UUID (root and verity only).
    pub uuid: Option<Guid>,
}

/// A bundle that cannot be used.
#[derive(Debug)]
pub struct BundleError(pub String);

impl fmt::Display for BundleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BundleError {}

fn bad(s: impl Into<String>) -> BundleError {
    BundleError(s.into())
}

impl Manifest {
    /// The members in bundle order (root, verity, UKI), each with its role.
    pub fn members(&self) -> [(Role, &Member); 3] {
        [
            (Role::Root, &self.root),
            (Role::Verity, &self.verity),
            (Role::Uki, &self.uki),
        ]
    }

    /// Parses a manifest; every problem names its line. Each line may appear once, and the
    /// three members must have distinct names: two members with one name would be one tar
    /// entry name for two destinations.
    pub fn parse(text: &str) -> Result<Manifest, BundleError> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        match lines.next() {
            Some((_, l)) if l.trim() == "skua-update 1" => {}
            _ => return Err(bad("manifest: first line must be 'skua-update 1'")),
        }
        // Each value with the (1-based) line that set it, to name both lines of a conflict.
        let mut version: Option<(usize, u64)> = None;
        let mut members: [Option<(usize, Member)>; 3] = [None, None, None];
        for (n, line) in lines {
            let n = n + 1;
            let f: Vec<&str> = line.split_whitespace().collect();
            let err = |why: &str| bad(format!("manifest line {n}: {why}: {line}"));
            let member = |with_uuid: bool| -> Result<Member, BundleError> {
                let want = if with_uuid { 5 } else { 4 };
                if f.len() != want {
                    return Err(err(&format!("expected {want} fields")));
                }
                let name = f[1];
                if name.contains('/') || name == "manifest" {
                    return Err(err("bad member name"));
                }
                let size = f[2].parse().map_err(|_| err("bad size"))?;
                if f[3].len() != 64 || !f[3].bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(err("bad sha256"));
                }
                let uuid = if with_uuid {
                    Some(Guid::parse(f[4]).ok_or_else(|| err("bad UUID"))?)
                } else {
                    None
                };
                Ok(Member {
                    name: name.to_string(),
                    size,
                    sha256: f[3].to_ascii_lowercase(),
                    uuid,
                })
            };
            let repeated = |what: &str, first: usize| {
                err(&format!("repeated '{what}' line (first on line {first})"))
            };
            let role = match f.first().copied() {
                Some("version") if f.len() == 2 => {
                    if let Some((first, _)) = version {
                        return Err(repeated("version", first));
                    }
                    version = Some((n, f[1].parse().map_err(|_| err("bad version"))?));
                    continue;
                }
                Some("root") => Role::Root,
                Some("verity") => Role::Verity,
                Some("uki") => Role::Uki,
                _ => return Err(err("unknown line")),
            };
            if let Some((first, _)) = &members[role as usize] {
                return Err(repeated(role.keyword(), *first));
            }
            let m = member(role != Role::Uki)?;
            for (other, seen) in ROLES.iter().zip(&members) {
                if let Some((at, o)) = seen.as_ref().filter(|(_, o)| o.name == m.name) {
                    return Err(err(&format!(
                        "member name '{}' is already used by the '{}' line (line {at}); \
                         members cannot share a name",
                        o.name,
                        other.keyword()
                    )));
                }
            }
            members[role as usize] = Some((n, m));
        }
        let missing = |what: &str| bad(format!("manifest: no '{what}' line"));
        let [root, verity, uki] = members;
        Ok(Manifest {
            version: version.ok_or_else(|| missing("version"))?.1,
            root: root.ok_or_else(|| missing("root"))?.1,
            verity: verity.ok_or_else(|| missing("verity"))?.1,
            uki: uki.ok_or_else(|| missing("uki"))?.1,
        })
    }
}

/// Opens a bundle: plain tar, or zstd-compressed tar (told apart by the zstd magic).
pub fn open<R: Read + 'static>(input: R) -> Result<Bundle, BundleError> {
    let mut input = BufReader::with_capacity(1 << 20, input);
    let mut magic = [0u8; 4];
    let peek = io::BufRead::fill_buf(&mut input).map_err(|e| bad(format!("read: {e}")))?;
    let n = peek.len().min(4);
    magic[..n].copy_from_slice(&peek[..n]);
    let reader: Box<dyn Read> = if magic == [0x28, 0xb5, 0x2f, 0xfd] {
        Box::new(
            ruzstd::decoding::StreamingDecoder::new(input)
                .map_err(|e| bad(format!("zstd: {e}")))?,
        )
    } else {
        Box::new(input)
    };
    let mut reader = reader;
    // The manifest is read from its own header so that the rest of the stream can be handed
    // to a fresh tar::Archive (whose entries() starts where the next member does).
    let mut header = [0u8; 512];
    reader
        .read_exact(&mut header)
        .map_err(|e| bad(format!("not a bundle (no tar header): {e}")))?;
    let h = tar::Header::from_byte_slice(&header);
    let path = h.path().map_err(|e| bad(format!("tar: {e}")))?;
    if path.to_str() != Some("manifest") {
        return Err(bad(format!(
            "first member is '{}', expected manifest",
            path.display()
        )));
    }
    let size = h.entry_size().map_err(|e| bad(format!("tar: {e}")))?;
    if size > 64 * 1024 {
        return Err(bad("manifest larger than 64 KiB"));
    }
    let mut text = vec![0u8; size.next_multiple_of(512) as usize];
    reader
        .read_exact(&mut text)
        .map_err(|e| bad(format!("manifest: {e}")))?;
    text.truncate(size as usize);
    let text = String::from_utf8(text).map_err(|_| bad("manifest is not UTF-8"))?;
    let manifest = Manifest::parse(&text)?;
    let archive = tar::Archive::new(reader);
    Ok(Bundle { archive, manifest })
}

/// An opened bundle: its manifest, and the archive positioned after it.
pub struct Bundle {
    archive: tar::Archive<Box<dyn Read>>,
    /// What the bundle holds.
    pub manifest: Manifest,
}

impl Bundle {
    /// Streams the members, in the manifest's order (root, verity, UKI), each to the writer
    /// `sink` returns for its role; checks each member's size and SHA-256 as it goes. The sink
    /// must choose the destination from the [`Role`], never from the member's name.
    pub fn stream<'w>(
        mut self,
        mut sink: impl FnMut(Role, &Member) -> io::Result<Box<dyn io::Write + 'w>>,
    ) -> Result<Manifest, BundleError> {
        let m = self.manifest.clone();
        let mut entries = self
            .archive
            .entries()
            .map_err(|e| bad(format!("tar: {e}")))?;
        for (role, member) in m.members() {
            let mut entry = entries
                .next()
                .ok_or_else(|| bad(format!("bundle ends before {}", member.name)))?
                .map_err(|e| bad(format!("tar: {e}")))?;
            let path = entry.path().map_err(|e| bad(format!("tar: {e}")))?;
            if path.to_str() != Some(member.name.as_str()) {
                return Err(bad(format!(
                    "member {} where the manifest expects {}",
                    path.display(),
                    member.name
                )));
            }
            if entry.size() != member.size {
                return Err(bad(format!(
                    "{}: {} bytes, the manifest says {}",
                    member.name,
                    entry.size(),
                    member.size
                )));
            }
            let mut out = sink(role, member).map_err(|e| bad(format!("{}: {e}", member.name)))?;
            let mut hash = Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            let mut total = 0u64;
            loop {
                let n = entry
                    .read(&mut buf)
                    .map_err(|e| bad(format!("{}: read: {e}", member.name)))?;
                if n == 0 {
                    break;
                }
                hash.update(&buf[..n]);
                out.write_all(&buf[..n])
                    .map_err(|e| bad(format!("{}: write: {e}", member.name)))?;
                total += n as u64;
            }
            out.flush()
                .map_err(|e| bad(format!("{}: write: {e}", member.name)))?;
            let got: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
            if total != member.size || got != member.sha256 {
                return Err(bad(format!(
                    "{}: checksum mismatch (corrupt or truncated bundle)",
                    member.name
                )));
            }
        }
        Ok(m)
    }
}
