//! Tests of the whole reader through the public API.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Config, Error, Loc, Server, parse_file, parse_str};

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
    assert!(s.so_reuseport);
    assert_eq!((s.so_rcvbuf, s.so_sndbuf), (None, None));
    assert!(s.access_control.is_empty() && s.local_zones.is_empty());
    assert!(s.local_data.is_empty() && s.local_data_ptr.is_empty());
    assert_eq!((s.identity.as_deref(), s.version.as_deref()), (None, None));
    assert!(!s.hide_identity && !s.hide_version);
    assert_eq!(s.verbosity, 1);
    assert_eq!(s.edns_buffer_size, 1232);
    assert_eq!(s.tcp_idle_timeout_ms, 30_000);
    assert_eq!(s.incoming_num_tcp, 10);
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
    assert!(!s.so_reuseport);
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
    assert_eq!(zone.primaries[0].value, "192.0.2.1@853#tls.example.org.");
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
  prefetch: yes
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
            (2, "'prefetch' is not supported yet and is ignored"),
            (4, "unknown directive 'frobnicate', ignored"),
            (
                5,
                "unknown server: directive 'zonefile', ignored ('zonefile:' belongs in an \
                 auth-zone: clause)"
            ),
            (
                6,
                "clause 'forward-zone:' is not supported yet; its 3 directives are ignored"
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
                17,
                "'allow-notify' in auth-zone: is not supported yet and is ignored"
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
    assert!(
        c.warnings
            .iter()
            .all(|w| &*w.loc.file == Path::new("t.conf"))
    );
    assert_eq!(
        c.warnings[0].to_string(),
        "t.conf:2: 'prefetch' is not supported yet and is ignored"
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
    let primaries: Vec<(&str, usize)> = a
        .primaries
        .iter()
        .map(|p| (p.value.as_str(), p.loc.line))
        .collect();
    assert_eq!(
        primaries,
        [("192.0.2.53", 9), ("2001:db8::53@5353#tls.example.", 10)]
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
        "  local-zone: a. static\n  prefetch: yes\n",
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
        format!("{d}/conf.d/a.conf:2: 'prefetch' is not supported yet and is ignored")
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
        "fwd.conf",
        "  forward-addr: 192.0.2.1\n  forward-first: yes\n",
    );
    let c = parse(&format!(
        "forward-zone:\n  name: example.\n  include: {d}/fwd.conf\nserver:\n  port: 9\n"
    ));
    assert_eq!(
        warnings(&c),
        [(
            1,
            "clause 'forward-zone:' is not supported yet; its 3 directives are ignored"
        )]
    );
    assert_eq!(c.server.port, 9);
}
