//! Helpers shared by the suites of the e2e binary: each test's turn beside the others
//! ([`suite`]), a running skuad with API tokens of each role, a hand-written HTTP/1.1 client
//! (the tests do not share the server's HTTP stack), DNS queries over UDP, TCP and TLS, test
//! certificates, a network namespace with only loopback for the suites' Python scripts, and
//! ([`xfr`]) what the zone-transfer suites share.

#![allow(dead_code)]

pub mod xfr;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use std::time::{Duration, Instant};

use tokio_rustls::rustls;

/// Which tests share the binary's test threads (main.rs says why): a test holds its suite's
/// turn from its first line to its end. The tests of a suite named in [`crate::ALONE`] run
/// only beside each other, as when the suite was a test binary of its own; the tests of the
/// other suites run beside each other, whatever their suite.
pub struct Suite(());

/// The room the tests enter: who is inside (a suite of [`crate::ALONE`], or `""` for the
/// others), how many, and the turns, handed out in the order the tests ask (first come, first
/// in: a suite waiting for the room to empty is not overtaken by tests arriving after it).
struct Room {
    key: &'static str,
    inside: usize,
    next: u64,
    serving: u64,
}

static ROOM: Mutex<Room> = Mutex::new(Room {
    key: "",
    inside: 0,
    next: 0,
    serving: 0,
});
static CHANGED: Condvar = Condvar::new();

fn room() -> MutexGuard<'static, Room> {
    // A test that panics holds no lock of the room (only its Suite), so no poison to fear;
    // take the room regardless.
    ROOM.lock().unwrap_or_else(|e| e.into_inner())
}

/// The turn of a test of `module` (its `module_path!()`), waited for; held until dropped.
pub fn suite(module: &'static str) -> Suite {
    let name = module.rsplit("::").next().unwrap_or(module);
    let key = crate::ALONE
        .iter()
        .copied()
        .find(|s| *s == name)
        .unwrap_or("");
    let mut r = room();
    let ticket = r.next;
    r.next += 1;
    while !(r.serving == ticket && (r.inside == 0 || r.key == key)) {
        r = CHANGED.wait(r).unwrap_or_else(|e| e.into_inner());
    }
    r.key = key;
    r.inside += 1;
    r.serving += 1;
    CHANGED.notify_all();
    Suite(())
}

impl Drop for Suite {
    fn drop(&mut self) {
        let mut r = room();
        r.inside -= 1;
        if r.inside == 0 {
            CHANGED.notify_all();
        }
    }
}

pub const SKUAD: &str = env!("CARGO_BIN_EXE_skuad");
pub const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

pub const TOKENS: [(&str, &str); 4] = [
    ("read", "read-token-0123456789"),
    ("dns", "dns-token-01234567890"),
    ("operator", "operator-token-012345"),
    ("admin", "admin-token-012345678"),
];

pub fn sha256_hex(s: &str) -> String {
    // The test computes the hash with the system's sha256sum: an independent implementation.
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(s.as_bytes())?;
            c.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// A port free for both UDP and TCP on 127.0.0.1, never handed out twice in this process.
pub fn free_port() -> u16 {
    static USED: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    for _ in 0..100 {
        let l = TcpListener::bind((LO, 0)).expect("bind port 0");
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
    panic!("no free port found on 127.0.0.1");
}

pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("skuad-api-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub struct Daemon {
    pub child: Child,
    pub dns: SocketAddr,
    pub api: SocketAddr,
    pub conf: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn config(dns_port: u16, api_port: u16, dir: &Path, extra_api: &str) -> String {
    let mut c = format!(
        "server:\n  interface: 127.0.0.1\n  port: {dns_port}\n  access-control: 127.0.0.0/8 allow\n  \
         local-zone: \"example.\" static\n  local-data: \"a.example. 300 IN A 198.18.0.1\"\n\
         api:\n  interface: 127.0.0.1@{api_port}\n  state-file: \"{}\"\n",
        dir.join("state.conf").display()
    );
    for (role, tok) in TOKENS {
        c.push_str(&format!(
            "  token: \"{role}-tok {role} sha256:{}\"\n",
            sha256_hex(tok)
        ));
    }
    c.push_str(extra_api);
    c
}

pub fn start(dir: &Path, conf_text: &str, dns_port: u16, api_port: u16) -> Daemon {
    let conf = dir.join("skuad.conf");
    std::fs::write(&conf, conf_text).unwrap();
    let child = Command::new(SKUAD)
        .args(["--no-xdp", "--config"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let d = Daemon {
        child,
        dns: SocketAddr::new(LO, dns_port),
        api: SocketAddr::new(LO, api_port),
        conf,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(r) = http(&d, "GET", "/health", None, None)
            && r.status == 200
        {
            return d;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("skuad's API did not come up on {}", d.api);
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

/// One HTTP/1.1 request (Connection: close), by hand: the test does not share the
/// server's HTTP stack.
pub fn raw(api: SocketAddr, req: &[u8]) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect_timeout(&api, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(req)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // Bodies here are small; a chunked one is reassembled naively.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut b = String::new();
        let mut rest = body;
        while let Some((len, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            b.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
        b
    } else {
        body.to_string()
    };
    Ok(Resp {
        status,
        headers: head.to_string(),
        body,
    })
}

pub fn http(
    d: &Daemon,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> std::io::Result<Resp> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: skuad\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ));
    } else {
        req.push_str("Content-Length: 0\r\n\r\n");
    }
    raw(d.api, req.as_bytes())
}

pub fn tok(role: &str) -> &'static str {
    TOKENS.iter().find(|(r, _)| *r == role).unwrap().1
}

/// A query with RD set, one question, class IN.
pub fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(u8::try_from(label.len()).expect("label too long"));
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    q
}

/// (rcode, ancount, last 4 bytes of the reply: the A record's address when there is one).
pub fn ask(server: SocketAddr, name: &str) -> (u8, u16, [u8; 4]) {
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let q = query(0x4242, name, 1);
    for _ in 0..3 {
        s.send_to(&q, server).unwrap();
        let mut b = [0u8; 1500];
        if let Ok((n, _)) = s.recv_from(&mut b) {
            let b = &b[..n];
            return (
                b[3] & 0xf,
                u16::from_be_bytes([b[6], b[7]]),
                b[n - 4..].try_into().unwrap(),
            );
        }
    }
    panic!("no DNS reply for {name}");
}

fn sh_ok(script: &str, what: &str) {
    let ok = Command::new("sh")
        .args(["-ec", script])
        .status()
        .expect("sh")
        .success();
    assert!(ok, "{what}");
}

/// A test certificate authority `TAG-ca.pem` (key `TAG-ca.key`) in `dir` (openssl):
/// returns the certificate's path.
pub fn test_ca(dir: &Path, tag: &str) -> PathBuf {
    sh_ok(
        &format!(
            "cd '{d}'; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
             -keyout {tag}-ca.key -out {tag}-ca.pem -days 2 -subj '/CN=Skua test CA {tag}' 2>/dev/null",
            d = dir.display()
        ),
        "test CA",
    );
    dir.join(format!("{tag}-ca.pem"))
}

/// A server certificate `TAG.pem` (key `TAG.key`, mode 0600) for `san` (`IP:127.0.0.1`,
/// `DNS:name,IP:...`) signed by the authority `CA` of [`test_ca`]: (certificate, key).
pub fn test_leaf(dir: &Path, ca: &str, tag: &str, san: &str) -> (PathBuf, PathBuf) {
    std::fs::write(
        dir.join(format!("{tag}.cnf")),
        format!("subjectAltName={san}\nextendedKeyUsage=serverAuth\n"),
    )
    .unwrap();
    sh_ok(
        &format!(
            "cd '{d}'; \
             openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout {tag}.key -out {tag}.csr -subj '/CN={tag}' 2>/dev/null; \
             openssl x509 -req -in {tag}.csr -CA {ca}-ca.pem -CAkey {ca}-ca.key -CAcreateserial -out {tag}.pem -days 2 -extfile {tag}.cnf 2>/dev/null; \
             chmod 600 {tag}.key",
            d = dir.display()
        ),
        "test certificate",
    );
    (
        dir.join(format!("{tag}.pem")),
        dir.join(format!("{tag}.key")),
    )
}

/// One `a.example. A` query in DNS over TCP framing to `server`, waiting at most `wait` for
/// the answer: its rcode, or `None` when the connection is refused, closed or silent, or
/// what comes back is not the answer to it (a TLS port sends an alert).
pub fn ask_tcp(server: SocketAddr, wait: Duration) -> Option<u8> {
    let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    let q = query(0x5151, "a.example.", 1);
    let mut m = (q.len() as u16).to_be_bytes().to_vec();
    m.extend_from_slice(&q);
    s.write_all(&m).ok()?;
    let mut len = [0u8; 2];
    s.read_exact(&mut len).ok()?;
    let mut b = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut b).ok()?;
    (b.len() >= 12 && b[..2] == [0x51, 0x51]).then(|| b[3] & 0xf)
}

pub fn der(pem: &Path) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::pem_file_iter(pem)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .to_vec()
}

/// A TLS client of our own (rustls) for the name `dot.test`: a connection, its server
/// certificate, and DNS over TLS queries over it (or anything else written on `tls`).
pub struct TlsClient {
    pub tls: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
}

impl TlsClient {
    pub fn config(ca: &Path, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        use rustls_pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(cfg)
    }

    pub fn connect(port: u16, ca: &Path, alpn: &[&[u8]]) -> Result<TlsClient, String> {
        Self::with(port, Self::config(ca, alpn))
    }

    /// A connection with `cfg` (its session store: a second connection resumes).
    pub fn with(port: u16, cfg: Arc<rustls::ClientConfig>) -> Result<TlsClient, String> {
        Self::with_name(port, cfg, "dot.test")
    }

    /// A connection with `cfg` for the server name `name`.
    pub fn with_name(
        port: u16,
        cfg: Arc<rustls::ClientConfig>,
        name: &str,
    ) -> Result<TlsClient, String> {
        let name = rustls_pki_types::ServerName::try_from(name.to_string()).unwrap();
        let conn = rustls::ClientConnection::new(cfg, name).unwrap();
        let sock = TcpStream::connect((LO, port)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, sock);
        // Drive the handshake to its end.
        while tls.conn.is_handshaking() {
            tls.conn
                .complete_io(&mut tls.sock)
                .map_err(|e| e.to_string())?;
        }
        Ok(TlsClient { tls })
    }

    pub fn peer_cert(&self) -> Vec<u8> {
        self.tls.conn.peer_certificates().unwrap()[0].to_vec()
    }

    /// (rcode, the last 4 bytes: the A record) for `name`.
    pub fn ask(&mut self, name: &str) -> (u8, [u8; 4]) {
        let q = query(0x7777, name, 1);
        let mut m = (q.len() as u16).to_be_bytes().to_vec();
        m.extend_from_slice(&q);
        self.tls.write_all(&m).unwrap();
        self.tls.flush().unwrap();
        let mut len = [0u8; 2];
        self.tls.read_exact(&mut len).unwrap();
        let mut b = vec![0u8; usize::from(u16::from_be_bytes(len))];
        self.tls.read_exact(&mut b).unwrap();
        (b[3] & 0xf, b[b.len() - 4..].try_into().unwrap())
    }
}

/// `kdig` over TLS to `port` (`+https` in `args`: over HTTPS), trusting `ca` for the name
/// `dot.test`: its whole output.
pub fn kdig_tls(port: u16, ca: &Path, args: &[&str]) -> String {
    let out = Command::new("kdig")
        .arg("@127.0.0.1")
        .args(["-p", &port.to_string()])
        .arg(format!("+tls-ca={}", ca.display()))
        .arg("+tls-hostname=dot.test")
        .args(["+timeout=3", "+retry=0"])
        .args(args)
        .output()
        .expect("kdig (knot-dnsutils)");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The size kdig reports for the reply (`;; Received N B`).
pub fn received(out: &str) -> usize {
    out.lines()
        .find_map(|l| l.strip_prefix(";; Received "))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no reply size in {out}"))
}

/// An audit log key file (`audit: key: file:`) in `dir`, mode 0600 as skuad requires.
pub fn audit_key(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let key = dir.join("audit.key");
    std::fs::write(
        &key,
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    )
    .unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    key
}

/// The value of the metric series `series` (name and labels as `/metrics` prints them) in
/// the text `m`; a missing series fails the test.
pub fn metric_value(m: &str, series: &str) -> u64 {
    let key = format!("{series} ");
    m.lines()
        .find_map(|l| l.strip_prefix(key.as_str()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {m}"))
}

/// Polls `f` every 50 ms until it gives a value or `secs` pass.
pub fn wait_for<T>(secs: u64, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// A network namespace with only loopback, up (hostile, xfr_interop); deleted on drop.
pub struct LoopbackNs(pub String);

impl LoopbackNs {
    /// `ip netns add NAME` (one of that name left by a killed run deleted first), `lo` up.
    pub fn new(name: String) -> Self {
        let ns = LoopbackNs(name);
        let _ = Command::new("ip")
            .args(["netns", "del", &ns.0])
            .stderr(Stdio::null())
            .status();
        assert!(
            Command::new("ip")
                .args(["netns", "add", &ns.0])
                .status()
                .unwrap()
                .success()
        );
        assert!(
            Command::new("ip")
                .args(["-n", &ns.0, "link", "set", "lo", "up"])
                .status()
                .unwrap()
                .success()
        );
        ns
    }
}

impl Drop for LoopbackNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.0])
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs `/usr/bin/python3 SCRIPT SKUAD WORK` in `ns`, killed by timeout(1) after `limit`
/// seconds (waited for 10 s more at the most): its output.
pub fn python_in(ns: &LoopbackNs, script: &Path, work: &Path, limit: u64) -> Output {
    let mut child = Command::new("timeout")
        .args([
            &limit.to_string(),
            "ip",
            "netns",
            "exec",
            &ns.0,
            "/usr/bin/python3",
        ])
        .arg(script)
        .arg(SKUAD)
        .arg(work)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the test script");
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break child.wait_with_output().unwrap();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(limit + 10),
            "{} did not end",
            script.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs `cmd` with `args`, killed after `secs` (timeout(1)): its output.
pub fn run_bounded(secs: u32, cmd: &str, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg(secs.to_string())
        .arg(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"))
}

/// Fails unless the test runs as root (for `what`): the tests that need it never skip.
pub fn assert_root(what: &str) {
    let uid = Command::new("id").arg("-u").output().expect("id -u");
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "this test needs root ({what}); it does not skip"
    );
}
