use super::*;

#[test]
fn default_config_loads() {
    let l = load_default().unwrap();
    assert_eq!(l.settings.udp, vec!["127.0.0.1:5353".parse().unwrap()]);
    assert_eq!(l.settings.tcp, l.settings.udp);
    assert!(l.records >= 5);
}

/// `quic-port:` on the plain DNS port: on 53 an error naming the `quic-port:` line (RFC
/// 9250 §4.1.1; Unbound refuses DoQ on 53 at start too); on another port a warning
/// naming the line, DoQ on UDP and plain DNS kept on TCP (as Unbound); nothing without
/// a certificate (no DoQ then) or with quic-port: on its own port.
#[test]
fn quic_port_on_the_plain_dns_port() {
    let cert =
        "  tls-service-pem: /nonexistent/cert.pem\n  tls-service-key: /nonexistent/key.pem\n";
    let e = load_str(
        &format!("server:\n  interface: 127.0.0.1\n  port: 53\n{cert}  quic-port: 53\n"),
        "t.conf",
    )
    .err()
    .unwrap();
    assert!(e.0.starts_with("t.conf:6: quic-port: 53 "), "{e}");
    assert!(
        e.0.contains("127.0.0.1:53") && e.0.contains("RFC 9250"),
        "{e}"
    );
    // The interface's own port 53 with quic-port: 53 and port: elsewhere: the same.
    let e = load_str(
        &format!("server:\n  port: 5300\n  interface: 127.0.0.1@53\n{cert}  quic-port: 53\n"),
        "t.conf",
    )
    .err()
    .unwrap();
    assert!(e.0.starts_with("t.conf:6: quic-port: 53 "), "{e}");

    let l = load_str(
        &format!("server:\n  interface: 127.0.0.1\n  port: 5353\n  quic-port: 5353\n{cert}"),
        "t.conf",
    )
    .unwrap();
    let a: SocketAddr = "127.0.0.1:5353".parse().unwrap();
    let w: Vec<_> = l
        .warnings
        .iter()
        .filter(|w| w.contains("quic-port"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", l.warnings);
    assert!(
        w[0].starts_with("t.conf:4: quic-port: 5353 is also port:"),
        "{}",
        w[0]
    );
    assert_eq!(l.settings.doq, vec![a]);
    assert!(l.settings.udp.is_empty(), "{:?}", l.settings.udp);
    assert_eq!(l.settings.tcp, vec![a], "plain DNS over TCP stays");

    // No certificate: no DNS over QUIC, plain DNS as configured, no warning.
    let l = load_str(
        "server:\n  interface: 127.0.0.1\n  port: 5353\n  quic-port: 5353\n",
        "t.conf",
    )
    .unwrap();
    assert!(
        l.warnings.iter().all(|w| !w.contains("quic-port")),
        "{:?}",
        l.warnings
    );
    assert_eq!(
        (l.settings.udp.clone(), l.settings.tcp.clone()),
        (vec![a], vec![a])
    );
    assert!(l.settings.doq.is_empty());
    // quic-port: on its own port (the default 853): plain DNS on 53 as ever.
    let l = load_str(
        &format!("server:\n  interface: 127.0.0.1\n  interface: 127.0.0.1@853\n  port: 53\n{cert}"),
        "t.conf",
    )
    .unwrap();
    assert!(
        l.warnings.iter().all(|w| !w.contains("quic-port")),
        "{:?}",
        l.warnings
    );
    let p53: SocketAddr = "127.0.0.1:53".parse().unwrap();
    let p853: SocketAddr = "127.0.0.1:853".parse().unwrap();
    assert_eq!(
        (l.settings.udp.clone(), l.settings.tcp.clone()),
        (vec![p53], vec![p53])
    );
    assert_eq!(
        (l.settings.doq.clone(), l.settings.tls.clone()),
        (vec![p853], vec![p853])
    );
}

#[test]
fn errors_name_file_and_line() {
    let e = load_str("server:\n  local-data: \"a.example. A 1.2.3\"\n", "t.conf")
        .err()
        .unwrap();
    assert!(e.0.starts_with("t.conf:2: local-data"), "{e}");
    let e = load_str("server:\n\n  access-control: 10.0.0.0/8 permit\n", "t.conf")
        .err()
        .unwrap();
    assert!(e.0.starts_with("t.conf:3: access-control action"), "{e}");
    let e = load_str("server:\n  local-zone: example. bogus\n", "t.conf")
        .err()
        .unwrap();
    assert!(e.0.starts_with("t.conf:2: local-zone type"), "{e}");
    let e = load_str(
            "server:\n local-data: \"a.example. A 198.18.0.1\"\n local-data: \"a.example. CNAME b.example.\"\n",
            "t.conf",
        )
        .err()
        .unwrap();
    assert!(e.0.starts_with("t.conf:3: "), "{e}");
}

#[test]
fn addresses() {
    assert_eq!(
        parse_addr("127.0.0.1", 8053).unwrap().to_string(),
        "127.0.0.1:8053"
    );
    assert_eq!(
        parse_addr("::1@9000", 8053).unwrap().to_string(),
        "[::1]:9000"
    );
    assert!(parse_addr("localhost", 8053).is_err());
}

#[test]
fn forward_and_stub_hosts_are_resolved_and_only_loops_warned() {
    let conf = "server:
  do-ip6: no
forward-zone:
  name: \".\"
  forward-addr: 198.18.0.1
forward-zone:
  name: corp.example.
  forward-host: ns.net.example@5353
  forward-host: NS.net.example.@5353
stub-zone:
  name: loop.example.
  stub-host: ns.loop.example.
forward-zone:
  name: tls.example.
  forward-tls-upstream: yes
  forward-host: dot.net.example
  forward-host: dot.net.example#other.example
";
    let l = load_str(conf, "t.conf").unwrap();
    let hosts: Vec<&String> = l.warnings.iter().filter(|w| w.contains("host")).collect();
    assert_eq!(hosts.len(), 1, "{:?}", l.warnings);
    assert!(
            hosts[0].starts_with(
                "t.conf:12: stub-zone host 'ns.loop.example.' cannot be resolved: its name is inside stub-zone 'loop.example.'"
            ),
            "{}",
            hosts[0]
        );
    assert!(
            l.warnings
                .iter()
                .any(|w| w == "t.conf:10: stub-zone 'loop.example.' has no usable address: its names get SERVFAIL"),
            "{:?}",
            l.warnings
        );
    assert!(
        !l.warnings.iter().any(|w| w.contains("corp.example")),
        "{:?}",
        l.warnings
    );
    let f = l.resolver.unwrap().forward;
    assert!(!f.do_ip6 && f.do_ip4 && f.do_not_query_localhost);
    // Case folded, duplicates dropped; the TLS name is the #name or the host's name.
    let got: Vec<(Vec<u8>, u16, Option<&str>)> = f
        .hosts
        .iter()
        .map(|h| (h.name.clone(), h.port, h.tls_name.as_deref()))
        .collect();
    assert_eq!(
        got,
        vec![
            (b"\x02ns\x03net\x07example\x00".to_vec(), 5353, None),
            (b"\x02ns\x04loop\x07example\x00".to_vec(), 53, None),
            (
                b"\x03dot\x03net\x07example\x00".to_vec(),
                53,
                Some("dot.net.example")
            ),
            (
                b"\x03dot\x03net\x07example\x00".to_vec(),
                853,
                Some("other.example")
            ),
        ]
    );
    assert_eq!(f.hosts[0].zone, b"\x04corp\x07example\x00".to_vec());
    // A host outside every zone (no "."), and a bad host name.
    let l = load_str(
        "forward-zone:\n  name: a.example.\n  forward-host: ns.b.example\n",
        "u.conf",
    )
    .unwrap();
    assert!(
            l.warnings.iter().any(|w| w.starts_with(
                "u.conf:3: forward-zone host 'ns.b.example' cannot be resolved: no forward-zone or stub-zone contains its name"
            )),
            "{:?}",
            l.warnings
        );
    let e = load_str(
        "forward-zone:\n  name: a.example.\n  forward-host: \"a..b\"\n",
        "v.conf",
    )
    .err()
    .unwrap();
    assert!(
        e.0.starts_with("v.conf:3: forward-zone host name 'a..b'"),
        "{e}"
    );
}

#[test]
fn forward_addresses_that_cannot_be_upstreams() {
    let zone = |extra: &str, addr: &str| {
        load_str(
            &format!("server:\n{extra}forward-zone:\n  name: \".\"\n  forward-addr: {addr}\n"),
            "t.conf",
        )
    };
    // Never an upstream: an error with the line and the reason.
    for (addr, why) in [
        ("224.0.0.53", "a multicast address"),
        ("ff02::fb", "a multicast address"),
        ("::ffff:239.1.1.1", "a multicast address"),
        ("255.255.255.255", "the broadcast address"),
        ("fe80::1", "an IPv6 link-local address without a scope"),
    ] {
        for extra in ["", "  do-not-query-localhost: no\n"] {
            let e = zone(extra, addr)
                .err()
                .unwrap_or_else(|| panic!("{addr} accepted"));
            let line = if extra.is_empty() { 4 } else { 5 };
            assert!(
                e.0.starts_with(&format!(
                    "t.conf:{line}: forward-zone address {addr}: {why}"
                )),
                "{e}"
            );
        }
    }
    // This machine: left out with a warning under do-not-query-localhost (Unbound
    // leaves them out silently), used as written (canonical) without it.
    let ups = |l: &Loaded| -> Vec<SocketAddr> {
        l.resolver.as_ref().unwrap().forward.zones[0]
            .upstreams
            .iter()
            .map(|u| u.addr)
            .collect()
    };
    for (addr, canonical) in [
        ("127.0.0.1", "127.0.0.1:53"),
        ("::1", "[::1]:53"),
        ("::ffff:127.0.0.2", "127.0.0.2:53"),
        ("0.0.0.0", "0.0.0.0:53"),
        ("::", "[::]:53"),
    ] {
        let l = zone("", addr).unwrap();
        assert!(ups(&l).is_empty(), "{addr}: {:?}", ups(&l));
        assert!(
            l.warnings.iter().any(|w| w.starts_with(&format!(
                "t.conf:4: forward-zone address {addr} is not used: "
            )) && w.contains("do-not-query-localhost")),
            "{addr}: {:?}",
            l.warnings
        );
        let l = zone("  do-not-query-localhost: no\n", addr).unwrap();
        assert_eq!(ups(&l), vec![canonical.parse::<SocketAddr>().unwrap()]);
    }
    // An IPv4-mapped address is kept as the IPv4 address.
    let l = zone("", "::ffff:198.18.0.1@5353").unwrap();
    assert_eq!(
        ups(&l),
        vec!["198.18.0.1:5353".parse::<SocketAddr>().unwrap()]
    );
}

#[test]
fn a_tls_name_taken_from_a_host_name_is_lower_case() {
    let l = load_str(
            "forward-zone:\n  name: \".\"\n  forward-addr: 198.18.0.1\nforward-zone:\n  name: tls.example.\n  forward-tls-upstream: yes\n  forward-host: DoT.Net.Example.\n  forward-host: dot.net.example\n",
            "t.conf",
        )
        .unwrap();
    let f = l.resolver.unwrap().forward;
    // One host (the same name, so the same certificate name), in lower case as the
    // host's name is: names are compared without case (RFC 4343), and a name that
    // keeps the case it was written in makes two hosts of one.
    let got: Vec<(Vec<u8>, Option<&str>)> = f
        .hosts
        .iter()
        .map(|h| (h.name.clone(), h.tls_name.as_deref()))
        .collect();
    assert_eq!(
        got,
        vec![(
            b"\x03dot\x03net\x07example\x00".to_vec(),
            Some("dot.net.example")
        )]
    );
}

#[test]
fn a_zone_changes_identity_with_its_hosts() {
    let id = |host: &str| {
        let l = load_str(
            &format!(
                "forward-zone:\n  name: \".\"\n  forward-addr: 198.18.0.1\n  forward-host: {host}\n"
            ),
            "t.conf",
        )
        .unwrap();
        l.resolver.unwrap().forward.zones[0].id
    };
    assert_eq!(id("ns.example"), id("NS.example."));
    assert_ne!(id("ns.example"), id("ns2.example"));
    assert_ne!(id("ns.example"), id("ns.example@5353"));
}

/// An auth-zone inside one of Unbound's default local zones is answered NXDOMAIN by
/// that zone (local zones first, as in Unbound): the load says so with the auth-zone's
/// file:line and the `nodefault` line that fixes it; with that line, or a configured
/// local zone of its own, nothing is said.
#[test]
fn an_auth_zone_under_a_default_local_zone_is_warned() {
    let dir = std::env::temp_dir().join(format!("skuad-shadow-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let zone = |apex: &str| {
        let f = dir.join(format!("{apex}zone"));
        std::fs::write(
                &f,
                format!("{apex} 300 IN SOA ns.{apex} a.{apex} 1 3600 600 86400 300\nwww.{apex} 300 IN A 198.18.0.7\n"),
            )
            .unwrap();
        format!(
            "auth-zone:\n  name: \"{apex}\"\n  zonefile: {}\n",
            f.display()
        )
    };
    let shadow = |l: &Loaded| -> Vec<String> {
        l.warnings
            .iter()
            .filter(|w| w.contains("default local zone"))
            .cloned()
            .collect()
    };
    for (apex, dz, ty) in [
        ("example.test.", "test.", "static"),
        ("test.", "test.", "static"),
        ("lab.home.arpa.", "home.arpa.", "static"),
        ("10.in-addr.arpa.", "10.in-addr.arpa.", "static"),
        ("5.168.192.in-addr.arpa.", "168.192.in-addr.arpa.", "static"),
        ("x.localhost.", "localhost.", "redirect"),
    ] {
        let l = load_str(
            &format!("server:\n  verbosity: 1\n{}", zone(apex)),
            "t.conf",
        )
        .unwrap();
        let w = shadow(&l);
        assert_eq!(w.len(), 1, "{apex}: {:?}", l.warnings);
        assert!(
            w[0].starts_with(&format!(
                "t.conf:4: auth-zone '{apex}' is inside Unbound's default local zone '{dz}' ({ty})"
            )),
            "{}",
            w[0]
        );
        assert!(
            w[0].contains(&format!("add 'local-zone: \"{dz}\" nodefault'")),
            "{}",
            w[0]
        );
    }
    // The fix the warning names: no warning.
    let l = load_str(
        &format!(
            "server:\n  local-zone: \"test.\" nodefault\n{}",
            zone("example.test.")
        ),
        "t.conf",
    )
    .unwrap();
    assert!(shadow(&l).is_empty(), "{:?}", l.warnings);
    // A local zone of the operator's own, as close or closer: not a default's doing.
    for lz in ["test. transparent", "example.test. static"] {
        let (n, t) = lz.split_once(' ').unwrap();
        let l = load_str(
            &format!(
                "server:\n  local-zone: \"{n}\" {t}\n{}",
                zone("example.test.")
            ),
            "t.conf",
        )
        .unwrap();
        assert!(shadow(&l).is_empty(), "{lz}: {:?}", l.warnings);
    }
    // Outside every default zone: nothing.
    let l = load_str(&format!("server:\n{}", zone("example.com.")), "t.conf").unwrap();
    assert!(shadow(&l).is_empty(), "{:?}", l.warnings);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn secondary_zones_load_their_primaries_and_copies() {
    let dir = std::env::temp_dir().join(format!("skuad-secondary-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("k.key");
    std::fs::write(&key, "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n").unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let conf = |zone: &str| {
        format!(
            "tsig-key:\n  name: k.\n  secret: file:{}\nauth-zone:\n  name: example.\n{zone}",
            key.display()
        )
    };
    // No copy yet: SERVFAIL, the primaries and allow-notify entries as written.
    let l = load_str(
            &conf(&format!(
                "  zonefile: {}\n  primary: 198.18.0.1 k.\n  request-xfr: 198.18.0.2@5300 NOKEY\n  allow-notify: 198.18.0.0/24\n",
                dir.join("example.zone").display()
            )),
            "t.conf",
        )
        .unwrap();
    let s = &l.xfr.secondaries[&b"\x07example\x00"[..]];
    assert!(s.version.is_none());
    assert_eq!(
        s.primaries,
        vec![
            crate::base::xfr::Primary {
                addr: "198.18.0.1:53".parse().unwrap(),
                key: Some(0)
            },
            crate::base::xfr::Primary {
                addr: "198.18.0.2:5300".parse().unwrap(),
                key: None
            },
        ]
    );
    assert_eq!(s.allow_notify.len(), 3, "the entry and each primary");
    assert!(l.xfr.zones.is_empty(), "nothing to transfer onwards yet");
    // With its zone file: served from it, its time kept.
    std::fs::write(
            dir.join("example.zone"),
            "example. 300 IN SOA ns.example. a.example. 7 3600 600 86400 300\nwww.example. 300 IN A 198.18.0.7\n",
        )
        .unwrap();
    let l = load_str(
        &conf(&format!(
            "  zonefile: {}\n  primary: 198.18.0.1 k.\n",
            dir.join("example.zone").display()
        )),
        "t.conf",
    )
    .unwrap();
    let s = &l.xfr.secondaries[&b"\x07example\x00"[..]];
    assert_eq!(s.version.as_ref().map(|v| v.serial()), Some(7));
    assert!(s.confirmed.is_some_and(|t| t > 1_000_000_000));
    assert_eq!(l.xfr.zones.len(), 1);
    // A file that is not the zone: a warning, no copy.
    std::fs::write(
        dir.join("example.zone"),
        "www.example. 300 IN A 198.18.0.7\n",
    )
    .unwrap();
    let l = load_str(
        &conf(&format!(
            "  zonefile: {}\n  primary: 198.18.0.1 k.\n",
            dir.join("example.zone").display()
        )),
        "t.conf",
    )
    .unwrap();
    assert!(l.xfr.secondaries[&b"\x07example\x00"[..]].version.is_none());
    assert!(
        l.warnings
            .iter()
            .any(|w| w.contains("is not usable") && w.contains("transferred anew")),
        "{:?}",
        l.warnings
    );
    // Errors name the line.
    for (zone, want) in [
        (
            "  primary: ns.example.\n",
            "t.conf:6: primary 'ns.example.': not an IP address with an optional @PORT",
        ),
        (
            "  primary: 198.18.0.1#tls.example.\n",
            "t.conf:6: primary '198.18.0.1#tls.example.': transfers over TLS are not supported",
        ),
        (
            "  primary: 198.18.0.1 other.\n",
            "t.conf:6: primary: no tsig-key: clause is named 'other.'",
        ),
        (
            "  primary: 198.18.0.1\n  allow-notify: 198.18.0.300 k.\n",
            "t.conf:7: allow-notify: '198.18.0.300'",
        ),
    ] {
        let e = load_str(&conf(zone), "t.conf").err().unwrap();
        assert!(e.0.starts_with(want), "{e} / {want}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn cpu_lists() {
    assert_eq!(parse_cpus("0,2-3"), Some(vec![0, 2, 3]));
    assert_eq!(parse_cpus("3-1"), None);
    assert_eq!(parse_cpus(""), None);
}
