//! Integration tests of the `skuad` binary: TCP per RFC 7766 (pipelining, idle timeout,
//! connection limit), SIGHUP reload, SIGTERM/SIGINT, `--check-config`, the embedded default
//! configuration and access control, each against a real child process on loopback.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::{LO, SKUAD, free_port, query};

const A: u16 = 1;
const CNAME: u16 = 5;
const NOERROR: u8 = 0;
const NXDOMAIN: u8 = 3;
const REFUSED: u8 = 5;

// ---------------------------------------------------------------------------------------
// DNS messages, by hand.

/// The header fields of a reply, and its bytes.
#[derive(Debug)]
struct Reply {
    id: u16,
    flags: u16,
    rcode: u8,
    qdcount: u16,
    ancount: u16,
    raw: Vec<u8>,
}

impl Reply {
    fn parse(raw: Vec<u8>) -> Self {
        assert!(raw.len() >= 12, "reply shorter than a header: {raw:?}");
        let be = |i: usize| u16::from_be_bytes([raw[i], raw[i + 1]]);
        Self {
            id: be(0),
            flags: be(2),
            rcode: raw[3] & 0x0f,
            qdcount: be(4),
            ancount: be(6),
            raw,
        }
    }

    fn is_response(&self) -> bool {
        self.flags & 0x8000 != 0
    }

    /// (type, rdata) of each answer record.
    fn answers(&self) -> Vec<(u16, Vec<u8>)> {
        let b = &self.raw;
        let be = |i: usize| Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]));
        let parse = || -> Option<Vec<(u16, Vec<u8>)>> {
            let mut pos = 12;
            for _ in 0..self.qdcount {
                pos = skip_name(b, pos)? + 4;
            }
            let mut out = Vec::new();
            for _ in 0..self.ancount {
                pos = skip_name(b, pos)?;
                let ty = be(pos)?;
                let rdlen = usize::from(be(pos + 8)?);
                let start = pos + 10;
                out.push((ty, b.get(start..start + rdlen)?.to_vec()));
                pos = start + rdlen;
            }
            Some(out)
        };
        parse().unwrap_or_else(|| panic!("malformed reply: {b:?}"))
    }

    /// The address of the first A record.
    fn first_a(&self) -> Option<Ipv4Addr> {
        self.answers()
            .into_iter()
            .find(|(t, d)| *t == A && d.len() == 4)
            .map(|(_, d)| Ipv4Addr::new(d[0], d[1], d[2], d[3]))
    }
}

fn skip_name(b: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let len = *b.get(pos)?;
        match len {
            0 => return Some(pos + 1),
            l if l & 0xc0 == 0xc0 => return Some(pos + 2),
            l => pos += 1 + usize::from(l),
        }
    }
}

/// Sends `q` over UDP from `src` and waits up to `timeout` for the reply with its ID.
fn udp_query_from(src: IpAddr, server: SocketAddr, q: &[u8], timeout: Duration) -> Option<Reply> {
    let sock = UdpSocket::bind(SocketAddr::new(src, 0)).expect("bind UDP client");
    sock.send_to(q, server).expect("send UDP query");
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        if left.is_zero() {
            return None;
        }
        sock.set_read_timeout(Some(left)).ok()?;
        match sock.recv_from(&mut buf) {
            Ok((n, from)) if from == server && n >= 2 && buf[..2] == q[..2] => {
                return Some(Reply::parse(buf[..n].to_vec()));
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return None;
            }
            // ICMP port unreachable while the daemon starts: no reply.
            Err(_) => return None,
        }
    }
}

fn udp_query(server: SocketAddr, q: &[u8], timeout: Duration) -> Option<Reply> {
    udp_query_from(LO, server, q, timeout)
}

fn tcp_send(s: &mut TcpStream, q: &[u8]) -> io::Result<()> {
    let mut m = u16::try_from(q.len()).unwrap().to_be_bytes().to_vec();
    m.extend_from_slice(q);
    s.write_all(&m)
}

/// One length-prefixed reply; `Ok(None)` on EOF before it.
fn tcp_read(s: &mut TcpStream) -> io::Result<Option<Reply>> {
    let mut len = [0u8; 2];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut buf)?;
    Ok(Some(Reply::parse(buf)))
}

fn tcp_connect(server: SocketAddr, timeout: Duration) -> TcpStream {
    let s = TcpStream::connect_timeout(&server, Duration::from_secs(2)).expect("TCP connect");
    s.set_read_timeout(Some(timeout)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

/// A TCP connection from a chosen loopback source address (std cannot bind before connect).
fn tcp_connect_from(src: IpAddr, server: SocketAddr, timeout: Duration) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind(SocketAddr::new(src, 0)).expect("bind TCP client");
        let s = tokio::time::timeout(Duration::from_secs(2), sock.connect(server))
            .await
            .expect("TCP connect timed out")
            .expect("TCP connect");
        s.into_std().unwrap()
    });
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

// ---------------------------------------------------------------------------------------
// Test directories, ports, the daemon.

/// A per-test directory under Cargo's target tmp dir, removed on drop.
struct TestDir(PathBuf);

impl TestDir {
    fn new(name: &str) -> Self {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("skuad-it-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create test dir");
        Self(d)
    }

    fn write(&self, file: &str, text: &str) -> PathBuf {
        let p = self.0.join(file);
        // Written beside and renamed: a reload never sees a half-written file.
        let tmp = self.0.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).expect("write config");
        std::fs::rename(&tmp, &p).expect("rename config");
        p
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A configuration on 127.0.0.1:`port` with a static zone `example.` holding
/// `a.example. A 198.18.0.1`; `extra` lines go at the end of `server:`.
fn conf(port: u16, extra: &[&str]) -> String {
    let mut c = format!(
        "server:\n    interface: 127.0.0.1\n    port: {port}\n    num-threads: 1\n    \
         access-control: 127.0.0.0/8 allow\n    local-zone: \"example.\" static\n    \
         local-data: \"a.example. 300 IN A 198.18.0.1\"\n"
    );
    for l in extra {
        c.push_str("    ");
        c.push_str(l);
        c.push('\n');
    }
    c
}

/// True once the process has handlers for SIGHUP, SIGINT and SIGTERM (`SigCgt` in
/// /proc/PID/status): before that, a signal would kill it.
fn signal_handlers_installed(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let Some(mask) = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
    else {
        return false;
    };
    let want =
        (1u64 << (libc::SIGHUP - 1)) | (1u64 << (libc::SIGINT - 1)) | (1u64 << (libc::SIGTERM - 1));
    mask & want == want
}

/// Sets its flag when dropped: a failing test also stops its helper threads.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A running `skuad --config`, killed on drop.
struct Daemon {
    child: Child,
    port: u16,
    conf: PathBuf,
    log: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Daemon {
    /// Starts skuad on a free port with the configuration `make(port)` written to
    /// `dir/skuad.conf`, and waits (bounded) until it answers.
    /// If another process takes the port meanwhile, it tries again with another one.
    fn start(dir: &TestDir, make: impl Fn(u16) -> String) -> Self {
        for attempt in 0..3 {
            let port = free_port();
            let conf = dir.write("skuad.conf", &make(port));
            let mut d = Self::spawn(conf, port);
            match d.wait_ready() {
                Ok(()) => return d,
                Err(log) if attempt < 2 && log.contains("cannot listen") => continue,
                Err(log) => panic!("skuad did not become ready on port {port}; its stderr:\n{log}"),
            }
        }
        unreachable!()
    }

    /// Starts `skuad --config conf` without waiting for anything.
    fn spawn(conf: PathBuf, port: u16) -> Self {
        let mut child = Command::new(SKUAD)
            .arg("--config")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn skuad");
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Self {
            child,
            port,
            conf,
            log,
            reader: Some(reader),
        }
    }

    /// Ready: it answers UDP and has its signal handlers (see
    /// `signal_right_after_first_reply_is_handled` for why answering is not enough).
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let probe = query(0xbeef, "a.example.", A);
        let mut answered = false;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = self.wait_exit(Duration::from_secs(1));
                return Err(self.log());
            }
            if !answered {
                answered = udp_query(self.addr(), &probe, Duration::from_millis(50)).is_some();
            }
            if answered && signal_handlers_installed(self.pid()) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(format!("(timed out after 5 s)\n{}", self.log()))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::new(LO, self.port)
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until stderr contains `needle`.
    fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.log().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `sig` with kill(2) (no `kill` process in between: no added delay).
    fn signal(&mut self, sig: libc::c_int) {
        assert!(
            self.running(),
            "cannot signal skuad: it exited:\n{}",
            self.log()
        );
        let pid = libc::pid_t::try_from(self.pid()).expect("pid fits pid_t");
        // SAFETY: kill(2) takes plain integers. The child has not been reaped (checked just
        // above, and only this thread waits for it), so its pid cannot have been reused.
        let r = unsafe { libc::kill(pid, sig) };
        assert_eq!(r, 0, "kill({pid}, {sig}): {}", io::Error::last_os_error());
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit, then for its stderr to be fully read.
    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `skuad --check-config [file]`: (exit status, stdout, stderr).
fn run_check_config(file: Option<&Path>) -> (ExitStatus, String, String) {
    let mut cmd = Command::new(SKUAD);
    cmd.arg("--check-config");
    if let Some(f) = file {
        cmd.arg(f);
    }
    let out = cmd.stdin(Stdio::null()).output().expect("run skuad");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---------------------------------------------------------------------------------------
// TCP (RFC 7766).

#[test]
fn tcp_pipelining() {
    let _suite = crate::common::suite(module_path!());
    let dir = TestDir::new("pipelining");
    let d = Daemon::start(&dir, |p| {
        conf(
            p,
            &[
                "local-data: \"b.example. 300 IN A 198.18.0.2\"",
                "local-data: \"b.example. 300 IN A 198.18.0.3\"",
            ],
        )
    });
    let mut expected: HashMap<u16, (u8, u16)> = HashMap::new();
    let mut burst = Vec::new();
    for i in 0..50u16 {
        let id = 0x4000 + i * 7;
        let (name, rcode, an) = match i % 4 {
            0 => ("a.example.".to_string(), NOERROR, 1),
            1 => (format!("nx{i}.example."), NXDOMAIN, 0),
            2 => ("B.Example.".to_string(), NOERROR, 2),
            _ => (format!("deep.nx{i}.example."), NXDOMAIN, 0),
        };
        let q = query(id, &name, A);
        burst.extend_from_slice(&u16::try_from(q.len()).unwrap().to_be_bytes());
        burst.extend_from_slice(&q);
        expected.insert(id, (rcode, an));
    }
    let mut s = tcp_connect(d.addr(), Duration::from_secs(3));
    s.write_all(&burst).expect("write 50 queries in one go");
    let mut seen = HashSet::new();
    for n in 0..50 {
        let r = tcp_read(&mut s)
            .unwrap_or_else(|e| panic!("reading reply {n}: {e}"))
            .unwrap_or_else(|| panic!("connection closed after {n} of 50 replies"));
        let Some(&(rcode, an)) = expected.get(&r.id) else {
            panic!("reply with unknown id {:#x}", r.id);
        };
        assert!(seen.insert(r.id), "id {:#x} answered twice", r.id);
        assert!(r.is_response());
        assert_eq!(r.rcode, rcode, "rcode for id {:#x}", r.id);
        assert_eq!(r.ancount, an, "ANCOUNT for id {:#x}", r.id);
    }
    // Half-close: the server answers nothing more and closes its side.
    s.shutdown(Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).expect("read to EOF");
    assert!(
        rest.is_empty(),
        "{} unexpected bytes after 50 replies",
        rest.len()
    );
}

#[test]
fn tcp_stalled_client_does_not_block_others() {
    let _suite = crate::common::suite(module_path!());
    let dir = TestDir::new("stalled");
    let d = Daemon::start(&dir, |p| conf(p, &["tcp-idle-timeout: 500"]));
    let q = query(0x1111, "a.example.", A);

    // Client A: the length prefix and half of the message, then nothing.
    let mut a = tcp_connect(d.addr(), Duration::from_secs(2));
    let mut partial = u16::try_from(q.len()).unwrap().to_be_bytes().to_vec();
    partial.extend_from_slice(&q[..q.len() / 2]);
    a.write_all(&partial).unwrap();
    let stalled_at = Instant::now();
    std::thread::sleep(Duration::from_millis(50));

    // Client B and UDP are served meanwhile.
    let t = Instant::now();
    let mut b = tcp_connect(d.addr(), Duration::from_millis(400));
    tcp_send(&mut b, &query(0x2222, "a.example.", A)).unwrap();
    let r = tcp_read(&mut b)
        .expect("client B is not answered while client A stalls")
        .expect("client B's connection was closed");
    let took = t.elapsed();
    assert_eq!((r.id, r.rcode, r.ancount), (0x2222, NOERROR, 1));
    assert!(took < Duration::from_millis(200), "TCP reply took {took:?}");
    let t = Instant::now();
    let r = udp_query(
        d.addr(),
        &query(0x3333, "a.example.", A),
        Duration::from_millis(400),
    )
    .expect("UDP is not answered while a TCP client stalls");
    let took = t.elapsed();
    assert_eq!((r.rcode, r.ancount), (NOERROR, 1));
    assert!(took < Duration::from_millis(200), "UDP reply took {took:?}");

    // Client A is disconnected by the idle timeout (500 ms), not before, not much later.
    match a.read(&mut [0u8; 64]) {
        Ok(0) => {}
        Ok(n) => panic!("stalled client got {n} bytes instead of being disconnected"),
        Err(e) if is_timeout(&e) => {
            panic!(
                "stalled client still connected after {:?}",
                stalled_at.elapsed()
            )
        }
        // A reset also ends the connection.
        Err(_) => {}
    }
    let closed = stalled_at.elapsed();
    assert!(
        closed >= Duration::from_millis(400) && closed <= Duration::from_millis(1500),
        "stalled client disconnected after {closed:?}, expected about 500 ms"
    );
}

/// `incoming-num-tcp:` bounds the connections open at once; with every slot taken by idle
/// connections, a new one is not left in the backlog: the connection idle longest is
/// closed to make room (and, with every slot in use, the idle timeout is down to 200 ms
/// anyway), so the newcomer is answered at once.
#[test]
fn tcp_connection_limit() {
    let _suite = crate::common::suite(module_path!());
    let dir = TestDir::new("limit");
    let d = Daemon::start(&dir, |p| {
        conf(p, &["incoming-num-tcp: 2", "tcp-idle-timeout: 10000"])
    });
    // Two connections, each proven accepted by a reply, then left idle.
    let mut held = Vec::new();
    for id in [1u16, 2] {
        let mut s = tcp_connect(d.addr(), Duration::from_secs(2));
        tcp_send(&mut s, &query(id, "a.example.", A)).unwrap();
        let r = tcp_read(&mut s)
            .expect("connection within the limit not answered")
            .expect("connection within the limit closed");
        assert_eq!(r.id, id);
        held.push(s);
    }
    // A third one is answered at once...
    let mut third = tcp_connect(d.addr(), Duration::from_secs(2));
    let t = Instant::now();
    tcp_send(&mut third, &query(3, "a.example.", A)).unwrap();
    let r = tcp_read(&mut third)
        .expect("third connection not answered: no idle connection made room")
        .expect("third connection closed instead of answered");
    assert_eq!((r.id, r.rcode, r.ancount), (3, NOERROR, 1));
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t.elapsed()
    );
    // ...because the first, idle longest, was closed.
    held[0]
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    match tcp_read(&mut held[0]) {
        Ok(None) => {}
        // A reset also ends the connection.
        Err(e) if !is_timeout(&e) => {}
        other => panic!("the longest idle connection is still open: {other:?}"),
    }
    // The newcomer keeps working.
    tcp_send(&mut third, &query(4, "a.example.", A)).unwrap();
    let r = tcp_read(&mut third).unwrap().unwrap();
    assert_eq!(r.id, 4);
}

/// A client that sends queries but never reads the replies must not hold its connection
/// (and its slot under `incoming-num-tcp`) forever: once its receive window and the server's
/// buffers are full, the server can make no progress on it, and the idle timeout should
/// apply to that write stall as it does to a read stall (RFC 7766 §6.2.3, §10).
#[test]
fn tcp_client_that_never_reads_is_disconnected() {
    let _suite = crate::common::suite(module_path!());
    let dir = TestDir::new("nonreader");
    let d = Daemon::start(&dir, |p| {
        conf(p, &["incoming-num-tcp: 1", "tcp-idle-timeout: 300"])
    });
    // Client A: a small receive buffer, queries until the server stops taking them.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut a = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        sock.connect(d.addr()).await.unwrap().into_std().unwrap()
    });
    a.set_nonblocking(true).unwrap();
    let mut m = Vec::new();
    let q = query(1, "a.example.", A);
    for _ in 0..64 {
        m.extend_from_slice(&u16::try_from(q.len()).unwrap().to_be_bytes());
        m.extend_from_slice(&q);
    }
    let (start, mut sent, mut blocked_since) = (Instant::now(), 0usize, None);
    while start.elapsed() < Duration::from_secs(5) {
        match a.write(&m) {
            Ok(n) => {
                sent += n;
                blocked_since = None;
            }
            Err(e) if is_timeout(&e) => {
                let since = *blocked_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(100) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("client A write after {sent} bytes: {e}"),
        }
    }
    assert!(
        blocked_since.is_some(),
        "the server kept reading for 5 s ({sent} bytes): test setup failed"
    );
    // Client B must be served once A has been idle (stuck) past the timeout.
    let mut b = tcp_connect(d.addr(), Duration::from_secs(2));
    tcp_send(&mut b, &query(2, "a.example.", A)).unwrap();
    match tcp_read(&mut b) {
        Ok(Some(r)) => assert_eq!(r.id, 2),
        other => panic!(
            "client B not served within 2 s: a client that never reads ({sent} bytes of \
             queries sent) still holds the only TCP slot ({other:?})"
        ),
    }
    drop(a);
}

// ---------------------------------------------------------------------------------------
// Signals and reload.

#[test]
fn sighup_reload_and_bad_reload() {
    let _suite = crate::common::suite(module_path!());
    let dir = TestDir::new("reload");
    let mut d = Daemon::start(&dir, |p| conf(p, &[]));
    let port = d.port;
    let server = d.addr();
    let a_of = |r: &Reply| r.first_a();

    // A steady stream of UDP queries, one at a time, across every reload.
    let stop = Arc::new(AtomicBool::new(false));
    let _stop = StopOnDrop(stop.clone());
    let stream = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut sent, mut lost) = (0u32, Vec::new());
            let mut seen: Vec<Ipv4Addr> = Vec::new();
            let mut id = 0u16;
            while !stop.load(Ordering::Relaxed) {
                id = id.wrapping_add(1);
                sent += 1;
                match udp_query(server, &query(id, "a.example.", A), Duration::from_secs(1)) {
                    Some(r) => {
                        if let Some(a) = r.first_a()
                            && seen.last() != Some(&a)
                        {
                            seen.push(a);
                        }
                    }
                    None => lost.push(id),
                }
            }
            (sent, lost, seen)
        })
    };

    let one = Ipv4Addr::new(198, 18, 0, 1);
    let two = Ipv4Addr::new(198, 18, 0, 2);
    let r = udp_query(server, &query(1, "a.example.", A), Duration::from_secs(1)).unwrap();
    assert_eq!(a_of(&r), Some(one));

    // A good reload.
    let good = conf(port, &[]).replace("198.18.0.1", "198.18.0.2");
    dir.write("skuad.conf", &good);
    d.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let r = udp_query(
            server,
            &query(2, "a.example.", A),
            Duration::from_millis(300),
        );
        if r.as_ref().and_then(a_of) == Some(two) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {r:?} 2 s after SIGHUP; stderr:\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        d.wait_log("reloaded:", Duration::from_secs(1)),
        "{}",
        d.log()
    );
    assert!(
        !d.log().contains("listener settings changed"),
        "same listeners, yet: {}",
        d.log()
    );

    // Bad reloads: rejected with file:line, the previous configuration keeps serving.
    let lines = good.lines().count();
    let bad_data = format!("{good}    local-data: \"b.example. 300 IN A 1.2.3\"\n");
    let bad_syntax = format!("{good}    local-data: \"b.example. 300 IN A 198.18.0.9\n");
    let conf_path = d.conf.display().to_string();
    for (n, bad) in [bad_data, bad_syntax].iter().enumerate() {
        let before = d.log().matches("reload rejected").count();
        dir.write("skuad.conf", bad);
        d.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(2);
        while d.log().matches("reload rejected").count() == before {
            assert!(
                Instant::now() < deadline,
                "bad config {n}: no 'reload rejected' within 2 s; stderr:\n{}",
                d.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let log = d.log();
        let line = log
            .lines()
            .filter(|l| l.contains("reload rejected"))
            .nth(before)
            .unwrap()
            .to_string();
        let at = format!("{conf_path}:{}:", lines + 1);
        assert!(line.contains(&at), "bad config {n}: '{at}' not in: {line}");
        assert!(d.running(), "skuad exited after a bad reload:\n{log}");
        let r = udp_query(server, &query(3, "a.example.", A), Duration::from_secs(1))
            .expect("no answer after a rejected reload");
        assert_eq!(a_of(&r), Some(two), "after rejected reload {n}");
    }

    stop.store(true, Ordering::Relaxed);
    let (sent, lost, seen) = stream.join().unwrap();
    assert!(
        lost.is_empty(),
        "{} of {sent} queries unanswered across reloads: {lost:?}",
        lost.len()
    );
    assert!(sent >= 20, "only {sent} queries sent");
    assert_eq!(
        seen,
        vec![one, two],
        "answers seen in order by the query stream"
    );
}

#[test]
fn sigterm_stops_cleanly() {
    let _suite = crate::common::suite(module_path!());
    for (sig, name) in [(libc::SIGTERM, "TERM"), (libc::SIGINT, "INT")] {
        let dir = TestDir::new(&format!("stop-{name}"));
        let mut d = Daemon::start(&dir, |p| conf(p, &["tcp-idle-timeout: 10000"]));
        // An open TCP connection and recent traffic must not delay the stop.
        let mut s = tcp_connect(d.addr(), Duration::from_secs(1));
        tcp_send(&mut s, &query(9, "a.example.", A)).unwrap();
        assert!(tcp_read(&mut s).unwrap().is_some());
        let t = Instant::now();
        d.signal(sig);
        let st = d
            .wait_exit(Duration::from_secs(2))
            .unwrap_or_else(|| panic!("SIG{name}: still running after 2 s"));
        assert!(
            st.success(),
            "SIG{name}: exit status {st:?}; stderr:\n{}",
            d.log()
        );
        assert!(t.elapsed() < Duration::from_secs(2));
        let log = d.log();
        let stopped = log
            .lines()
            .find(|l| l.contains("stopped:"))
            .unwrap_or_else(|| panic!("SIG{name}: no 'stopped:' line in:\n{log}"));
        assert!(stopped.contains(" queries, "), "{stopped}");
    }
}

/// A signal sent as soon as skuad answers its first query must be handled, not fatal: a
/// supervisor (or `skuad … & dig …; kill -HUP`) sees a serving daemon and may reload it.
#[test]
fn signal_right_after_first_reply_is_handled() {
    let _suite = crate::common::suite(module_path!());
    for i in 0..40 {
        let dir = TestDir::new(&format!("early-hup-{i}"));
        let port = free_port();
        let conf_path = dir.write("skuad.conf", &conf(port, &[]));
        // Traffic from the start, as for a resolver restarted in production.
        let (stop, answered) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let _stop = StopOnDrop(stop.clone());
        let flood = {
            let (stop, answered) = (stop.clone(), answered.clone());
            std::thread::spawn(move || {
                let sock = UdpSocket::bind((LO, 0)).unwrap();
                sock.set_nonblocking(true).unwrap();
                let q = query(7, "a.example.", A);
                let mut buf = [0u8; 512];
                while !stop.load(Ordering::Relaxed) {
                    let _ = sock.send_to(&q, (LO, port));
                    if sock.recv(&mut buf).is_ok() {
                        answered.store(true, Ordering::Relaxed);
                    }
                }
            })
        };
        let mut d = Daemon::spawn(conf_path, port);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !answered.load(Ordering::Relaxed) {
            assert!(
                Instant::now() < deadline,
                "no answer within 5 s: {}",
                d.log()
            );
            std::hint::spin_loop();
        }
        d.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        flood.join().unwrap();
        assert!(
            d.running(),
            "run {i}: skuad was killed by a SIGHUP sent after it answered a query (exit: {:?})",
            d.wait_exit(Duration::from_secs(1)).map(|st| st
                .signal()
                .map_or(format!("{st}"), |n| format!("signal {n}")))
        );
    }
}

// ---------------------------------------------------------------------------------------
// Configuration.

#[test]
fn check_config() {
    let _suite = crate::common::suite(module_path!());
    let dir = TestDir::new("check");
    let good = dir.write(
        "good.conf",
        "server:\n    port: 5353\n    prefetch-key: yes\n    local-data: \"a.example. A 198.18.0.1\"\n",
    );
    let (st, out, err) = run_check_config(Some(&good));
    assert!(st.success(), "good config rejected: {st:?}\n{err}");
    assert!(out.contains("configuration OK: 1 records"), "stdout: {out}");
    let want = format!("{}:3: 'prefetch-key' is not supported", good.display());
    assert!(err.contains(&want), "no '{want}' warning in stderr:\n{err}");

    for (file, text, line, reason) in [
        (
            "bad-data.conf",
            "server:\n    port: 5353\n\n    local-data: \"a.example. A 1.2.3\"\n",
            4,
            "bad IPv4 address",
        ),
        (
            "bad-syntax.conf",
            "server:\n    local-data: \"a.example. A 198.18.0.1\n",
            2,
            "unterminated",
        ),
        (
            "bad-acl.conf",
            "server:\n    access-control: 10.0.0.0/8 permit\n",
            2,
            "access-control",
        ),
    ] {
        let bad = dir.write(file, text);
        let (st, out, err) = run_check_config(Some(&bad));
        assert!(!st.success(), "{file}: accepted: {out}");
        assert_eq!(st.code(), Some(1), "{file}");
        let at = format!("{}:{line}: ", bad.display());
        let msg = err
            .lines()
            .find(|l| l.contains(&at))
            .unwrap_or_else(|| panic!("{file}: no '{at}' in stderr:\n{err}"));
        assert!(msg.contains(reason), "{file}: no '{reason}' in: {msg}");
    }

    let (st, _, err) = run_check_config(Some(&dir.0.join("missing.conf")));
    assert!(!st.success(), "a missing file is accepted");
    assert!(err.contains("missing.conf"), "{err}");
}

#[test]
fn embedded_default_serves() {
    let _suite = crate::common::suite(module_path!());
    // The embedded configuration itself, without binding its fixed port.
    let (st, out, err) = run_check_config(None);
    assert!(st.success(), "embedded config rejected: {err}");
    assert!(
        out.contains("configuration OK: 11 records"),
        "stdout: {out}"
    );
    assert!(
        !err.contains("warning"),
        "embedded config has warnings: {err}"
    );

    // A copy of it on a free port.
    const DEFAULT: &str = include_str!("../../src/control/default.conf");
    assert!(DEFAULT.contains("port: 5353\n"));
    let dir = TestDir::new("default");
    let d = Daemon::start(&dir, |p| {
        DEFAULT.replace("port: 5353\n", &format!("port: {p}\n"))
    });
    let ask = |id: u16, name: &str| {
        udp_query(d.addr(), &query(id, name, A), Duration::from_secs(1))
            .unwrap_or_else(|| panic!("no answer for {name}"))
    };
    let r = ask(1, "www.skua.test.");
    assert_eq!((r.rcode, r.ancount), (NOERROR, 1));
    assert_eq!(r.first_a(), Some(Ipv4Addr::new(198, 18, 0, 10)));

    let r = ask(2, "alias.skua.test.");
    assert_eq!(r.rcode, NOERROR);
    let ans = r.answers();
    assert_eq!(ans.first().map(|a| a.0), Some(CNAME), "answers: {ans:?}");
    // As in Unbound, the target of a local-data CNAME is not chased.
    assert_eq!(ans.len(), 1, "answers: {ans:?}");

    assert_eq!(ask(3, "x.ads.skua.test.").rcode, NXDOMAIN);
    assert_eq!(ask(4, "nothing.skua.test.").rcode, NXDOMAIN);

    // And over TCP.
    let mut s = tcp_connect(d.addr(), Duration::from_secs(1));
    tcp_send(&mut s, &query(5, "www.skua.test.", A)).unwrap();
    let r = tcp_read(&mut s).unwrap().unwrap();
    assert_eq!(r.first_a(), Some(Ipv4Addr::new(198, 18, 0, 10)));
}

// ---------------------------------------------------------------------------------------
// Access control.

#[test]
fn acl_over_udp_and_tcp() {
    let _suite = crate::common::suite(module_path!());
    let dir = TestDir::new("acl");
    let d = Daemon::start(&dir, |p| {
        conf(
            p,
            &[
                "access-control: 127.0.0.1/32 refuse",
                "access-control: 127.0.0.2/32 deny",
            ],
        )
    });
    let allowed: IpAddr = "127.0.0.3".parse().unwrap();
    let refused: IpAddr = "127.0.0.1".parse().unwrap();
    let denied: IpAddr = "127.0.0.2".parse().unwrap();
    let q = query(0x5a5a, "a.example.", A);
    let wait = Duration::from_secs(1);

    // UDP.
    let r = udp_query_from(allowed, d.addr(), &q, wait).expect("allowed client not answered");
    assert_eq!((r.rcode, r.ancount), (NOERROR, 1));
    let r = udp_query_from(refused, d.addr(), &q, wait).expect("refused client got no reply");
    assert_eq!(
        r.raw.len(),
        12,
        "REFUSED reply is a bare header: {:?}",
        r.raw
    );
    assert!(r.is_response());
    assert_eq!(
        (r.id, r.rcode, r.qdcount, r.ancount),
        (0x5a5a, REFUSED, 0, 0)
    );
    let r = udp_query_from(denied, d.addr(), &q, Duration::from_millis(300));
    assert!(r.is_none(), "denied client got a reply: {r:?}");

    // TCP.
    let mut s = tcp_connect_from(allowed, d.addr(), wait);
    tcp_send(&mut s, &q).unwrap();
    let r = tcp_read(&mut s)
        .unwrap()
        .expect("allowed TCP client closed");
    assert_eq!((r.rcode, r.ancount), (NOERROR, 1));

    let mut s = tcp_connect_from(refused, d.addr(), wait);
    tcp_send(&mut s, &q).unwrap();
    let r = tcp_read(&mut s)
        .unwrap()
        .expect("refused TCP client closed");
    assert_eq!(
        r.raw.len(),
        12,
        "REFUSED reply is a bare header: {:?}",
        r.raw
    );
    assert_eq!(
        (r.id, r.rcode, r.qdcount, r.ancount),
        (0x5a5a, REFUSED, 0, 0)
    );

    let mut s = tcp_connect_from(denied, d.addr(), wait);
    tcp_send(&mut s, &q).unwrap();
    let t = Instant::now();
    match s.read(&mut [0u8; 64]) {
        Ok(0) => {}
        Ok(n) => panic!("denied TCP client got {n} bytes"),
        Err(e) if is_timeout(&e) => panic!("denied TCP client's connection still open after 1 s"),
        Err(_) => {}
    }
    assert!(t.elapsed() < wait);

    // The denied client was dropped silently: nothing logged as an error.
    assert!(!d.log().contains("error"), "{}", d.log());
}
