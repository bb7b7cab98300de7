//! `skua-xdpgun`: a DNS-over-UDP load generator on AF_XDP, for the benchmarks of
//! `tests/bench/` on machines where Knot's `kxdpgun` cannot start (kxdpgun 3.2.6 on kernel
//! 6.18 has its own XDP program refused: "program of this type cannot use helper
//! bpf_xdp_adjust_meta"). It is a benchmark tool, not part of the appliance: skuad never runs
//! it and nothing in skuad links it.
//!
//! Interface: kxdpgun's flags as `tests/bench/xdp.sh` and `xdp-cache.sh` use them
//! (`-t SECS -Q QPS -i FILE -I IFNAME -l ADDR[/PREFIX] -L MAC -R MAC -F CPU TARGET`), so the
//! scripts swap one binary for the other; the summary lines `total queries: N (P pps)` and
//! `total replies: N (P pps)` are kxdpgun's, so the scripts parse both alike.
//!
//! Sending: one AF_XDP socket on queue 0 of the interface (skua-xdp's [`XskSocket`] and ring
//! code: copy mode on veth), frames built by [`skua_fastpath::build_udp_frame`] straight into
//! the UMEM, paced to the offered rate (a query is due every 1/QPS s from the start; the
//! sender catches up in batches of at most 64, never bursts beyond what is due). Sources cycle
//! through every address of `-l` (a prefix: many clients) and source ports 1024-65535.
//!
//! Receiving: a 21-instruction XDP program, assembled here (no object file, no clang),
//! attached to the interface through a `bpf_link` (it leaves with the process, even on
//! SIGKILL): IPv4 UDP from the target port is redirected to the socket, everything else
//! passes to the kernel. Replies are counted (and their RCODEs) only when they come from the
//! target address and port and have QR set; with `-r` no program is attached and nothing is
//! counted (the benchmarks count replies at the veth's `rx_packets` anyway).
//!
//! Run as root (AF_XDP, BPF): `skua-xdpgun --help`.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use skua_engine::name::WireName;
use skua_engine::text::rtype_from_str;
use skua_fastpath::build_udp_frame;
use skua_xdp::queue::RxAction;
use skua_xdp::socket::{XskConfig, XskSocket};

const USAGE: &str = "\
usage: skua-xdpgun [options] -i QUERYFILE TARGET_IP        (root)
  -t, --duration SECS     sending time, seconds (decimal; default 5)
  -Q, --qps QPS           offered queries per second, paced (default 1000)
  -i, --infile FILE       queries, one per line: NAME TYPE [e|d] (kxdpgun's text format:
                          e adds EDNS (1232 octets), d EDNS with DO); RD is set
  -I, --interface IF      interface to send on (required)
  -l, --local ADDR[/LEN]  source address, or every address of a prefix in turn
                          (default: the interface's first address of TARGET's family)
  -L, --local-mac MAC     source MAC (default: the interface's)
  -R, --remote-mac MAC    destination MAC (default: TARGET's entry in the neighbour table)
  -p, --port PORT         destination port (default 53)
  -F, --affinity CPU      pin the generator to CPU (kxdpgun's [<start>][s<step>]: the start)
  -b, --batch N           at most N queries per TX kick (default 32; 1-64)
  -r, --drop              no receive program: replies are not counted
  -w, --wait-ms MS        keep counting replies MS ms after sending stops (default 200)
  -h, --help
Prints kxdpgun's summary lines: 'total queries: N (P pps)', 'total replies: N (P pps)',
where P is N over the sending time.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse_args(&args) {
        Ok(None) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Some(opts)) => match run(&opts) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("skua-xdpgun: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("skua-xdpgun: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

// ------------------------------------------------------------------------------ options

struct Opts {
    secs: f64,
    qps: u64,
    infile: String,
    ifname: String,
    local: Option<(IpAddr, u8)>,
    local_mac: Option<[u8; 6]>,
    remote_mac: Option<[u8; 6]>,
    port: u16,
    cpu: Option<usize>,
    batch: usize,
    drop: bool,
    wait: Duration,
    target: IpAddr,
}

fn parse_args(args: &[String]) -> Result<Option<Opts>, String> {
    let mut secs = 5.0;
    let mut qps = 1000;
    let (mut infile, mut ifname, mut local, mut target) = (None, None, None, None);
    let (mut local_mac, mut remote_mac, mut cpu) = (None, None, None);
    let (mut port, mut batch, mut drop, mut wait_ms) = (53u16, 32usize, false, 200u64);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "-t" | "--duration" => {
                let v = val(a)?;
                secs = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                    .ok_or_else(|| format!("-t: not a duration in seconds (0-86400): '{v}'"))?;
            }
            "-Q" | "--qps" => {
                let v = val(a)?;
                qps = v
                    .parse::<u64>()
                    .ok()
                    .filter(|q| (1..=100_000_000).contains(q))
                    .ok_or_else(|| format!("-Q: not a rate (1-100000000 qps): '{v}'"))?;
            }
            "-i" | "--infile" => infile = Some(val(a)?),
            "-I" | "--interface" => ifname = Some(val(a)?),
            "-l" | "--local" => local = Some(parse_prefix(&val(a)?)?),
            "-L" | "--local-mac" => local_mac = Some(parse_mac(&val(a)?)?),
            "-R" | "--remote-mac" => remote_mac = Some(parse_mac(&val(a)?)?),
            "-p" | "--port" => {
                let v = val(a)?;
                port = v
                    .parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("-p: not a port: '{v}'"))?;
            }
            "-F" | "--affinity" => {
                let v = val(a)?;
                // kxdpgun's [<cpu_start>][s<cpu_step>]: one thread here, so the start.
                let start = v.split('s').next().unwrap_or("");
                cpu = Some(if start.is_empty() {
                    0
                } else {
                    start
                        .parse()
                        .map_err(|_| format!("-F: not a CPU number: '{v}'"))?
                });
            }
            "-b" | "--batch" => {
                let v = val(a)?;
                batch = v
                    .parse()
                    .ok()
                    .filter(|b| (1..=64).contains(b))
                    .ok_or_else(|| format!("-b: not a batch size (1-64): '{v}'"))?;
            }
            "-r" | "--drop" => drop = true,
            "-w" | "--wait-ms" => {
                let v = val(a)?;
                wait_ms = v
                    .parse()
                    .ok()
                    .filter(|w| *w <= 60_000)
                    .ok_or_else(|| format!("-w: not a wait in ms (0-60000): '{v}'"))?;
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(format!("unknown option '{s}'")),
            s => {
                if target.is_some() {
                    return Err(format!("more than one target ('{s}')"));
                }
                target = Some(
                    s.parse::<IpAddr>()
                        .map_err(|_| format!("the target must be an IP address, not '{s}'"))?,
                );
            }
        }
    }
    let target = target.ok_or("no target address")?;
    if let Some((l, _)) = local
        && l.is_ipv4() != target.is_ipv4()
    {
        return Err("-l and the target must be of the same address family".into());
    }
    Ok(Some(Opts {
        secs,
        qps,
        infile: infile.ok_or("no query file (-i)")?,
        ifname: ifname.ok_or("no interface (-I): say which interface to send on")?,
        local,
        local_mac,
        remote_mac,
        port,
        cpu,
        batch,
        drop,
        wait: Duration::from_millis(wait_ms),
        target,
    }))
}

fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let ip: IpAddr = a
        .parse()
        .map_err(|_| format!("-l: not an address: '{a}'"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|l| *l <= max)
            .ok_or_else(|| format!("-l: not a prefix length (0-{max}): '{l}'"))?,
    };
    Ok((ip, len))
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = parts
            .next()
            .and_then(|p| u8::from_str_radix(p, 16).ok())
            .ok_or_else(|| format!("not a MAC address: '{s}'"))?;
    }
    if parts.next().is_some() {
        return Err(format!("not a MAC address: '{s}'"));
    }
    Ok(mac)
}

// ------------------------------------------------------------------------------ queries

/// The queries of `path`, in kxdpgun's text format (`NAME TYPE [e|d]`), as DNS messages
/// (RFC 1035 §4.1: ID 0, RD set, one question of class IN; `e`/`d` add an OPT record,
/// RFC 6891 §6.1.2, with 1232 octets and DO for `d`).
fn load_queries(path: &str) -> Result<Vec<Vec<u8>>, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut f = line.split_whitespace();
        let Some(name) = f.next() else { continue };
        let at = || format!("{path}:{}", n + 1);
        let ty = f
            .next()
            .ok_or_else(|| format!("{}: no query type after '{name}'", at()))?;
        let flags = f.next();
        if let Some(x) = f.next() {
            return Err(format!("{}: unexpected '{x}'", at()));
        }
        let qname = WireName::parse(name, None).map_err(|e| format!("{}: '{name}': {e}", at()))?;
        let qtype = rtype_from_str(ty).ok_or_else(|| format!("{}: unknown type '{ty}'", at()))?;
        let (edns, dnssec_ok) = match flags {
            None => (false, false),
            Some("e" | "E") => (true, false),
            Some("d" | "D") => (true, true),
            Some(x) => return Err(format!("{}: unknown flag '{x}' (e or d)", at())),
        };
        let mut m = vec![0, 0, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(edns)];
        m.extend_from_slice(qname.as_bytes());
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        if edns {
            m.extend_from_slice(&[0, 0, 41]);
            m.extend_from_slice(&1232u16.to_be_bytes());
            m.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
        }
        out.push(m);
    }
    if out.is_empty() {
        return Err(format!("{path}: no queries"));
    }
    Ok(out)
}

// ------------------------------------------------------------------------------ addresses

fn read_mac(ifname: &str) -> Result<[u8; 6], String> {
    let p = format!("/sys/class/net/{ifname}/address");
    let s = fs::read_to_string(&p).map_err(|e| format!("cannot read {p}: {e}"))?;
    parse_mac(s.trim())
}

/// TARGET's MAC from the neighbour table (`ip neigh`), as kxdpgun resolves it.
fn neighbour_mac(ifname: &str, target: IpAddr) -> Result<[u8; 6], String> {
    let t = target.to_string();
    let out = std::process::Command::new("ip")
        .args(["neigh", "show", &t, "dev", ifname])
        .output()
        .map_err(|e| format!("cannot run 'ip neigh': {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut f = text.split_whitespace();
    while let Some(w) = f.next() {
        if w == "lladdr" {
            return f.next().map_or_else(
                || Err("'ip neigh': lladdr without a value".into()),
                parse_mac,
            );
        }
    }
    Err(format!(
        "no neighbour entry for {t} on {ifname}: give -R MAC (or ping {t} first)"
    ))
}

/// The interface's first address of the target's family (kxdpgun's default source).
fn interface_address(ifname: &str, v4: bool) -> Result<IpAddr, String> {
    let out = std::process::Command::new("ip")
        .args([
            if v4 { "-4" } else { "-6" },
            "-o",
            "addr",
            "show",
            "dev",
            ifname,
        ])
        .output()
        .map_err(|e| format!("cannot run 'ip addr': {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "inet" && *w != "inet6")
        .nth(1)
        .and_then(|a| a.split('/').next()?.parse().ok())
        .ok_or_else(|| format!("{ifname} has no address of the target's family: give -l ADDR"))
}

/// Every source address of a prefix, in turn: all of them for /31, /32 (/127, /128), else
/// the hosts between the network and the last address; at most 2^24.
struct Sources {
    first: u128,
    count: u128,
    v4: bool,
}

impl Sources {
    fn new(addr: IpAddr, len: u8) -> Self {
        let (bits, v) = match addr {
            IpAddr::V4(a) => (32u32, u128::from(u32::from(a))),
            IpAddr::V6(a) => (128, u128::from(a)),
        };
        let host_bits = bits - u32::from(len);
        if host_bits == 0 {
            return Self {
                first: v,
                count: 1,
                v4: addr.is_ipv4(),
            };
        }
        let net = v & !((1u128 << host_bits) - 1);
        let size = 1u128 << host_bits.min(24);
        let (first, count) = if host_bits <= 1 {
            (net, size)
        } else {
            (net + 1, size - 2)
        };
        Self {
            first,
            count,
            v4: addr.is_ipv4(),
        }
    }

    fn get(&self, i: u64) -> IpAddr {
        let a = self.first + u128::from(i) % self.count;
        if self.v4 {
            // Cannot truncate: first + count stays inside the IPv4 prefix.
            IpAddr::V4(Ipv4Addr::from(a as u32))
        } else {
            IpAddr::V6(Ipv6Addr::from(a))
        }
    }
}

// ------------------------------------------------------------------------------ run

#[derive(Default)]
struct Replies {
    count: u64,
    octets: u64,
    noerror: u64,
    nxdomain: u64,
    other_rcode: u64,
    /// Frames the receive program redirected that are not replies from the target.
    other: u64,
}

fn run(o: &Opts) -> Result<(), String> {
    let queries = load_queries(&o.infile)?;
    if let Some(cpu) = o.cpu {
        pin_to(cpu).map_err(|e| format!("-F {cpu}: cannot pin to that CPU: {e}"))?;
    }
    let ifindex = ifindex(&o.ifname)?;
    let local_mac = match o.local_mac {
        Some(m) => m,
        None => read_mac(&o.ifname)?,
    };
    let remote_mac = match o.remote_mac {
        Some(m) => m,
        None => neighbour_mac(&o.ifname, o.target)?,
    };
    let (local, len) = match o.local {
        Some(l) => l,
        None => {
            let a = interface_address(&o.ifname, o.target.is_ipv4())?;
            (a, if a.is_ipv4() { 32 } else { 128 })
        }
    };
    let sources = Sources::new(local, len);

    // Rings of 4096: the client's NAPI kthread shares the generator's CPU in the benchmarks,
    // and while it runs it fills the fill ring's frames with replies the generator cannot
    // yet take (2048 ran empty at 800 k offered). 16384 frames: the fill ring's, TX's, and
    // as many completing.
    let cfg = XskConfig {
        frames: 16384,
        frame_size: 2048,
        ring_size: 4096,
        batch: 64,
        ..XskConfig::default()
    };
    let mut sock = XskSocket::open(ifindex, 0, &cfg)
        .map_err(|e| format!("AF_XDP socket on {} queue 0: {e}", o.ifname))?;
    let catcher = if o.drop {
        None
    } else {
        Some(
            skua_xdp_gun_bpf::ReplyCatcher::attach(ifindex, o.port, sock.as_fd())
                .map_err(|e| format!("receive program on {}: {e}", o.ifname))?,
        )
    };
    println!(
        "using interface {}, XDP threads 1, {}/UDP, AF_XDP {} mode, {} (skua-xdpgun)",
        o.ifname,
        if o.target.is_ipv4() { "IPv4" } else { "IPv6" },
        sock.mode().as_str(),
        match &catcher {
            Some(c) => format!("replies counted ({} XDP)", c.mode),
            None => "replies not counted (-r)".into(),
        }
    );

    let mut replies = Replies::default();
    let mut sent: u64 = 0;
    let mut no_frame: u64 = 0;
    let dst = SocketAddr::new(o.target, o.port);
    let (target, port) = (o.target, o.port);
    let nanos_per_query = 1e9 / o.qps as f64;
    let window = Duration::from_secs_f64(o.secs);
    let total = (o.secs * o.qps as f64).round() as u64;
    let start = Instant::now();
    let mut last_send = start;
    let mut end_wait: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let elapsed = now - start;
        let sending = elapsed < window && sent < total;
        if !sending && end_wait.is_none() {
            end_wait = Some(now + o.wait);
        }
        if end_wait.is_some_and(|t| now >= t) {
            break;
        }
        let q = sock.queue();
        q.reap_completions();
        if catcher.is_some() {
            top_up(q);
        }
        let mut did = 0;
        if sending {
            // Queries due so far (one every 1/QPS s from the start), at most a batch now.
            let due = ((elapsed.as_nanos() as f64 / nanos_per_query) as u64 + 1).min(total);
            let n = due.saturating_sub(sent).min(o.batch as u64);
            for _ in 0..n {
                let Some(addr) = q.take_free() else {
                    no_frame += 1;
                    break;
                };
                let Some(buf) = q.umem_mut().data_mut(addr) else {
                    break;
                };
                let payload = &queries[(sent % queries.len() as u64) as usize];
                // Cannot truncate: the remainder is below 64512.
                let sport = 1024 + (sent % 64512) as u16;
                let src = SocketAddr::new(sources.get(sent), sport);
                let Some(len) =
                    build_udp_frame(buf, local_mac, remote_mac, None, src, dst, payload)
                else {
                    return Err(format!(
                        "a query does not fit a {} octet frame",
                        cfg.frame_size
                    ));
                };
                if !q.transmit(addr, len) {
                    break;
                }
                sent += 1;
                did += 1;
            }
            if did > 0 {
                last_send = Instant::now();
            }
        }
        if q.tx_in_flight() > 0 {
            sock.wakeup_tx();
        }
        let mut got = 0;
        if catcher.is_some() {
            for _ in 0..4 {
                let n = sock.queue().process_rx(|buf, len| {
                    count_reply(&buf[..len], target, port, &mut replies);
                    RxAction::Release
                });
                got += n;
                // `refill` gives at most one batch per call and a pass here takes up to one:
                // the fill ring is topped up after each, or a burst of replies finds it empty
                // (XDP_STATISTICS fill_ring_empty) and the kernel drops them.
                top_up(sock.queue());
                if n < cfg.batch {
                    break;
                }
            }
        }
        if did == 0 && got == 0 {
            // Idle until the next query is due (or a reply comes): sleep in short steps at
            // low rates rather than spin a CPU the server may need.
            let next = Duration::from_nanos(((sent as f64) * nanos_per_query) as u64);
            let gap = next.saturating_sub(start.elapsed());
            if !sending || gap > Duration::from_micros(200) {
                std::thread::sleep(gap.clamp(Duration::from_micros(50), Duration::from_millis(1)));
            } else {
                std::hint::spin_loop();
            }
        }
    }
    let dur = (last_send - start).as_secs_f64().max(1e-6);
    if let Ok(s) = sock.stats()
        && s.rx_dropped + s.rx_ring_full + s.rx_fill_ring_empty_descs > 0
    {
        println!(
            "AF_XDP receive drops: rx_dropped {} rx_ring_full {} fill_ring_empty {}",
            s.rx_dropped, s.rx_ring_full, s.rx_fill_ring_empty_descs
        );
    }
    drop(catcher);
    print!("{}", summary(sent, no_frame, dur, o, &replies));
    Ok(())
}

/// Gives the kernel every free frame the fill ring has room for (at most 64 batches).
fn top_up(q: &mut skua_xdp::queue::Queue) {
    for _ in 0..64 {
        if q.refill() == 0 {
            return;
        }
    }
}

fn summary(sent: u64, no_frame: u64, dur: f64, o: &Opts, r: &Replies) -> String {
    let mut s = String::new();
    let pct = |n: u64, of: u64| {
        if of == 0 {
            0.0
        } else {
            100.0 * n as f64 / of as f64
        }
    };
    let _ = writeln!(
        s,
        "total queries:     {sent} ({:.0} pps) ({:.0}% of {} offered)",
        sent as f64 / dur,
        pct(sent, (o.secs * o.qps as f64).round() as u64),
        (o.secs * o.qps as f64).round()
    );
    if !o.drop {
        let _ = writeln!(
            s,
            "total replies:     {} ({:.0} pps) ({:.0}%)",
            r.count,
            r.count as f64 / dur,
            pct(r.count, sent)
        );
        if let Some(avg) = r.octets.checked_div(r.count) {
            let _ = writeln!(s, "average DNS reply size: {avg} B");
        }
        let _ = writeln!(s, "responded NOERROR: {}", r.noerror);
        let _ = writeln!(s, "responded NXDOMAIN: {}", r.nxdomain);
        let _ = writeln!(s, "responded other RCODE: {}", r.other_rcode);
        if r.other > 0 {
            let _ = writeln!(s, "other frames received: {}", r.other);
        }
    }
    if no_frame > 0 {
        let _ = writeln!(s, "send stalls (no free frame): {no_frame}");
    }
    let _ = writeln!(s, "duration: {dur:.3} s");
    s
}

/// Counts `frame` if it is a DNS reply (QR set) from `target`:`port` over IPv4 or IPv6.
fn count_reply(frame: &[u8], target: IpAddr, port: u16, r: &mut Replies) {
    let dns = reply_payload(frame, target, port);
    match dns {
        Some(d) if d.len() >= 12 && d[2] & 0x80 != 0 => {
            r.count += 1;
            r.octets += d.len() as u64;
            match d[3] & 0x0f {
                0 => r.noerror += 1,
                3 => r.nxdomain += 1,
                _ => r.other_rcode += 1,
            }
        }
        _ => r.other += 1,
    }
}

fn reply_payload(f: &[u8], target: IpAddr, port: u16) -> Option<&[u8]> {
    let ethertype = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    let (src, udp) = match ethertype {
        0x0800 => {
            let ihl = usize::from(f.get(14)? & 0x0f) * 4;
            if f.get(23) != Some(&17) || ihl < 20 {
                return None;
            }
            let s: [u8; 4] = f.get(26..30)?.try_into().ok()?;
            (IpAddr::from(s), 14 + ihl)
        }
        0x86dd => {
            if f.get(20) != Some(&17) {
                return None;
            }
            let s: [u8; 16] = f.get(22..38)?.try_into().ok()?;
            (IpAddr::from(s), 54)
        }
        _ => return None,
    };
    let sport = u16::from_be_bytes([*f.get(udp)?, *f.get(udp + 1)?]);
    let ulen = usize::from(u16::from_be_bytes([*f.get(udp + 4)?, *f.get(udp + 5)?]));
    if src != target || sport != port || ulen < 8 {
        return None;
    }
    f.get(udp + 8..udp + ulen)
}

fn ifindex(name: &str) -> Result<u32, String> {
    let c = std::ffi::CString::new(name).map_err(|_| format!("bad interface name '{name}'"))?;
    // SAFETY: `c` is a valid C string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(format!("no interface '{name}'"));
    }
    Ok(i)
}

fn pin_to(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu < CPU_SETSIZE (checked above), so the bit is inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: passes a live cpu_set_t and its exact size; pid 0 is this thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

// ------------------------------------------------------------------------------ receive program

/// The receive side's XDP program, assembled here and loaded with bpf(2): no object file to
/// build or ship, nothing that a kernel refusing one helper (kxdpgun's case) would refuse.
mod skua_xdp_gun_bpf {
    use super::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, io};

    const BPF_MAP_CREATE: i32 = 0;
    const BPF_MAP_UPDATE_ELEM: i32 = 2;
    const BPF_PROG_LOAD: i32 = 5;
    const BPF_LINK_CREATE: i32 = 28;
    const BPF_MAP_TYPE_XSKMAP: u32 = 17;
    const BPF_PROG_TYPE_XDP: u32 = 6;
    const BPF_XDP: u32 = 37;
    const XDP_FLAGS_SKB_MODE: u32 = 2;
    const XDP_FLAGS_DRV_MODE: u32 = 4;
    const BPF_FUNC_REDIRECT_MAP: i32 = 51;
    const XDP_PASS: i32 = 2;

    /// The program, its socket map and the link that holds it on the interface; dropping it
    /// detaches the program.
    pub struct ReplyCatcher {
        _link: OwnedFd,
        _prog: OwnedFd,
        _map: OwnedFd,
        /// "native" or "generic".
        pub mode: &'static str,
    }

    impl ReplyCatcher {
        /// Loads the program (redirecting IPv4 UDP from `port` to `xsk`, queue 0) and
        /// attaches it to `ifindex`, in driver mode when the driver has one.
        pub fn attach(ifindex: u32, port: u16, xsk: BorrowedFd<'_>) -> io::Result<Self> {
            let map = map_create()?;
            map_update(&map, 0, xsk.as_raw_fd())?;
            let prog = prog_load(&program(port, map.as_raw_fd()))?;
            let (link, mode) = match link_create(&prog, ifindex, XDP_FLAGS_DRV_MODE) {
                Ok(l) => (l, "native"),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    return Err(ctx(
                        e,
                        "BPF_LINK_CREATE (XDP): another XDP program is attached \
                         (ip link set dev IF xdp off)",
                    ));
                }
                // No driver mode (EOPNOTSUPP and the like): the generic hook.
                Err(_) => (
                    link_create(&prog, ifindex, XDP_FLAGS_SKB_MODE)
                        .map_err(|e| ctx(e, "BPF_LINK_CREATE (XDP, generic mode)"))?,
                    "generic",
                ),
            };
            Ok(Self {
                _link: link,
                _prog: prog,
                _map: map,
                mode,
            })
        }
    }

    /// One instruction (`struct bpf_insn`): opcode, dst/src registers, offset, immediate.
    fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
        let o = off.to_le_bytes();
        let i = imm.to_le_bytes();
        u64::from_le_bytes([code, dst | (src << 4), o[0], o[1], i[0], i[1], i[2], i[3]])
    }

    /// A 16-bit field in network order, as a little- or big-endian load sees it.
    fn be16(v: u16) -> i32 {
        i32::from(u16::from_ne_bytes(v.to_be_bytes()))
    }

    /// ```text
    ///  r2 = ctx->data; r3 = ctx->data_end
    ///  if data + 42 > data_end goto pass             (Ethernet + IPv4 + UDP headers)
    ///  if ethertype != 0x0800 goto pass
    ///  if ip version/IHL != 0x45 goto pass          (options: the kernel's)
    ///  if protocol != UDP goto pass
    ///  if udp source port != port goto pass
    ///  return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)
    /// pass: return XDP_PASS
    /// ```
    pub(super) fn program(port: u16, map_fd: i32) -> Vec<u64> {
        const LDXW: u8 = 0x61;
        const LDXH: u8 = 0x69;
        const LDXB: u8 = 0x71;
        const MOV64_REG: u8 = 0xbf;
        const MOV64_IMM: u8 = 0xb7;
        const ADD64_IMM: u8 = 0x07;
        const JGT_REG: u8 = 0x2d;
        const JNE_IMM: u8 = 0x55;
        const LD_IMM64: u8 = 0x18;
        const CALL: u8 = 0x85;
        const EXIT: u8 = 0x95;
        const PSEUDO_MAP_FD: u8 = 1;
        let mut p = vec![
            insn(LDXW, 2, 1, 0, 0),
            insn(LDXW, 3, 1, 4, 0),
            insn(MOV64_REG, 4, 2, 0, 0),
            insn(ADD64_IMM, 4, 0, 0, 42),
            insn(JGT_REG, 4, 3, 0, 0), // -> pass
            insn(LDXH, 5, 2, 12, 0),
            insn(JNE_IMM, 5, 0, 0, be16(0x0800)), // -> pass
            insn(LDXB, 5, 2, 14, 0),
            insn(JNE_IMM, 5, 0, 0, 0x45), // -> pass
            insn(LDXB, 5, 2, 23, 0),
            insn(JNE_IMM, 5, 0, 0, 17), // -> pass
            insn(LDXH, 5, 2, 34, 0),
            insn(JNE_IMM, 5, 0, 0, be16(port)), // -> pass
            insn(LDXW, 2, 1, 16, 0),            // rx_queue_index
            insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),
            insn(0, 0, 0, 0, 0),
            insn(MOV64_IMM, 3, 0, 0, XDP_PASS), // fallback when the queue has no socket
            insn(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
            insn(EXIT, 0, 0, 0, 0),
        ];
        let pass = p.len();
        p.push(insn(MOV64_IMM, 0, 0, 0, XDP_PASS));
        p.push(insn(EXIT, 0, 0, 0, 0));
        // Patch the forward jumps to `pass` (offset counted from the next instruction).
        for (i, ins) in p.iter_mut().enumerate().take(pass) {
            let code = (*ins & 0xff) as u8;
            if code == JGT_REG || code == JNE_IMM {
                // Cannot truncate: the program has 21 instructions.
                let off = (pass - i - 1) as i16;
                *ins = (*ins & !(0xffff_u64 << 16)) | (u64::from(off as u16) << 16);
            }
        }
        p
    }

    fn bpf(cmd: i32, attr: &mut [u8; 128]) -> io::Result<OwnedFd> {
        // SAFETY: `attr` is a live, zero-initialised 128-byte bpf_attr; the kernel reads and
        // writes at most that many bytes.
        let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
        let raw = i32::try_from(rc).unwrap_or(-1);
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just returned this descriptor to us and nobody else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    fn map_create() -> io::Result<OwnedFd> {
        let mut a = [0u8; 128];
        a[0..4].copy_from_slice(&BPF_MAP_TYPE_XSKMAP.to_ne_bytes());
        a[4..8].copy_from_slice(&4u32.to_ne_bytes()); // key: queue index
        a[8..12].copy_from_slice(&4u32.to_ne_bytes()); // value: socket fd
        a[12..16].copy_from_slice(&1u32.to_ne_bytes()); // queue 0 only
        a[28..28 + 9].copy_from_slice(b"xdpgun_xs");
        bpf(BPF_MAP_CREATE, &mut a).map_err(|e| ctx(e, "BPF_MAP_CREATE (XSKMAP)"))
    }

    fn map_update(map: &OwnedFd, key: u32, value: i32) -> io::Result<()> {
        let mut a = [0u8; 128];
        // Cannot truncate: descriptors are non-negative i32.
        a[0..4].copy_from_slice(&(map.as_raw_fd() as u32).to_ne_bytes());
        a[8..16].copy_from_slice(&(std::ptr::from_ref(&key) as u64).to_ne_bytes());
        a[16..24].copy_from_slice(&(std::ptr::from_ref(&value) as u64).to_ne_bytes());
        // SAFETY: `a` is a live bpf_attr; key and value outlive the call; the command
        // returns 0, not a descriptor, so nothing is wrapped.
        let rc =
            unsafe { libc::syscall(libc::SYS_bpf, BPF_MAP_UPDATE_ELEM, a.as_mut_ptr(), a.len()) };
        if rc < 0 {
            return Err(ctx(
                io::Error::last_os_error(),
                "BPF_MAP_UPDATE_ELEM (XSKMAP)",
            ));
        }
        Ok(())
    }

    fn prog_load(insns: &[u64]) -> io::Result<OwnedFd> {
        let license = c"Apache-2.0";
        let mut log = vec![0u8; 65536];
        let mut a = [0u8; 128];
        a[0..4].copy_from_slice(&BPF_PROG_TYPE_XDP.to_ne_bytes());
        // Cannot truncate: 21 instructions.
        a[4..8].copy_from_slice(&(insns.len() as u32).to_ne_bytes());
        a[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_ne_bytes());
        a[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
        a[24..28].copy_from_slice(&1u32.to_ne_bytes()); // log level
        // Cannot truncate: 64 KiB.
        a[28..32].copy_from_slice(&(log.len() as u32).to_ne_bytes());
        a[32..40].copy_from_slice(&(log.as_mut_ptr() as u64).to_ne_bytes());
        a[48..48 + 11].copy_from_slice(b"skua_xdpgun");
        a[68..72].copy_from_slice(&BPF_XDP.to_ne_bytes());
        bpf(BPF_PROG_LOAD, &mut a).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let verifier = String::from_utf8_lossy(&log[..end]);
            ctx(e, &format!("BPF_PROG_LOAD (verifier: {})", verifier.trim()))
        })
    }

    fn link_create(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
        let mut a = [0u8; 128];
        // Cannot truncate: descriptors are non-negative i32.
        a[0..4].copy_from_slice(&(prog.as_raw_fd() as u32).to_ne_bytes());
        a[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        a[8..12].copy_from_slice(&BPF_XDP.to_ne_bytes());
        a[12..16].copy_from_slice(&flags.to_ne_bytes());
        bpf(BPF_LINK_CREATE, &mut a)
    }

    fn ctx(e: io::Error, what: &str) -> io::Error {
        io::Error::new(e.kind(), format!("{what}: {e}"))
    }
}
