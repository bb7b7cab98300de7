//! `skuactl`'s API commands against a real `skuad` on loopback: every command, human and
//! `--json` output, the changes checked with DNS queries to skuad, and the exit codes
//! (1 refused, 2 usage, 3 unreachable, 4 authentication/authorization).
//!
//! skuactl does not depend on skuad, so the skuad binary is found next to this test's
//! target directory (`SKUAD_BIN` overrides), and built with `cargo build -p skuad` when it
//! is missing.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

const SKUACTL: &str = env!("CARGO_BIN_EXE_skuactl");
const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

const TOKENS: [(&str, &str); 4] = [
    ("read", "read-token-0123456789"),
    ("dns", "dns-token-01234567890"),
    ("operator", "operator-token-012345"),
    ("admin", "admin-token-012345678"),
];

fn tok(role: &str) -> &'static str {
    TOKENS.iter().find(|(r, _)| *r == role).unwrap().1
}

/// The skuad binary: `SKUAD_BIN`, else `<target dir>/<profile>/skuad` (this test runs from
/// `<target dir>/<profile>/deps/`), built with cargo if it is not there.
fn skuad() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("SKUAD_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary in <target>/<profile>/deps");
        let bin = profile_dir.join("skuad");
        if bin.is_file() {
            return bin;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
        let mut cmd = Command::new(&cargo);
        cmd.args(["build", "-p", "skuad", "--bin", "skuad"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().and_then(|n| n.to_str()) == Some("release") {
            cmd.arg("--release");
        }
        eprintln!(
            "skuad not found at {}; running {cargo} build -p skuad",
            bin.display()
        );
        let st = cmd.status().expect("run cargo build -p skuad");
        assert!(st.success(), "cargo build -p skuad: {st}");
        assert!(
            bin.is_file(),
            "cargo build -p skuad did not make {} (CARGO_TARGET_DIR differs? set SKUAD_BIN)",
            bin.display()
        );
        bin
    })
}

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn free_port() -> u16 {
    static USED: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    loop {
        let l = TcpListener::bind((LO, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        if UdpSocket::bind((LO, port)).is_err() {
            continue;
        }
        let mut used = USED.lock().unwrap();
        if !used.contains(&port) {
            used.push(port);
            return port;
        }
    }
}

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("skuactl-ctl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// A token file for `role` (with a final newline, as an editor writes it).
    fn token_file(&self, role: &str) -> PathBuf {
        let p = self.0.join(format!("{role}.token"));
        std::fs::write(&p, format!("{}\n", tok(role))).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Daemon {
    child: Child,
    dns: SocketAddr,
    url: String,
    conf: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dns_port: u16, api_port: u16, dir: &Path, extra_api: &str) -> String {
    let mut c = format!(
        "server:\n  interface: 127.0.0.1\n  port: {dns_port}\n  access-control: 127.0.0.0/8 allow\n  \
         local-zone: \"example.\" static\n  local-data: \"a.example. 300 IN A 198.18.0.1\"\n\
         api:\n  interface: 127.0.0.1@{api_port}\n  state-file: \"{}\"\n",
        dir.join("state.conf").display()
    );
    for (role, t) in TOKENS {
        c.push_str(&format!(
            "  token: \"{role}-tok {role} sha256:{}\"\n",
            sha256_hex(t)
        ));
    }
    c.push_str(extra_api);
    c
}

/// `GET /health` by hand (no token; the test does not use skuactl to wait for skuad).
fn healthy(api: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&api, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: skuad\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out.starts_with(b"HTTP/1.1 200")
}

fn start(dir: &Path, extra_api: &str) -> Daemon {
    let (p, a) = (free_port(), free_port());
    let conf = dir.join("skuad.conf");
    std::fs::write(&conf, config(p, a, dir, extra_api)).unwrap();
    let child = Command::new(skuad())
        .args(["--no-xdp", "--config"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let d = Daemon {
        child,
        dns: SocketAddr::new(LO, p),
        url: format!("http://127.0.0.1:{a}"),
        conf,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !healthy(SocketAddr::new(LO, a)) {
        assert!(
            Instant::now() < deadline,
            "skuad's API did not come up on {}",
            d.url
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    d
}

#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// Runs skuactl with `args`; `token`: the value of SKUA_TOKEN (none set otherwise). The
/// environment's SKUA_API and SKUA_TOKEN never leak in.
fn ctl(args: &[&str], token: Option<&str>) -> Out {
    let mut c = Command::new(SKUACTL);
    c.args(args)
        .env_remove("SKUA_API")
        .env_remove("SKUA_TOKEN")
        .env_remove("SKUA_SOCKET");
    if let Some(t) = token {
        c.env("SKUA_TOKEN", t);
    }
    let o = c.output().expect("run skuactl");
    Out {
        code: o.status.code().expect("skuactl exited"),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

/// `ctl` against daemon `d` (`--api` first).
fn at(d: &Daemon, args: &[&str], token: Option<&str>) -> Out {
    let mut a = vec!["--api", d.url.as_str()];
    a.extend_from_slice(args);
    ctl(&a, token)
}

#[track_caller]
fn expect(o: &Out, code: i32) {
    assert_eq!(o.code, code, "{o:?}");
}

fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for l in name.split('.').filter(|l| !l.is_empty()) {
        q.push(l.len() as u8);
        q.extend_from_slice(l.as_bytes());
    }
    q.extend_from_slice(&[0, (qtype >> 8) as u8, qtype as u8, 0, 1]);
    q
}

/// An A query over UDP: (rcode, ancount, last 4 bytes of the reply: the address of the
/// A record when there is one answer).
fn ask(server: SocketAddr, name: &str) -> (u8, u16, [u8; 4]) {
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let q = query(0x5151, name, 1);
    for _ in 0..3 {
        s.send_to(&q, server).unwrap();
        let mut b = [0u8; 1500];
        if let Ok((n, _)) = s.recv_from(&mut b) {
            let b = &b[..n];
            assert_eq!(&b[..2], &[0x51, 0x51]);
            return (
                b[3] & 0xf,
                u16::from_be_bytes([b[6], b[7]]),
                b[n - 4..].try_into().unwrap(),
            );
        }
    }
    panic!("no DNS reply for {name}");
}

const NOERROR: u8 = 0;
const NXDOMAIN: u8 = 3;
const REFUSED: u8 = 5;

#[test]
fn zones_and_records_are_served_and_listed() {
    let dir = Dir::new("crud");
    let d = start(&dir.0, "  auth-fail-limit: 1000\n");
    let dns_file = dir.token_file("dns");
    let dns_file = dns_file.to_str().unwrap();
    let read = Some(tok("read"));

    // Zone list: the configuration's zone, human and JSON.
    let o = at(&d, &["zone", "list"], read);
    expect(&o, 0);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{o:?}");
    let at_line = format!("{}:5", d.conf.display());
    assert!(
        lines
            .iter()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["example.", "static", "config", at_line.as_str()]),
        "{o:?}"
    );

    assert_eq!(ask(d.dns, "www.api.example.net.").0, REFUSED);
    let o = at(
        &d,
        &[
            "zone",
            "add",
            "api.example.net.",
            "static",
            "--token-file",
            dns_file,
        ],
        None,
    );
    expect(&o, 0);
    assert!(o.stdout.starts_with("added zone api.example.net."), "{o:?}");
    assert_eq!(
        ask(d.dns, "www.api.example.net.").0,
        NXDOMAIN,
        "a static zone now"
    );
    // The same zone again: the API refuses (exit 1) with its code and message.
    let o = at(
        &d,
        &[
            "--token-file",
            dns_file,
            "zone",
            "add",
            "api.example.net.",
            "static",
        ],
        None,
    );
    expect(&o, 1);
    assert!(o.stderr.starts_with("skuactl: conflict: "), "{o:?}");
    assert!(o.stderr.contains("api.example.net."), "{o:?}");
    assert!(o.stdout.is_empty(), "{o:?}");
    // With --json, the API's error body is printed (and the exit code is the same).
    let o = at(
        &d,
        &[
            "--json",
            "--token-file",
            dns_file,
            "zone",
            "add",
            "api.example.net.",
            "static",
        ],
        None,
    );
    expect(&o, 1);
    assert_eq!(o.json()["error"]["code"], "conflict");

    let z = at(&d, &["zone", "list", "--json"], read);
    expect(&z, 0);
    let zones = z.json();
    let api_zone = zones["zones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["name"] == "api.example.net.")
        .expect("the new zone is listed");
    assert_eq!(api_zone["source"], "api");
    assert_eq!(api_zone["type"], "static");

    // Records: one argument, or the record's words as arguments.
    let o = at(
        &d,
        &["record", "add", "www.api.example.net. 60 A 198.18.7.7"],
        Some(tok("dns")),
    );
    expect(&o, 0);
    assert_eq!(
        ask(d.dns, "www.api.example.net."),
        (NOERROR, 1, [198, 18, 7, 7])
    );
    let o = at(
        &d,
        &[
            "record",
            "add",
            "--json",
            "txt.api.example.net.",
            "60",
            "TXT",
            "\"hello & world?\"",
        ],
        Some(tok("dns")),
    );
    expect(&o, 0);
    let applied = o.json();
    assert!(applied["generation"].as_u64().unwrap() >= 3, "{applied}");
    assert_eq!(applied["records"], 3);
    let o = at(&d, &["record", "list", "api.example.net."], read);
    expect(&o, 0);
    assert!(
        o.stdout.lines().any(|l| l.starts_with("api")
            && l.ends_with("www.api.example.net. 60 IN A 198.18.7.7")),
        "{o:?}"
    );
    assert!(
        o.stdout
            .contains("txt.api.example.net. 60 IN TXT \"hello & world?\""),
        "{o:?}"
    );
    assert!(
        !o.stdout.contains("a.example."),
        "only records under the zone: {o:?}"
    );
    let all = at(&d, &["--json", "record", "list"], read).json();
    let rrs: Vec<&str> = all["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rr"].as_str().unwrap())
        .collect();
    assert_eq!(
        rrs,
        [
            "a.example. 300 IN A 198.18.0.1",
            "www.api.example.net. 60 IN A 198.18.7.7",
            "txt.api.example.net. 60 IN TXT \"hello & world?\""
        ]
    );

    // Remove: served at once; removing again is not_found (exit 1).
    let o = at(
        &d,
        &["record", "remove", "www.api.example.net. 60 A 198.18.7.7"],
        Some(tok("dns")),
    );
    expect(&o, 0);
    assert!(o.stdout.starts_with("removed "), "{o:?}");
    assert_eq!(ask(d.dns, "www.api.example.net.").0, NXDOMAIN);
    let o = at(
        &d,
        &["record", "remove", "www.api.example.net. 60 A 198.18.7.7"],
        Some(tok("dns")),
    );
    expect(&o, 1);
    assert!(o.stderr.starts_with("skuactl: not_found: "), "{o:?}");
    let o = at(
        &d,
        &["zone", "remove", "api.example.net."],
        Some(tok("dns")),
    );
    expect(&o, 0);
    assert_eq!(ask(d.dns, "www.api.example.net.").0, REFUSED);
    let o = at(&d, &["record", "list", "api.example.net."], read);
    expect(&o, 0);
    assert_eq!(o.stdout, "no records\n", "the zone's records went with it");
    // A zone of the main configuration is not the API's to remove.
    let o = at(&d, &["zone", "remove", "example."], Some(tok("dns")));
    expect(&o, 1);
    assert!(o.stderr.starts_with("skuactl: conflict: "), "{o:?}");
    assert_eq!(ask(d.dns, "a.example."), (NOERROR, 1, [198, 18, 0, 1]));
}

#[test]
fn reload_status_stats_metrics_audit() {
    let dir = Dir::new("ops");
    let d = start(&dir.0, "  auth-fail-limit: 1000\n");
    let op = Some(tok("operator"));
    let read = Some(tok("read"));

    let o = at(&d, &["status"], read);
    expect(&o, 0);
    assert!(
        o.stdout
            .contains(&format!("skuad {}", env!("CARGO_PKG_VERSION"))),
        "{o:?}"
    );
    assert!(o.stdout.contains("dataplane   sockets"), "{o:?}");
    assert!(o.stdout.contains(d.conf.to_str().unwrap()), "{o:?}");
    assert!(o.stdout.contains("1 records"), "{o:?}");
    let st = at(&d, &["status", "--json"], read).json();
    assert_eq!(st["dataplane"]["state"], "sockets");
    let generation = st["generation"].as_u64().unwrap();

    // Reload: a record added to the main file is served, the generation moves on.
    let text = std::fs::read_to_string(&d.conf).unwrap();
    std::fs::write(
        &d.conf,
        text.replace(
            "  local-data: \"a.example. 300 IN A 198.18.0.1\"\n",
            "  local-data: \"a.example. 300 IN A 198.18.0.1\"\n  local-data: \"b.example. 300 IN A 198.18.0.2\"\n",
        ),
    )
    .unwrap();
    assert_eq!(ask(d.dns, "b.example.").0, NXDOMAIN);
    let o = at(&d, &["reload"], op);
    expect(&o, 0);
    assert!(o.stdout.starts_with("reloaded: generation "), "{o:?}");
    assert!(o.stdout.contains("serving 2 records"), "{o:?}");
    assert_eq!(ask(d.dns, "b.example."), (NOERROR, 1, [198, 18, 0, 2]));
    let o = at(&d, &["reload", "--json"], op);
    expect(&o, 0);
    let g = o.json()["generation"].as_u64().unwrap();
    assert!(g >= generation + 2, "{g} after {generation}");
    // A broken file: the API refuses with the line, the old data keeps being served.
    std::fs::write(&d.conf, text.replace("A 198.18.0.1", "A 198.18.0")).unwrap();
    let o = at(&d, &["reload"], op);
    expect(&o, 1);
    assert!(o.stderr.starts_with("skuactl: invalid_config: "), "{o:?}");
    assert!(o.stderr.contains("skuad.conf:6"), "{o:?}");
    assert_eq!(ask(d.dns, "b.example."), (NOERROR, 1, [198, 18, 0, 2]));
    // reload needs the operator role.
    expect(&at(&d, &["reload"], Some(tok("dns"))), 4);

    // Counters: the queries above are counted, in all three forms.
    let o = at(&d, &["stats"], read);
    expect(&o, 0);
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("sockets"))
        .unwrap_or_else(|| panic!("{o:?}"));
    let shown: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(shown >= 3, "{line}");
    assert!(o.stdout.contains("NOERROR"), "{o:?}");
    assert!(o.stdout.contains("NXDOMAIN"), "{o:?}");
    let s = at(&d, &["stats", "--json"], read).json();
    assert!(s["socket"]["queries"].as_u64().unwrap() >= shown);
    assert!(s["socket"]["rcode"]["NOERROR"].as_u64().unwrap() >= 2);
    let o = at(&d, &["metrics"], read);
    expect(&o, 0);
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("skua_queries_total{path=\"socket\"}"))
        .unwrap_or_else(|| panic!("{o:?}"));
    let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= shown, "{line}");
    assert!(
        o.stdout.contains("# TYPE skua_queries_total counter"),
        "{o:?}"
    );
    // Prometheus text is not JSON: --json is a usage error there.
    expect(&at(&d, &["metrics", "--json"], read), 2);

    // Audit: this skuad has no audit log; the API says so (exit 1) with its code.
    let o = at(&d, &["audit", "tail", "-n", "5"], op);
    expect(&o, 1);
    assert!(o.stderr.starts_with("skuactl: unavailable: "), "{o:?}");
    let o = at(&d, &["audit", "tail", "--json"], op);
    expect(&o, 1);
    assert_eq!(o.json()["error"]["code"], "unavailable");
    expect(&at(&d, &["audit", "tail"], read), 4);
    expect(&at(&d, &["audit", "tail", "-n", "0"], op), 2);
    expect(&at(&d, &["audit", "tail", "-n", "many"], op), 2);
}

#[test]
fn exit_codes() {
    let dir = Dir::new("exit");
    let d = start(&dir.0, "  auth-fail-limit: 1000\n");

    // 2: usage errors, before anything is sent.
    for args in [
        &["zone", "frob"][..],
        &["zone", "add", "only-a-name."],
        &["record", "add"],
        &["record"],
        &["status", "--bogus"],
        &["status", "--token", "dns-token-01234567890"],
        &["status", "extra"],
        &["stats", "-n", "3"],
        &["status", "--timeout", "soon"],
    ] {
        let o = at(&d, args, Some(tok("read")));
        expect(&o, 2);
        assert!(o.stderr.starts_with("skuactl: "), "{o:?}");
    }
    let o = at(&d, &["status", "--token", "x"], None);
    assert!(o.stderr.contains("SKUA_TOKEN"), "{o:?}");
    let o = ctl(&["--api", "ftp://127.0.0.1", "status"], None);
    expect(&o, 2);
    let o = at(&d, &["--token-file", "/nonexistent/token", "status"], None);
    expect(&o, 2);
    assert!(o.stderr.contains("/nonexistent/token"), "{o:?}");
    for args in [
        &["cache", "flush"][..],
        &["cache", "flush", "--all", "x."],
        &["cache", "flush", "x.", "--subtree", "--type", "A"],
        &["status", "--all"],
        &["cache", "dump", "--json"],
    ] {
        let o = ctl(args, None);
        expect(&o, 2);
        assert!(o.stderr.starts_with("skuactl: "), "{o:?}");
    }
    // No forward-zone: no resolver, no cache: the API says so (409, exit 1).
    for args in [
        &["cache", "lookup", "www.example.net."][..],
        &["cache", "flush", "--all"],
        &["cache", "dump"],
        &["upstreams"],
    ] {
        let o = at(&d, args, Some(tok("admin")));
        expect(&o, 1);
        assert!(o.stderr.contains("conflict: no resolver"), "{o:?}");
    }
    let o = ctl(&["--help"], None);
    expect(&o, 0);
    assert!(o.stdout.contains("skuactl zone add NAME TYPE"), "{o:?}");
    assert!(o.stdout.contains("exit codes"), "{o:?}");

    // 3: nothing listens on the URL (refused at once), or nothing answers (timeout).
    let port = {
        let l = TcpListener::bind((LO, 0)).unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let o = ctl(&["--api", &url, "status"], Some(tok("read")));
    expect(&o, 3);
    assert!(o.stderr.contains(&url), "{o:?}");
    assert!(o.stderr.contains("connection refused"), "{o:?}");
    // SKUA_API is the default.
    let o = Command::new(SKUACTL)
        .args(["zone", "list"])
        .env("SKUA_API", &url)
        .env_remove("SKUA_TOKEN")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&url));
    let silent = TcpListener::bind((LO, 0)).unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let t0 = Instant::now();
    let o = ctl(
        &["--api", &url, "--timeout", "1", "status"],
        Some(tok("read")),
    );
    expect(&o, 3);
    assert!(o.stderr.contains("timed out"), "{o:?}");
    assert!(t0.elapsed() < Duration::from_secs(10));
    drop(silent);

    // 4: no token, an unknown token, a role too low.
    let o = at(&d, &["zone", "list"], None);
    expect(&o, 4);
    assert!(o.stderr.starts_with("skuactl: unauthorized: "), "{o:?}");
    assert!(o.stderr.contains("no token given"), "{o:?}");
    let o = at(&d, &["zone", "list"], Some("not-a-token-0123456789"));
    expect(&o, 4);
    assert!(o.stderr.starts_with("skuactl: unauthorized: "), "{o:?}");
    let o = at(
        &d,
        &["zone", "add", "ro.example.net.", "static"],
        Some(tok("read")),
    );
    expect(&o, 4);
    assert!(o.stderr.starts_with("skuactl: forbidden: "), "{o:?}");
    assert!(o.stderr.contains("needs dns"), "{o:?}");
    // Nothing changed.
    assert_eq!(ask(d.dns, "x.ro.example.net.").0, REFUSED);
    let o = at(&d, &["--json", "zone", "list"], Some(tok("admin")));
    expect(&o, 0);
    assert!(!o.stdout.contains("ro.example.net."));

    // 4 too: past the failed-authentication limit (429) for another wrong token; a good
    // token still works (failures are throttled, the operator is never locked out).
    let dir2 = Dir::new("limit");
    let d2 = start(&dir2.0, "  auth-fail-limit: 2\n");
    for _ in 0..2 {
        expect(&at(&d2, &["status"], Some("wrong-token-0123456789")), 4);
    }
    let o = at(&d2, &["status"], Some("wrong-token-0123456789"));
    expect(&o, 4);
    assert!(
        o.stderr.starts_with("skuactl: too_many_auth_failures: "),
        "{o:?}"
    );
    expect(&at(&d2, &["status"], Some(tok("admin"))), 0);
}

/// `https://` with `--ca-file`: the API's self-signed certificate as the only trust anchor.
/// Without it the certificate is not trusted and nothing is sent (exit 3).
#[test]
fn https_with_a_ca_file() {
    let dir = Dir::new("tls");
    let (cert, key) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
    let ok = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            // An end-entity certificate (openssl makes a CA one by default, which webpki
            // refuses as a server's certificate).
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl")
        .success();
    assert!(ok);
    let (p, a) = (free_port(), free_port());
    let conf = dir.0.join("skuad.conf");
    std::fs::write(
        &conf,
        config(
            p,
            a,
            &dir.0,
            &format!(
                "  tls-cert: \"{}\"\n  tls-key: \"{}\"\n",
                cert.display(),
                key.display()
            ),
        ),
    )
    .unwrap();
    let child = Command::new(skuad())
        .args(["--no-xdp", "--config"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let d = Daemon {
        child,
        dns: SocketAddr::new(LO, p),
        url: format!("https://127.0.0.1:{a}"),
        conf,
    };
    let ca = cert.to_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let o = loop {
        let o = at(
            &d,
            &["--ca-file", ca, "status", "--json"],
            Some(tok("read")),
        );
        if o.code != 3 || Instant::now() > deadline {
            break o;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    expect(&o, 0);
    assert_eq!(o.json()["dataplane"]["state"], "sockets");
    let o = at(
        &d,
        &[
            "--ca-file",
            ca,
            "record",
            "add",
            "t.example. 60 A 198.18.3.3",
        ],
        Some(tok("dns")),
    );
    expect(&o, 0);
    assert_eq!(ask(d.dns, "t.example."), (NOERROR, 1, [198, 18, 3, 3]));
    // Not trusted without the CA file; plain HTTP on the HTTPS port is not the API either.
    let o = at(&d, &["status"], Some(tok("read")));
    expect(&o, 3);
    assert!(o.stderr.contains(&d.url), "{o:?}");
    assert!(o.stderr.contains("--ca-file"), "{o:?}");
    let o = ctl(
        &[
            "--api",
            &format!("http://127.0.0.1:{a}"),
            "--timeout",
            "5",
            "status",
        ],
        Some(tok("read")),
    );
    expect(&o, 3);
    let o = at(&d, &["--ca-file", key.to_str().unwrap(), "status"], None);
    expect(&o, 2);
}

/// `audit tail` against a skuad with an audit log: the entries of the changes just made,
/// one a line, newest last; `-n` limits them; `--json` is the API's `{"entries": [...]}`.
#[test]
fn audit_tail_shows_the_changes() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Dir::new("audit");
    let key = dir.0.join("k.hex");
    std::fs::write(&key, "33".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let audit = format!(
        "  auth-fail-limit: 1000\naudit:\n  log: \"{}\"\n  key: \"file:{}\"\n",
        dir.0.join("audit.log").display(),
        key.display()
    );
    let d = start(&dir.0, &audit);
    let dns = Some(tok("dns"));
    expect(
        &at(&d, &["zone", "add", "audited.example.", "static"], dns),
        0,
    );
    expect(
        &at(&d, &["zone", "add", "audited.example.", "static"], dns),
        1,
    );
    expect(
        &at(
            &d,
            &["record", "add", "r.audited.example. 60 A 198.18.5.5"],
            dns,
        ),
        0,
    );

    let o = at(&d, &["audit", "tail", "-n", "3"], Some(tok("operator")));
    expect(&o, 0);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{o:?}");
    for l in &lines {
        let w: Vec<&str> = l.split_whitespace().collect();
        assert!(w[0].parse::<u64>().is_ok(), "seq first: {l}");
        assert!(w[1].ends_with('Z'), "UTC time second: {l}");
        assert_eq!(w[2], "dns-tok@127.0.0.1", "{l}");
        assert_eq!(w[3], "api-write", "{l}");
    }
    assert!(
        lines[1].contains("refused"),
        "the second write was refused: {o:?}"
    );
    assert!(lines[2].contains("r.audited.example."), "{o:?}");

    let o = at(
        &d,
        &["audit", "tail", "-n", "1", "--json"],
        Some(tok("admin")),
    );
    expect(&o, 0);
    let v = o.json();
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{v}");
    assert_eq!(entries[0]["kind"], "api-write");
    assert_eq!(entries[0]["actor"], "dns-tok");
    let o = at(&d, &["audit", "tail"], Some(tok("operator")));
    expect(&o, 0);
    assert!(o.stdout.lines().next().unwrap().contains(" start"), "{o:?}");
}

/// skuactl as another user (uid `uid`, primary group `gid`, no supplementary groups), with
/// `env` set and nothing else of this process's skuactl environment.
fn ctl_as(uid: u32, gid: u32, args: &[&str], env: &[(&str, &Path)]) -> Out {
    let mut c = Command::new("setpriv");
    c.args([
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--clear-groups".into(),
    ])
    .arg(SKUACTL)
    .args(args)
    .env_remove("SKUA_API")
    .env_remove("SKUA_TOKEN")
    .env_remove("SKUA_SOCKET")
    .env_remove("XDG_RUNTIME_DIR");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("run setpriv (util-linux)");
    Out {
        code: o.status.code().expect("skuactl exited"),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

/// The local control socket: no token; root is admin, a member of control-socket-group
/// gets its role, anyone else cannot connect; the same audit entries as the HTTP API, with
/// the caller's user name; found by skuactl with no option in the default place.
#[test]
fn control_socket_roles_audit_and_discovery() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    assert_eq!(
        std::fs::metadata("/proc/self").unwrap().uid(),
        0,
        "this test runs skuactl as other users: run it as root (CI does)"
    );
    let dir = Dir::new("sock");
    // The per-user runtime directory of a user who is not root: skuad (root) puts its
    // socket there on request, skuactl run as that user finds it there by default.
    let xdg = dir.0.join("xdg");
    let sock = xdg.join("skua/control.sock");
    std::fs::create_dir_all(&xdg).unwrap();
    for d in [&dir.0, &xdg] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let key = dir.0.join("k.hex");
    std::fs::write(&key, "44".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    // nogroup (65534) is the group; nobody (65534) a member by its primary group.
    let extra = format!(
        "  control-socket: \"{}\"\n  control-socket-group: 65534\n  control-socket-group-role: read\n\
         audit:\n  log: \"{}\"\n  key: \"file:{}\"\n",
        sock.display(),
        dir.0.join("audit.log").display(),
        key.display()
    );
    let d = start(&dir.0, &extra);
    let m = std::fs::symlink_metadata(&sock).expect("the control socket exists");
    assert_eq!(
        (m.mode() & 0o777, m.gid()),
        (0o660, 65534),
        "mode and group"
    );
    let s = sock.to_str().unwrap();

    // Root, no token: admin.
    let o = ctl(
        &["--socket", s, "zone", "add", "local.example.", "static"],
        None,
    );
    expect(&o, 0);
    let o = ctl(
        &[
            "--socket",
            s,
            "record",
            "add",
            "w.local.example. 60 IN A 198.18.7.7",
        ],
        None,
    );
    expect(&o, 0);
    assert_eq!(ask(d.dns, "w.local.example.").2, [198, 18, 7, 7]);
    // $SKUA_SOCKET instead of --socket.
    let o = Command::new(SKUACTL)
        .args(["status", "--json"])
        .env_remove("SKUA_API")
        .env_remove("SKUA_TOKEN")
        .env("SKUA_SOCKET", &sock)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");

    // nobody (in the group): read, found with no option under its $XDG_RUNTIME_DIR.
    let env = [("XDG_RUNTIME_DIR", xdg.as_path())];
    let o = ctl_as(65534, 65534, &["status"], &env);
    expect(&o, 0);
    assert!(o.stdout.contains("api writes  2 ok"), "{o:?}");
    let o = ctl_as(65534, 65534, &["reload"], &env);
    expect(&o, 4);
    assert!(o.stderr.contains("forbidden"), "{o:?}");
    assert!(o.stderr.contains("local:nobody"), "{o:?}");
    // Not in the group: the file's mode keeps it out.
    let o = ctl_as(65534, 1, &["status"], &env);
    expect(&o, 3);
    assert!(o.stderr.contains("permission denied"), "{o:?}");
    // --api wins over the default socket: the HTTP API wants a token.
    let o = ctl_as(65534, 65534, &["--api", &d.url, "status"], &env);
    expect(&o, 4);

    // The audit log names the local callers, without a source address.
    let o = ctl(
        &["--socket", s, "audit", "tail", "-n", "50", "--json"],
        None,
    );
    expect(&o, 0);
    let entries = o.json()["entries"].as_array().cloned().unwrap_or_default();
    let write = entries
        .iter()
        .find(|e| e["kind"] == "api-write" && e["actor"] == "local:root")
        .unwrap_or_else(|| panic!("no api-write by local:root: {entries:?}"));
    assert!(write["source"].is_null(), "{write}");
    let refusal = entries
        .iter()
        .find(|e| e["kind"] == "auth-failure" && e["actor"] == "local:nobody")
        .unwrap_or_else(|| panic!("no auth-failure of local:nobody: {entries:?}"));
    assert!(refusal["source"].is_null(), "{refusal}");
    assert_eq!(refusal["detail"]["route"], "/reload", "{refusal}");

    // A clean stop removes the socket.
    let st = Command::new("kill")
        .args(["-TERM", &d.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while sock.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!sock.exists(), "the socket outlived skuad's stop");
    drop(d);
}
