//! Six real-world Unbound configurations (`tests/configs/real-world/*.conf`, each with its
//! source, date and licence in its header) in skuad, unmodified:
//!
//! - `check_config_accepts_the_corpus`: `unbound-checkconf` (the installed Unbound, 1.17)
//!   accepts each file, and so does `skuad --check-config`; its warnings are collected and
//!   none names a directive of the caching forwarder (`forward-zone`, `tls-cert-bundle`,
//!   the cache sizes and TTLs, `prefetch`, `serve-expired*`, `outgoing-*`,
//!   `edns-buffer-size`, `use-caps-for-id`, `do-not-query-localhost`,
//!   `unwanted-reply-threshold`...). The counts per file may only go down (the table below,
//!   also in docs/conformance.md, "Real-world configurations").
//! - one test per forwarder (`02`, `03`, `04`, DNS over TLS to Cloudflare, Google and
//!   Quad9): skuad runs the file in a network namespace of its own with only loopback,
//!   where the config's public upstream addresses (1.1.1.1, 8.8.8.8, 9.9.9.9...) are
//!   added to `lo` and served on port 853 by an Unbound with a test certificate for the
//!   config's `#name` (or, without one, for the addresses); a question for a name in that
//!   Unbound's local data gets its answer through skuad, over TLS, and the repeated
//!   question comes from skuad's cache. Nothing leaves the namespace.
//! - one test per recursive setup (`01`, `05`, `06`): skuad serves the file's local data
//!   (here Unbound's default zones: `localhost.`, the loopback reverse zone) and answers
//!   REFUSED for any other name: recursion from the root is not built yet.
//!
//! What the tests provide around the files, never in them (a file runs as written):
//!
//! - the filesystem the configuration expects, in a private mount namespace (tmpfs over
//!   the directories, nothing written outside the test's own directory): a CA bundle at
//!   the config's `tls-cert-bundle` (`/etc/ssl/cert.pem` on Alpine and OpenBSD,
//!   `/etc/ssl/certs/ca-certificates.crt` on Debian): the system's bundle for
//!   `--check-config`, the test CA when running; for `unbound-checkconf`, the trust
//!   anchor files the configs name (the root zone's KSK-2017 DS record), mvance's chroot
//!   `/opt/unbound/etc/unbound` with `dev/null` and the image's user `_unbound`; an empty
//!   `/run` so that skuad's control socket (`/run/skua/control.sock` for root) stays in it;
//! - the addresses: the upstreams' and, for `05` (open to 192.168.0.0/16), a client
//!   address 192.168.1.2, all on the namespace's `lo` (this kernel has no dummy links);
//! - skuad runs with `--no-xdp` (kernel sockets; XDP has tests of its own).
//!
//! Needs root (network and mount namespaces), `ip`, `unshare`, `unbound`,
//! `unbound-checkconf`, `unbound-control`, `openssl` and `dig`: it asserts root, never
//! skips. Every wait is bounded.
//!
//! Warnings of `skuad --check-config` per file (the issue counted 91 over its six files
//! before forwarding was built; "before" here is skuad at 243bbef, the commit before the
//! forwarder's configuration, on these files):
//!
//! | file | kind | before | now |
//! |---|---|---|---|
//! | 01-pihole-guide.conf | recursive | 11 | 9 |
//! | 02-mvance-unbound-docker.conf | forwarder, DoT | 49 | 34 |
//! | 03-alpine-jsiu-dot.conf | forwarder, DoT | 9 | 6 |
//! | 04-openbsd-quad9-dot.conf | forwarder, DoT | 3 | 1 |
//! | 05-nlnetlabs-getting-started.conf | recursive | 2 | 2 |
//! | 06-debian-default.conf | recursive | 2 | 2 |
//! | total | | 76 | 54 |

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{SKUAD, assert_root, run_bounded};

/// The corpus and, per file, the most warnings `skuad --check-config` may give.
const CORPUS: [(&str, usize); 6] = [
    ("01-pihole-guide.conf", 9),
    ("02-mvance-unbound-docker.conf", 34),
    ("03-alpine-jsiu-dot.conf", 6),
    ("04-openbsd-quad9-dot.conf", 1),
    ("05-nlnetlabs-getting-started.conf", 2),
    ("06-debian-default.conf", 2),
];

/// The directives the caching forwarder implements: no warning may name one.
const FORWARDER_DIRECTIVES: [&str; 21] = [
    "forward-zone",
    "stub-zone",
    "tls-cert-bundle",
    "tls-system-cert",
    "msg-cache-size",
    "rrset-cache-size",
    "cache-min-ttl",
    "cache-max-ttl",
    "cache-max-negative-ttl",
    "prefetch",
    "serve-expired",
    "serve-expired-ttl",
    "serve-expired-reply-ttl",
    "serve-expired-client-timeout",
    "outgoing-range",
    "outgoing-port-permit",
    "outgoing-port-avoid",
    "edns-buffer-size",
    "use-caps-for-id",
    "do-not-query-localhost",
    "unwanted-reply-threshold",
];

/// The root zone's trust anchor (KSK-2017) as a DS record: what `unbound-anchor` writes
/// first, for the configs' `auto-trust-anchor-file:` (unbound-checkconf loads it).
const ROOT_DS: &str =
    ". IN DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D";

/// The name the test upstream serves, and its address.
const TEST_NAME: &str = "www.real-world.skua.example.";
const TEST_ADDR: &str = "198.51.100.7";

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/configs/real-world")
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A directory of the test's own, removed when the test passes.
struct Work(PathBuf);

impl Work {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("skua-rw-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Work(d)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A network namespace with `lo` up and the given addresses on it; deleted on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str, addrs: &[&str]) -> Self {
        let ns = Netns(format!("skua-rw-{tag}-{}", std::process::id()));
        let _ = Command::new("ip")
            .args(["netns", "del", &ns.0])
            .stderr(Stdio::null())
            .status();
        ok(
            &run_bounded(10, "ip", &["netns", "add", &ns.0]),
            "ip netns add",
        );
        ok(
            &run_bounded(10, "ip", &["-n", &ns.0, "link", "set", "lo", "up"]),
            "lo up",
        );
        for a in addrs {
            let (prefix, extra): (String, &[&str]) = if a.contains(':') {
                (format!("{a}/128"), &["nodad"])
            } else {
                (format!("{a}/32"), &[])
            };
            let mut args = vec!["-n", &ns.0, "addr", "add", &prefix, "dev", "lo"];
            args.extend_from_slice(extra);
            ok(&run_bounded(10, "ip", &args), &format!("address {a}"));
        }
        ns
    }

    /// `ip netns exec NS CMD ARGS`, killed after `secs`.
    fn run(&self, secs: u32, cmd: &str, args: &[&str]) -> Output {
        let mut all = vec!["netns", "exec", &self.0, cmd];
        all.extend_from_slice(args);
        run_bounded(secs, "ip", &all)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A daemon (skuad or Unbound) in the namespace: SIGTERM on drop, then SIGKILL.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts `sh -c SCRIPT` in the namespace and in a mount namespace of its own; the
    /// script ends by exec'ing the daemon, so the child is the daemon.
    fn start(ns: &Netns, script: &str, log: PathBuf) -> Self {
        let out = std::fs::File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.0,
                "unshare",
                "-m",
                "--propagation",
                "private",
            ])
            .args(["sh", "-c", script])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start a daemon");
        Daemon { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn assert_running(&mut self, what: &str) {
        if let Some(st) = self.child.try_wait().unwrap() {
            panic!("{what} exited ({st}):\n{}", self.log());
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `dig` saw: the status and the answer records as "name ttl class type data".
#[derive(Debug)]
struct Dig {
    status: String,
    answers: Vec<String>,
}

impl Dig {
    /// The rdata of the answers of type `t`.
    fn data(&self, t: &str) -> Vec<String> {
        self.answers
            .iter()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 5 && f[3] == t).then(|| f[4..].join(" "))
            })
            .collect()
    }
}

/// `dig` in the namespace: one try of 2 s (`extra`: `+tls`, `-b ADDR`...); `None` when
/// nothing answered.
fn dig(
    ns: &Netns,
    server: &str,
    port: u16,
    name: &str,
    qtype: &str,
    extra: &[&str],
) -> Option<Dig> {
    let at = format!("@{server}");
    let p = port.to_string();
    let mut args = vec![
        at.as_str(),
        "-p",
        &p,
        "+time=2",
        "+tries=1",
        "+noall",
        "+comments",
        "+answer",
        name,
        qtype,
    ];
    args.extend_from_slice(extra);
    let out = ns.run(10, "dig", &args);
    let text = String::from_utf8_lossy(&out.stdout);
    let status = text
        .lines()
        .find_map(|l| l.split("status: ").nth(1))?
        .split(',')
        .next()?
        .to_string();
    let answers = text
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    Some(Dig { status, answers })
}

/// Asks until an answer comes (at most 20 s), failing early if the daemon exits.
fn wait_answer(
    ns: &Netns,
    d: &mut Daemon,
    what: &str,
    server: &str,
    port: u16,
    name: &str,
    extra: &[&str],
) {
    let t0 = Instant::now();
    loop {
        d.assert_running(what);
        if dig(ns, server, port, name, "A", extra).is_some() {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{what} did not answer on {server}@{port} within 20 s:\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Shell that gives the daemon the filesystem its configuration expects: an empty `/run`
/// (skuad's control socket) and a tmpfs over `/etc/ssl` with `bundle` at the Alpine and
/// OpenBSD path `/etc/ssl/cert.pem` and at Debian's `/etc/ssl/certs/ca-certificates.crt`.
fn os_view(bundle: &Path) -> String {
    let b = bundle.display();
    format!(
        "set -e; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /etc/ssl; mkdir /etc/ssl/certs; \
         cp '{b}' /etc/ssl/cert.pem; cp '{b}' /etc/ssl/certs/ca-certificates.crt; "
    )
}

/// Does `text` name `directive` (as a whole word: `prefetch` is not in `prefetch-key`)?
fn names(text: &str, directive: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '-';
    text.match_indices(directive).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + directive.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

#[test]
fn names_matches_whole_directives() {
    let _suite = crate::common::suite(module_path!());
    assert!(names("a.conf:3: 'prefetch' is not supported", "prefetch"));
    assert!(!names(
        "a.conf:3: 'prefetch-key' is not supported",
        "prefetch"
    ));
    assert!(!names(
        "'serve-expired-ttl-reset' is accepted",
        "serve-expired-ttl"
    ));
    assert!(names("clause 'forward-zone:' is not", "forward-zone"));
}

#[test]
fn check_config_accepts_the_corpus() {
    let _suite = crate::common::suite(module_path!());
    assert_root("network and mount namespaces");
    let work = Work::new("check");
    let dir = corpus_dir();
    // unbound-checkconf: the files its checks open, on tmpfs in a private mount namespace:
    // the trust anchors of 02 (in mvance's chroot), 05 and 06, the chroot's dev/null, and
    // the users the files name (the image's _unbound; Debian's package makes unbound).
    let passwd = work.path("passwd");
    let checkconf_env = format!(
        "set -e; cp /etc/passwd '{p}'; \
         for u in _unbound unbound; do grep -q \"^$u:\" '{p}' || echo \"$u:x:65400:65400::/nonexistent:/usr/sbin/nologin\" >> '{p}'; done; \
         mount --bind '{p}' /etc/passwd; \
         mount -t tmpfs tmpfs /opt; mkdir -p /opt/unbound/etc/unbound/var /opt/unbound/etc/unbound/dev; \
         : > /opt/unbound/etc/unbound/dev/null; echo '{ds}' > /opt/unbound/etc/unbound/var/root.key; \
         mount -t tmpfs tmpfs /usr/local; mkdir -p /usr/local/etc/unbound; echo '{ds}' > /usr/local/etc/unbound/root.key; \
         mount -t tmpfs tmpfs /var/lib; mkdir -p /var/lib/unbound; echo '{ds}' > /var/lib/unbound/root.key; ",
        p = passwd.display(),
        ds = ROOT_DS
    );
    // skuad --check-config: the system's CA bundle where the files expect one.
    let system_bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    assert!(
        system_bundle.exists(),
        "no system CA bundle at {system_bundle:?}"
    );
    let bundle = work.path("system-bundle.pem");
    std::fs::copy(system_bundle, &bundle).unwrap();
    let skuad_env = os_view(&bundle);

    let mut total = 0;
    let mut table = String::from("file | warnings (at most)\n");
    let mut failures = Vec::new();
    for (file, most) in CORPUS {
        let path = dir.join(file);
        let path = path.to_str().unwrap();
        let script = format!("{checkconf_env} exec unbound-checkconf '{path}'");
        let out = run_bounded(
            30,
            "unshare",
            &["-m", "--propagation", "private", "sh", "-c", &script],
        );
        ok(&out, &format!("unbound-checkconf {file}"));

        let script = format!("{skuad_env} exec '{SKUAD}' --check-config '{path}'");
        let out = run_bounded(
            30,
            "unshare",
            &["-m", "--propagation", "private", "sh", "-c", &script],
        );
        ok(&out, &format!("skuad --check-config {file}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let warnings: Vec<&str> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("warning: "))
            .collect();
        assert!(
            stdout.contains(&format!("{} warnings", warnings.len())),
            "{file}: the summary does not count {} warnings: {stdout}",
            warnings.len()
        );
        for w in &warnings {
            for d in FORWARDER_DIRECTIVES {
                if names(w, d) {
                    failures.push(format!("{file}: a warning names '{d}': {w}"));
                }
            }
        }
        if warnings.len() > most {
            failures.push(format!(
                "{file}: {} warnings, more than the {most} of the table (real_world.rs, docs/conformance.md):\n  {}",
                warnings.len(),
                warnings.join("\n  ")
            ));
        }
        table.push_str(&format!("{file} | {} ({most})\n", warnings.len()));
        total += warnings.len();
    }
    table.push_str(&format!("total | {total}\n"));
    println!("{table}");
    assert!(failures.is_empty(), "{}\n{table}", failures.join("\n"));
}

/// A forwarding configuration of the corpus and what it needs around it.
struct Forwarder {
    file: &'static str,
    /// The `forward-addr:` lines of the file, as written (checked to be there).
    forward_addrs: &'static [&'static str],
    /// The names its upstreams' certificate must carry: the `#name`s, or with none the
    /// addresses (skuad then checks the certificate against the address).
    cert_names: &'static [&'static str],
    /// Where skuad listens (from the file's `interface:`): (address, port).
    listen: &'static [(&'static str, u16)],
}

fn forwarder(tag: &str, f: &Forwarder) {
    assert_root("network and mount namespaces");
    let t0 = Instant::now();
    let work = Work::new(tag);
    let conf = corpus_dir().join(f.file);
    let text = std::fs::read_to_string(&conf).unwrap();
    let mut upstreams: Vec<&str> = Vec::new();
    for a in f.forward_addrs {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("forward-addr: {a}"))),
            "{}: no 'forward-addr: {a}'",
            f.file
        );
        upstreams.push(a.split('@').next().unwrap());
    }

    // A test CA and a certificate for the upstreams (openssl, as tests/resolver/dot.py).
    let sh = |script: &str, what: &str| ok(&run_bounded(60, "sh", &["-ec", script]), what);
    let san: Vec<String> = f
        .cert_names
        .iter()
        .map(|n| match n.parse::<std::net::IpAddr>() {
            Ok(_) => format!("IP:{n}"),
            Err(_) => format!("DNS:{n}"),
        })
        .collect();
    work.write(
        "ext.cnf",
        &format!(
            "subjectAltName={}\nextendedKeyUsage=serverAuth\n",
            san.join(",")
        ),
    );
    sh(
        &format!(
            "cd '{w}'; \
             openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=Skua real-world test CA' 2>/dev/null; \
             openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr -subj '/CN={cn}' 2>/dev/null; \
             openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile ext.cnf 2>/dev/null",
            w = work.0.display(),
            cn = f.cert_names[0]
        ),
        "test certificates",
    );

    // The namespace: loopback with the upstreams' public addresses.
    let ns = Netns::new(tag, &upstreams);

    // The upstream: Unbound serving DNS over TLS on each upstream address, with the test
    // name in its local data (anything else would need recursion: SERVFAIL at once here).
    let mut up_conf = String::from("server:\n");
    for u in &upstreams {
        up_conf.push_str(&format!("  interface: {u}@853\n"));
    }
    up_conf.push_str(&format!(
        "  tls-port: 853\n  tls-service-key: \"{w}/srv.key\"\n  tls-service-pem: \"{w}/srv.pem\"\n\
         \x20 do-daemonize: no\n  use-syslog: no\n  username: \"\"\n  chroot: \"\"\n  pidfile: \"\"\n\
         \x20 directory: \"{w}\"\n  access-control: 0.0.0.0/0 allow\n  access-control: ::/0 allow\n\
         \x20 extended-statistics: yes\n\
         \x20 local-zone: \"real-world.skua.example.\" static\n\
         \x20 local-data: \"{TEST_NAME} 300 IN A {TEST_ADDR}\"\n\
         remote-control:\n  control-enable: yes\n  control-interface: \"{w}/up.ctl\"\n  control-use-cert: no\n",
        w = work.0.display()
    ));
    let up_conf_path = work.write("upstream.conf", &up_conf);
    let mut upstream = Daemon::start(
        &ns,
        &format!("exec unbound -d -c '{}'", up_conf_path.display()),
        work.path("upstream.log"),
    );
    for u in &upstreams {
        wait_answer(
            &ns,
            &mut upstream,
            "the upstream Unbound",
            u,
            853,
            TEST_NAME,
            &["+tls"],
        );
    }

    // skuad with the file as written; the test CA where the file's tls-cert-bundle is.
    let mut skuad = Daemon::start(
        &ns,
        &format!(
            "{} exec '{SKUAD}' --no-xdp --config '{}'",
            os_view(&work.path("ca.pem")),
            conf.display()
        ),
        work.path("skuad.log"),
    );
    let (addr, port) = f.listen[0];
    wait_answer(&ns, &mut skuad, "skuad", addr, port, "localhost.", &[]);

    let tls_queries = || {
        let out = ns.run(
            20,
            "unbound-control",
            &["-c", up_conf_path.to_str().unwrap(), "stats_noreset"],
        );
        ok(&out, "unbound-control stats_noreset");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("num.query.tls="))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = tls_queries();
    for &(addr, port) in f.listen {
        let r = dig(&ns, addr, port, TEST_NAME, "A", &[]).unwrap_or_else(|| {
            panic!(
                "{}: no answer from skuad on {addr}@{port}:\n{}",
                f.file,
                skuad.log()
            )
        });
        assert_eq!(
            (r.status.as_str(), r.data("A")),
            ("NOERROR", vec![TEST_ADDR.to_string()]),
            "{}: {TEST_NAME} through skuad on {addr}@{port}: {r:?}\nskuad:\n{}\nupstream:\n{}",
            f.file,
            skuad.log(),
            upstream.log()
        );
    }
    let after = tls_queries();
    assert!(
        after > before,
        "{}: the upstream counted no question over TLS ({before} then {after})",
        f.file
    );
    // Asked again: from skuad's cache, the upstream asked nothing more.
    let r = dig(&ns, addr, port, TEST_NAME, "A", &[]).expect("a second answer");
    assert_eq!(
        r.data("A"),
        vec![TEST_ADDR.to_string()],
        "{}: {r:?}",
        f.file
    );
    assert_eq!(
        tls_queries(),
        after,
        "{}: the repeated question reached the upstream",
        f.file
    );
    skuad.assert_running("skuad");
    println!(
        "{}: {TEST_NAME} answered {TEST_ADDR} through skuad over DNS over TLS to {} ({:.1} s)",
        f.file,
        upstreams.join(", "),
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn forwarder_02_mvance_container_default_resolves() {
    let _suite = crate::common::suite(module_path!());
    forwarder(
        "fwd02",
        &Forwarder {
            file: "02-mvance-unbound-docker.conf",
            forward_addrs: &[
                "1.1.1.1@853#cloudflare-dns.com",
                "1.0.0.1@853#cloudflare-dns.com",
            ],
            cert_names: &["cloudflare-dns.com"],
            listen: &[("127.0.0.1", 53)],
        },
    );
}

#[test]
fn forwarder_03_alpine_dot_without_names_resolves() {
    let _suite = crate::common::suite(module_path!());
    forwarder(
        "fwd03",
        &Forwarder {
            file: "03-alpine-jsiu-dot.conf",
            forward_addrs: &["8.8.8.8@853", "8.8.4.4@853", "1.1.1.1@853", "1.0.0.1@853"],
            cert_names: &["8.8.8.8", "8.8.4.4", "1.1.1.1", "1.0.0.1"],
            listen: &[("127.0.0.1", 53)],
        },
    );
}

#[test]
fn forwarder_04_openbsd_quad9_resolves() {
    let _suite = crate::common::suite(module_path!());
    forwarder(
        "fwd04",
        &Forwarder {
            file: "04-openbsd-quad9-dot.conf",
            forward_addrs: &[
                "9.9.9.9@853#dns.quad9.net",
                "149.112.112.112@853#dns.quad9.net",
            ],
            cert_names: &["dns.quad9.net"],
            listen: &[("127.0.0.1", 53), ("::1", 53)],
        },
    );
}

/// A recursive configuration: it loads, serves Unbound's default local data, and REFUSES
/// what it would have to resolve from the root. Each client address asks skuad on that
/// same address (a wildcard listener answers from the address asked, as Unbound's).
fn recursive(tag: &str, file: &str, port: u16, clients: &[&str]) {
    assert_root("network and mount namespaces");
    let t0 = Instant::now();
    let work = Work::new(tag);
    let conf = corpus_dir().join(file);
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        !text.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("forward-zone:") || l.starts_with("stub-zone:")
        }),
        "{file} is not recursive"
    );
    let extra: Vec<&str> = clients
        .iter()
        .copied()
        .filter(|c| *c != "127.0.0.1" && *c != "::1")
        .collect();
    let ns = Netns::new(tag, &extra);
    let system_bundle = work.path("bundle.pem");
    std::fs::copy("/etc/ssl/certs/ca-certificates.crt", &system_bundle).unwrap();
    let mut skuad = Daemon::start(
        &ns,
        &format!(
            "{} exec '{SKUAD}' --no-xdp --config '{}'",
            os_view(&system_bundle),
            conf.display()
        ),
        work.path("skuad.log"),
    );
    wait_answer(
        &ns,
        &mut skuad,
        "skuad",
        clients[0],
        port,
        "localhost.",
        &[],
    );
    for &c in clients {
        let from = ["-b", c];
        let ask = |name: &str, t: &str| {
            dig(&ns, c, port, name, t, &from)
                .unwrap_or_else(|| panic!("{file}: no answer to {name} {t} on {c}@{port}"))
        };
        let r = ask("localhost.", "A");
        assert_eq!(
            (r.status.as_str(), r.data("A")),
            ("NOERROR", vec!["127.0.0.1".to_string()]),
            "{file}: localhost. A on {c}: {r:?}"
        );
        let r = ask("1.0.0.127.in-addr.arpa.", "PTR");
        assert_eq!(
            (r.status.as_str(), r.data("PTR")),
            ("NOERROR", vec!["localhost.".to_string()]),
            "{file}: 1.0.0.127.in-addr.arpa. PTR on {c}: {r:?}"
        );
        let r = ask("www.example.com.", "A");
        assert_eq!(
            (r.status.as_str(), r.answers.len()),
            ("REFUSED", 0),
            "{file}: www.example.com. on {c} (recursion is not built: REFUSED): {r:?}"
        );
    }
    skuad.assert_running("skuad");
    println!(
        "{file}: local data answered, www.example.com. REFUSED (no recursion yet), on {} ({:.1} s)",
        clients.join(", "),
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn recursive_01_pihole_guide_serves_local_data_and_refuses_the_rest() {
    let _suite = crate::common::suite(module_path!());
    recursive("rec01", "01-pihole-guide.conf", 5335, &["127.0.0.1"]);
}

#[test]
fn recursive_05_nlnetlabs_serves_local_data_and_refuses_the_rest() {
    let _suite = crate::common::suite(module_path!());
    // Open to 192.168.0.0/16 by the file, and to localhost by Unbound's defaults.
    recursive(
        "rec05",
        "05-nlnetlabs-getting-started.conf",
        53,
        &["127.0.0.1", "192.168.1.2"],
    );
}

#[test]
fn recursive_06_debian_default_serves_local_data_and_refuses_the_rest() {
    let _suite = crate::common::suite(module_path!());
    // Unbound's default interfaces: 127.0.0.1 and ::1.
    recursive("rec06", "06-debian-default.conf", 53, &["127.0.0.1", "::1"]);
}
