//! Tests of the whole reader through the public API.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{
    Api, Audit, AuditFsync, Config, Error, ForwardZone, Loc, PortAction, PortRule, Rrl, Server,
    UpstreamAddr, UpstreamHost, ZoneKind, parse_file, parse_str,
};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "skua-config-test-{}-{tag}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    /// Writes `text` to `rel` (creating directories); returns the full path.
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn parse(text: &str) -> Config {
    parse_str(text, "t.conf").unwrap_or_else(|e| panic!("unexpected error: {e}"))
}

fn err(text: &str) -> String {
    match parse_str(text, "t.conf") {
        Ok(c) => panic!("expected an error for {text:?}, got {c:?}"),
        Err(e) => e.to_string(),
    }
}

/// The warnings as (line, message).
fn warnings(c: &Config) -> Vec<(usize, &str)> {
    c.warnings
        .iter()
        .map(|w| (w.loc.line, w.msg.as_str()))
        .collect()
}

#[test]
fn defaults() {
    let c = parse("");
    let s = &c.server;
    assert!(s.interfaces.is_empty());
    assert_eq!(s.port, 53);
    assert!(s.do_ip4 && s.do_ip6 && s.do_udp && s.do_tcp);
    assert_eq!(s.num_threads, 1);
    assert!(s.so_reuseport && !s.ip_freebind);
    assert_eq!((s.so_rcvbuf, s.so_sndbuf), (None, None));
    assert!(s.access_control.is_empty() && s.local_zones.is_empty());
    assert!(s.local_data.is_empty() && s.local_data_ptr.is_empty());
    assert_eq!((s.identity.as_deref(), s.version.as_deref()), (None, None));
    assert!(!s.hide_identity && !s.hide_version);
    assert_eq!(s.verbosity, 1);
    assert_eq!(s.edns_buffer_size, 1232);
    assert_eq!(s.tcp_idle_timeout_ms, 30_000);
    assert_eq!(s.incoming_num_tcp, 1000);
    assert_eq!(s.tcp_connection_limit_per_source, 100);
    assert_eq!(s.max_udp_size, 4096);
    assert!(s.minimal_responses);
    assert_eq!(s.cpu_affinity, None);
    assert_eq!(s.logfile, None);
    assert!(s.use_syslog);
    assert_eq!(
        (&s.username, &s.chroot, &s.directory, &s.pidfile),
        (&None, &None, &None, &None)
    );
    assert!(c.auth_zones.is_empty() && c.warnings.is_empty() && c.files.is_empty());
    assert!(c.forward_zones.is_empty());
    // The cache and the upstream side: Unbound 1.17's defaults.
    assert_eq!(s.tls_cert_bundle, None);
    assert!(!s.tls_system_cert);
    assert_eq!((s.msg_cache_size, s.rrset_cache_size), (4 << 20, 4 << 20));
    assert_eq!((s.msg_cache_slabs, s.rrset_cache_slabs), (4, 4));
    assert_eq!(
        (s.cache_min_ttl, s.cache_max_ttl, s.cache_max_negative_ttl),
        (0, 86_400, 3600)
    );
    assert!(!s.prefetch);
    assert!(!s.serve_expired && !s.serve_expired_ttl_reset);
    assert_eq!(s.serve_expired_ttl, 0);
    assert_eq!(s.serve_expired_reply_ttl, 30);
    assert_eq!(s.serve_expired_client_timeout_ms, 0);
    assert_eq!(s.outgoing_range, 4096);
    assert!(s.outgoing_port_rules.is_empty());
    assert!(!s.use_caps_for_id && s.caps_exempt.is_empty());
    assert!(s.do_not_query_localhost, "Unbound's default is yes");
    assert_eq!(s.unwanted_reply_threshold, 0);
    assert!(!s.tcp_upstream && !s.tls_upstream);
    assert_eq!(s.infra_host_ttl, 900);
    assert_eq!(s.num_queries_per_thread, 1024);
    assert_eq!(s.jostle_timeout_ms, 200);
    assert!(!s.ede && !s.ede_serve_expired);
    // An empty server: clause, comments and blank lines change nothing.
    let c = parse("# nothing\n\nserver:\n   \n\t# still nothing\n");
    assert_eq!(c.server, Server::default());
    assert!(c.warnings.is_empty());
}

#[test]
fn every_implemented_server_directive() {
    let c = parse(
        r#"server:
    interface: 192.0.2.1
    ip-address: 2001:db8::1@5353
    interface: eth0
    port: 5353
    do-ip4: no
    do-ip6: NO
    do-udp: Yes
    do-tcp: no
    num-threads: 4
    so-reuseport: no
    so-rcvbuf: 4m
    so-sndbuf: 262144
    access-control: 10.0.0.0/8 allow
    access-control: ::0/0 refuse
    local-zone: "example." static
    local-data: "www.example. A 192.0.2.80"
    local-data: 'txt.example. TXT "a # b"'
    local-data-ptr: "192.0.2.80 www.example."
    identity: "resolver-1"
    version: ""
    hide-identity: yes
    hide-version: yes
    verbosity: 3
    edns-buffer-size: 1400
    tcp-idle-timeout: 10000
    incoming-num-tcp: 100
    max-udp-size: 4096
    minimal-responses: no
    cpu-affinity: "0-3"
    logfile: "/var/log/unbound.log"
    use-syslog: no
    username: ""
    chroot: ""
    directory: "/etc/unbound"
    pidfile: "/run/unbound.pid"
    ip-freebind: yes
"#,
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let s = &c.server;
    let ifs: Vec<(&str, usize)> = s
        .interfaces
        .iter()
        .map(|i| (i.value.as_str(), i.loc.line))
        .collect();
    assert_eq!(
        ifs,
        [("192.0.2.1", 2), ("2001:db8::1@5353", 3), ("eth0", 4)]
    );
    assert_eq!(s.port, 5353);
    assert_eq!(
        (s.do_ip4, s.do_ip6, s.do_udp, s.do_tcp),
        (false, false, true, false)
    );
    assert_eq!(s.num_threads, 4);
    assert!(!s.so_reuseport && s.ip_freebind);
    assert_eq!(s.so_rcvbuf, Some(4 * 1024 * 1024));
    assert_eq!(s.so_sndbuf, Some(262_144));
    assert_eq!(s.access_control.len(), 2);
    assert_eq!(
        s.access_control[0].value,
        ("10.0.0.0/8".to_owned(), "allow".to_owned())
    );
    assert_eq!(s.access_control[0].loc, Loc::new("t.conf", 14));
    assert_eq!(
        s.access_control[1].value,
        ("::0/0".to_owned(), "refuse".to_owned())
    );
    assert_eq!(
        s.local_zones[0].value,
        ("example.".to_owned(), "static".to_owned())
    );
    assert_eq!(s.local_zones[0].loc.line, 16);
    assert_eq!(s.local_data.len(), 2);
    assert_eq!(s.local_data[0].value, "www.example. A 192.0.2.80");
    assert_eq!(s.local_data[0].loc.to_string(), "t.conf:17");
    assert_eq!(s.local_data[1].value, r#"txt.example. TXT "a # b""#);
    assert_eq!(s.local_data_ptr[0].value, "192.0.2.80 www.example.");
    assert_eq!(s.local_data_ptr[0].loc.line, 19);
    assert_eq!(s.identity.as_deref(), Some("resolver-1"));
    assert_eq!(s.version.as_deref(), Some(""));
    assert!(s.hide_identity && s.hide_version);
    assert_eq!(s.verbosity, 3);
    assert_eq!(s.edns_buffer_size, 1400);
    assert_eq!(s.tcp_idle_timeout_ms, 10_000);
    assert_eq!(s.incoming_num_tcp, 100);
    assert_eq!(s.max_udp_size, 4096);
    assert!(!s.minimal_responses);
    assert_eq!(s.cpu_affinity.as_deref(), Some("0-3"));
    assert_eq!(s.logfile.as_deref(), Some("/var/log/unbound.log"));
    assert!(!s.use_syslog);
    assert_eq!(s.username.as_deref(), Some(""));
    assert_eq!(s.chroot.as_deref(), Some(""));
    assert_eq!(s.directory.as_deref(), Some("/etc/unbound"));
    assert_eq!(s.pidfile.as_deref(), Some("/run/unbound.pid"));
}

#[test]
fn value_edge_cases() {
    let c = parse(
        "server:\n  max-udp-size: 65536\n  edns-buffer-size: 512\n  so-rcvbuf: 0\n  \
         so-sndbuf: \"1 MB\"\n  incoming-num-tcp: 0\n  verbosity: 0\n  port: 65535\n  \
         tcp-idle-timeout: 0\n",
    );
    let s = &c.server;
    assert_eq!(s.max_udp_size, 65535, "Unbound's 65536 means no maximum");
    assert_eq!(s.edns_buffer_size, 512);
    assert_eq!(s.so_rcvbuf, None, "0 is the system value");
    assert_eq!(s.so_sndbuf, Some(1 << 20));
    assert_eq!(s.incoming_num_tcp, 0);
    assert_eq!(s.verbosity, 0);
    assert_eq!(s.port, 65535);
    assert_eq!(s.tcp_idle_timeout_ms, 0);
    // A later value replaces an earlier one; lists accumulate.
    let c = parse(
        "server:\n port: 1\n interface: a\nauth-zone:\n name: x.\nserver:\n port: 2\n interface: b\n",
    );
    assert_eq!(c.server.port, 2);
    assert_eq!(c.server.interfaces.len(), 2);
}

#[test]
fn comments_and_quotes() {
    let c = parse(
        r##"# leading comment
server: # comment after the clause
    port: 5300 # trailing comment
    #port: 1
	    # indented comment
    identity: "a # b"
    pidfile: v#1
    logfile: "" # empty
    local-data: 'txt.example. TXT "#not a comment"'
    local-data: "esc.example. TXT \"#x\""
auth-zone:
    name: "example.org." # the name
    primary: 192.0.2.1@853#tls.example.org.
"##,
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let s = &c.server;
    assert_eq!(s.port, 5300);
    assert_eq!(s.identity.as_deref(), Some("a # b"));
    assert_eq!(s.pidfile.as_deref(), Some("v#1"));
    assert_eq!(s.logfile.as_deref(), Some(""));
    assert_eq!(
        s.local_data[0].value,
        r##"txt.example. TXT "#not a comment""##
    );
    assert_eq!(s.local_data[1].value, r##"esc.example. TXT \"#x\""##);
    let zone = &c.auth_zones[0];
    assert_eq!(zone.name.value, "example.org.");
    assert_eq!(
        zone.primaries[0].value,
        ("192.0.2.1@853#tls.example.org.".into(), "NOKEY".into())
    );
}

#[test]
fn several_directives_on_one_line() {
    let c = parse(
        "server: port:5353 do-ip6: no access-control: 10.0.0.0/8 allow verbosity:2\n\
         server: frob: 1 2 interface: ::1\n",
    );
    let s = &c.server;
    assert_eq!(s.port, 5353);
    assert!(!s.do_ip6);
    assert_eq!(s.access_control[0].value.1, "allow");
    assert_eq!(s.verbosity, 2);
    assert_eq!(s.interfaces[0].value, "::1");
    assert_eq!(s.interfaces[0].loc.line, 2);
    assert_eq!(warnings(&c), [(2, "unknown directive 'frob', ignored")]);
}

#[test]
fn unquoted_local_data_takes_the_rest_of_the_line() {
    let c = parse(
        "server:\n  local-data: www.example.   IN\tA 192.0.2.1   # comment\n  \
         local-data: txt.example. TXT \"hello world\"\n  local-data-ptr: 192.0.2.1 www.example.\n",
    );
    let s = &c.server;
    assert_eq!(s.local_data[0].value, "www.example. IN A 192.0.2.1");
    assert_eq!(s.local_data[1].value, r#"txt.example. TXT "hello world""#);
    assert_eq!(s.local_data_ptr[0].value, "192.0.2.1 www.example.");
}

#[test]
fn crlf_line_endings_and_bom() {
    let c = parse("\u{feff}server:\r\n  port: 5353\r\n  identity: \"x\"\r\n");
    assert_eq!(c.server.port, 5353);
    assert_eq!(c.server.identity.as_deref(), Some("x"));
}

#[test]
fn syntax_errors_name_file_line_and_reason() {
    let cases: &[(&str, &str)] = &[
        (
            "port: 53\n",
            "t.conf:1: 'port:' is outside any clause (is a 'server:' line missing?)",
        ),
        ("server:\n  port:\n", "t.conf:2: 'port:' needs a value"),
        (
            "server:\n  do-ip4: maybe\n",
            "t.conf:2: 'do-ip4:' must be yes or no, not 'maybe'",
        ),
        (
            "server:\n  do-ip4: 1\n",
            "t.conf:2: 'do-ip4:' must be yes or no, not '1'",
        ),
        (
            "server:\n\n  num-threads: four\n",
            "t.conf:3: 'num-threads:' must be a decimal number, not 'four'",
        ),
        (
            "server:\n  num-threads: 0\n",
            "t.conf:2: 'num-threads:' value 0 is out of range (at least 1)",
        ),
        (
            "server:\n  port: 65536\n",
            "t.conf:2: 'port:' value 65536 is out of range (1-65535)",
        ),
        (
            "server:\n  port: 0\n",
            "t.conf:2: 'port:' value 0 is out of range (1-65535)",
        ),
        (
            "server:\n  port: -1\n",
            "t.conf:2: 'port:' must be a decimal number, not '-1'",
        ),
        (
            "server:\n  port: \"\"\n",
            "t.conf:2: 'port:' must be a decimal number, not ''",
        ),
        (
            "server:\n  edns-buffer-size: 100\n",
            "t.conf:2: 'edns-buffer-size:' value 100 is out of range (512-65535)",
        ),
        (
            "server:\n  max-udp-size: 70000\n",
            "t.conf:2: 'max-udp-size:' value 70000 is out of range (512-65536)",
        ),
        (
            "server:\n  verbosity: 256\n",
            "t.conf:2: 'verbosity:' value 256 is out of range (0-255)",
        ),
        (
            "server:\n  so-rcvbuf: lots\n",
            "t.conf:2: 'so-rcvbuf:' must be a size (a number of bytes, or with k, m or g as \
             in '4m'), not 'lots'",
        ),
        (
            "server:\n  local-data: \"www.example. A 192.0.2.1\n",
            "t.conf:2: unterminated quoted string (missing closing \" on this line)",
        ),
        (
            "server:\n  identity: 'abc\n",
            "t.conf:2: unterminated quoted string (missing closing ' on this line)",
        ),
        (
            "foo:\nserver:\n",
            "t.conf:1: unknown clause 'foo:' (or directive 'foo:' without a value)",
        ),
        (
            "server:\n  forward-zones:\n",
            "t.conf:2: unknown clause 'forward-zones:' (or directive 'forward-zones:' without \
             a value)",
        ),
        (
            "server:\n  frob: port: 53\n",
            "t.conf:2: unknown clause 'frob:' (or directive 'frob:' without a value)",
        ),
        (
            "server:\n  access-control: 10.0.0.0/8\n",
            "t.conf:2: 'access-control:' needs 2 values, found 1",
        ),
        (
            "server:\n  access-control: 10.0.0.0/8 allow extra\n",
            "t.conf:2: 'access-control:' takes exactly 2 values, found more: 'extra' (quote a \
             value that contains spaces)",
        ),
        (
            "server:\n  local-zone: example.\n",
            "t.conf:2: 'local-zone:' needs 2 values, found 1",
        ),
        (
            "server:\n  local-zone: example. static nodefault\n",
            "t.conf:2: 'local-zone:' takes exactly 2 values, found more: 'nodefault' (quote a \
             value that contains spaces)",
        ),
        (
            "server:\n  port: 53 54\n",
            "t.conf:2: 'port:' takes one value, found more: '54' (quote a value that contains \
             spaces)",
        ),
        (
            "server:\n  local-data: \"a. A 192.0.2.1\" extra\n",
            "t.conf:2: 'local-data:' takes one value, found more: 'extra' (quote a value that \
             contains spaces)",
        ),
        (
            "server:\n  port 53\n",
            "t.conf:2: unknown keyword 'port' (a directive name ends with ':', as in 'port: 53')",
        ),
        (
            "server:\n  \"port:\" 53\n",
            "t.conf:2: expected a directive name ending in ':', found the quoted string \"port:\"",
        ),
        (
            "server:\n  :53\n",
            "t.conf:2: stray ':' in ':53' (no directive name before it)",
        ),
        (
            "server:\n  prefetch:\n",
            "t.conf:2: 'prefetch:' needs a value",
        ),
        (
            "server:\n  local-zone-override: a. 10.0.0.0/8\n",
            "t.conf:2: 'local-zone-override:' needs 3 values, found 2",
        ),
        (
            "server:\n  include:\n",
            "t.conf:2: 'include:' needs a file name",
        ),
        (
            "server:\n  include: \"\"\n",
            "t.conf:2: empty include file name",
        ),
        (
            "server:\n\n\nauth-zone:\n  zonefile: x\nserver:\n",
            "t.conf:4: auth-zone: clause without 'name:'",
        ),
        (
            "auth-zone:\n  zonefile: x\n",
            "t.conf:1: auth-zone: clause without 'name:'",
        ),
        (
            "auth-zone:\n  name: a.\n  name: b.\n",
            "t.conf:3: second 'name:' in this auth-zone: clause (the first is at t.conf:2); \
             each auth-zone: has one name",
        ),
        (
            "auth-zone:\n  name: a.\n  for-upstream: perhaps\n",
            "t.conf:3: 'for-upstream:' must be yes or no, not 'perhaps'",
        ),
        ("auth-zone:\n  name:\n", "t.conf:2: 'name:' needs a value"),
        (
            "forward-zone:\n  name: \".\"\n  forward-adr:\n",
            "t.conf:3: unknown clause 'forward-adr:' (or directive 'forward-adr:' without a \
             value)",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(&err(text), expected, "for {text:?}");
    }
}

#[test]
fn error_fields() {
    let e: Error = parse_str("server:\n  port: x\n", "dir/v.conf").unwrap_err();
    assert_eq!(e.file, Path::new("dir/v.conf"));
    assert_eq!(e.line, 2);
    assert_eq!(e.msg, "'port:' must be a decimal number, not 'x'");
    let missing = std::env::temp_dir().join("skua-config-test-does-not-exist.conf");
    let e = parse_file(&missing).unwrap_err();
    assert_eq!(e.file, missing);
    assert_eq!(e.line, 0);
    assert!(e.msg.starts_with("cannot open"), "{}", e.msg);
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot open", missing.display()))
    );
}

#[test]
fn warnings_for_unsupported_and_unknown() {
    let c = parse(
        "server:
  prefetch-key: yes
  port: 5353
  frobnicate: 7
  zonefile: x
forward-zone:
  name: \".\"
  forward-addr: 192.0.2.1
  forward-addr: 2001:db8::1
server:
  rrset-roundrobin: yes
  access-control-tag-action: 10.0.0.0/8 tag refuse
remote-control:
auth-zone:
  name: example.
  url: http://192.0.2.1/example.zone
  allow-notify: 192.0.2.1
  zonemd-check: yes
  port: 99
  bogus: 1
view:
  name: v
",
    );
    assert_eq!(
        warnings(&c),
        [
            (2, "'prefetch-key' is not supported yet and is ignored"),
            (4, "unknown directive 'frobnicate', ignored"),
            (
                5,
                "unknown server: directive 'zonefile', ignored ('zonefile:' belongs in an \
                 auth-zone: clause)"
            ),
            (11, "'rrset-roundrobin' is not supported yet and is ignored"),
            (
                12,
                "'access-control-tag-action' is not supported yet and is ignored"
            ),
            (
                13,
                "clause 'remote-control:' is not supported yet; its 0 directives are ignored"
            ),
            (
                16,
                "'url' in auth-zone: is not supported yet and is ignored"
            ),
            (
                18,
                "'zonemd-check' in auth-zone: is not supported yet and is ignored"
            ),
            (
                19,
                "'port:' is a server: directive, not an auth-zone: one; ignored (is a \
                 'server:' line missing?)"
            ),
            (20, "unknown auth-zone: directive 'bogus', ignored"),
            (
                21,
                "clause 'view:' is not supported yet; its 1 directive is ignored"
            ),
        ]
    );
    assert_eq!(c.server.port, 5353, "port: inside auth-zone: is ignored");
    assert_eq!(c.auth_zones.len(), 1);
    assert_eq!(
        c.forward_zones.len(),
        1,
        "forward-zone: is read, without warnings"
    );
    assert!(
        c.warnings
            .iter()
            .all(|w| &*w.loc.file == Path::new("t.conf"))
    );
    assert_eq!(
        c.warnings[0].to_string(),
        "t.conf:2: 'prefetch-key' is not supported yet and is ignored"
    );
}

#[test]
fn auth_zones_and_server_reopened() {
    let c = parse(
        r#"server:
  port: 5353
auth-zone:
  name: "example.org."
  zonefile: "example.org.zone"
  for-downstream: yes
  for-upstream: no
  fallback-enabled: yes
  primary: 192.0.2.53
  master: 2001:db8::53@5353#tls.example.
auth-zone:
  name: example.net.
server:
  verbosity: 4
  local-zone: "local." static
"#,
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.auth_zones.len(), 2);
    let a = &c.auth_zones[0];
    assert_eq!(a.loc, Loc::new("t.conf", 3));
    assert_eq!(a.name.value, "example.org.");
    assert_eq!(a.name.loc.line, 4);
    let zonefile = a.zonefile.as_ref().unwrap();
    assert_eq!(
        (zonefile.value.as_str(), zonefile.loc.line),
        ("example.org.zone", 5)
    );
    assert!(a.for_downstream);
    assert!(!a.for_upstream);
    assert!(a.fallback_enabled);
    let primaries: Vec<(&str, &str, usize)> = a
        .primaries
        .iter()
        .map(|p| (p.value.0.as_str(), p.value.1.as_str(), p.loc.line))
        .collect();
    assert_eq!(
        primaries,
        [
            ("192.0.2.53", "NOKEY", 9),
            ("2001:db8::53@5353#tls.example.", "NOKEY", 10)
        ]
    );
    let b = &c.auth_zones[1];
    assert_eq!(b.loc.line, 11);
    assert_eq!(b.name.value, "example.net.");
    assert_eq!(b.zonefile, None);
    assert!(b.for_downstream && b.for_upstream && !b.fallback_enabled);
    assert!(b.primaries.is_empty());
    assert_eq!(c.server.port, 5353);
    assert_eq!(c.server.verbosity, 4);
    assert_eq!(c.server.local_zones[0].loc.line, 15);
}

#[test]
fn includes_with_globs() {
    let dir = TempDir::new("glob");
    let d = dir.0.display();
    dir.write("pre.conf", "server:\n  port: 5300\n");
    dir.write("conf.d/b.conf", "  local-zone: b. static\n");
    dir.write(
        "conf.d/a.conf",
        "  local-zone: a. static\n  prefetch-key: yes\n",
    );
    dir.write("conf.d/.hidden.conf", "  local-zone: hidden. static\n");
    dir.write("conf.d/c.txt", "  local-zone: txt. static\n");
    let main = dir.write(
        "main.conf",
        &format!(
            "include: \"{d}/pre.conf\"\n  verbosity: 2\n  include: {d}/conf.d/*.conf\n  \
             identity: after\ninclude: \"{d}/conf.d/{{b,a}}.conf\"\n"
        ),
    );
    let c = parse_file(&main).unwrap();
    let s = &c.server;
    assert_eq!(s.port, 5300);
    assert_eq!(
        s.verbosity, 2,
        "the server: clause of pre.conf continues after it"
    );
    assert_eq!(s.identity.as_deref(), Some("after"));
    let zones: Vec<(&str, PathBuf, usize)> = s
        .local_zones
        .iter()
        .map(|z| (z.value.0.as_str(), z.loc.file.to_path_buf(), z.loc.line))
        .collect();
    assert_eq!(
        zones,
        [
            ("a.", dir.path("conf.d/a.conf"), 1),
            ("b.", dir.path("conf.d/b.conf"), 1),
            ("b.", dir.path("conf.d/b.conf"), 1),
            ("a.", dir.path("conf.d/a.conf"), 1),
        ]
    );
    assert_eq!(c.warnings.len(), 2);
    assert_eq!(
        c.warnings[0].to_string(),
        format!("{d}/conf.d/a.conf:2: 'prefetch-key' is not supported yet and is ignored")
    );
    assert_eq!(
        c.files,
        [
            main,
            dir.path("pre.conf"),
            dir.path("conf.d/a.conf"),
            dir.path("conf.d/b.conf"),
        ]
    );
}

#[test]
fn include_pattern_matching_nothing_warns_but_missing_file_errors() {
    let dir = TempDir::new("nomatch");
    let d = dir.0.display();
    let c = parse(&format!(
        "server:\n  include: \"{d}/none/*.conf\"\n  port: 54\n"
    ));
    assert_eq!(c.server.port, 54);
    assert_eq!(
        warnings(&c),
        [(
            2,
            format!("include pattern '{d}/none/*.conf' matches no files (tried '{d}/none/*.conf'); nothing included").as_str()
        )]
    );
    assert_eq!(
        err(&format!("server:\n  include: \"{d}/missing.conf\"\n")),
        format!(
            "t.conf:2: cannot open include file '{d}/missing.conf': no such file (tried \
             '{d}/missing.conf')"
        )
    );
}

#[test]
fn relative_include_falls_back_to_the_including_files_directory() {
    // The tests run in the crate directory, where these relative paths do not exist.
    let dir = TempDir::new("relative");
    dir.write("sub/x.conf", "  port: 1234\n  include: y.conf\n");
    dir.write("sub/y.conf", "  verbosity: 5\n");
    let main = dir.write("main.conf", "server:\n  include: \"sub/x.conf\"\n");
    let c = parse_file(&main).unwrap();
    assert_eq!(c.server.port, 1234);
    assert_eq!(c.server.verbosity, 5);
    assert_eq!(
        c.files,
        [main, dir.path("sub/x.conf"), dir.path("sub/y.conf")]
    );
    // parse_str has no including file: only the working directory is tried.
    let e = err("server:\n  include: \"sub/x.conf\"\n");
    assert_eq!(
        e,
        "t.conf:2: cannot open include file 'sub/x.conf': no such file (tried 'sub/x.conf')"
    );
}

#[test]
fn directory_is_the_base_of_later_relative_includes() {
    let dir = TempDir::new("directory");
    let d = dir.0.display();
    dir.write("etc/z.conf", "  port: 4321\n");
    let c = parse(&format!(
        "server:\n  directory: \"{d}/etc\"\n  include: z.conf\n"
    ));
    assert_eq!(c.server.port, 4321);
    assert_eq!(c.files, [dir.path("etc/z.conf")]);
    assert_eq!(c.server.directory, Some(format!("{d}/etc")));
}

#[test]
fn include_loops_are_errors() {
    let dir = TempDir::new("loop");
    let d = dir.0.display();
    let own = dir.write(
        "self.conf",
        &format!("server:\n  include: \"{d}/self.conf\"\n"),
    );
    let e = parse_file(&own).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{d}/self.conf:2: include loop: {d}/self.conf -> {d}/self.conf")
    );
    let a = dir.write("a.conf", &format!("server:\n  include: {d}/b.conf\n"));
    dir.write("b.conf", &format!("  port: 1\n  include: \"{d}/a.conf\"\n"));
    let e = parse_file(&a).unwrap_err();
    assert_eq!(e.file, dir.path("b.conf"));
    assert_eq!(e.line, 2);
    assert_eq!(
        e.msg,
        format!("include loop: {d}/a.conf -> {d}/b.conf -> {d}/a.conf")
    );
    // The same file included twice, one after the other, is not a loop.
    dir.write("once.conf", "  verbosity: 2\n");
    let twice = dir.write(
        "twice.conf",
        &format!("server:\n  include: {d}/once.conf\n  include: {d}/once.conf\n"),
    );
    let c = parse_file(&twice).unwrap();
    assert_eq!(c.server.verbosity, 2);
    assert_eq!(c.files, [twice, dir.path("once.conf")]);
}

#[test]
fn errors_in_included_files_name_the_included_file() {
    let dir = TempDir::new("incerr");
    let d = dir.0.display();
    dir.write("bad.conf", "# first\n  do-tcp: sometimes\n");
    let e = err(&format!("server:\n  include: {d}/bad.conf\n"));
    assert_eq!(
        e,
        format!("{d}/bad.conf:2: 'do-tcp:' must be yes or no, not 'sometimes'")
    );
}

#[test]
fn include_toplevel_ends_the_clause() {
    let dir = TempDir::new("toplevel");
    let d = dir.0.display();
    dir.write("zone.conf", "auth-zone:\n  name: t.\n");
    // Lines after include-toplevel: need a clause again.
    assert_eq!(
        err(&format!(
            "server:\n  port: 1\ninclude-toplevel: \"{d}/zone.conf\"\n  verbosity: 3\n"
        )),
        "t.conf:4: 'verbosity:' is outside any clause (is a 'server:' line missing?)"
    );
    let c = parse(&format!(
        "server:\n  port: 1\ninclude-toplevel: \"{d}/zone.conf\"\nserver:\n  verbosity: 3\n"
    ));
    assert_eq!(c.auth_zones[0].name.value, "t.");
    assert_eq!((c.server.port, c.server.verbosity), (1, 3));
    // The included file starts at top level, even inside a clause.
    dir.write("bare.conf", "  port: 5\n");
    assert_eq!(
        err(&format!(
            "auth-zone:\n  name: x.\ninclude-toplevel: {d}/bare.conf\n"
        )),
        format!("{d}/bare.conf:1: 'port:' is outside any clause (is a 'server:' line missing?)")
    );
    // A plain include continues the clause.
    let c = parse(&format!("server:\n  include: {d}/bare.conf\n"));
    assert_eq!(c.server.port, 5);
}

#[test]
fn unsupported_clause_spans_includes_and_counts_directives() {
    let dir = TempDir::new("unsupported");
    let d = dir.0.display();
    dir.write(
        "view.conf",
        "  local-zone: example. static\n  view-first: yes\n",
    );
    let c = parse(&format!(
        "view:\n  name: v\n  include: {d}/view.conf\nserver:\n  port: 9\n"
    ));
    assert_eq!(
        warnings(&c),
        [(
            1,
            "clause 'view:' is not supported yet; its 3 directives are ignored"
        )]
    );
    assert_eq!(c.server.port, 9);
    assert!(
        c.server.local_zones.is_empty(),
        "local-zone: inside view: is ignored"
    );
}

/// The value and line of each located string.
fn lines(v: &[crate::Located<String>]) -> Vec<(&str, usize)> {
    v.iter().map(|l| (l.value.as_str(), l.loc.line)).collect()
}

const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

#[test]
fn rrl_api_audit_defaults() {
    let c = parse("server:\n  port: 53\n");
    let r = &c.server.rrl;
    assert_eq!(*r, Rrl::default());
    assert_eq!((r.responses_per_second, r.all_per_second), (0, 0));
    assert_eq!(
        (
            r.nodata_per_second,
            r.nxdomains_per_second,
            r.referrals_per_second,
            r.errors_per_second
        ),
        (None, None, None, None)
    );
    assert_eq!((r.window, r.slip), (15, 2));
    assert_eq!((r.ipv4_prefix_length, r.ipv6_prefix_length), (24, 56));
    assert!(r.exempt_clients.is_empty());
    assert_eq!(r.qps_scale, 0);
    assert!(!r.log_only);
    assert_eq!((r.max_table_size, r.min_table_size), (20_000, 500));
    assert!(!r.enabled());

    let a = &c.api;
    assert_eq!(*a, Api::default());
    assert!(a.enable);
    assert!(a.interfaces.is_empty() && a.tokens.is_empty());
    assert_eq!(a.port, 8053);
    assert_eq!(
        (&a.tls_cert, &a.tls_key, &a.state_file),
        (&None, &None, &None)
    );
    assert_eq!(a.max_body, 1 << 20);
    assert_eq!(a.auth_fail_limit, 10);

    let au = &c.audit;
    assert_eq!(*au, Audit::default());
    assert_eq!(au.log, None);
    assert!(au.keys.is_empty());
    assert_eq!(au.current_key(), None);
    assert_eq!(au.checkpoint_every, 1000);
    assert_eq!(au.fsync, AuditFsync::Entry);
    assert_eq!(AuditFsync::default(), AuditFsync::Entry);

    // Empty api: and audit: clauses change nothing.
    let c = parse("api:\naudit:\n");
    assert_eq!((c.api, c.audit), (Api::default(), Audit::default()));
    assert!(c.warnings.is_empty());
}

#[test]
fn every_rrl_directive() {
    let c = parse(
        "server:
    rrl-responses-per-second: 5
    rrl-nodata-per-second: 4
    rrl-nxdomains-per-second: 3
    rrl-referrals-per-second: 2
    rrl-errors-per-second: 1
    rrl-all-per-second: 100
    rrl-window: 3600
    rrl-slip: 0
    rrl-ipv4-prefix-length: 32
    rrl-ipv6-prefix-length: 128
    rrl-exempt-clients: 192.0.2.0/24
    rrl-exempt-clients: \"2001:db8::/32\"
    rrl-qps-scale: 250
    rrl-log-only: YES
    rrl-max-table-size: 1
    rrl-min-table-size: 0
",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let r = &c.server.rrl;
    assert_eq!(r.responses_per_second, 5);
    assert_eq!(r.nodata_per_second, Some(4));
    assert_eq!(r.nxdomains_per_second, Some(3));
    assert_eq!(r.referrals_per_second, Some(2));
    assert_eq!(r.errors_per_second, Some(1));
    assert_eq!(r.all_per_second, 100);
    assert_eq!(r.window, 3600);
    assert_eq!(r.slip, 0);
    assert_eq!((r.ipv4_prefix_length, r.ipv6_prefix_length), (32, 128));
    assert_eq!(
        lines(&r.exempt_clients),
        [("192.0.2.0/24", 12), ("2001:db8::/32", 13)]
    );
    assert_eq!(r.exempt_clients[0].loc.to_string(), "t.conf:12");
    assert_eq!(r.qps_scale, 250);
    assert!(r.log_only);
    assert_eq!((r.max_table_size, r.min_table_size), (1, 0));
    assert!(r.enabled());
    // The other ends of the ranges.
    let c = parse(
        "server:\n  rrl-window: 1\n  rrl-slip: 10\n  rrl-ipv4-prefix-length: 0\n  \
         rrl-ipv6-prefix-length: 0\n  rrl-responses-per-second: 4294967295\n  \
         rrl-nodata-per-second: 0\n",
    );
    let r = &c.server.rrl;
    assert_eq!((r.window, r.slip), (1, 10));
    assert_eq!((r.ipv4_prefix_length, r.ipv6_prefix_length), (0, 0));
    assert_eq!(r.responses_per_second, u32::MAX);
    assert_eq!(
        r.nodata_per_second,
        Some(0),
        "0 given is not 'as responses'"
    );
}

#[test]
fn rrl_enabled_when_any_rate_is_set() {
    let enabled = |text: &str| parse(&format!("server:\n  {text}\n")).server.rrl.enabled();
    assert!(!enabled("rrl-window: 5"));
    assert!(!enabled("rrl-responses-per-second: 0"));
    assert!(!enabled("rrl-nxdomains-per-second: 0"));
    assert!(enabled("rrl-responses-per-second: 10"));
    assert!(enabled("rrl-all-per-second: 10"));
    assert!(enabled("rrl-nodata-per-second: 1"));
    assert!(enabled("rrl-nxdomains-per-second: 1"));
    assert!(enabled("rrl-referrals-per-second: 1"));
    assert!(enabled("rrl-errors-per-second: 1"));
}

#[test]
fn every_api_directive() {
    let c = parse(&format!(
        r#"api:
    enable: no
    interface: 127.0.0.1
    interface: "[::1]@9443"
    port: 9000
    token: "ci read sha256:{SHA}"
    token: ops operator env:SKUA_OPS_TOKEN
    token: 'root admin file:/etc/skua/admin.token'
    token: dns-bot dns file:/run/secrets/dns
    tls-cert: /etc/skua/api.crt
    tls-key: "/etc/skua/api.key"
    max-body: 64k
    auth-fail-limit: 3
    state-file: /var/lib/skua/api-state.json
"#
    ));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let a = &c.api;
    assert!(!a.enable);
    assert_eq!(lines(&a.interfaces), [("127.0.0.1", 3), ("[::1]@9443", 4)]);
    assert_eq!(a.port, 9000);
    let ci = format!("ci read sha256:{SHA}");
    assert_eq!(
        lines(&a.tokens),
        [
            (ci.as_str(), 6),
            ("ops operator env:SKUA_OPS_TOKEN", 7),
            ("root admin file:/etc/skua/admin.token", 8),
            ("dns-bot dns file:/run/secrets/dns", 9),
        ]
    );
    let cert = a.tls_cert.as_ref().unwrap();
    assert_eq!(
        (cert.value.as_str(), cert.loc.line),
        ("/etc/skua/api.crt", 10)
    );
    let key = a.tls_key.as_ref().unwrap();
    assert_eq!(
        (key.value.as_str(), key.loc.line),
        ("/etc/skua/api.key", 11)
    );
    assert_eq!(a.max_body, 64 << 10);
    assert_eq!(a.auth_fail_limit, 3);
    let state = a.state_file.as_ref().unwrap();
    assert_eq!(state.value, "/var/lib/skua/api-state.json");
    assert_eq!(state.loc.to_string(), "t.conf:14");
    // Sizes as so-rcvbuf:, down to 1k.
    assert_eq!(parse("api:\n  max-body: 1m\n").api.max_body, 1 << 20);
    assert_eq!(parse("api:\n  max-body: 1024\n").api.max_body, 1024);
    assert_eq!(parse("api:\n  max-body: 1k\n").api.max_body, 1024);
    // Several directives on one line, as in server:.
    let c = parse("api: port: 1 enable: yes\n");
    assert_eq!((c.api.port, c.api.enable), (1, true));
}

#[test]
fn every_audit_directive() {
    let c = parse(
        "audit:
    log: /var/log/skua/audit.log
    key: file:/etc/skua/audit-2023.key
    key: \"env:SKUA_AUDIT_KEY\"
    checkpoint-every: 1
    fsync: batch
",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let a = &c.audit;
    let log = a.log.as_ref().unwrap();
    assert_eq!(
        (log.value.as_str(), log.loc.line),
        ("/var/log/skua/audit.log", 2)
    );
    assert_eq!(
        lines(&a.keys),
        [
            ("file:/etc/skua/audit-2023.key", 3),
            ("env:SKUA_AUDIT_KEY", 4)
        ]
    );
    let current = a.current_key().unwrap();
    assert_eq!(
        (current.value.as_str(), current.loc.line),
        ("env:SKUA_AUDIT_KEY", 4),
        "the last key: signs"
    );
    assert_eq!(a.checkpoint_every, 1);
    assert_eq!(a.fsync, AuditFsync::Batch);
    assert_eq!(
        parse("audit:\n  fsync: entry\n").audit.fsync,
        AuditFsync::Entry
    );
    assert_eq!(
        parse("audit:\n  checkpoint-every: 18446744073709551615\n")
            .audit
            .checkpoint_every,
        u64::MAX
    );
    // Keys without a log (e.g. only for verification) are fine.
    let c = parse("audit:\n  key: env:K\n");
    assert_eq!(c.audit.log, None);
    assert_eq!(c.audit.keys.len(), 1);
}

#[test]
fn api_and_audit_clauses_merge_like_server() {
    let c = parse(
        "api:
  port: 9000
  interface: 127.0.0.1
  token: a read env:A
  tls-cert: /a.crt
audit:
  log: /first.log
  checkpoint-every: 10
server:
  port: 5353
  rrl-exempt-clients: 10.0.0.0/8
api:
  port: 9001
  interface: ::1
  token: b admin env:B
  tls-key: /a.key
audit:
  key: file:/old.key
  log: /second.log
audit:
  key: file:/new.key
server:
  rrl-exempt-clients: ::1/128
  rrl-slip: 1
",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let a = &c.api;
    assert_eq!(a.port, 9001, "a later value replaces an earlier one");
    assert_eq!(lines(&a.interfaces), [("127.0.0.1", 3), ("::1", 14)]);
    assert_eq!(
        lines(&a.tokens),
        [("a read env:A", 4), ("b admin env:B", 15)]
    );
    assert_eq!(a.tls_cert.as_ref().unwrap().loc.line, 5);
    assert_eq!(a.tls_key.as_ref().unwrap().loc.line, 16);
    let au = &c.audit;
    assert_eq!(au.log.as_ref().unwrap().value, "/second.log");
    assert_eq!(au.checkpoint_every, 10);
    assert_eq!(
        lines(&au.keys),
        [("file:/old.key", 18), ("file:/new.key", 21)]
    );
    assert_eq!(au.current_key().unwrap().value, "file:/new.key");
    assert_eq!(c.server.port, 5353);
    assert_eq!(
        lines(&c.server.rrl.exempt_clients),
        [("10.0.0.0/8", 11), ("::1/128", 23)]
    );
    assert_eq!(c.server.rrl.slip, 1);
}

#[test]
fn rrl_api_audit_errors_name_file_line_and_reason() {
    let cases: &[(&str, &str)] = &[
        // rrl-* in server:
        (
            "server:\n  rrl-responses-per-second: 4294967296\n",
            "t.conf:2: 'rrl-responses-per-second:' value 4294967296 is out of range \
             (0-4294967295)",
        ),
        (
            "server:\n  rrl-nodata-per-second: -1\n",
            "t.conf:2: 'rrl-nodata-per-second:' must be a decimal number, not '-1'",
        ),
        (
            "server:\n  rrl-nxdomains-per-second: many\n",
            "t.conf:2: 'rrl-nxdomains-per-second:' must be a decimal number, not 'many'",
        ),
        (
            "server:\n  rrl-referrals-per-second: 1.5\n",
            "t.conf:2: 'rrl-referrals-per-second:' must be a decimal number, not '1.5'",
        ),
        (
            "server:\n  rrl-errors-per-second: 99999999999\n",
            "t.conf:2: 'rrl-errors-per-second:' value 99999999999 is out of range \
             (0-4294967295)",
        ),
        (
            "server:\n  rrl-all-per-second:\n",
            "t.conf:2: 'rrl-all-per-second:' needs a value",
        ),
        (
            "server:\n  rrl-window: 0\n",
            "t.conf:2: 'rrl-window:' value 0 is out of range (1-3600)",
        ),
        (
            "server:\n  rrl-window: 3601\n",
            "t.conf:2: 'rrl-window:' value 3601 is out of range (1-3600)",
        ),
        (
            "server:\n  rrl-slip: 11\n",
            "t.conf:2: 'rrl-slip:' value 11 is out of range (0-10)",
        ),
        (
            "server:\n  rrl-ipv4-prefix-length: 33\n",
            "t.conf:2: 'rrl-ipv4-prefix-length:' value 33 is out of range (0-32)",
        ),
        (
            "server:\n  rrl-ipv6-prefix-length: 129\n",
            "t.conf:2: 'rrl-ipv6-prefix-length:' value 129 is out of range (0-128)",
        ),
        (
            "server:\n  rrl-exempt-clients: 10.0.0.0/8 192.0.2.0/24\n",
            "t.conf:2: 'rrl-exempt-clients:' takes one value, found more: '192.0.2.0/24' \
             (quote a value that contains spaces)",
        ),
        (
            "server:\n  rrl-qps-scale: x\n",
            "t.conf:2: 'rrl-qps-scale:' must be a decimal number, not 'x'",
        ),
        (
            "server:\n  rrl-log-only: 1\n",
            "t.conf:2: 'rrl-log-only:' must be yes or no, not '1'",
        ),
        (
            "server:\n  rrl-max-table-size: 0\n",
            "t.conf:2: 'rrl-max-table-size:' value 0 is out of range (at least 1)",
        ),
        (
            "server:\n  rrl-min-table-size: lots\n",
            "t.conf:2: 'rrl-min-table-size:' must be a decimal number, not 'lots'",
        ),
        // api:
        (
            "api:\n  enable: maybe\n",
            "t.conf:2: 'enable:' must be yes or no, not 'maybe'",
        ),
        (
            "api:\n  port: 0\n",
            "t.conf:2: 'port:' value 0 is out of range (1-65535)",
        ),
        (
            "api:\n  port: 65536\n",
            "t.conf:2: 'port:' value 65536 is out of range (1-65535)",
        ),
        (
            "api:\n  interface:\n",
            "t.conf:2: 'interface:' needs a value",
        ),
        (
            "api:\n  interface: 127.0.0.1 ::1\n",
            "t.conf:2: 'interface:' takes one value, found more: '::1' (quote a value that \
             contains spaces)",
        ),
        ("api:\n  token:\n", "t.conf:2: 'token:' needs a value"),
        (
            "api:\n  token: ci read\n",
            "t.conf:2: 'token:' must be \"NAME ROLE SECRET\": three words separated by single \
             spaces",
        ),
        (
            "api:\n  token: \"ci read env:A extra\"\n",
            "t.conf:2: 'token:' must be \"NAME ROLE SECRET\": three words separated by single \
             spaces",
        ),
        (
            "api:\n  token: \"ci  read env:A\"\n",
            "t.conf:2: 'token:' must be \"NAME ROLE SECRET\": three words separated by single \
             spaces",
        ),
        (
            "api:\n  token: \"ci\tread env:A\"\n",
            "t.conf:2: 'token:' must be \"NAME ROLE SECRET\": three words separated by single \
             spaces",
        ),
        (
            "api:\n  token: \"\"\n",
            "t.conf:2: 'token:' must be \"NAME ROLE SECRET\": three words separated by single \
             spaces",
        ),
        (
            "api:\n  token: \"ci read env:A\" extra\n",
            "t.conf:2: 'token:' takes one value, found more: 'extra' (quote a value that \
             contains spaces)",
        ),
        (
            "api:\n  token: ci root env:A\n",
            "t.conf:2: 'token:' role 'root' is not one of read, dns, operator, admin, sync",
        ),
        (
            "api:\n  token: ci Admin env:A\n",
            "t.conf:2: 'token:' role 'Admin' is not one of read, dns, operator, admin, sync",
        ),
        (
            "api:\n  token: ci read hunter2\n",
            "t.conf:2: 'token:' secret must be sha256:HEX, env:VAR or file:PATH (the token \
             itself is never written in the configuration)",
        ),
        (
            "api:\n  token: ci read env:\n",
            "t.conf:2: 'token:' secret must be sha256:HEX, env:VAR or file:PATH (the token \
             itself is never written in the configuration)",
        ),
        (
            "api:\n  token: ci read file:\n",
            "t.conf:2: 'token:' secret must be sha256:HEX, env:VAR or file:PATH (the token \
             itself is never written in the configuration)",
        ),
        (
            "api:\n  token: ci read sha512:abcd\n",
            "t.conf:2: 'token:' secret must be sha256:HEX, env:VAR or file:PATH (the token \
             itself is never written in the configuration)",
        ),
        (
            "api:\n  token: ci read sha256:abcd\n",
            "t.conf:2: 'token:' secret 'sha256:' must be followed by 64 hex digits",
        ),
        (
            "api:\n  tls-cert: /a.crt\n  port: 1\n",
            "t.conf:2: 'tls-cert:' without 'tls-key:' in api: (give both or neither)",
        ),
        (
            "server:\napi:\n  port: 1\napi:\n  tls-key: /a.key\nserver:\n",
            "t.conf:5: 'tls-key:' without 'tls-cert:' in api: (give both or neither)",
        ),
        (
            "api:\n  max-body: 1023\n",
            "t.conf:2: 'max-body:' size '1023' is too small (at least 1k)",
        ),
        (
            "api:\n  max-body: 0\n",
            "t.conf:2: 'max-body:' size '0' is too small (at least 1k)",
        ),
        (
            "api:\n  max-body: big\n",
            "t.conf:2: 'max-body:' must be a size (a number of bytes, or with k, m or g as in \
             '4m'), not 'big'",
        ),
        (
            "api:\n  auth-fail-limit: 4294967296\n",
            "t.conf:2: 'auth-fail-limit:' value 4294967296 is out of range (0-4294967295)",
        ),
        (
            "api:\n  auth-fail-limit: ten\n",
            "t.conf:2: 'auth-fail-limit:' must be a decimal number, not 'ten'",
        ),
        (
            "api:\n  state-file:\n",
            "t.conf:2: 'state-file:' needs a value",
        ),
        // audit:
        (
            "audit:\n  key: /etc/skua/audit.key\n",
            "t.conf:2: 'key:' must be file:PATH or env:VAR (the key itself is never written \
             in the configuration)",
        ),
        (
            "audit:\n  key: \"file:\"\n",
            "t.conf:2: 'key:' must be file:PATH or env:VAR (the key itself is never written \
             in the configuration)",
        ),
        (
            "audit:\n  key: sha256:abcd\n",
            "t.conf:2: 'key:' must be file:PATH or env:VAR (the key itself is never written \
             in the configuration)",
        ),
        (
            "audit:\n  checkpoint-every: 0\n",
            "t.conf:2: 'checkpoint-every:' value 0 is out of range (at least 1)",
        ),
        (
            "audit:\n  fsync: always\n",
            "t.conf:2: 'fsync:' must be entry or batch, not 'always'",
        ),
        ("audit:\n  log:\n", "t.conf:2: 'log:' needs a value"),
        (
            "server:\n\naudit:\n  log: /var/log/audit.log\n  fsync: entry\n",
            "t.conf:3: audit: clause with 'log:' but no 'key:' (the audit log needs a signing \
             key: 'key: file:PATH' or 'key: env:VAR')",
        ),
        (
            "audit:\n  checkpoint-every: 5\naudit:\n  log: /a.log\n",
            "t.conf:3: audit: clause with 'log:' but no 'key:' (the audit log needs a signing \
             key: 'key: file:PATH' or 'key: env:VAR')",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(&err(text), expected, "for {text:?}");
    }
    // A secret written by mistake is not repeated in the error.
    assert!(!err("api:\n  token: ci read hunter2\n").contains("hunter2"));
    assert!(!err("audit:\n  key: s3cr3t\n").contains("s3cr3t"));
    // Errors in included files name the included file.
    let dir = TempDir::new("apierr");
    let d = dir.0.display();
    dir.write("api.conf", "# tokens\n  token: ci read\n");
    assert_eq!(
        err(&format!("api:\n  include: {d}/api.conf\n")),
        format!(
            "{d}/api.conf:2: 'token:' must be \"NAME ROLE SECRET\": three words separated by \
             single spaces"
        )
    );
}

#[test]
fn unknown_directives_in_api_and_audit_warn_as_elsewhere() {
    let c = parse(
        "api:
  bogus: 1
  verbosity: 3
  log: /x.log
  name: example.
  port: 9000
audit:
  frob: 1 2
  port: 99
  token: a read env:A
  key: env:K
server:
  enable: yes
  key: env:K
  token: b admin env:B
auth-zone:
  name: example.
  token: a read env:A
",
    );
    assert_eq!(
        warnings(&c),
        [
            (2, "unknown api: directive 'bogus', ignored"),
            (
                3,
                "'verbosity:' is a server: directive, not an api: one; ignored (is a \
                 'server:' line missing?)"
            ),
            (
                4,
                "'log:' is an audit: directive, not an api: one; ignored (is an 'audit:' \
                 line missing?)"
            ),
            (
                5,
                "'name:' is an auth-zone: directive, not an api: one; ignored (is an \
                 'auth-zone:' line missing?)"
            ),
            (8, "unknown audit: directive 'frob', ignored"),
            (
                9,
                "'port:' is a server: directive, not an audit: one; ignored (is a 'server:' \
                 line missing?)"
            ),
            (
                10,
                "'token:' is an api: directive, not an audit: one; ignored (is an 'api:' line \
                 missing?)"
            ),
            (
                13,
                "unknown server: directive 'enable', ignored ('enable:' belongs in an api: \
                 clause)"
            ),
            (
                14,
                "unknown server: directive 'key', ignored ('key:' belongs in an audit: \
                 clause)"
            ),
            (
                15,
                "unknown server: directive 'token', ignored ('token:' belongs in an api: \
                 clause)"
            ),
            (
                18,
                "'token:' is an api: directive, not an auth-zone: one; ignored (is an 'api:' \
                 line missing?)"
            ),
        ]
    );
    assert_eq!(c.server.verbosity, 1, "verbosity: inside api: is ignored");
    assert_eq!(c.server.port, 53, "port: inside audit: is ignored");
    assert_eq!(c.api.port, 9000);
    assert_eq!(c.audit.log, None);
    assert_eq!(lines(&c.audit.keys), [("env:K", 11)]);
    assert!(c.api.tokens.is_empty());
    // Without a value, an unknown name is an unknown clause, as in server: and auth-zone:.
    assert_eq!(
        err("api:\n  bogus:\n"),
        "t.conf:2: unknown clause 'bogus:' (or directive 'bogus:' without a value)"
    );
    assert_eq!(
        err("audit:\n  frob: port: 1\n"),
        "t.conf:2: unknown clause 'frob:' (or directive 'frob:' without a value)"
    );
    // api: and audit: directives outside any clause.
    assert_eq!(
        err("token: a read env:A\n"),
        "t.conf:1: 'token:' is outside any clause (is a 'server:' line missing?)"
    );
}

#[test]
fn remote_control_stays_an_unsupported_clause() {
    let c = parse(
        "remote-control:
  control-enable: yes
  control-interface: 127.0.0.1
  control-port: 8953
api:
  port: 9000
",
    );
    assert_eq!(
        warnings(&c),
        [(
            1,
            "clause 'remote-control:' is not supported yet; its 3 directives are ignored"
        )]
    );
    assert_eq!(c.api.port, 9000);
    assert_eq!(c.server.port, 53);
}

#[test]
fn control_socket_directives() {
    let a = parse("").api;
    assert_eq!(
        (
            &a.control_socket,
            &a.control_socket_group,
            a.control_socket_group_role.as_str()
        ),
        (&None, &None, "operator")
    );
    let a = parse(
        "api:
  control-socket: /run/skua/ctl.sock
  control-socket-group: skua
  control-socket-group-role: read
",
    )
    .api;
    let s = a.control_socket.as_ref().unwrap();
    assert_eq!((s.value.as_str(), s.loc.line), ("/run/skua/ctl.sock", 2));
    assert_eq!(a.control_socket_group.unwrap().value, "skua");
    assert_eq!(a.control_socket_group_role, "read");
    for off in ["no", "\"\""] {
        let a = parse(&format!("api:\n  control-socket: {off}\n")).api;
        assert_eq!(a.control_socket.unwrap().value, "");
    }
    for (text, want) in [
        (
            "api:\n  control-socket: run/ctl.sock\n",
            ":2: 'control-socket:' 'run/ctl.sock' must be an absolute path, or no",
        ),
        (
            "api:\n\n  control-socket-group: a:b\n",
            ":3: 'control-socket-group:' 'a:b' is not a group name or number",
        ),
        (
            "api:\n  control-socket-group-role: root\n",
            ":2: 'control-socket-group-role:' role 'root' is not one of read, dns, operator, admin, sync",
        ),
    ] {
        let e = err(text);
        assert!(e.ends_with(want), "{e}");
    }
}

// ---------------------------------------------------------------------------------------
// The caching forwarder: server: directives, forward-zone: and stub-zone:.

#[test]
fn every_forwarder_server_directive() {
    let c = parse(
        "server:
    tls-cert-bundle: /etc/ssl/certs/ca-certificates.crt
    tls-system-cert: yes
    msg-cache-size: 64m
    msg-cache-slabs: 8
    rrset-cache-size: 128m
    rrset-cache-slabs: 16
    cache-min-ttl: 60
    cache-max-ttl: 3600
    cache-max-negative-ttl: 300
    prefetch: yes
    serve-expired: yes
    serve-expired-ttl: 86400
    serve-expired-ttl-reset: yes
    serve-expired-reply-ttl: 5
    serve-expired-client-timeout: 1800
    outgoing-range: 8192
    outgoing-port-permit: 32768-60999
    outgoing-port-avoid: 53
    outgoing-port-avoid: 0-1023
    use-caps-for-id: yes
    caps-exempt: licdn.com.
    do-not-query-localhost: no
    unwanted-reply-threshold: 10000000
    tcp-upstream: yes
    tls-upstream: yes
    infra-host-ttl: 60
    num-queries-per-thread: 4096
    jostle-timeout: 300
    ede: yes
    ede-serve-expired: yes
    edns-buffer-size: 1232
",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let s = &c.server;
    let bundle = s.tls_cert_bundle.as_ref().unwrap();
    assert_eq!(
        (bundle.value.as_str(), bundle.loc.to_string().as_str()),
        ("/etc/ssl/certs/ca-certificates.crt", "t.conf:2")
    );
    assert!(s.tls_system_cert);
    assert_eq!((s.msg_cache_size, s.msg_cache_slabs), (64 << 20, 8));
    assert_eq!((s.rrset_cache_size, s.rrset_cache_slabs), (128 << 20, 16));
    assert_eq!(
        (s.cache_min_ttl, s.cache_max_ttl, s.cache_max_negative_ttl),
        (60, 3600, 300)
    );
    assert!(s.prefetch && s.serve_expired && s.serve_expired_ttl_reset);
    assert_eq!(s.serve_expired_ttl, 86_400);
    assert_eq!(s.serve_expired_reply_ttl, 5);
    assert_eq!(s.serve_expired_client_timeout_ms, 1800);
    assert_eq!(s.outgoing_range, 8192);
    let rules: Vec<(PortRule, usize)> = s
        .outgoing_port_rules
        .iter()
        .map(|r| (r.value, r.loc.line))
        .collect();
    let rule = |action, low, high| PortRule { action, low, high };
    assert_eq!(
        rules,
        [
            (rule(PortAction::Permit, 32768, 60999), 18),
            (rule(PortAction::Avoid, 53, 53), 19),
            (rule(PortAction::Avoid, 0, 1023), 20),
        ],
        "permit and avoid in one list, in file order"
    );
    assert!(s.use_caps_for_id);
    assert_eq!(lines(&s.caps_exempt), [("licdn.com.", 22)]);
    assert!(!s.do_not_query_localhost);
    assert_eq!(s.unwanted_reply_threshold, 10_000_000);
    assert!(s.tcp_upstream && s.tls_upstream);
    assert_eq!(s.infra_host_ttl, 60);
    assert_eq!(s.num_queries_per_thread, 4096);
    assert_eq!(s.jostle_timeout_ms, 300);
    assert!(s.ede && s.ede_serve_expired);
    assert_eq!(s.edns_buffer_size, 1232);

    // The other ends: zeros where Unbound takes them, one slab, the largest TTL.
    let c = parse(
        "server:\n  cache-max-ttl: 0\n  cache-min-ttl: 4294967295\n  msg-cache-size: 0\n  \
         msg-cache-slabs: 1\n  rrset-cache-slabs: 1024\n  jostle-timeout: 0\n  \
         outgoing-port-permit: 65535\n  serve-expired-reply-ttl: 0\n  outgoing-range: 1\n",
    );
    let s = &c.server;
    assert_eq!((s.cache_max_ttl, s.cache_min_ttl), (0, u32::MAX));
    assert_eq!(s.msg_cache_size, 0, "0 is kept as 0");
    assert_eq!((s.msg_cache_slabs, s.rrset_cache_slabs), (1, 1024));
    assert_eq!(s.jostle_timeout_ms, 0);
    assert_eq!(
        s.outgoing_port_rules[0].value,
        PortRule {
            action: PortAction::Permit,
            low: 65535,
            high: 65535
        }
    );
    assert_eq!(s.serve_expired_reply_ttl, 0);
    assert_eq!(s.outgoing_range, 1);
    // A later value replaces an earlier one; lists accumulate.
    let c = parse(
        "server:\n  prefetch: yes\n  caps-exempt: a.\nserver:\n  prefetch: no\n  caps-exempt: b.\n",
    );
    assert!(!c.server.prefetch);
    assert_eq!(lines(&c.server.caps_exempt), [("a.", 3), ("b.", 6)]);
}

#[test]
fn forwarder_server_aliases() {
    let c = parse(
        "server:
    ssl-cert-bundle: /etc/ssl/cert.pem
    tls-win-cert: yes
    caps-whitelist: example.com.
    caps-exempt: example.net.
    ssl-upstream: yes
",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let s = &c.server;
    assert_eq!(
        s.tls_cert_bundle.as_ref().unwrap().value,
        "/etc/ssl/cert.pem"
    );
    assert!(s.tls_system_cert);
    assert_eq!(
        lines(&s.caps_exempt),
        [("example.com.", 4), ("example.net.", 5)],
        "caps-whitelist: and caps-exempt: fill one list"
    );
    assert!(s.tls_upstream);
    // The new and the old name set the same value: the last one wins.
    let c = parse("server:\n  tls-upstream: yes\n  ssl-upstream: no\n");
    assert!(!c.server.tls_upstream);
    let c = parse("server:\n  tls-system-cert: no\n  tls-win-cert: yes\n");
    assert!(c.server.tls_system_cert);
}

#[test]
fn forwarder_server_errors_name_file_line_and_reason() {
    let cases: &[(&str, &str)] = &[
        (
            "server:\n  prefetch: sometimes\n",
            "t.conf:2: 'prefetch:' must be yes or no, not 'sometimes'",
        ),
        (
            "server:\n  serve-expired: 1\n",
            "t.conf:2: 'serve-expired:' must be yes or no, not '1'",
        ),
        (
            "server:\n  tls-win-cert: y\n",
            "t.conf:2: 'tls-win-cert:' must be yes or no, not 'y'",
        ),
        (
            "server:\n  msg-cache-size: lots\n",
            "t.conf:2: 'msg-cache-size:' must be a size (a number of bytes, or with k, m or g \
             as in '4m'), not 'lots'",
        ),
        (
            "server:\n  rrset-cache-size: 4x\n",
            "t.conf:2: 'rrset-cache-size:' must be a size (a number of bytes, or with k, m or \
             g as in '4m'), not '4x'",
        ),
        (
            "server:\n  msg-cache-slabs: 3\n",
            "t.conf:2: 'msg-cache-slabs:' value 3 is not a power of 2",
        ),
        (
            "server:\n  rrset-cache-slabs: 0\n",
            "t.conf:2: 'rrset-cache-slabs:' value 0 is out of range (1-4294967295)",
        ),
        (
            "server:\n  cache-min-ttl: -1\n",
            "t.conf:2: 'cache-min-ttl:' must be a decimal number, not '-1'",
        ),
        (
            "server:\n  cache-max-ttl: 4294967296\n",
            "t.conf:2: 'cache-max-ttl:' value 4294967296 is out of range (0-4294967295)",
        ),
        (
            "server:\n  cache-max-negative-ttl: 1h\n",
            "t.conf:2: 'cache-max-negative-ttl:' must be a decimal number, not '1h'",
        ),
        (
            "server:\n  serve-expired-client-timeout: 1.8s\n",
            "t.conf:2: 'serve-expired-client-timeout:' must be a decimal number, not '1.8s'",
        ),
        (
            "server:\n  outgoing-range: 0\n",
            "t.conf:2: 'outgoing-range:' value 0 is out of range (at least 1)",
        ),
        (
            "server:\n  num-queries-per-thread: 0\n",
            "t.conf:2: 'num-queries-per-thread:' value 0 is out of range (at least 1)",
        ),
        (
            "server:\n  unwanted-reply-threshold: many\n",
            "t.conf:2: 'unwanted-reply-threshold:' must be a decimal number, not 'many'",
        ),
        (
            "server:\n  outgoing-port-permit: 2000-1000\n",
            "t.conf:2: 'outgoing-port-permit:' range '2000-1000' is empty (its first port is \
             above its last)",
        ),
        (
            "server:\n\n  outgoing-port-avoid: 1000-\n",
            "t.conf:3: 'outgoing-port-avoid:' must be a port or a range LOW-HIGH of ports \
             0-65535 without spaces, not '1000-'",
        ),
        (
            "server:\n  outgoing-port-avoid: -1000\n",
            "t.conf:2: 'outgoing-port-avoid:' must be a port or a range LOW-HIGH of ports \
             0-65535 without spaces, not '-1000'",
        ),
        (
            "server:\n  outgoing-port-permit: 65536\n",
            "t.conf:2: 'outgoing-port-permit:' must be a port or a range LOW-HIGH of ports \
             0-65535 without spaces, not '65536'",
        ),
        (
            "server:\n  outgoing-port-permit: http\n",
            "t.conf:2: 'outgoing-port-permit:' must be a port or a range LOW-HIGH of ports \
             0-65535 without spaces, not 'http'",
        ),
        (
            "server:\n  outgoing-port-permit: 1-2-3\n",
            "t.conf:2: 'outgoing-port-permit:' must be a port or a range LOW-HIGH of ports \
             0-65535 without spaces, not '1-2-3'",
        ),
        (
            "server:\n  outgoing-port-permit: 1000 - 2000\n",
            "t.conf:2: 'outgoing-port-permit:' takes one value, found more: '-' (quote a \
             value that contains spaces)",
        ),
        (
            "server:\n  tls-cert-bundle:\n",
            "t.conf:2: 'tls-cert-bundle:' needs a value",
        ),
        (
            "server:\n  caps-exempt: a. b.\n",
            "t.conf:2: 'caps-exempt:' takes one value, found more: 'b.' (quote a value that \
             contains spaces)",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(&err(text), expected, "for {text:?}");
    }
}

/// The addresses of a zone as (text, line).
fn addrs(z: &ForwardZone) -> Vec<(String, usize)> {
    z.addrs
        .iter()
        .map(|a| (a.value.to_string(), a.loc.line))
        .collect()
}

#[test]
fn forward_and_stub_zones() {
    let c = parse(
        r#"server:
  port: 5353
forward-zone:
  name: "."
  forward-addr: 9.9.9.9@853#dns.quad9.net
  forward-addr: 2620:fe::fe@853#dns.quad9.net
  forward-addr: 192.0.2.1
  forward-addr: 192.0.2.2#tls.example.
  forward-addr: "2001:db8::53@5353"
  forward-host: dns.example.net
  forward-host: dot.example.net@8853#dot.example.net
  forward-first: yes
  forward-no-cache: yes
  forward-tls-upstream: yes
  forward-tcp-upstream: yes
stub-zone:
  name: corp.example.
  stub-addr: 10.0.0.53
  stub-host: ns1.corp.example.
  stub-prime: yes
  stub-first: yes
  stub-no-cache: yes
  stub-tls-upstream: yes
  stub-tcp-upstream: yes
forward-zone:
  name: example.org
  forward-host: resolver.example.#resolver.example.
server:
  verbosity: 2
"#,
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!((c.server.port, c.server.verbosity), (5353, 2));
    let z = &c.forward_zones;
    assert_eq!(
        z.len(),
        3,
        "forward and stub zones in one list, in file order"
    );

    let root = &z[0];
    assert_eq!(root.kind, ZoneKind::Forward);
    assert_eq!(root.loc, Loc::new("t.conf", 3));
    assert_eq!((root.name.value.as_str(), root.name.loc.line), (".", 4));
    assert_eq!(
        root.addrs[0].value,
        UpstreamAddr {
            ip: "9.9.9.9".parse().unwrap(),
            port: Some(853),
            tls_name: Some("dns.quad9.net".into()),
        }
    );
    assert_eq!(
        root.addrs[1].value,
        UpstreamAddr {
            ip: "2620:fe::fe".parse().unwrap(),
            port: Some(853),
            tls_name: Some("dns.quad9.net".into()),
        }
    );
    assert_eq!(
        root.addrs[2].value,
        UpstreamAddr {
            ip: "192.0.2.1".parse().unwrap(),
            port: None,
            tls_name: None,
        }
    );
    let to_strings = |v: &[(&str, usize)]| -> Vec<(String, usize)> {
        v.iter().map(|&(a, l)| (a.to_owned(), l)).collect()
    };
    assert_eq!(
        addrs(root),
        to_strings(&[
            ("9.9.9.9@853#dns.quad9.net", 5),
            ("2620:fe::fe@853#dns.quad9.net", 6),
            ("192.0.2.1", 7),
            ("192.0.2.2#tls.example.", 8),
            ("2001:db8::53@5353", 9),
        ])
    );
    // The ports used: @PORT, else 853 with a TLS name (Unbound's rule for IP#NAME), else 53.
    let used: Vec<String> = root
        .addrs
        .iter()
        .map(|a| a.value.socket_addr().to_string())
        .collect();
    assert_eq!(
        used,
        [
            "9.9.9.9:853",
            "[2620:fe::fe]:853",
            "192.0.2.1:53",
            "192.0.2.2:853",
            "[2001:db8::53]:5353"
        ]
    );
    assert_eq!(
        root.hosts[0].value,
        UpstreamHost {
            name: "dns.example.net".into(),
            port: None,
            tls_name: None,
        }
    );
    assert_eq!(root.hosts[0].value.port_or_default(), 53);
    assert_eq!(
        root.hosts[1].value,
        UpstreamHost {
            name: "dot.example.net".into(),
            port: Some(8853),
            tls_name: Some("dot.example.net".into()),
        }
    );
    assert_eq!(root.hosts[1].loc.line, 11);
    assert_eq!(
        root.hosts[1].value.to_string(),
        "dot.example.net@8853#dot.example.net"
    );
    assert!(root.first && root.no_cache && root.tls_upstream && root.tcp_upstream);
    assert!(!root.prime, "stub-prime: is for stub zones only");

    let stub = &z[1];
    assert_eq!(stub.kind, ZoneKind::Stub);
    assert_eq!(stub.kind.clause(), "stub-zone");
    assert_eq!(
        (stub.name.value.as_str(), stub.loc.line),
        ("corp.example.", 16)
    );
    assert_eq!(addrs(stub), to_strings(&[("10.0.0.53", 18)]));
    assert_eq!(stub.hosts[0].value.name, "ns1.corp.example.");
    assert!(stub.prime && stub.first && stub.no_cache && stub.tls_upstream && stub.tcp_upstream);

    let org = &z[2];
    assert_eq!(org.kind, ZoneKind::Forward);
    assert_eq!(org.name.value, "example.org", "kept as written");
    assert!(org.addrs.is_empty());
    assert_eq!(
        org.hosts[0].value,
        UpstreamHost {
            name: "resolver.example.".into(),
            port: None,
            tls_name: Some("resolver.example.".into()),
        }
    );
    assert_eq!(org.hosts[0].value.port_or_default(), 853);
    assert!(!org.first && !org.no_cache && !org.tls_upstream && !org.tcp_upstream);
    assert_eq!(
        *org,
        ForwardZone {
            addrs: Vec::new(),
            hosts: org.hosts.clone(),
            ..ForwardZone::new(ZoneKind::Forward, org.name.clone(), org.loc.clone())
        },
        "defaults are ForwardZone::new's"
    );
}

#[test]
fn zone_aliases_and_several_directives_on_one_line() {
    let c = parse(
        "forward-zone: name: a. forward-addr: 192.0.2.1 forward-ssl-upstream: yes\n\
         stub-zone:\n  name: b.\n  stub-addr:192.0.2.2@5300\n  stub-ssl-upstream: yes\n",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let (a, b) = (&c.forward_zones[0], &c.forward_zones[1]);
    assert_eq!(a.name.value, "a.");
    assert!(
        a.tls_upstream,
        "forward-ssl-upstream: is forward-tls-upstream:"
    );
    assert_eq!(a.addrs[0].value.to_string(), "192.0.2.1");
    assert_eq!(b.addrs[0].value.port, Some(5300));
    assert!(b.tls_upstream, "stub-ssl-upstream: is stub-tls-upstream:");
    // Later values replace earlier ones inside a zone; booleans in any case.
    let c = parse(
        "forward-zone:\n name: x.\n forward-addr: ::1\n forward-first: YES\n forward-first: no\n",
    );
    assert!(!c.forward_zones[0].first);
}

#[test]
fn zone_errors_name_file_line_and_reason() {
    let cases: &[(&str, &str)] = &[
        (
            "server:\n\nforward-zone:\n  forward-addr: 192.0.2.1\nserver:\n",
            "t.conf:3: forward-zone: clause without 'name:'",
        ),
        (
            "stub-zone:\n  stub-addr: 192.0.2.1\n",
            "t.conf:1: stub-zone: clause without 'name:'",
        ),
        (
            "forward-zone:\n  name: a.\n  name: b.\n",
            "t.conf:3: second 'name:' in this forward-zone: clause (the first is at \
             t.conf:2); each forward-zone: has one name",
        ),
        (
            "stub-zone:\n  name: a.\n  stub-addr: 192.0.2.1\n  name: a.\n",
            "t.conf:4: second 'name:' in this stub-zone: clause (the first is at t.conf:2); \
             each stub-zone: has one name",
        ),
        (
            "forward-zone:\n  name:\n",
            "t.conf:2: 'name:' needs a value",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: 192.0.2.300\n",
            "t.conf:3: 'forward-addr:' '192.0.2.300': '192.0.2.300' is not an IP address \
             (write IP, IP@PORT, IP#TLS-NAME or IP@PORT#TLS-NAME; a host name goes in \
             'forward-host:')",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: dns.quad9.net@853\n",
            "t.conf:3: 'forward-addr:' 'dns.quad9.net@853': 'dns.quad9.net' is not an IP \
             address (write IP, IP@PORT, IP#TLS-NAME or IP@PORT#TLS-NAME; a host name goes in \
             'forward-host:')",
        ),
        (
            "stub-zone:\n  name: .\n  stub-addr: [2001:db8::1]@53\n",
            "t.conf:3: 'stub-addr:' '[2001:db8::1]@53': '[2001:db8::1]' is not an IP address \
             (write IP, IP@PORT, IP#TLS-NAME or IP@PORT#TLS-NAME; a host name goes in \
             'stub-host:')",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: 9.9.9.9#dns.quad9.net@853\n",
            "t.conf:3: 'forward-addr:' '9.9.9.9#dns.quad9.net@853': \
             '9.9.9.9#dns.quad9.net' is not an IP address (write IP, IP@PORT, IP#TLS-NAME or \
             IP@PORT#TLS-NAME; a host name goes in 'forward-host:')",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: 9.9.9.9@99999\n",
            "t.conf:3: 'forward-addr:' '9.9.9.9@99999': port '99999' is not a number from 1 \
             to 65535",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: 9.9.9.9@0\n",
            "t.conf:3: 'forward-addr:' '9.9.9.9@0': port '0' is not a number from 1 to 65535",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: 9.9.9.9@853x#dns.quad9.net\n",
            "t.conf:3: 'forward-addr:' '9.9.9.9@853x#dns.quad9.net': port '853x' is not a \
             number from 1 to 65535",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: 9.9.9.9@#dns.quad9.net\n",
            "t.conf:3: 'forward-addr:' '9.9.9.9@#dns.quad9.net': port '' is not a number \
             from 1 to 65535",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: 9.9.9.9@853#\n",
            "t.conf:3: 'forward-addr:' '9.9.9.9@853#': empty TLS name after '#'",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: fe80::1%eth0@53\n",
            "t.conf:3: 'forward-addr:' 'fe80::1%eth0@53': an IPv6 scope ('%eth0') is not \
             supported",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: \"\"\n",
            "t.conf:3: 'forward-addr:' '': '' is not an IP address (write IP, IP@PORT, \
             IP#TLS-NAME or IP@PORT#TLS-NAME; a host name goes in 'forward-host:')",
        ),
        (
            "forward-zone:\n  name: .\n  forward-addr: 192.0.2.1 192.0.2.2\n",
            "t.conf:3: 'forward-addr:' takes one value, found more: '192.0.2.2' (quote a \
             value that contains spaces)",
        ),
        (
            "forward-zone:\n  name: .\n  forward-host: dns.example@dns\n",
            "t.conf:3: 'forward-host:' 'dns.example@dns': port 'dns' is not a number from 1 \
             to 65535",
        ),
        (
            "stub-zone:\n  name: .\n  stub-host: @53\n",
            "t.conf:3: 'stub-host:' '@53': no host name",
        ),
        (
            "forward-zone:\n  name: .\n  forward-host: dot.example#\n",
            "t.conf:3: 'forward-host:' 'dot.example#': empty TLS name after '#'",
        ),
        (
            "forward-zone:\n  name: .\n  forward-first: maybe\n",
            "t.conf:3: 'forward-first:' must be yes or no, not 'maybe'",
        ),
        (
            "forward-zone:\n  name: .\n  forward-tls-upstream: on\n",
            "t.conf:3: 'forward-tls-upstream:' must be yes or no, not 'on'",
        ),
        (
            "stub-zone:\n  name: .\n  stub-prime: 1\n",
            "t.conf:3: 'stub-prime:' must be yes or no, not '1'",
        ),
        (
            "stub-zone:\n  name: .\n  stub-no-cache:\n",
            "t.conf:3: 'stub-no-cache:' needs a value",
        ),
        (
            "forward-zone:\n  name: .\n  forward-adr:\n",
            "t.conf:3: unknown clause 'forward-adr:' (or directive 'forward-adr:' without a \
             value)",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(&err(text), expected, "for {text:?}");
    }
    // Errors in included files name the included file.
    let dir = TempDir::new("zoneerr");
    let d = dir.0.display();
    dir.write("fwd.conf", "# upstreams\n  forward-addr: 9.9.9.9@853#\n");
    assert_eq!(
        err(&format!(
            "forward-zone:\n  name: .\n  include: {d}/fwd.conf\n"
        )),
        format!("{d}/fwd.conf:2: 'forward-addr:' '9.9.9.9@853#': empty TLS name after '#'")
    );
}

#[test]
fn zone_warnings() {
    let c = parse(
        "forward-zone:
  name: empty.example.
  forward-first: yes
  bogus: 1
  stub-addr: 192.0.2.1
  port: 53
stub-zone:
  name: stub.example.
  forward-addr: 192.0.2.1
  stub-host: ns.stub.example.
server:
  forward-addr: 192.0.2.1
  stub-prime: yes
  name: x.
auth-zone:
  name: example.
  forward-first: yes
stub-zone:
  name: also-empty.
",
    );
    assert_eq!(
        warnings(&c),
        [
            (
                1,
                "forward-zone: 'empty.example.' has no 'forward-addr:' or 'forward-host:': \
                 its queries have nowhere to go"
            ),
            (4, "unknown forward-zone: directive 'bogus', ignored"),
            (
                5,
                "'stub-addr:' is a stub-zone: directive, not a forward-zone: one; ignored (is \
                 a 'stub-zone:' line missing?)"
            ),
            (
                6,
                "'port:' is a server: directive, not a forward-zone: one; ignored (is a \
                 'server:' line missing?)"
            ),
            (
                9,
                "'forward-addr:' is a forward-zone: directive, not a stub-zone: one; ignored \
                 (is a 'forward-zone:' line missing?)"
            ),
            (
                12,
                "unknown server: directive 'forward-addr', ignored ('forward-addr:' belongs in \
                 a forward-zone: clause)"
            ),
            (
                13,
                "unknown server: directive 'stub-prime', ignored ('stub-prime:' belongs in a \
                 stub-zone: clause)"
            ),
            (
                14,
                "unknown server: directive 'name', ignored ('name:' belongs in an auth-zone: \
                 clause)"
            ),
            (
                17,
                "'forward-first:' is a forward-zone: directive, not an auth-zone: one; \
                 ignored (is a 'forward-zone:' line missing?)"
            ),
            (
                18,
                "stub-zone: 'also-empty.' has no 'stub-addr:' or 'stub-host:': its queries \
                 have nowhere to go"
            ),
        ]
    );
    let z = &c.forward_zones;
    assert_eq!(z.len(), 3, "zones without upstreams are kept");
    assert!(z[0].first && z[0].addrs.is_empty());
    assert!(
        z[1].addrs.is_empty(),
        "forward-addr: inside stub-zone: is ignored"
    );
    assert_eq!(z[1].hosts.len(), 1);
    assert_eq!(c.server.port, 53);
    // Outside any clause.
    assert_eq!(
        err("forward-addr: 192.0.2.1\n"),
        "t.conf:1: 'forward-addr:' is outside any clause (is a 'server:' line missing?)"
    );
}

#[test]
fn includes_inside_a_forward_zone() {
    let dir = TempDir::new("fwdinc");
    let d = dir.0.display();
    dir.write(
        "upstreams.conf",
        "# Quad9 over TLS\n  forward-addr: 9.9.9.9@853#dns.quad9.net\n  \
         forward-addr: 149.112.112.112@853#dns.quad9.net\n",
    );
    dir.write("tls.conf", "  forward-tls-upstream: yes\n");
    dir.write(
        "zones/a.conf",
        "forward-zone:\n  name: a.\n  forward-addr: 192.0.2.1\n",
    );
    dir.write(
        "zones/b.conf",
        "stub-zone:\n  name: b.\n  stub-addr: 192.0.2.2\n",
    );
    let main = dir.write(
        "main.conf",
        &format!(
            "server:\n  port: 5300\nforward-zone:\n  name: \".\"\n  include: {d}/upstreams.conf\n  \
             include: \"{d}/tls.conf\"\n  forward-first: yes\ninclude-toplevel: {d}/zones/*.conf\n\
             server:\n  prefetch: yes\n"
        ),
    );
    let c = parse_file(&main).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let z = &c.forward_zones;
    assert_eq!(z.len(), 3);
    let root = &z[0];
    assert_eq!(root.name.value, ".");
    let at: Vec<(String, PathBuf, usize)> = root
        .addrs
        .iter()
        .map(|a| (a.value.to_string(), a.loc.file.to_path_buf(), a.loc.line))
        .collect();
    assert_eq!(
        at,
        [
            (
                "9.9.9.9@853#dns.quad9.net".to_owned(),
                dir.path("upstreams.conf"),
                2
            ),
            (
                "149.112.112.112@853#dns.quad9.net".to_owned(),
                dir.path("upstreams.conf"),
                3
            ),
        ],
        "an include inside a forward-zone: continues it"
    );
    assert!(root.tls_upstream && root.first);
    assert_eq!(root.loc, Loc::new(&main, 3));
    assert_eq!(
        (z[1].kind, z[1].name.value.as_str()),
        (ZoneKind::Forward, "a.")
    );
    assert_eq!(
        (z[2].kind, z[2].name.value.as_str()),
        (ZoneKind::Stub, "b.")
    );
    assert_eq!(z[2].loc, Loc::new(dir.path("zones/b.conf"), 1));
    assert_eq!(c.server.port, 5300);
    assert!(c.server.prefetch);
    // include-toplevel: ends the zone: a directive after it needs a clause line again.
    assert_eq!(
        err(&format!(
            "forward-zone:\n  name: a.\ninclude-toplevel: {d}/tls.conf\n"
        )),
        format!(
            "{d}/tls.conf:1: 'forward-tls-upstream:' is outside any clause (is a 'server:' \
             line missing?)"
        )
    );
    // A zone without name: in an included file is reported where it opens.
    dir.write(
        "noname.conf",
        "\nforward-zone:\n  forward-addr: 192.0.2.1\n",
    );
    assert_eq!(
        err(&format!("server:\ninclude: {d}/noname.conf\nserver:\n")),
        format!("{d}/noname.conf:2: forward-zone: clause without 'name:'")
    );
}

/// The directives of the brief for the caching forwarder: none of them may warn.
const FORWARDER_DIRECTIVES: &[&str] = &[
    "forward-zone",
    "stub-zone",
    "name",
    "forward-addr",
    "forward-host",
    "forward-first",
    "forward-no-cache",
    "forward-tls-upstream",
    "forward-ssl-upstream",
    "forward-tcp-upstream",
    "stub-addr",
    "stub-host",
    "stub-first",
    "stub-no-cache",
    "stub-tls-upstream",
    "stub-ssl-upstream",
    "stub-tcp-upstream",
    "stub-prime",
    "tls-cert-bundle",
    "tls-system-cert",
    "tls-win-cert",
    "msg-cache-size",
    "rrset-cache-size",
    "msg-cache-slabs",
    "rrset-cache-slabs",
    "cache-min-ttl",
    "cache-max-ttl",
    "cache-max-negative-ttl",
    "prefetch",
    "serve-expired",
    "serve-expired-ttl",
    "serve-expired-ttl-reset",
    "serve-expired-reply-ttl",
    "serve-expired-client-timeout",
    "outgoing-range",
    "outgoing-port-permit",
    "outgoing-port-avoid",
    "use-caps-for-id",
    "caps-whitelist",
    "caps-exempt",
    "do-not-query-localhost",
    "unwanted-reply-threshold",
    "tcp-upstream",
    "tls-upstream",
    "ssl-upstream",
    "infra-host-ttl",
    "num-queries-per-thread",
    "jostle-timeout",
    "ede",
    "ede-serve-expired",
    "edns-buffer-size",
];

/// Fails if a warning is about one of [`FORWARDER_DIRECTIVES`].
fn assert_no_forwarder_warning(c: &Config) {
    for w in &c.warnings {
        for d in FORWARDER_DIRECTIVES {
            assert!(
                !w.msg.contains(&format!("'{d}'")) && !w.msg.contains(&format!("'{d}:'")),
                "warning about {d}: {w}"
            );
        }
    }
}

/// Pi-hole's guide to Unbound as its recursive upstream (docs.pi-hole.net, "unbound"),
/// with the usual additions of its users (a cache floor, serving stale answers).
const PIHOLE_CONF: &str = r#"server:
    # If no logfile is specified, syslog is used
    # logfile: "/var/log/unbound/unbound.log"
    verbosity: 0

    interface: 127.0.0.1
    port: 5335
    do-ip4: yes
    do-udp: yes
    do-tcp: yes

    # May be set to no if you don't have IPv6 connectivity
    do-ip6: yes

    # You want to leave this to no unless you have *native* IPv6.
    prefer-ip6: no

    # Use this only when you downloaded the list of primary root servers!
    #root-hints: "/var/lib/unbound/root.hints"

    # Trust glue only if it is within the server's authority
    harden-glue: yes

    # Require DNSSEC data for trust-anchored zones
    harden-dnssec-stripped: yes

    # Don't use Capitalization randomization as it known to cause DNSSEC issues sometimes
    use-caps-for-id: no

    # Reduce EDNS reassembly buffer size (DNS Flag Day 2020).
    edns-buffer-size: 1232

    # Perform prefetching of close to expired message cache entries
    prefetch: yes

    # One thread should be sufficient
    num-threads: 1

    # Ensure kernel buffer is large enough to not lose messages in traffic spikes
    so-rcvbuf: 1m

    # Ensure privacy of local IP ranges
    private-address: 192.168.0.0/16
    private-address: 169.254.0.0/16
    private-address: 172.16.0.0/12
    private-address: 10.0.0.0/8
    private-address: fd00::/8
    private-address: fe80::/10

    # Users' additions
    cache-min-ttl: 300
    serve-expired: yes
    serve-expired-ttl: 86400
    serve-expired-client-timeout: 1800
    msg-cache-size: 8m
    rrset-cache-size: 16m
"#;

#[test]
fn realistic_pihole_config() {
    let c = parse_str(PIHOLE_CONF, "pi-hole.conf").unwrap();
    assert_no_forwarder_warning(&c);
    let s = &c.server;
    assert_eq!(s.port, 5335);
    assert_eq!(s.interfaces[0].value, "127.0.0.1");
    assert!(!s.use_caps_for_id && s.prefetch && s.serve_expired);
    assert_eq!(s.edns_buffer_size, 1232);
    assert_eq!(s.so_rcvbuf, Some(1 << 20));
    assert_eq!((s.cache_min_ttl, s.serve_expired_ttl), (300, 86_400));
    assert_eq!(s.serve_expired_client_timeout_ms, 1800);
    assert_eq!((s.msg_cache_size, s.rrset_cache_size), (8 << 20, 16 << 20));
    assert!(
        c.forward_zones.is_empty(),
        "Pi-hole's guide recurses from the root"
    );
    // What is still warned about: recursion and DNSSEC hardening, private addresses.
    let warned: Vec<usize> = c.warnings.iter().map(|w| w.loc.line).collect();
    assert_eq!(warned, [16, 22, 25, 43, 44, 45, 46, 47, 48]);
    assert_eq!(
        c.warnings[0].to_string(),
        "pi-hole.conf:16: 'prefer-ip6' is not supported yet and is ignored"
    );
    assert_eq!(
        c.warnings[3].msg,
        "'private-address' is not supported yet and is ignored"
    );
}

/// OPNsense's Unbound with "DNS over TLS" forwarding, as its generator writes it: the main
/// file with the cache and local data, `dot.conf` included at the end.
const OPNSENSE_CONF: &str = r#"##########################
# Unbound Configuration
##########################

##
# Server configuration
##
server:
chroot: /var/unbound
username: unbound
directory: /var/unbound
pidfile: /var/run/unbound.pid
use-syslog: yes
port: 53
verbosity: 1
hide-identity: yes
hide-version: yes
harden-glue: yes
do-ip4: yes
do-ip6: yes
do-udp: yes
do-tcp: yes
so-reuseport: yes
so-sndbuf: 4m
so-rcvbuf: 4m
edns-buffer-size: 1232
num-threads: 4
msg-cache-size: 4m
rrset-cache-size: 8m
msg-cache-slabs: 4
rrset-cache-slabs: 4
outgoing-range: 8192
num-queries-per-thread: 4096
jostle-timeout: 200
infra-host-ttl: 900
cache-max-ttl: 86400
cache-min-ttl: 60
cache-max-negative-ttl: 3600
prefetch: yes
prefetch-key: yes
serve-expired: yes
serve-expired-ttl: 0
serve-expired-ttl-reset: no
serve-expired-reply-ttl: 30
serve-expired-client-timeout: 0
use-caps-for-id: no
do-not-query-localhost: no
unwanted-reply-threshold: 0
ede: yes
ede-serve-expired: yes
outgoing-port-avoid: 0-1023
interface: 0.0.0.0
interface: ::

access-control: 127.0.0.0/8 allow
access-control: 192.168.1.0/24 allow
access-control: ::1 allow
access-control: 0.0.0.0/0 refuse

# Host overrides and DHCP registrations
local-zone: "home.arpa" transparent
local-data-ptr: "192.168.1.1 opnsense.home.arpa"
local-data: "opnsense.home.arpa A 192.168.1.1"
local-data: "nas.home.arpa A 192.168.1.10"
local-zone: "ads.example" always_nxdomain

include: DOT_CONF
"#;

const OPNSENSE_DOT_CONF: &str = r#"# DNS over TLS forwarding
server:
tls-cert-bundle: /etc/ssl/certs/ca-certificates.crt
forward-zone:
    name: "."
    forward-tls-upstream: yes
    forward-addr: 9.9.9.9@853#dns.quad9.net
    forward-addr: 149.112.112.112@853#dns.quad9.net
    forward-addr: 2620:fe::fe@853#dns.quad9.net
    forward-addr: 2620:fe::9@853#dns.quad9.net
forward-zone:
    name: "home.arpa"
    forward-addr: 192.168.1.53
    forward-first: no
    forward-no-cache: yes
"#;

#[test]
fn realistic_opnsense_dot_config() {
    let dir = TempDir::new("opnsense");
    let dot = dir.write("dot.conf", OPNSENSE_DOT_CONF);
    let main = dir.write(
        "unbound.conf",
        &OPNSENSE_CONF.replace("DOT_CONF", &dot.display().to_string()),
    );
    let c = parse_file(&main).unwrap();
    assert_no_forwarder_warning(&c);
    // Only these two are still warned about.
    assert_eq!(
        warnings(&c),
        [
            (18, "'harden-glue' is not supported yet and is ignored"),
            (40, "'prefetch-key' is not supported yet and is ignored"),
        ]
    );
    let s = &c.server;
    assert_eq!(
        s.tls_cert_bundle.as_ref().unwrap().value,
        "/etc/ssl/certs/ca-certificates.crt"
    );
    assert_eq!(s.tls_cert_bundle.as_ref().unwrap().loc, Loc::new(&dot, 3));
    assert!(s.prefetch && s.serve_expired && s.ede && s.ede_serve_expired);
    assert_eq!(s.cache_min_ttl, 60);
    assert_eq!((s.msg_cache_size, s.rrset_cache_size), (4 << 20, 8 << 20));
    assert_eq!((s.outgoing_range, s.num_queries_per_thread), (8192, 4096));
    assert!(!s.do_not_query_localhost);
    assert_eq!(s.outgoing_port_rules.len(), 1);
    assert_eq!(s.local_zones.len(), 2);
    assert_eq!(s.local_data.len(), 2);
    assert_eq!(s.local_data_ptr[0].value, "192.168.1.1 opnsense.home.arpa");
    assert_eq!(s.access_control.len(), 4);

    let z = &c.forward_zones;
    assert_eq!(z.len(), 2);
    assert_eq!(z[0].name.value, ".");
    assert!(z[0].tls_upstream && !z[0].first && !z[0].no_cache);
    let quad9: Vec<String> = z[0]
        .addrs
        .iter()
        .map(|a| a.value.socket_addr().to_string())
        .collect();
    assert_eq!(
        quad9,
        [
            "9.9.9.9:853",
            "149.112.112.112:853",
            "[2620:fe::fe]:853",
            "[2620:fe::9]:853"
        ]
    );
    assert!(
        z[0].addrs
            .iter()
            .all(|a| a.value.tls_name.as_deref() == Some("dns.quad9.net"))
    );
    assert_eq!(z[1].name.value, "home.arpa");
    assert!(z[1].no_cache && !z[1].tls_upstream);
    assert_eq!(
        z[1].addrs[0].value.socket_addr().to_string(),
        "192.168.1.53:53"
    );
    assert_eq!(c.files, [main, dot]);
}

#[test]
fn ha_clause_directives_defaults_and_errors() {
    assert_eq!(parse("server:\n").ha, crate::Ha::default());
    assert_eq!(crate::Ha::default().lease_max_ms, 1000);
    let c = parse(
        "ha:
    address: 198.18.53.53
ha:
    address: fd00:53::53@5353
    lease-max: 400
",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(
        lines(&c.ha.addresses),
        [("198.18.53.53", 2), ("fd00:53::53@5353", 4)]
    );
    assert_eq!(c.ha.lease_max_ms, 400);
    for (text, want) in [
        (
            "ha:\n  lease-max: 5\n",
            "t.conf:2: 'lease-max:' value 5 is out of range (10-60000)",
        ),
        ("ha:\n  address:\n", "t.conf:2: 'address:' needs a value"),
    ] {
        let e = parse_str(text, "t.conf").unwrap_err();
        assert_eq!(e.to_string(), want, "{text:?}");
    }
    // A server: directive in ha: warns like any misplaced directive.
    let c = parse("ha:\n  port: 53\n");
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(c.warnings[0].msg.contains("server:"), "{:?}", c.warnings);
}

#[test]
fn tsig_keys_and_transfer_directives() {
    let c = parse(
        "tsig-key:
  name: xfr.example.
  algorithm: HMAC-SHA256.
  secret: file:/etc/skua/xfr.key
tsig-key:
  name: other
  secret: env:OTHER_KEY
auth-zone:
  name: example.
  zonefile: example.zone
  provide-xfr: 198.18.0.0/15 xfr.example.
  provide-xfr: 198.18.0.66 BLOCKED
  notify: 198.18.0.2@5300 xfr.example.
  notify: fd00::2 NOKEY
  ixfr-number: 7
  ixfr-size: 64k
",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.tsig_keys.len(), 2);
    let k = &c.tsig_keys[0];
    assert_eq!(
        (
            k.name.value.as_str(),
            k.algorithm.as_str(),
            k.secret.value.as_str()
        ),
        ("xfr.example.", "hmac-sha256", "file:/etc/skua/xfr.key")
    );
    assert_eq!((k.loc.line, k.name.loc.line, k.secret.loc.line), (1, 2, 4));
    assert_eq!(c.tsig_keys[1].algorithm, "hmac-sha256", "the default");
    let z = &c.auth_zones[0];
    let pairs = |v: &[crate::Located<(String, String)>]| {
        v.iter()
            .map(|l| (l.value.0.clone(), l.value.1.clone(), l.loc.line))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        pairs(&z.provide_xfr),
        [
            ("198.18.0.0/15".into(), "xfr.example.".into(), 11),
            ("198.18.0.66".into(), "BLOCKED".into(), 12)
        ]
    );
    assert_eq!(
        pairs(&z.notify),
        [
            ("198.18.0.2@5300".into(), "xfr.example.".into(), 13),
            ("fd00::2".into(), "NOKEY".into(), 14)
        ]
    );
    assert_eq!((z.ixfr_number, z.ixfr_size), (7, 64 * 1024));
    // Defaults.
    let c = parse("auth-zone:\n  name: a.\n");
    assert_eq!(
        (c.auth_zones[0].ixfr_number, c.auth_zones[0].ixfr_size),
        (100, 1 << 20)
    );
    assert!(c.auth_zones[0].provide_xfr.is_empty());
}

#[test]
fn secondary_directives() {
    let c = parse(
        "auth-zone:
  name: example.
  zonefile: example.zone
  primary: 198.18.0.1
  primary: 198.18.0.2@5300 xfr.example.
  request-xfr: fd00::1 NOKEY
  master: 198.18.0.3 zonefile: other.zone
  allow-notify: 198.18.0.0/24
  allow-notify: fd00::/8 xfr.example.
  size-limit-xfr: 10m
  xfr-max-records: 5000
",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let z = &c.auth_zones[0];
    let pairs = |v: &[crate::Located<(String, String)>]| {
        v.iter()
            .map(|l| (l.value.0.clone(), l.value.1.clone(), l.loc.line))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        pairs(&z.primaries),
        [
            ("198.18.0.1".into(), "NOKEY".into(), 4),
            ("198.18.0.2@5300".into(), "xfr.example.".into(), 5),
            ("fd00::1".into(), "NOKEY".into(), 6),
            ("198.18.0.3".into(), "NOKEY".into(), 7),
        ]
    );
    assert_eq!(
        z.zonefile.as_ref().map(|z| z.value.as_str()),
        Some("other.zone"),
        "a directive after an optional value on the same line"
    );
    assert_eq!(
        pairs(&z.allow_notify),
        [
            ("198.18.0.0/24".into(), "NOKEY".into(), 8),
            ("fd00::/8".into(), "xfr.example.".into(), 9),
        ]
    );
    assert_eq!((z.size_limit_xfr, z.xfr_max_records), (10 << 20, 5000));
    let c = parse("auth-zone:\n  name: a.\n");
    let z = &c.auth_zones[0];
    assert_eq!(
        (z.size_limit_xfr, z.xfr_max_records),
        (
            crate::DEFAULT_SIZE_LIMIT_XFR,
            crate::DEFAULT_XFR_MAX_RECORDS
        )
    );
    assert!(z.primaries.is_empty() && z.allow_notify.is_empty());
    for (text, want) in [
        (
            "auth-zone:\n  name: a.\n  request-xfr: 198.18.0.1\n",
            "t.conf:3: 'request-xfr:' needs 2 values, found 1",
        ),
        (
            "auth-zone:\n  name: a.\n  primary: 198.18.0.1 k. extra\n",
            "t.conf:3: 'primary:' takes exactly 2 values, found more: 'extra' (quote a value that contains spaces)",
        ),
        (
            "auth-zone:\n  name: a.\n  size-limit-xfr: 100\n",
            "t.conf:3: 'size-limit-xfr:' must be at least 1k",
        ),
        (
            "auth-zone:\n  name: a.\n  xfr-max-records: 0\n",
            "t.conf:3: 'xfr-max-records:' value 0 is out of range (1-1000000000)",
        ),
    ] {
        assert_eq!(err(text), want, "{text}");
    }
}

#[test]
fn tsig_key_errors_name_the_line_and_never_repeat_a_secret() {
    let e = err("tsig-key:\n  name: k.\n  secret: c2VjcmV0c2VjcmV0\n");
    assert_eq!(
        e,
        "t.conf:3: 'secret:' must be file:PATH or env:VAR (the secret itself is never written in the configuration)"
    );
    assert!(!e.contains("c2VjcmV0"));
    assert_eq!(
        err("tsig-key:\n  secret: env:K\n"),
        "t.conf:1: tsig-key: clause without 'name:'"
    );
    assert_eq!(
        err("tsig-key:\n  name: k.\nserver:\n"),
        "t.conf:1: tsig-key: clause without 'secret:' (file:PATH or env:VAR)"
    );
    assert_eq!(
        err("tsig-key:\n  name: k.\n  algorithm: hmac-md5\n  secret: env:K\n"),
        "t.conf:3: 'algorithm:' 'hmac-md5' is not implemented (hmac-sha256 is)"
    );
    assert_eq!(
        err("tsig-key:\n  name: K\n  secret: env:A\ntsig-key:\n  name: k.\n  secret: env:B\n"),
        "t.conf:5: tsig-key 'k.' is defined twice (first at t.conf:2)"
    );
    assert_eq!(
        err("tsig-key:\n  name: a.\n  name: b.\n"),
        "t.conf:3: second 'name:' in this tsig-key: clause (the first is at t.conf:2)"
    );
    assert_eq!(
        err("auth-zone:\n  name: a.\n  provide-xfr: 198.18.0.1\n"),
        "t.conf:3: 'provide-xfr:' needs 2 values, found 1"
    );
    assert_eq!(
        err("auth-zone:\n  name: a.\n  ixfr-number: 10001\n"),
        "t.conf:3: 'ixfr-number:' value 10001 is out of range (0-10000)"
    );
    // A directive of another clause: a warning with the hint.
    let c = parse("tsig-key:\n  name: k.\n  secret: env:K\n  zonefile: x\n");
    assert_eq!(
        warnings(&c),
        [(
            4,
            "'zonefile:' is an auth-zone: directive, not a tsig-key: one; ignored (is an 'auth-zone:' line missing?)"
        )]
    );
}

#[test]
fn sync_clause_directives_defaults_and_errors() {
    assert_eq!(parse("server:\n").sync, crate::Sync::default());
    assert_eq!(crate::Sync::default().wait_s, 20);
    let c = parse(
        "sync:
    from: https://[fd00::1]:8953
    token-file: /etc/skua/sync.token
sync:
    from: http://peer.example:8953
    shared-config: shared.conf
    tls-ca: /etc/skua/ca.pem
    wait: 5
",
    );
    // A plain-HTTP source off the host is a warning (token and configuration in clear).
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].loc.line, 5);
    assert!(c.warnings[0].msg.contains("in clear"), "{:?}", c.warnings);
    assert!(
        parse("sync:\n  from: http://127.0.0.1:8953\n")
            .warnings
            .is_empty()
    );
    assert_eq!(
        lines(&c.sync.from),
        [
            ("https://[fd00::1]:8953", 2),
            ("http://peer.example:8953", 5)
        ]
    );
    assert_eq!(c.sync.token_file.unwrap().value, "/etc/skua/sync.token");
    assert_eq!(c.sync.shared_config.unwrap().value, "shared.conf");
    assert_eq!(c.sync.tls_ca.unwrap().value, "/etc/skua/ca.pem");
    assert_eq!(c.sync.wait_s, 5);
    for (text, want) in [
        (
            "sync:\n  wait: 30\n",
            "t.conf:2: 'wait:' value 30 is out of range (1-25)",
        ),
        (
            "sync:\n  from: ftp://x:1\n",
            "t.conf:2: 'ftp://x:1': a sync source is http://HOST:PORT or https://HOST:PORT",
        ),
        (
            "sync:\n  from: http://x:1/api\n",
            "t.conf:2: 'http://x:1/api': only a scheme, a host and a port (no path, user or query)",
        ),
        (
            "sync:\n  from: http://x:99999\n",
            "t.conf:2: 'http://x:99999': bad port '99999'",
        ),
        ("sync:\n  from:\n", "t.conf:2: 'from:' needs a value"),
    ] {
        let e = parse_str(text, "t.conf").unwrap_err();
        assert_eq!(e.to_string(), want, "{text:?}");
    }
    let u = crate::SyncUrl::parse("https://[fd00::1]").unwrap();
    assert_eq!((u.tls, u.host.as_str(), u.port), (true, "fd00::1", 443));
    assert_eq!(u.to_string(), "https://[fd00::1]:443");
    let u = crate::SyncUrl::parse("http://198.18.0.1:8953/").unwrap();
    assert_eq!(u.to_string(), "http://198.18.0.1:8953");
    // A server: directive in sync: warns like any misplaced directive.
    let c = parse("sync:\n  port: 53\n");
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
}

#[test]
fn parse_file_with_swaps_one_file_and_returns_the_texts_read() {
    let d = TempDir::new("swap");
    let shared = d.write(
        "shared.conf",
        "server:\n  local-data: \"a.example. A 198.18.0.1\"\n",
    );
    let main = d.write("main.conf", "server:\n  port: 5353\ninclude: shared.conf\n");
    let canon = fs::canonicalize(&shared).unwrap();
    let text_of = |texts: &[(PathBuf, String)]| {
        texts
            .iter()
            .find(|(p, _)| *p == canon)
            .map(|(_, t)| t.clone())
    };
    let (c, texts) = crate::parse_file_with(&main, None).unwrap();
    assert_eq!(c.server.local_data.len(), 1);
    assert_eq!(texts.len(), 2);
    assert_eq!(
        text_of(&texts).as_deref(),
        Some("server:\n  local-data: \"a.example. A 198.18.0.1\"\n")
    );
    // The swapped text is parsed (and returned) instead of the file's; the file is untouched.
    let new = "server:\n  local-data: \"b.example. A 198.18.0.2\"\n  local-data: \"c.example. A 198.18.0.3\"\n";
    let (c, texts) = crate::parse_file_with(&main, Some((&shared, new))).unwrap();
    assert_eq!(c.server.local_data.len(), 2);
    assert_eq!(text_of(&texts).as_deref(), Some(new));
    assert!(fs::read_to_string(&shared).unwrap().contains("a.example"));
    // Errors in the swapped text name the shared file and line.
    let e = crate::parse_file_with(&main, Some((&shared, "server:\n  port: x\n")))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(&format!("{}:2:", shared.display())), "{e}");
}

#[test]
fn text_from_elsewhere_reads_no_file() {
    for text in [
        "include: /etc/passwd\n",
        "server: include: /etc/passwd\n",
        "\u{feff}include: /etc/passwd\n",
        "server:\n  local-zone: \"x.\" static include-toplevel: /etc/passwd\n",
    ] {
        let e = crate::parse_str_without_includes(text, "shared.conf")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not allowed here"), "{text:?}: {e}");
        assert!(!e.contains("root:"), "{e}");
    }
    assert!(crate::parse_str_without_includes("server:\n  port: 53\n", "s").is_ok());
}

#[test]
fn a_listing_names_every_clause_and_directive_as_written() {
    let text = "server: port: 53\n  ip-address: 192.0.2.1\n  no-such-thing: 1\n\
                view:\n  name: v\n\
                acme:\n  account-file: /etc/passwd\n\
                auth-zone:\n  name: x.\n  master: 192.0.2.9\n";
    let (_, l) = crate::parse_str_listing(text, "s.conf").unwrap();
    let got: Vec<String> = l
        .iter()
        .map(|w| match &w.directive {
            Some(d) => format!("{} {}:{d}", w.loc, w.clause),
            None => format!("{} {}:", w.loc, w.clause),
        })
        .collect();
    assert_eq!(
        got,
        [
            "s.conf:1 server:",
            "s.conf:1 server:port",
            // Aliases under the name written; unknown directives and unsupported clauses
            // too (the configuration only warns about them).
            "s.conf:2 server:ip-address",
            "s.conf:3 server:no-such-thing",
            "s.conf:4 view:",
            "s.conf:5 view:name",
            "s.conf:6 acme:",
            "s.conf:7 acme:account-file",
            "s.conf:8 auth-zone:",
            "s.conf:9 auth-zone:name",
            "s.conf:10 auth-zone:master",
        ]
    );
    // No file is read, as with parse_str_without_includes.
    assert!(crate::parse_str_listing("server: include: /etc/passwd\n", "s").is_err());
}

#[test]
fn dns_over_tls_directives() {
    let c = parse("server:\n");
    assert_eq!(
        (
            c.server.tls_port,
            c.server.pad_responses,
            c.server.pad_responses_block_size
        ),
        (853, true, 468)
    );
    assert!(c.server.tls_service_key.is_none() && c.server.tls_service_pem.is_none());
    let c = parse(
        "server:\n  ssl-service-key: k.pem\n  tls-service-pem: c.pem\n  ssl-port: 8853\n  \
         pad-responses: no\n  pad-responses-block-size: 128\n",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.server.tls_service_key.unwrap().value, "k.pem");
    assert_eq!(c.server.tls_service_pem.unwrap().value, "c.pem");
    assert_eq!(c.server.tls_port, 8853);
    assert!(!c.server.pad_responses);
    assert_eq!(c.server.pad_responses_block_size, 128);
    assert_eq!(
        err("server:\n  tls-port: 0\n"),
        "t.conf:2: 'tls-port:' value 0 is out of range (1-65535)"
    );
}

#[test]
fn dns_over_https_and_connection_limit_directives() {
    let c = parse("server:\n");
    let s = &c.server;
    assert_eq!(
        (s.https_port, s.http_endpoint.as_str(), s.http_max_streams),
        (443, "/dns-query", 100)
    );
    assert_eq!(
        (s.http_query_buffer_size, s.http_response_buffer_size),
        (4 << 20, 4 << 20)
    );
    assert!(!s.http_notls_downstream);
    assert_eq!(s.quic_port, 853);
    assert!(s.tcp_connection_limits.is_empty());
    let c = parse(
        "server:\n  https-port: 8443\n  http-endpoint: \"/q\"\n  http-max-streams: 8\n  \
         http-query-buffer-size: 64k\n  http-response-buffer-size: 1m\n  \
         http-notls-downstream: yes\n  quic-port: 8853\n  \
         tcp-connection-limit: 192.0.2.0/24 10\n  tcp-connection-limit: 2001:db8::1 0\n",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let s = &c.server;
    assert_eq!(
        (s.https_port, s.http_endpoint.as_str(), s.http_max_streams),
        (8443, "/q", 8)
    );
    assert_eq!(
        (s.http_query_buffer_size, s.http_response_buffer_size),
        (64 << 10, 1 << 20)
    );
    assert!(s.http_notls_downstream);
    assert_eq!(s.quic_port, 8853);
    let limits: Vec<_> = s
        .tcp_connection_limits
        .iter()
        .map(|l| (l.value.netblock.as_str(), l.value.limit, l.loc.line))
        .collect();
    assert_eq!(limits, [("192.0.2.0/24", 10, 9), ("2001:db8::1", 0, 10)]);
    assert_eq!(
        err("server:\n  http-endpoint: dns-query\n"),
        "t.conf:2: 'http-endpoint:' must be a path like /dns-query (visible ASCII, no '?' or '#', at most 255 bytes), not 'dns-query'"
    );
    assert!(err("server:\n  http-endpoint: \"/a?b\"\n").starts_with("t.conf:2:"));
    assert_eq!(
        err("server:\n  http-max-streams: 0\n"),
        "t.conf:2: 'http-max-streams:' value 0 is out of range (1-4294967295)"
    );
    assert!(err("server:\n  tcp-connection-limit: 10.0.0.0/8\n").starts_with("t.conf:2:"));
    assert!(err("server:\n  tcp-connection-limit: 10.0.0.0/8 many\n").starts_with("t.conf:2:"));
    // The per-source default: 100 unless set; 0 turns it off.
    assert_eq!(s.tcp_connection_limit_per_source, 100);
    let c = parse("server:\n  tcp-connection-limit-per-source: 0\n");
    assert_eq!(c.server.tcp_connection_limit_per_source, 0);
    let c = parse("server:\n  tcp-connection-limit-per-source: 250\n");
    assert_eq!(c.server.tcp_connection_limit_per_source, 250);
    assert!(err("server:\n  tcp-connection-limit-per-source: -1\n").starts_with("t.conf:2:"));
}

#[test]
fn acme_clause() {
    let c = parse(
        "acme:\n  directory: https://acme.example/dir\n  contact: mailto:a@example.net\n  \
         name: dns.example.net\n  name: doh.example.net.\n  challenge: DNS-01\n  \
         http-01-interface: 127.0.0.1@8080\n  ca-bundle: ca.pem\n  account-file: acct.json\n",
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let a = &c.acme;
    assert_eq!(
        a.directory.as_ref().unwrap().value,
        "https://acme.example/dir"
    );
    assert_eq!(a.contacts.len(), 1);
    let names: Vec<_> = a.names.iter().map(|n| n.value.as_str()).collect();
    assert_eq!(names, ["dns.example.net", "doh.example.net."]);
    assert_eq!(a.challenge, crate::AcmeChallenge::Dns01);
    assert_eq!(a.http_interface.as_ref().unwrap().value, "127.0.0.1@8080");
    assert_eq!(
        parse("acme:\n  challenge: tls-alpn-01\n").acme.challenge,
        crate::AcmeChallenge::TlsAlpn01
    );
    assert_eq!(parse("server:\n").acme, crate::Acme::default());
    assert_eq!(
        err("acme:\n  directory: http://acme.example/dir\n"),
        "t.conf:2: acme: 'directory:' must be an https:// URL, not 'http://acme.example/dir'"
    );
    assert!(err("acme:\n  challenge: dns-02\n").starts_with("t.conf:2: acme: 'challenge:'"));
    assert!(err("acme:\n  name: bad_name.example\n").starts_with("t.conf:2: acme: 'name:'"));
    // profile: (draft-ietf-acme-profiles): one name, kept as written with its line.
    let a = parse("acme:\n  directory: https://acme.example/dir\n  profile: shortlived\n").acme;
    let p = a.profile.unwrap();
    assert_eq!(p.value, "shortlived");
    assert_eq!(p.loc.to_string(), "t.conf:3");
    assert_eq!(parse("acme:\n  name: a.example\n").acme.profile, None);
    assert_eq!(
        err("acme:\n  name: a.example\n  profile: \"\"\n"),
        "t.conf:3: acme: 'profile:' must be a profile name the ACME server lists, like shortlived (1 to 64 printable characters), not ''"
    );
    assert!(
        err(&format!("acme:\n  profile: {}\n", "p".repeat(65)))
            .starts_with("t.conf:2: acme: 'profile:' must be")
    );
    assert!(err("acme:\n  profile: short lived\n").starts_with("t.conf:2:"));
    // A server: directive in acme: is a warning, as in every skuad clause.
    let w = parse("acme:\n  tls-port: 853\n").warnings;
    assert!(w[0].msg.contains("not an acme: one"), "{w:?}");
}
