//! The two differential suites: set up namespace, configs and daemons, send
//! the generated queries to reference and subject, compare.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::compare::{
    Difference, Options, Report, Suite, allowed_by, apply_masks, describe_allow_list,
    differing_aspects,
};
use crate::daemon::Daemon;
use crate::fwdgen::{ForwardScenario, FwdMode, PROBE_NAME};
use crate::netns::{NetNs, TempDir, run_bounded, run_bounded_in};
use crate::querygen::{AUTH_ORIGIN, AuthScenario, LocalScenario};
use crate::transport::{Reply, tcp_exchange, udp_exchange};
use crate::wire::{EdnsQuery, Query, Response, rcode_name, types};

/// Port of the reference server inside the test namespace.
pub const REFERENCE_PORT: u16 = 5301;
/// Port of the subject server inside the test namespace.
pub const SUBJECT_PORT: u16 = 5302;
/// Port of the upstream (NSD) of the forwarding suite.
pub const UPSTREAM_PORT: u16 = 5310;
/// Default generator seed (override with `SKUA_CONFORMANCE_SEED`).
pub const DEFAULT_SEED: u64 = 0x5ca1_ab1e;
/// How many differences a failure message lists.
pub const SHOWN_DIFFERENCES: usize = 20;

const UDP_WINDOW: usize = 128;
const UDP_TIMEOUT: Duration = Duration::from_millis(1000);
const TCP_TIMEOUT: Duration = Duration::from_millis(1500);
const TCP_WORKERS: usize = 8;
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Forwarding suite: wait between the miss and the hit pass, so that the hits count down
/// and the 1-s TTLs have expired (answered again from upstream, partly from cached RRsets).
const PASS_PAUSE: Duration = Duration::from_secs(3);

/// What is compared against the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// The skuad binary (default).
    Skuad,
    /// A second instance of the reference itself (unbound vs unbound, nsd
    /// vs nsd): must give zero differences; validates the harness.
    SelfTest,
}

impl Subject {
    /// From `SKUA_SUBJECT`: unset or `skuad` -> skuad; `unbound`, `nsd` or
    /// `self` -> self-test of the reference.
    pub fn from_env() -> Result<Subject, String> {
        match std::env::var("SKUA_SUBJECT").as_deref() {
            Err(_) | Ok("") | Ok("skuad") => Ok(Subject::Skuad),
            Ok("unbound") | Ok("nsd") | Ok("self") => Ok(Subject::SelfTest),
            Ok(other) => Err(format!(
                "SKUA_SUBJECT={other}: expected skuad, unbound, nsd or self"
            )),
        }
    }
}

/// The generator seed in force.
pub fn seed() -> u64 {
    std::env::var("SKUA_CONFORMANCE_SEED")
        .ok()
        .and_then(|s| {
            let s = s.trim();
            s.strip_prefix("0x")
                .map_or_else(|| s.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
        })
        .unwrap_or(DEFAULT_SEED)
}

/// Full path of a system program (PATH, then the sbin directories).
pub fn find_program(name: &str) -> Result<PathBuf, String> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .filter(|d| !d.is_empty())
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "{name} not found (PATH or /usr/sbin); install it (Debian: apt-get install {name})"
            )
        })
}

fn preflight() -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    if uid != 0 {
        return Err("the differential tests need root (network namespaces)".into());
    }
    find_program("ip").map(|_| ())
}

/// Path of the skuad binary: `SKUAD_BIN`, else `<test exe dir>/../skuad`,
/// built with `cargo build -p skuad --bin skuad` when missing.
pub fn skuad_binary() -> Result<PathBuf, String> {
    static SKUAD: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    SKUAD.get_or_init(locate_or_build_skuad).clone()
}

fn locate_or_build_skuad() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SKUAD_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let deps = exe.parent().ok_or("test exe has no directory")?;
    let profile_dir = deps.parent().ok_or("test exe dir has no parent")?;
    let candidate = profile_dir.join("skuad");
    if candidate.is_file() {
        return Ok(candidate);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
    let mut args = vec!["build", "-p", "skuad", "--bin", "skuad"];
    if profile_dir.file_name().and_then(|n| n.to_str()) == Some("release") {
        args.push("--release");
    }
    // Run from this crate's directory: cargo finds the workspace from there
    // (and its config, e.g. build.target-dir); CARGO_TARGET_DIR is inherited.
    eprintln!(
        "skuad not found at {}; running {cargo} {}",
        candidate.display(),
        args.join(" ")
    );
    run_bounded_in(
        Some(Path::new(env!("CARGO_MANIFEST_DIR"))),
        &cargo,
        &args,
        Duration::from_secs(1200),
    )?;
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(format!(
            "cargo build -p skuad succeeded but {} does not exist (CARGO_TARGET_DIR mismatch?)",
            candidate.display()
        ))
    }
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("non-UTF-8 path {}", p.display()))
}

fn start_skuad(ns: &NetNs, tmp: &TempDir, conf: &Path) -> Result<Daemon, String> {
    let bin = skuad_binary()?;
    let conf_s = path_str(conf)?;
    let bin_s = path_str(&bin)?;
    match run_bounded(bin_s, &["--check-config", conf_s], Duration::from_secs(30)) {
        Ok(out) => {
            if !out.trim().is_empty() {
                println!("skuad --check-config: {}", out.trim());
            }
        }
        Err(e) => return Err(format!("skuad rejects the test configuration: {e}")),
    }
    Daemon::spawn(
        ns,
        "skuad",
        &bin,
        &["--config".to_string(), conf_s.to_string()],
        &tmp.path().join("skuad.log"),
    )
}

fn simple_query(qname: &str, qtype: u16) -> Query {
    Query {
        qname: qname.into(),
        qtype,
        qclass: 1,
        rd: true,
        cd: false,
        edns: Some(EdnsQuery {
            udp_size: 1232,
            dnssec_ok: false,
        }),
        tcp: false,
        category: "probe",
        needs_resolution: false,
    }
}

/// Polls `port` with `probe` until it answers (bounded by [`READY_TIMEOUT`]).
fn wait_ready(ns: &NetNs, daemon: &mut Daemon, port: u16, probe: &Query) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let wire = probe.to_wire(0x4242);
    loop {
        daemon.check_running()?;
        let items = [(0x4242u16, wire.clone())];
        let r = ns.run_in(|| udp_exchange(addr, &items, 1, Duration::from_millis(200)))??;
        if matches!(r.first(), Some(Reply::Message(_))) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{} did not answer on port {port} within {READY_TIMEOUT:?}; log:\n{}",
                daemon.label(),
                daemon.log_tail(40)
            ));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Sends every query to `port` (UDP with a sliding window, TCP on a worker
/// pool). Call inside the namespace.
fn query_all(ns: &NetNs, port: u16, queries: &[Query], ids: &[u16]) -> Result<Vec<Reply>, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut replies = vec![Reply::None; queries.len()];
    let udp: Vec<usize> = (0..queries.len()).filter(|&i| !queries[i].tcp).collect();
    let tcp: Vec<usize> = (0..queries.len()).filter(|&i| queries[i].tcp).collect();
    let items: Vec<(u16, Vec<u8>)> = udp
        .iter()
        .map(|&i| (ids[i], queries[i].to_wire(ids[i])))
        .collect();
    let got = udp_exchange(addr, &items, UDP_WINDOW, UDP_TIMEOUT)?;
    for (k, r) in got.into_iter().enumerate() {
        replies[udp[k]] = r;
    }
    let next = AtomicUsize::new(0);
    let tcp_results: Vec<Result<Vec<(usize, Reply)>, String>> = thread::scope(|s| {
        let workers: Vec<_> = (0..TCP_WORKERS)
            .map(|_| {
                s.spawn(|| -> Result<Vec<(usize, Reply)>, String> {
                    ns.enter_current_thread()?;
                    let mut mine = Vec::new();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&i) = tcp.get(k) else { break };
                        let r = tcp_exchange(addr, &queries[i].to_wire(ids[i]), TCP_TIMEOUT)?;
                        mine.push((i, r));
                    }
                    Ok(mine)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("tcp worker panicked".into()))
            })
            .collect()
    });
    for part in tcp_results {
        for (i, r) in part? {
            replies[i] = r;
        }
    }
    Ok(replies)
}

struct Run<'a> {
    suite: Suite,
    title: &'static str,
    ns: &'a NetNs,
    queries: Vec<Query>,
    reference_name: String,
    subject_name: String,
    check_model: bool,
    /// How many times the whole set is sent (forwarding: 2, a miss then a hit).
    passes: usize,
    /// Compare TTLs within the seconds elapsed since the first query (plus two).
    ttl_tolerance: bool,
    /// Wait between passes (forwarding: the cache counts down meanwhile).
    pause: Duration,
    /// Printed with each difference (e.g. the configuration).
    note: String,
    /// The subject is a second instance of the reference.
    self_test: bool,
}

/// Sends every query to both servers at once; a UDP query answered by one side only is
/// asked again on the silent side.
fn exchange_both(
    ns: &NetNs,
    queries: &[Query],
    ids: &[u16],
) -> Result<(Vec<Reply>, Vec<Reply>), String> {
    let (ref_replies, sub_replies) = thread::scope(|s| {
        let a = s.spawn(|| ns.run_in(|| query_all(ns, REFERENCE_PORT, queries, ids)));
        let b = s.spawn(|| ns.run_in(|| query_all(ns, SUBJECT_PORT, queries, ids)));
        let ra = a
            .join()
            .map_err(|_| "reference query thread panicked".to_string());
        let rb = b
            .join()
            .map_err(|_| "subject query thread panicked".to_string());
        (ra, rb)
    });
    let mut ref_replies = ref_replies???;
    let mut sub_replies = sub_replies???;
    // A UDP query answered by one side only is asked again on the silent side (loss is
    // not expected on loopback, but a lost datagram must not show up as a difference).
    // Queries both sides drop cost no retry.
    let one_sided = |mine: &[Reply], other: &[Reply]| -> Vec<usize> {
        (0..queries.len())
            .filter(|&i| !queries[i].tcp && mine[i] == Reply::None && other[i] != Reply::None)
            .collect()
    };
    let retry_ref = one_sided(&ref_replies, &sub_replies);
    let retry_sub = one_sided(&sub_replies, &ref_replies);
    for (retry, replies, port) in [
        (retry_ref, &mut ref_replies, REFERENCE_PORT),
        (retry_sub, &mut sub_replies, SUBJECT_PORT),
    ] {
        if retry.is_empty() {
            continue;
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let items: Vec<(u16, Vec<u8>)> = retry
            .iter()
            .map(|&i| (ids[i], queries[i].to_wire(ids[i])))
            .collect();
        let got = ns.run_in(|| udp_exchange(addr, &items, UDP_WINDOW, UDP_TIMEOUT))??;
        for (k, r) in got.into_iter().enumerate() {
            replies[retry[k]] = r;
        }
    }
    Ok((ref_replies, sub_replies))
}

fn differential(run: Run<'_>, daemons: &mut [&mut Daemon]) -> Result<Report, String> {
    let started = Instant::now();
    let queries = &run.queries;
    // Distinct IDs (a bijection of the index), identical for both servers.
    let ids: Vec<u16> = (0..queries.len())
        .map(|i| ((i & 0xffff) as u16).wrapping_mul(0x9e37) ^ 0x5a5a)
        .collect();
    let ns = run.ns;
    let mut report = Report {
        title: run.title.to_string(),
        reference: run.reference_name.clone(),
        subject: run.subject_name.clone(),
        total: queries.len() * run.passes,
        tcp: queries.iter().filter(|q| q.tcp).count() * run.passes,
        ..Report::default()
    };
    for pass in 1..=run.passes {
        if pass > 1 && !run.pause.is_zero() {
            // Let the caches count down and the shortest TTLs expire before the hits.
            thread::sleep(run.pause);
        }
        let (ref_replies, sub_replies) = exchange_both(ns, queries, &ids)?;
        for d in daemons.iter_mut() {
            d.check_running()
                .map_err(|e| format!("daemon died during the run: {e}"))?;
        }
        let mut opts = Options::for_suite(run.suite);
        opts.self_test = run.self_test;
        if run.ttl_tolerance {
            // Each server's TTLs count down from when it got the RRset, and either may
            // have fetched an RRset again in the meantime (an expired answer, a reply that
            // replaced it): its TTLs may differ from the other's by the time elapsed since
            // the first query, pause included; each side rounds to whole seconds.
            let secs = started.elapsed().as_secs_f64().ceil() as u64 + 2;
            opts = opts.with_ttl_tolerance(u32::try_from(secs).unwrap_or(u32::MAX));
        }
        let pass_label = match (run.passes, pass) {
            (1, _) => String::new(),
            (_, 1) => "pass 1 (cache miss)".to_string(),
            (_, n) => format!("pass {n} (cache hit)"),
        };
        let before = report.differences.len();
        compare_pass(
            &run,
            pass,
            opts,
            &ref_replies,
            &sub_replies,
            &pass_label,
            &mut report,
        );
        if run.passes > 1 {
            report.per_pass.push((
                format!("{} {pass_label}", run.note),
                queries.len(),
                report.differences.len() - before,
                opts.ttl_tolerance,
            ));
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn compare_pass(
    run: &Run<'_>,
    pass: usize,
    opts: Options,
    ref_replies: &[Reply],
    sub_replies: &[Reply],
    pass_label: &str,
    report: &mut Report,
) {
    for (i, q) in run.queries.iter().enumerate() {
        let parse = |r: &Reply| match r {
            Reply::None => None,
            Reply::Message(m) => Some(Response::parse(m)),
        };
        let (ra, rb) = (parse(&ref_replies[i]), parse(&sub_replies[i]));
        if ra.is_none() && rb.is_none() {
            *report.silent.entry(q.category).or_default() += 1;
        }
        let key = ra
            .as_ref()
            .map_or("no reply".to_string(), |r| rcode_name(r.rcode()));
        *report.reference_rcodes.entry(key).or_default() += 1;
        if run.check_model
            && pass == 1
            && q.rd
            && let Some(r) = &ra
        {
            let servfail = r.rcode() == 2 && !r.header.aa;
            if servfail != q.needs_resolution {
                report.model_mismatches.push(format!(
                    "{} -> {} (model: {})",
                    q.describe(),
                    rcode_name(r.rcode()),
                    if q.needs_resolution {
                        "resolution"
                    } else {
                        "local"
                    }
                ));
            }
        }
        if let (Some(a), Some(b)) = (&ra, &rb)
            && opts.ignore_ra
            && a.header.ra != b.header.ra
        {
            report.ra_masked += 1;
        }
        let mut aspects = differing_aspects(ra.as_ref(), rb.as_ref(), opts);
        for id in apply_masks(run.suite, q, ra.as_ref(), rb.as_ref(), opts, &mut aspects) {
            *report.allowed.entry(id).or_default() += 1;
        }
        let cat = report.per_category.entry(q.category).or_default();
        cat.0 += 1;
        if aspects.is_empty() {
            continue;
        }
        if let Some(id) = allowed_by(run.suite, q, ra.as_ref(), rb.as_ref(), opts, &aspects) {
            *report.allowed.entry(id).or_default() += 1;
            continue;
        }
        cat.1 += 1;
        let show = |r: &Option<Response>| {
            r.as_ref()
                .map_or(";; no reply (timeout)\n".to_string(), Response::render)
        };
        let note = [run.note.as_str(), pass_label]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        let note = if opts.ttl_tolerance > 0 {
            format!("{note} (TTL tolerance {} s)", opts.ttl_tolerance)
        } else {
            note
        };
        report.differences.push(Difference {
            index: i,
            query: q.clone(),
            aspects,
            reference: show(&ra),
            subject: show(&rb),
            note,
        });
    }
}

/// Test 1: the local-zone configuration, Unbound as reference.
pub fn run_local_zones(subject: Subject) -> Result<Report, String> {
    preflight()?;
    let unbound = find_program("unbound")?;
    let tmp = TempDir::create("local")?;
    let dir = path_str(tmp.path())?.to_string();
    let scenario = LocalScenario::new();
    let ref_conf = tmp.write(
        "unbound-reference.conf",
        &scenario.unbound_conf(REFERENCE_PORT, &dir),
    )?;
    let sub_conf = tmp.write("subject.conf", &scenario.unbound_conf(SUBJECT_PORT, &dir))?;
    if let Ok(check) = find_program("unbound-checkconf") {
        run_bounded(
            path_str(&check)?,
            &[path_str(&ref_conf)?],
            Duration::from_secs(30),
        )
        .map_err(|e| format!("the generated unbound.conf is invalid: {e}"))?;
    }
    println!("{}", describe_allow_list(Suite::LocalZones));
    let ns = NetNs::create("local")?;
    let args = |c: &Path| -> Result<Vec<String>, String> {
        Ok(vec!["-d".into(), "-c".into(), path_str(c)?.to_string()])
    };
    let mut reference = Daemon::spawn(
        &ns,
        "unbound (reference)",
        &unbound,
        &args(&ref_conf)?,
        &tmp.path().join("unbound-reference.log"),
    )?;
    let (mut subject_d, subject_name) = match subject {
        Subject::Skuad => (start_skuad(&ns, &tmp, &sub_conf)?, "skuad".to_string()),
        Subject::SelfTest => (
            Daemon::spawn(
                &ns,
                "unbound (self-test subject)",
                &unbound,
                &args(&sub_conf)?,
                &tmp.path().join("unbound-subject.log"),
            )?,
            "unbound (second instance)".to_string(),
        ),
    };
    let probe = simple_query("localhost.", types::A);
    wait_ready(&ns, &mut reference, REFERENCE_PORT, &probe)?;
    wait_ready(&ns, &mut subject_d, SUBJECT_PORT, &probe)?;
    let seed = seed();
    println!("seed {seed:#x}");
    let run = Run {
        suite: Suite::LocalZones,
        title: "local zones",
        ns: &ns,
        queries: scenario.queries(seed),
        reference_name: "unbound 1.17 (reference)".into(),
        subject_name,
        check_model: true,
        passes: 1,
        ttl_tolerance: false,
        pause: Duration::ZERO,
        note: String::new(),
        self_test: subject == Subject::SelfTest,
    };
    let report = differential(run, &mut [&mut reference, &mut subject_d])?;
    if subject == Subject::SelfTest && !report.model_mismatches.is_empty() {
        return Err(format!(
            "the generator's resolution model disagrees with Unbound:\n{}",
            report.model_mismatches.join("\n")
        ));
    }
    Ok(report)
}

fn nsd_conf(port: u16, dir: &str, tag: &str) -> String {
    nsd_conf_zones(port, dir, tag, &[AUTH_ORIGIN])
}

/// NSD configuration serving `zones` (origin `o` from file `{dir}/{o}zone`).
fn nsd_conf_zones(port: u16, dir: &str, tag: &str, zones: &[&str]) -> String {
    let mut s = format!(
        "# Generated by skua-conformance.\n\
         server:\n\
         \x20 ip-address: 127.0.0.1\n\
         \x20 port: {port}\n\
         \x20 do-ip6: no\n\
         \x20 server-count: 1\n\
         \x20 username: \"\"\n\
         \x20 chroot: \"\"\n\
         \x20 zonesdir: \"{dir}\"\n\
         \x20 database: \"\"\n\
         \x20 zonelistfile: \"{dir}/nsd-{tag}.zonelist\"\n\
         \x20 xfrdfile: \"{dir}/nsd-{tag}.xfrd.state\"\n\
         \x20 xfrdir: \"{dir}\"\n\
         \x20 pidfile: \"{dir}/nsd-{tag}.pid\"\n\
         \x20 verbosity: 0\n\
         \x20 minimal-responses: yes\n\
         \x20 refuse-any: yes\n\
         \x20 rrl-ratelimit: 0\n\
         \x20 rrl-whitelist-ratelimit: 0\n\
         remote-control:\n\
         \x20 control-enable: no\n"
    );
    for z in zones {
        let _ = write!(
            s,
            "zone:\n\
             \x20 name: \"{z}\"\n\
             \x20 zonefile: \"{z}zone\"\n"
        );
    }
    s
}

fn skuad_auth_conf(port: u16, dir: &str) -> String {
    format!(
        "# Generated by skua-conformance.\n\
         server:\n\
         \x20 interface: 127.0.0.1\n\
         \x20 port: {port}\n\
         \x20 do-ip6: no\n\
         \x20 chroot: \"\"\n\
         \x20 username: \"\"\n\
         \x20 pidfile: \"\"\n\
         \x20 directory: \"{dir}\"\n\
         \x20 use-syslog: no\n\
         \x20 logfile: \"\"\n\
         \x20 verbosity: 0\n\
         \x20 module-config: \"iterator\"\n\
         \x20 do-not-query-localhost: yes\n\
         \x20 access-control: 127.0.0.0/8 allow\n\
         \x20 # NSD caps UDP replies at its ipv4-edns-size (1232); use the same cap.\n\
         \x20 max-udp-size: 1232\n\
         \n\
         auth-zone:\n\
         \x20 name: \"{AUTH_ORIGIN}\"\n\
         \x20 zonefile: \"{dir}/{AUTH_ORIGIN}zone\"\n\
         \x20 for-downstream: yes\n"
    )
}

/// Test 2: the authoritative zone, NSD as reference.
pub fn run_auth_zone(subject: Subject) -> Result<Report, String> {
    preflight()?;
    let nsd = find_program("nsd")?;
    let tmp = TempDir::create("auth")?;
    let dir = path_str(tmp.path())?.to_string();
    let scenario = AuthScenario;
    tmp.write(&format!("{AUTH_ORIGIN}zone"), &scenario.zone_file())?;
    let ref_conf = tmp.write(
        "nsd-reference.conf",
        &nsd_conf(REFERENCE_PORT, &dir, "reference"),
    )?;
    println!("{}", describe_allow_list(Suite::AuthZone));
    let ns = NetNs::create("auth")?;
    let args = |c: &Path| -> Result<Vec<String>, String> {
        Ok(vec!["-d".into(), "-c".into(), path_str(c)?.to_string()])
    };
    let mut reference = Daemon::spawn(
        &ns,
        "nsd (reference)",
        &nsd,
        &args(&ref_conf)?,
        &tmp.path().join("nsd-reference.log"),
    )?;
    let (mut subject_d, subject_name) = match subject {
        Subject::Skuad => {
            let conf = tmp.write("skuad-auth.conf", &skuad_auth_conf(SUBJECT_PORT, &dir))?;
            (start_skuad(&ns, &tmp, &conf)?, "skuad".to_string())
        }
        Subject::SelfTest => {
            let conf = tmp.write("nsd-subject.conf", &nsd_conf(SUBJECT_PORT, &dir, "subject"))?;
            (
                Daemon::spawn(
                    &ns,
                    "nsd (self-test subject)",
                    &nsd,
                    &args(&conf)?,
                    &tmp.path().join("nsd-subject.log"),
                )?,
                "nsd (second instance)".to_string(),
            )
        }
    };
    let probe = simple_query(AUTH_ORIGIN, types::SOA);
    wait_ready(&ns, &mut reference, REFERENCE_PORT, &probe)?;
    wait_ready(&ns, &mut subject_d, SUBJECT_PORT, &probe)?;
    let seed = seed();
    println!("seed {seed:#x}");
    let run = Run {
        suite: Suite::AuthZone,
        title: "auth zone",
        ns: &ns,
        queries: scenario.queries(seed),
        reference_name: "nsd 4.6 (reference)".into(),
        subject_name,
        check_model: false,
        passes: 1,
        ttl_tolerance: false,
        pause: Duration::ZERO,
        note: String::new(),
        self_test: subject == Subject::SelfTest,
    };
    differential(run, &mut [&mut reference, &mut subject_d])
}

/// Test 3: forwarding. NSD serves the generated zones on [`UPSTREAM_PORT`]; Unbound
/// (reference) and the subject forward to it with the same configuration, first
/// `forward-zone: "."`, then one `stub-zone:` per zone, then forward and stub zones mixed
/// (fresh daemons, empty caches each time). Every query is sent twice: a cache miss,
/// then, [`PASS_PAUSE`] later, a hit; TTLs are compared within the seconds elapsed since
/// the configuration's first query.
pub fn run_forwarding(subject: Subject) -> Result<Report, String> {
    preflight()?;
    let unbound = find_program("unbound")?;
    let nsd = find_program("nsd")?;
    let tmp = TempDir::create("fwd")?;
    let dir = path_str(tmp.path())?.to_string();
    let seed = seed();
    println!("seed {seed:#x}");
    let scenario = ForwardScenario::new(seed);
    let origins: Vec<&str> = scenario.zones.iter().map(|z| z.origin.as_str()).collect();
    for z in &scenario.zones {
        tmp.write(&z.file_name(), &z.zone_file())?;
    }
    let nsd_conf = tmp.write(
        "nsd-upstream.conf",
        &nsd_conf_zones(UPSTREAM_PORT, &dir, "upstream", &origins),
    )?;
    println!("{}", describe_allow_list(Suite::Forwarding));
    let ns = NetNs::create("fwd")?;
    let args = |c: &Path| -> Result<Vec<String>, String> {
        Ok(vec!["-d".into(), "-c".into(), path_str(c)?.to_string()])
    };
    let mut upstream = Daemon::spawn(
        &ns,
        "nsd (upstream)",
        &nsd,
        &args(&nsd_conf)?,
        &tmp.path().join("nsd-upstream.log"),
    )?;
    let mut soa_probe = simple_query(origins[0], types::SOA);
    soa_probe.rd = false;
    wait_ready(&ns, &mut upstream, UPSTREAM_PORT, &soa_probe)?;
    let mut total: Option<Report> = None;
    for mode in FwdMode::ALL {
        let tag = mode.tag();
        let ref_conf = tmp.write(
            &format!("unbound-reference-{tag}.conf"),
            &scenario.conf(mode, REFERENCE_PORT, UPSTREAM_PORT, &dir),
        )?;
        let sub_conf = tmp.write(
            &format!("subject-{tag}.conf"),
            &scenario.conf(mode, SUBJECT_PORT, UPSTREAM_PORT, &dir),
        )?;
        if let Ok(check) = find_program("unbound-checkconf") {
            run_bounded(
                path_str(&check)?,
                &[path_str(&ref_conf)?],
                Duration::from_secs(30),
            )
            .map_err(|e| format!("the generated unbound.conf is invalid: {e}"))?;
        }
        let mut reference = Daemon::spawn(
            &ns,
            "unbound (reference)",
            &unbound,
            &args(&ref_conf)?,
            &tmp.path().join(format!("unbound-reference-{tag}.log")),
        )?;
        let (mut subject_d, subject_name) = match subject {
            Subject::Skuad => (start_skuad(&ns, &tmp, &sub_conf)?, "skuad".to_string()),
            Subject::SelfTest => (
                Daemon::spawn(
                    &ns,
                    "unbound (self-test subject)",
                    &unbound,
                    &args(&sub_conf)?,
                    &tmp.path().join(format!("unbound-subject-{tag}.log")),
                )?,
                "unbound (second instance)".to_string(),
            ),
        };
        // Ready once it answers a forwarded name (not in the query set).
        let probe = simple_query(PROBE_NAME, types::A);
        wait_ready(&ns, &mut reference, REFERENCE_PORT, &probe)?;
        wait_ready(&ns, &mut subject_d, SUBJECT_PORT, &probe)?;
        let run = Run {
            suite: Suite::Forwarding,
            title: "forwarding",
            ns: &ns,
            queries: scenario.queries(mode, seed),
            reference_name: "unbound 1.17 (reference)".into(),
            subject_name,
            check_model: false,
            passes: 2,
            ttl_tolerance: true,
            pause: PASS_PAUSE,
            note: mode.label().to_string(),
            self_test: subject == Subject::SelfTest,
        };
        let report = differential(run, &mut [&mut reference, &mut subject_d, &mut upstream])?;
        println!("{}", report.summary());
        reference.stop();
        subject_d.stop();
        match &mut total {
            None => total = Some(report),
            Some(t) => t.merge(report),
        }
    }
    upstream
        .check_running()
        .map_err(|e| format!("the upstream died: {e}"))?;
    let mut report = total.ok_or("no configuration ran")?;
    let mut modes = String::new();
    for m in FwdMode::ALL {
        let _ = write!(
            modes,
            "{}{}",
            if modes.is_empty() { "" } else { " + " },
            m.label()
        );
    }
    report.title = format!("forwarding ({modes})");
    Ok(report)
}
