//! A/B upgrades on disk images: slot bookkeeping, the commit order, and every refusal.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use gptman::{GPT, GPTPartitionEntry};
use sha2::{Digest, Sha256};
use skuactl::bundle;
use skuactl::slots::{Disk, EMPTY_LABEL, Guid, ROOT_VERITY_X86_64, ROOT_X86_64};
use skuactl::upgrade::{self, Target, UpgradeError};

const MIB: u64 = 1 << 20;
const ROOT: u64 = 4 * MIB;
const VERITY: u64 = MIB;

struct Fixture {
    dir: PathBuf,
    disk: PathBuf,
    esp: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Deterministic bytes that differ per seed.
fn data(seed: u64, len: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn guid(seed: u8) -> Guid {
    Guid([seed; 16])
}

fn hex(g: Guid) -> String {
    g.0.iter().map(|b| format!("{b:02x}")).collect()
}

fn uki_for(root: Guid, verity: Guid, version: u64) -> Vec<u8> {
    let mut u = b"MZ\0\0 fake PE; .cmdline: ".to_vec();
    u.extend_from_slice(
        format!(
            "root=/dev/mapper/root ro roothash={}{} console=ttyS0\0 version {version}",
            hex(root),
            hex(verity)
        )
        .as_bytes(),
    );
    u.extend(data(version, 4096));
    u
}

/// ESP, root A (version 1), verity A, root B (empty), verity B: the image's layout, small.
fn fixture(name: &str) -> Fixture {
    let dir = std::env::temp_dir().join(format!("skuactl-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("esp/EFI/Linux")).unwrap();
    let disk = dir.join("disk.raw");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&disk)
        .unwrap();
    f.set_len(24 * MIB).unwrap();
    let mut gpt = GPT::new_from(&mut f, 512, [7; 16]).unwrap();
    let esp_type = Guid::parse("c12a7328-f81f-11d2-ba4b-00a0c93ec93b").unwrap();
    let parts = [
        (esp_type, guid(0xe5), "esp", 4 * MIB),
        (ROOT_X86_64, guid(0xa1), "skua_1", ROOT),
        (ROOT_VERITY_X86_64, guid(0xa2), "skua_1_verity", VERITY),
        (ROOT_X86_64, guid(0xb1), EMPTY_LABEL, ROOT),
        (ROOT_VERITY_X86_64, guid(0xb2), EMPTY_LABEL, VERITY),
    ];
    let mut lba = 2048;
    for (i, (t, u, label, size)) in parts.iter().enumerate() {
        let sectors = size / 512;
        gpt[i as u32 + 1] = GPTPartitionEntry {
            partition_type_guid: t.to_disk(),
            unique_partition_guid: u.to_disk(),
            starting_lba: lba,
            ending_lba: lba + sectors - 1,
            attribute_bits: 0,
            partition_name: (*label).into(),
        };
        lba += sectors;
    }
    gpt.write_into(&mut f).unwrap();
    // Version 1's data in slot A.
    f.seek(SeekFrom::Start((2048 * 512) + 4 * MIB)).unwrap();
    f.write_all(&data(1, ROOT)).unwrap();
    let esp = dir.join("esp");
    fs::write(
        esp.join("EFI/Linux/skua_1.efi"),
        uki_for(guid(0xa1), guid(0xa2), 1),
    )
    .unwrap();
    Fixture { dir, disk, esp }
}

struct Payload {
    version: u64,
    root: Vec<u8>,
    verity: Vec<u8>,
    uki: Vec<u8>,
    root_uuid: Guid,
    verity_uuid: Guid,
}

fn payload(version: u64) -> Payload {
    let (ru, vu) = (guid(version as u8 * 16), guid(version as u8 * 16 + 1));
    Payload {
        version,
        // Like the real root: data, then zeros to the partition's size.
        root: {
            let mut r = data(version * 10, ROOT / 2);
            r.resize(ROOT as usize, 0);
            r
        },
        verity: data(version * 10 + 1, VERITY / 4),
        uki: uki_for(ru, vu, version),
        root_uuid: ru,
        verity_uuid: vu,
    }
}

fn sha(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Writes a bundle file; `tamper` changes the root bytes after the manifest was made.
fn bundle_file(fx: &Fixture, p: &Payload, compress: bool, tamper: bool) -> PathBuf {
    let v = p.version;
    let manifest = format!(
        "skua-update 1\nversion {v}\nroot skua_{v}.root.raw {} {} {}\nverity skua_{v}.root-verity.raw {} {} {}\nuki skua_{v}.efi {} {}\n",
        p.root.len(),
        sha(&p.root),
        p.root_uuid,
        p.verity.len(),
        sha(&p.verity),
        p.verity_uuid,
        p.uki.len(),
        sha(&p.uki)
    );
    let mut root = p.root.clone();
    if tamper {
        root[12345] ^= 1;
    }
    let mut b = tar::Builder::new(Vec::new());
    for (name, bytes) in [
        ("manifest".to_string(), manifest.as_bytes()),
        (format!("skua_{v}.root.raw"), &root[..]),
        (format!("skua_{v}.root-verity.raw"), &p.verity[..]),
        (format!("skua_{v}.efi"), &p.uki[..]),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, bytes).unwrap();
    }
    let mut out = b.into_inner().unwrap();
    if compress {
        out = ruzstd::encoding::compress_to_vec(
            &out[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
    }
    let path = fx.dir.join(format!(
        "skua_{v}{}.update",
        if tamper { "-bad" } else { "" }
    ));
    fs::write(&path, out).unwrap();
    path
}

fn install(
    fx: &Fixture,
    bundle: &Path,
    booted: Guid,
    tries: u32,
) -> Result<upgrade::Installed, UpgradeError> {
    let b = bundle::open(File::open(bundle).unwrap()).map_err(UpgradeError::Bundle)?;
    upgrade::install(
        b,
        &Target {
            disk: fx.disk.clone(),
            esp: fx.esp.clone(),
            booted_root: booted,
            tries,
        },
    )
}

fn read_disk(fx: &Fixture) -> Disk {
    Disk::read(&mut File::open(&fx.disk).unwrap()).unwrap()
}

fn bytes_at(fx: &Fixture, offset: u64, len: usize) -> Vec<u8> {
    let mut f = File::open(&fx.disk).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    let mut b = vec![0; len];
    f.read_exact(&mut b).unwrap();
    b
}

fn entries(fx: &Fixture) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(fx.esp.join("EFI/Linux"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn v1_to_v2_to_v3_alternates_slots_and_keeps_the_running_entry() {
    let fx = fixture("abc");
    let (p2, p3) = (payload(2), payload(3));
    let d = read_disk(&fx);
    let a_offset = d.slots[0].root.offset;
    let a_before = bytes_at(&fx, a_offset, ROOT as usize);

    // v1 runs from A: v2 goes to B (compressed bundle), with 3 tries.
    let done = install(&fx, &bundle_file(&fx, &p2, true, false), guid(0xa1), 3).unwrap();
    assert_eq!((done.version, done.previous, done.slot), (2, Some(1), 'B'));
    let d = read_disk(&fx);
    assert_eq!(d.slots[1].version(), Some(2));
    assert_eq!(
        (d.slots[1].root.uuid, d.slots[1].verity.uuid),
        (p2.root_uuid, p2.verity_uuid)
    );
    assert_eq!(
        bytes_at(&fx, d.slots[1].root.offset, ROOT as usize),
        p2.root
    );
    assert_eq!(
        bytes_at(&fx, d.slots[1].verity.offset, p2.verity.len()),
        p2.verity
    );
    assert_eq!(
        bytes_at(&fx, a_offset, ROOT as usize),
        a_before,
        "running slot untouched"
    );
    assert_eq!(d.slots[0].version(), Some(1));
    assert_eq!(entries(&fx), ["skua_1.efi", "skua_2+3.efi"]);
    assert_eq!(
        fs::read(fx.esp.join("EFI/Linux/skua_2+3.efi")).unwrap(),
        p2.uki
    );

    // v2 was blessed (systemd-bless-boot drops the counter) and runs from B: v3 goes to A,
    // v1's entry goes (its slot is overwritten), v2's stays.
    fs::rename(
        fx.esp.join("EFI/Linux/skua_2+3.efi"),
        fx.esp.join("EFI/Linux/skua_2.efi"),
    )
    .unwrap();
    let done = install(&fx, &bundle_file(&fx, &p3, false, false), p2.root_uuid, 1).unwrap();
    assert_eq!((done.version, done.previous, done.slot), (3, Some(2), 'A'));
    assert_eq!(done.removed, [fx.esp.join("EFI/Linux/skua_1.efi")]);
    let d = read_disk(&fx);
    assert_eq!(
        (d.slots[0].version(), d.slots[1].version()),
        (Some(3), Some(2))
    );
    assert_eq!(
        bytes_at(&fx, d.slots[0].root.offset, ROOT as usize),
        p3.root
    );
    assert_eq!(entries(&fx), ["skua_2.efi", "skua_3+1.efi"]);
}

#[test]
fn a_corrupt_bundle_commits_nothing() {
    let fx = fixture("corrupt");
    let p2 = payload(2);
    let err = install(&fx, &bundle_file(&fx, &p2, true, true), guid(0xa1), 3).unwrap_err();
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
    let d = read_disk(&fx);
    // The slot is marked empty, keeps its old UUIDs; no boot entry, no temporary file.
    assert_eq!(d.slots[1].version(), None);
    assert_eq!(d.slots[1].root.label, EMPTY_LABEL);
    assert_eq!(d.slots[1].root.uuid, guid(0xb1));
    assert_eq!(d.slots[0].version(), Some(1));
    assert_eq!(entries(&fx), ["skua_1.efi"]);
    // A good bundle still installs afterwards.
    install(&fx, &bundle_file(&fx, &p2, true, false), guid(0xa1), 3).unwrap();
    assert_eq!(read_disk(&fx).slots[1].version(), Some(2));
}

#[test]
fn refusals_write_nothing() {
    let fx = fixture("refuse");
    let before = fs::read(&fx.disk).unwrap();
    let refused = |p: &Payload, booted: Guid| match install(
        &fx,
        &bundle_file(&fx, p, false, false),
        booted,
        3,
    ) {
        Err(UpgradeError::Refused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    };
    // Not newer than the running version.
    let mut old = payload(2);
    old.version = 1;
    assert!(refused(&old, guid(0xa1)).contains("not newer"));
    // The running version itself.
    let mut same = payload(2);
    same.root_uuid = guid(0xa1);
    assert!(refused(&same, guid(0xa1)).contains("is the one running"));
    // Too big for the slot.
    let mut big = payload(2);
    big.root.resize((ROOT + 512) as usize, 0);
    assert!(refused(&big, guid(0xa1)).contains("slot B has"));
    // A UUID that another partition carries.
    let mut clash = payload(2);
    clash.verity_uuid = guid(0xa2);
    assert!(refused(&clash, guid(0xa1)).contains("already used"));
    // Not booted from this disk.
    assert!(refused(&payload(2), guid(0x77)).contains("is not a slot"));
    assert_eq!(fs::read(&fx.disk).unwrap(), before, "the disk is unchanged");
    assert_eq!(entries(&fx), ["skua_1.efi"]);
}

#[test]
fn manifest_errors_name_the_line() {
    let ok = "skua-update 1\nversion 2\nroot r 1 {h} 00112233445566778899aabbccddeeff\nverity v 1 {h} 00112233-4455-6677-8899-aabbccddeeff\nuki u 1 {h}\n"
        .replace("{h}", &"ab".repeat(32));
    let m = bundle::Manifest::parse(&ok).unwrap();
    assert_eq!(m.version, 2);
    assert_eq!(m.root.uuid, m.verity.uuid);
    for (bad, want) in [
        (ok.replace("skua-update 1", "skua-update 2"), "first line"),
        (
            ok.replace("version 2", "version two"),
            "line 2: bad version",
        ),
        (ok.replace("uki u 1", "uki u x"), "line 5: bad size"),
        (ok.replace("root r", "root ../r"), "line 3: bad member name"),
        (ok.replace("verity v 1 ", "verity v 1 zz"), "line 4"),
        (ok.replace("uki u 1", "kernel u 1"), "unknown line"),
        (
            ok.lines().take(4).collect::<Vec<_>>().join("\n"),
            "no 'uki' line",
        ),
    ] {
        let e = bundle::Manifest::parse(&bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad:?}: {e}");
    }
}

#[test]
fn a_bundle_must_start_with_its_manifest() {
    let fx = fixture("order");
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(3);
    h.set_cksum();
    b.append_data(&mut h, "skua_2.efi", &b"abc"[..]).unwrap();
    let path = fx.dir.join("bad.update");
    fs::write(&path, b.into_inner().unwrap()).unwrap();
    let e = bundle::open(File::open(&path).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("expected manifest"), "{e}");
    fs::write(&path, b"").unwrap();
    assert!(bundle::open(File::open(&path).unwrap()).is_err());
}

/// Writes a bundle whose members carry the given names (root, verity, UKI), in that order,
/// each with its own bytes and a manifest whose sizes and hashes match them.
fn bundle_named(fx: &Fixture, p: &Payload, names: [&str; 3], file: &str) -> PathBuf {
    bundle_with(fx, p, names, names, file)
}

/// [`bundle_named`] with tar entry names that may differ from the manifest's.
fn bundle_with(
    fx: &Fixture,
    p: &Payload,
    names: [&str; 3],
    entries: [&str; 3],
    file: &str,
) -> PathBuf {
    let v = p.version;
    let manifest = format!(
        "skua-update 1\nversion {v}\nroot {} {} {} {}\nverity {} {} {} {}\nuki {} {} {}\n",
        names[0],
        p.root.len(),
        sha(&p.root),
        p.root_uuid,
        names[1],
        p.verity.len(),
        sha(&p.verity),
        p.verity_uuid,
        names[2],
        p.uki.len(),
        sha(&p.uki)
    );
    let mut b = tar::Builder::new(Vec::new());
    for (name, bytes) in [
        ("manifest", manifest.as_bytes()),
        (entries[0], &p.root[..]),
        (entries[1], &p.verity[..]),
        (entries[2], &p.uki[..]),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, bytes).unwrap();
    }
    let path = fx.dir.join(file);
    fs::write(&path, b.into_inner().unwrap()).unwrap();
    path
}

#[test]
fn members_that_share_a_name_are_refused_before_anything_is_written() {
    // Review item 6: the destination was chosen by comparing names, so a verity member named
    // like the root member went to the root partition (and a UKI named like it too), every
    // hash matched, and the slot was committed with verity data in its root partition.
    let fx = fixture("samename");
    let p2 = payload(2);
    let disk_before = fs::read(&fx.disk).unwrap();
    let esp_before = entries(&fx);
    for (i, names) in [
        ["same", "same", "skua_2.efi"],
        ["same", "same", "same"],
        ["same", "skua_2.root-verity.raw", "same"],
        ["skua_2.root.raw", "same", "same"],
    ]
    .into_iter()
    .enumerate()
    {
        let path = bundle_named(&fx, &p2, names, &format!("same-{i}.update"));
        let err = install(&fx, &path, guid(0xa1), 3).unwrap_err();
        assert!(
            matches!(&err, UpgradeError::Bundle(e) if e.to_string().contains("cannot share a name")),
            "{names:?}: {err}"
        );
        assert!(
            fs::read(&fx.disk).unwrap() == disk_before,
            "{names:?}: the disk (partition table and slots) is unchanged"
        );
        assert_eq!(
            entries(&fx),
            esp_before,
            "{names:?}: no boot entry, no temporary file"
        );
    }
    let d = read_disk(&fx);
    assert_eq!(
        (d.slots[0].version(), d.slots[1].version()),
        (Some(1), None)
    );
    // Distinct names still install, into the right partitions.
    let ok = bundle_named(&fx, &p2, ["r", "v", "u"], "distinct.update");
    install(&fx, &ok, guid(0xa1), 3).unwrap();
    let d = read_disk(&fx);
    assert_eq!(d.slots[1].version(), Some(2));
    assert_eq!(
        bytes_at(&fx, d.slots[1].root.offset, ROOT as usize),
        p2.root
    );
    assert_eq!(
        bytes_at(&fx, d.slots[1].verity.offset, p2.verity.len()),
        p2.verity
    );
    assert_eq!(
        fs::read(fx.esp.join("EFI/Linux/skua_2+3.efi")).unwrap(),
        p2.uki
    );
}

#[test]
fn manifest_refuses_repeated_lines_naming_them() {
    let h = "ab".repeat(32);
    let ok = format!(
        "skua-update 1\nversion 2\nroot r 1 {h} 00112233445566778899aabbccddeeff\nverity v 1 {h} 00112233-4455-6677-8899-aabbccddeeff\nuki u 1 {h}\n"
    );
    bundle::Manifest::parse(&ok).unwrap();
    for (extra, want) in [
        (
            format!("root r2 1 {h} 00112233445566778899aabbccddee00"),
            "manifest line 6: repeated 'root' line (first on line 3)",
        ),
        (
            format!("verity v2 1 {h} 00112233445566778899aabbccddee00"),
            "manifest line 6: repeated 'verity' line (first on line 4)",
        ),
        (
            format!("uki u2 1 {h}"),
            "manifest line 6: repeated 'uki' line (first on line 5)",
        ),
        (
            "version 3".to_string(),
            "manifest line 6: repeated 'version' line (first on line 2)",
        ),
    ] {
        let bad = format!("{ok}{extra}\n");
        let e = bundle::Manifest::parse(&bad).unwrap_err().to_string();
        assert!(e.contains(want), "{extra:?}: {e}");
    }
    // Two roles, one name: refused, naming both lines.
    let e = bundle::Manifest::parse(&ok.replace("uki u ", "uki r "))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("manifest line 5: member name 'r' is already used by the 'root' line (line 3)"),
        "{e}"
    );
}

#[test]
fn stream_hands_the_sink_root_verity_uki_in_that_order() {
    use std::cell::RefCell;
    use std::io;

    let fx = fixture("roles");
    let p2 = payload(2);
    // Names that say nothing about the roles, in an order that would mislead a name-based
    // choice: the sink must go by the role it is handed.
    let path = bundle_named(&fx, &p2, ["c", "b", "a"], "roles.update");
    let b = bundle::open(File::open(&path).unwrap()).unwrap();
    let seen = RefCell::new(Vec::new());
    b.stream(|role, member| -> io::Result<Box<dyn Write>> {
        seen.borrow_mut()
            .push((role, member.name.clone(), member.size));
        Ok(Box::new(io::sink()))
    })
    .unwrap();
    assert_eq!(
        seen.into_inner(),
        [
            (bundle::Role::Root, "c".to_string(), p2.root.len() as u64),
            (
                bundle::Role::Verity,
                "b".to_string(),
                p2.verity.len() as u64
            ),
            (bundle::Role::Uki, "a".to_string(), p2.uki.len() as u64),
        ]
    );
}

#[test]
fn install_routes_members_by_role_not_by_name() {
    // Defence in depth behind the parser: names that collide anyway (forced here after
    // parsing, through the public field, to match tar entries that all carry one name) still
    // send each member to its own place.
    let fx = fixture("byrole");
    let p2 = payload(2);
    let path = bundle_with(
        &fx,
        &p2,
        ["r", "v", "u"],
        ["same", "same", "same"],
        "forced.update",
    );
    let mut b = bundle::open(File::open(&path).unwrap()).unwrap();
    for m in [
        &mut b.manifest.root,
        &mut b.manifest.verity,
        &mut b.manifest.uki,
    ] {
        m.name = "same".into();
    }
    let done = upgrade::install(
        b,
        &Target {
            disk: fx.disk.clone(),
            esp: fx.esp.clone(),
            booted_root: guid(0xa1),
            tries: 3,
        },
    )
    .unwrap();
    let d = read_disk(&fx);
    assert_eq!(d.slots[1].version(), Some(2));
    assert_eq!(
        bytes_at(&fx, d.slots[1].root.offset, ROOT as usize),
        p2.root
    );
    assert_eq!(
        bytes_at(&fx, d.slots[1].verity.offset, p2.verity.len()),
        p2.verity
    );
    assert_eq!(fs::read(&done.uki).unwrap(), p2.uki);
}
