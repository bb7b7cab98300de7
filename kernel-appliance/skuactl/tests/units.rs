//! GUID byte order, boot entry names, the command line, and the DNS health check.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType, rdata::A};
use skuactl::health::Check;
use skuactl::slots::{Guid, ROOT_X86_64};
use skuactl::system::roothash_of;
use skuactl::upgrade::{parse_entry, uki_file_root, uki_root};

#[test]
fn guids_use_the_gpt_mixed_endian_layout() {
    // UEFI 2.10 App. A: the x86-64 root type 4f68bce3-e8cd-4db1-96e7-fbcaf984b709 is stored
    // as e3 bc 68 4f cd e8 b1 4d 96 e7 fb ca f9 84 b7 09 (what sfdisk/blkid decode).
    assert_eq!(
        ROOT_X86_64.to_disk(),
        [
            0xe3, 0xbc, 0x68, 0x4f, 0xcd, 0xe8, 0xb1, 0x4d, 0x96, 0xe7, 0xfb, 0xca, 0xf9, 0x84,
            0xb7, 0x09
        ]
    );
    assert_eq!(Guid::from_disk(ROOT_X86_64.to_disk()), ROOT_X86_64);
    assert_eq!(
        ROOT_X86_64.to_string(),
        "4f68bce3-e8cd-4db1-96e7-fbcaf984b709"
    );
    assert_eq!(
        Guid::parse("4F68BCE3E8CD4DB196E7FBCAF984B709"),
        Some(ROOT_X86_64)
    );
    assert_eq!(Guid::parse("4f68bce3-e8cd-4db1-96e7-fbcaf984b70"), None);
    assert_eq!(Guid::parse("4f68bce3-e8cd-4db1-96e7-fbcaf984b70g"), None);
}

#[test]
fn roothash_halves_name_the_partitions() {
    let hash = "7e2395c6ced160482748a39f678be6f716f9087463f95433a9f4bee3baf82644";
    let cmdline = format!("root=/dev/mapper/root ro roothash={hash} console=ttyS0");
    let (root, verity) = roothash_of(&cmdline).unwrap();
    assert_eq!(root.to_string(), "7e2395c6-ced1-6048-2748-a39f678be6f7");
    assert_eq!(verity.to_string(), "16f90874-63f9-5433-a9f4-bee3baf82644");
    assert_eq!(roothash_of("root=/dev/vda2 ro"), None);
    assert_eq!(roothash_of("roothash=abc"), None);
    let uki = [
        b"\0\0MZ junk roothash=".as_slice(),
        hash.as_bytes(),
        b" quiet",
    ]
    .concat();
    assert_eq!(uki_root(&uki), Some(root));
    assert_eq!(uki_root(b"no command line here"), None);
}

#[test]
fn boot_entry_names_follow_boot_counting() {
    assert_eq!(parse_entry("skua_2.efi"), Some((2, None)));
    assert_eq!(parse_entry("skua_3+3.efi"), Some((3, Some((3, 0)))));
    assert_eq!(parse_entry("skua_3+0-1.efi"), Some((3, Some((0, 1)))));
    assert_eq!(parse_entry("skua_10+2-1.efi"), Some((10, Some((2, 1)))));
    assert_eq!(parse_entry("debian.efi"), None);
    assert_eq!(parse_entry("skua_x.efi"), None);
    assert_eq!(parse_entry("skua_2.conf"), None);
}

/// A responder: localhost. A -> 127.0.0.1, wrong. A -> 198.18.9.9,
/// anything else NXDOMAIN; `garbage.` gets a malformed reply first.
fn responder() -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((n, peer)) = sock.recv_from(&mut buf) {
            let Ok(q) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let name = q.queries[0].name().to_ascii();
            let mut r = Message::new(q.metadata.id, MessageType::Response, OpCode::Query);
            r.add_queries(q.queries.clone());
            let ip = match name.as_str() {
                "localhost." => Some(Ipv4Addr::LOCALHOST),
                "wrong." => Some(Ipv4Addr::new(198, 18, 9, 9)),
                "garbage." => {
                    let _ = sock.send_to(b"\x01", peer);
                    None
                }
                _ => None,
            };
            match ip {
                Some(ip) => {
                    r.add_answer(Record::from_rdata(
                        q.queries[0].name().clone(),
                        60,
                        RData::A(A(ip)),
                    ));
                }
                None => r.metadata.response_code = ResponseCode::NXDomain,
            }
            let _ = sock.send_to(&r.to_vec().unwrap(), peer);
        }
    });
    addr
}

fn check(server: SocketAddr, name: &str, expect: Option<&str>) -> Check {
    Check {
        server,
        name: name.into(),
        qtype: RecordType::A,
        expect: expect.map(Into::into),
        unit: None,
    }
}

#[test]
fn health_check_passes_only_on_the_expected_answer() {
    let server = responder();
    assert_eq!(
        check(server, "localhost.", Some("127.0.0.1"))
            .once(1)
            .unwrap(),
        ["127.0.0.1"]
    );
    assert_eq!(
        check(server, "garbage.", None).once(2).unwrap_err().0,
        "garbage. A answered NXDOMAIN"
    );
    let e = check(server, "wrong.", Some("127.0.0.1"))
        .once(3)
        .unwrap_err()
        .0;
    assert!(e.contains("got 198.18.9.9, want 127.0.0.1"), "{e}");
    let e = check(server, "missing.", None).once(4).unwrap_err().0;
    assert!(e.contains("NXDOMAIN"), "{e}");
}

#[test]
fn health_wait_gives_up_after_its_deadline() {
    // Nothing listens there: every try times out (1 s each).
    let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
    let server = quiet.local_addr().unwrap();
    let started = Instant::now();
    let mut failures = 0;
    let e = check(server, "localhost.", None)
        .wait(Duration::from_secs(2), |_| failures += 1)
        .unwrap_err();
    assert!(e.0.contains("no answer"), "{e}");
    assert!(failures >= 1);
    assert!(started.elapsed() >= Duration::from_secs(2));
}

#[test]
fn health_requires_the_unit_to_be_active() {
    // A unit systemd cannot report as active (no systemd as PID 1 here, or no such unit):
    // the DNS answer alone does not make the appliance healthy.
    let server = responder();
    let mut c = check(server, "localhost.", Some("127.0.0.1"));
    c.unit = Some("skua-no-such-unit-for-tests.service".into());
    let e = c.once(9).unwrap_err().0;
    assert!(e.contains("skua-no-such-unit-for-tests.service"), "{e}");
}

#[test]
fn uki_file_root_finds_the_command_line_across_chunk_boundaries() {
    let hash = "7e2395c6ced160482748a39f678be6f716f9087463f95433a9f4bee3baf82644";
    let root = roothash_of(&format!("roothash={hash}")).unwrap().0;
    let dir = std::env::temp_dir().join(format!("skuactl-uki-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // At the start, straddling the first 1 MiB boundary, deep in the file, and absent.
    for (at, want) in [
        (0usize, Some(root)),
        ((1 << 20) - 20, Some(root)),
        (3 << 20, Some(root)),
        (usize::MAX, None),
    ] {
        let mut f = vec![b'x'; 4 << 20];
        if at != usize::MAX {
            let cmd = format!("roothash={hash} ro");
            f[at..at + cmd.len()].copy_from_slice(cmd.as_bytes());
        }
        let path = dir.join("skua_9.efi");
        std::fs::write(&path, &f).unwrap();
        assert_eq!(uki_file_root(&path), want, "command line at {at}");
    }
    assert_eq!(uki_file_root(&dir.join("missing.efi")), None);
    let _ = std::fs::remove_dir_all(&dir);
}
