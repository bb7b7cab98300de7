//! `skuad bench`: the engine in-process, no network, after BIND 10's `query_bench`.
//!
//! Loads a configuration (or a single zone file), reads a queryperf-style file
//! (`qname qtype` per line), encodes every query once, then answers them `-n` times in a
//! loop and prints queries per second and nanoseconds per query. `-s N` spreads the queries
//! over N client addresses (in 198.18.0.0/15), which matters with rate limiting: `-r` turns
//! response rate limiting on (as BIND 10's `query_bench -r`) and prints how many responses
//! slipped and dropped; `--rrl-ab N` alternates runs without and with it and prints the
//! overhead.
//!
//! `--cache` measures cache hits instead of local data: the loaded data is served by an
//! in-process upstream, and the engine measured forwards `--origin` to it. Before the timed
//! runs, every distinct question of the query file is resolved once through skuad's own
//! forwarder ([`skua_resolver::forward::Forwarder`]), which scrubs, renders and stores the
//! upstream's reply in the cache the dataplanes share ([`SharedCache`]); the runs then answer
//! with [`Engine::handle_query_with`] and that cache, as the socket and AF_XDP workers do.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use skua_config::{Config, Loc, Located};
use skua_engine::engine::DropReason;
use skua_engine::name::WireName;
use skua_engine::rrl::{Rrl, RrlConfig};
use skua_engine::{AnswerCache, Engine, NoCache, Outcome, Request, Transport, text};
use skua_resolver::cache::{MsgShard, SetShard};
use skua_resolver::forward::{Entropy, Event, Forwarder, Question, Start};

use crate::base::clock;
use crate::base::resolving::{ResolverSettings, RwShard, SharedCache};

const HELP: &str = "\
usage: skuad bench (--config FILE | --zone FILE --origin NAME) [-n ITERATIONS] [-s SOURCES]
                   [--edns SIZE] [--do] [--tcp] [-r [RRL options]] [--cache] QUERYFILE
  QUERYFILE   one query per line: 'qname qtype' (queryperf format); '#' or ';' comments
  -n N        passes over the query file (default 10)
  -s N        spread queries over N client addresses in 198.18.0.0/15 (default 1)
  --edns SIZE add an OPT record advertising SIZE; --do sets the DO bit
  --tcp       answer as over TCP (no truncation, never rate limited)
  --cache     cache hits instead of local data: the data loaded (--config or --zone) is the
              upstream, the engine measured forwards --origin to it (forward-zone:, default
              cache sizes); every distinct question of QUERYFILE is resolved once through
              skuad's forwarder first, then the runs answer from the cache
  -r          response rate limiting on (BIND defaults but the options below); without -r,
              the configuration's rrl-* directives apply
  --rrl-rate N      responses per second per account, every class (default 5)
  --rrl-slip N      slip (default 2)
  --rrl-prefix N    IPv4 prefix length of a client netblock (default 24)
  --rrl-table N     max-table-size (default 20000)
  --rrl-ab ROUNDS   ROUNDS alternations of a run without and a run with rate limiting (-r
                    options), then the median overhead";

struct Opts {
    config: Option<PathBuf>,
    zone: Option<PathBuf>,
    origin: Option<String>,
    iterations: usize,
    sources: u32,
    edns: Option<u16>,
    dnssec_ok: bool,
    tcp: bool,
    queries: Option<PathBuf>,
    rrl: Option<RrlConfig>,
    ab_rounds: usize,
    cache: bool,
}

fn parse_args(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        config: None,
        zone: None,
        origin: None,
        iterations: 10,
        sources: 1,
        edns: None,
        dnssec_ok: false,
        tcp: false,
        queries: None,
        rrl: None,
        ab_rounds: 0,
        cache: false,
    };
    let mut rrl = RrlConfig {
        responses_per_second: 5,
        ..RrlConfig::default()
    };
    let mut i = 0;
    let value = |i: &mut usize| -> Result<String, String> {
        *i += 1;
        args.get(*i)
            .cloned()
            .ok_or_else(|| format!("{} needs a value\n{HELP}", args[*i - 1]))
    };
    while i < args.len() {
        match args[i].as_str() {
            "--config" | "-c" => o.config = Some(value(&mut i)?.into()),
            "--zone" | "-z" => o.zone = Some(value(&mut i)?.into()),
            "--origin" | "-o" => o.origin = Some(value(&mut i)?),
            "-n" => o.iterations = value(&mut i)?.parse().map_err(|_| "bad -n".to_string())?,
            "-s" => o.sources = value(&mut i)?.parse().map_err(|_| "bad -s".to_string())?,
            "--edns" => {
                o.edns = Some(
                    value(&mut i)?
                        .parse()
                        .map_err(|_| "bad --edns".to_string())?,
                )
            }
            "--do" => o.dnssec_ok = true,
            "--tcp" => o.tcp = true,
            "--cache" => o.cache = true,
            "-r" => o.rrl = Some(RrlConfig::default()),
            "--rrl-rate" => {
                rrl.responses_per_second = value(&mut i)?
                    .parse()
                    .map_err(|_| "bad --rrl-rate".to_string())?
            }
            "--rrl-slip" => {
                rrl.slip = value(&mut i)?
                    .parse()
                    .map_err(|_| "bad --rrl-slip".to_string())?
            }
            "--rrl-prefix" => {
                rrl.ipv4_prefix_length = value(&mut i)?
                    .parse()
                    .map_err(|_| "bad --rrl-prefix".to_string())?
            }
            "--rrl-table" => {
                rrl.max_table_size = value(&mut i)?
                    .parse()
                    .map_err(|_| "bad --rrl-table".to_string())?
            }
            "--rrl-ab" => {
                o.ab_rounds = value(&mut i)?
                    .parse()
                    .map_err(|_| "bad --rrl-ab".to_string())?;
                o.rrl = Some(RrlConfig::default());
            }
            "-h" | "--help" => return Err(HELP.into()),
            f if !f.starts_with('-') && o.queries.is_none() => o.queries = Some(f.into()),
            f => return Err(format!("unknown argument '{f}'\n{HELP}")),
        }
        i += 1;
    }
    if o.sources == 0 || o.sources > 1 << 17 {
        return Err("-s must be between 1 and 131072 (the size of 198.18.0.0/15)".into());
    }
    if o.iterations == 0 {
        return Err("-n must be at least 1".into());
    }
    if o.cache && o.origin.is_none() {
        return Err(format!(
            "--cache needs --origin NAME (the zone forwarded to the loaded data)\n{HELP}"
        ));
    }
    if o.cache && (o.rrl.is_some() || o.ab_rounds > 0) {
        return Err("--cache does not combine with -r or --rrl-ab".into());
    }
    if o.rrl.is_some() {
        rrl.check()
            .map_err(|e| format!("rate limiting options: {e}"))?;
        o.rrl = Some(rrl);
    }
    Ok(o)
}

/// Reads a queryperf file into (name, type) pairs.
pub fn read_queries(text: &str) -> Result<Vec<(WireName, u16)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(name), t) = (it.next(), it.next().unwrap_or("A")) else {
            continue;
        };
        let name = WireName::parse(name, None).map_err(|e| format!("line {}: {e}", n + 1))?;
        let t =
            text::rtype_from_str(t).ok_or_else(|| format!("line {}: unknown type '{t}'", n + 1))?;
        out.push((name, t));
    }
    Ok(out)
}

/// Entry point of `skuad bench`.
pub fn main(args: &[String]) -> Result<(), String> {
    let o = parse_args(args)?;
    let qfile = o
        .queries
        .clone()
        .ok_or_else(|| format!("missing QUERYFILE\n{HELP}"))?;
    let mut cfg = match (&o.config, &o.zone, &o.origin) {
        (Some(c), None, _) => skua_config::parse_file(c).map_err(|e| e.to_string())?,
        (None, Some(z), Some(origin)) => {
            let text = format!(
                "auth-zone:\n  name: \"{origin}\"\n  zonefile: \"{}\"\n",
                z.display()
            );
            skua_config::parse_str(&text, "<bench>").map_err(|e| e.to_string())?
        }
        _ => {
            return Err(format!(
                "give --config FILE, or --zone FILE with --origin NAME\n{HELP}"
            ));
        }
    };
    allow_everyone(&mut cfg);
    let base = o
        .config
        .as_ref()
        .and_then(|c| c.parent().map(PathBuf::from));
    let rss0 = skua_netio::rss_bytes().unwrap_or(0);
    let loaded = crate::control::load::load_config(cfg, base).map_err(|e| e.to_string())?;
    skua_netio::release_free_memory();
    let rss1 = skua_netio::rss_bytes().unwrap_or(0);
    let engine = loaded.engine;
    let config_rrl = loaded.rrl.clone();
    println!(
        "Loaded {} records ({} names) in {:.3} s; answer tables {} KiB; RSS +{} KiB ({:.0} bytes/record)",
        loaded.records,
        engine.name_count(),
        loaded.elapsed.as_secs_f64(),
        engine.heap_bytes() / 1024,
        rss1.saturating_sub(rss0) / 1024,
        rss1.saturating_sub(rss0) as f64 / loaded.records.max(1) as f64
    );
    let text = std::fs::read_to_string(&qfile).map_err(|e| format!("{}: {e}", qfile.display()))?;
    let qs = read_queries(&text)?;
    if qs.is_empty() {
        return Err("the query file holds no query".into());
    }
    if o.cache {
        // The loaded data is the upstream; the engine measured only forwards.
        let origin = o.origin.as_deref().unwrap_or(".");
        return cached(&engine, origin, &qs, &o);
    }
    let packets: Vec<Vec<u8>> = qs
        .iter()
        .enumerate()
        .map(|(i, (n, t))| crate::base::query::encode_query(i as u16, n, *t, o.edns, o.dnssec_ok))
        .collect();
    let sources: Vec<std::net::IpAddr> = (0..o.sources)
        .map(|i| std::net::IpAddr::V4(std::net::Ipv4Addr::from(0xc612_0000u32 + i)))
        .collect();
    let transport = if o.tcp {
        Transport::Tcp
    } else {
        Transport::Udp
    };
    let mut engine = engine;
    let table = o
        .rrl
        .clone()
        .or(config_rrl)
        .map(|c| Arc::new(Rrl::new(c, crate::control::load::rrl_seed())));
    if let Some(t) = &table {
        engine.set_rrl(Some(t.clone()));
    }
    let run = Run {
        packets: &packets,
        sources: &sources,
        transport,
        iterations: o.iterations,
    };
    if o.ab_rounds > 0 {
        return ab(&mut engine, table, &run, o.ab_rounds);
    }
    let s = run.go(&engine);
    s.print(&run, o.sources);
    if let Some(t) = engine.rrl() {
        println!(
            "Slip: {} Drop: {} (rate limiting: {} of {} accounts in use)",
            s.slipped,
            s.rate_limited,
            t.accounts(),
            t.capacity()
        );
    }
    Ok(())
}

/// One measured pass set: the encoded queries, their client addresses, and how often.
struct Run<'a> {
    packets: &'a [Vec<u8>],
    sources: &'a [std::net::IpAddr],
    transport: Transport,
    iterations: usize,
}

/// Counts of one run.
#[derive(Default)]
struct Stats {
    replies: u64,
    drops: u64,
    rate_limited: u64,
    slipped: u64,
    hot: u64,
    cached: u64,
    bytes: u64,
    secs: f64,
}

impl Run<'_> {
    fn go(&self, engine: &Engine) -> Stats {
        self.go_with(engine, &NoCache)
    }

    /// The runs, answering names outside local data from `cache` (a dataplane's call).
    fn go_with<C: AnswerCache>(&self, engine: &Engine, cache: &C) -> Stats {
        let mut out = vec![0u8; 65535];
        let mut s = Stats::default();
        let start = Instant::now();
        let mut k = 0usize;
        let mut now = crate::base::clock::now_secs();
        for _ in 0..self.iterations {
            for p in self.packets {
                // A dataplane reads the clock once per batch; so does the bench.
                if k.is_multiple_of(64) {
                    now = crate::base::clock::now_secs();
                }
                let req = Request {
                    src: self.sources[k % self.sources.len()],
                    transport: self.transport,
                    now,
                };
                k += 1;
                match engine.handle_query_with(&req, p, &mut out, cache) {
                    Outcome::Reply { len, info } => {
                        s.replies += 1;
                        s.hot += u64::from(info.hot);
                        s.cached += u64::from(info.cached);
                        s.slipped += u64::from(info.slipped);
                        s.bytes += len as u64;
                    }
                    Outcome::Drop {
                        reason: DropReason::RateLimited,
                        ..
                    } => s.rate_limited += 1,
                    Outcome::Drop { .. } | Outcome::Resolve => s.drops += 1,
                }
            }
        }
        s.secs = start.elapsed().as_secs_f64();
        s
    }

    fn queries(&self) -> f64 {
        (self.iterations * self.packets.len()) as f64
    }
}

impl Stats {
    fn qps(&self, run: &Run<'_>) -> f64 {
        run.queries() / self.secs
    }

    fn print(&self, run: &Run<'_>, sources: u32) {
        let n = run.queries();
        println!(
            "Processed {} queries ({} distinct, {} sources) in {:.6} s ({:.2} qps), {:.1} ns/query",
            n as u64,
            run.packets.len(),
            sources,
            self.secs,
            n / self.secs,
            self.secs * 1e9 / n
        );
        println!(
            "Replies: {} (hot path {:.1} %, {:.1} bytes average), drops: {}",
            self.replies,
            100.0 * self.hot as f64 / self.replies.max(1) as f64,
            self.bytes as f64 / self.replies.max(1) as f64,
            self.drops + self.rate_limited
        );
        if self.cached > 0 {
            println!(
                "From the cache: {} ({:.1} % of the replies)",
                self.cached,
                100.0 * self.cached as f64 / self.replies.max(1) as f64
            );
        }
    }
}

/// Alternates runs without and with the rate-limiting table and prints the overhead.
///
/// Each round is a pair of runs, in the order off-on, then on-off the next round (so a
/// drift of the machine's speed during a round weighs on both sides alike); the overhead
/// of a round is its time per query with rate limiting over its time without. Many short
/// rounds (small `-n`) give a steadier median than a few long ones on a shared machine:
/// with both sides off, 101 rounds of 0.03 s read within ±0.2 % of zero here.
fn ab(
    engine: &mut Engine,
    table: Option<Arc<Rrl>>,
    run: &Run<'_>,
    rounds: usize,
) -> Result<(), String> {
    let mut overheads = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        let mut go = |on: bool| {
            engine.set_rrl(if on { table.clone() } else { None });
            run.go(engine)
        };
        let (off, on) = if round % 2 == 1 {
            let off = go(false);
            (off, go(true))
        } else {
            let on = go(true);
            (go(false), on)
        };
        let pct = 100.0 * (off.qps(run) / on.qps(run) - 1.0);
        println!(
            "round {round}: without RRL {:.2} qps, with RRL {:.2} qps (Slip: {} Drop: {}), overhead {pct:+.2} %",
            off.qps(run),
            on.qps(run),
            on.slipped,
            on.rate_limited
        );
        overheads.push(pct);
    }
    engine.set_rrl(table);
    overheads.sort_by(f64::total_cmp);
    let q = |f: f64| overheads[((rounds - 1) as f64 * f).round() as usize];
    println!(
        "RRL overhead, median of {rounds}: {:+.2} % of the time per query (quartiles {:+.2} % to {:+.2} %)",
        q(0.5),
        q(0.25),
        q(0.75)
    );
    Ok(())
}

/// Every bench client is allowed, whatever the file says (the bench measures answering).
fn allow_everyone(cfg: &mut Config) {
    let loc = Loc::new("<bench>", 0);
    for nb in ["0.0.0.0/0", "::/0"] {
        cfg.server.access_control.push(Located {
            value: (nb.to_string(), "allow".to_string()),
            loc: loc.clone(),
        });
    }
}

/// The forwarder's random numbers: xorshift64* from a fixed seed (the bench's queries are
/// never exposed to anyone: reproducible IDs are fine).
struct BenchEntropy(u64);

impl Entropy for BenchEntropy {
    fn u32(&mut self) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

/// What filling the cache took.
struct Fill {
    questions: usize,
    upstream_queries: usize,
    answered: usize,
    secs: f64,
}

/// Resolves every distinct question of `qs` once through skuad's forwarder, `upstream`
/// answering its queries in-process, into a new cache with `settings`' sizes.
fn fill_cache(
    upstream: &Engine,
    settings: &ResolverSettings,
    qs: &[(WireName, u16)],
) -> Result<(Arc<SharedCache>, Fill), String> {
    let start = Instant::now();
    let cache = Arc::new(SharedCache::new(settings.cache.clone()));
    let mut fwd: Forwarder<usize, RwShard<MsgShard>, RwShard<SetShard>> =
        Forwarder::new(settings.forward.clone(), cache.clone());
    let mut rng = BenchEntropy(0x9e37_79b9_7f4a_7c15);
    let mut out = vec![0u8; 65535];
    // The forwarder's address, as the upstream sees it.
    let src = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    let mut seen = HashSet::new();
    let mut f = Fill {
        questions: 0,
        upstream_queries: 0,
        answered: 0,
        secs: 0.0,
    };
    for (i, (name, qtype)) in qs.iter().enumerate() {
        let q = Question {
            name: name.to_lowercase().as_bytes().to_vec(),
            qtype: *qtype,
            qclass: 1,
        };
        if !seen.insert(q.clone()) {
            continue;
        }
        f.questions += 1;
        // The daemon's clock: the cache's expiries are compared with the engine's seconds.
        match fwd.resolve(q, Some(i), clock::now_millis(), &mut rng) {
            Start::Pending => {}
            _ => return Err(format!("{name}: the forwarder did not take the question")),
        }
        while let Some(ev) = fwd.poll_event() {
            match ev {
                Event::Transmit(t) => {
                    f.upstream_queries += 1;
                    let req = Request {
                        src,
                        transport: Transport::Udp,
                        now: clock::now_secs(),
                    };
                    match upstream.handle_query(&req, &t.bytes, &mut out) {
                        Outcome::Reply { len, .. } => {
                            fwd.reply(t.token, t.to, &out[..len], clock::now_millis(), &mut rng)
                        }
                        _ => fwd.failed(t.token, clock::now_millis(), &mut rng),
                    }
                }
                // A SERVFAIL is an answer too, but fills no cache: not counted.
                Event::Answer(a) if a.rendered.flags & 0x000f != 2 => f.answered += a.clients.len(),
                _ => {}
            }
        }
    }
    f.secs = start.elapsed().as_secs_f64();
    Ok((cache, f))
}

/// The engine `--cache` measures: `forward-zone:` `origin` (to an address never used: the
/// bench hands the forwarder's queries to the upstream engine itself), the default cache
/// sizes, every client allowed; and its resolver settings.
fn forwarding_engine(origin: &str) -> Result<(Engine, ResolverSettings), String> {
    let text = format!(
        "server:\n  num-threads: 1\nforward-zone:\n  name: \"{origin}\"\n  forward-addr: 198.18.0.53\n"
    );
    let mut cfg = skua_config::parse_str(&text, "<bench --cache>").map_err(|e| e.to_string())?;
    allow_everyone(&mut cfg);
    let loaded = crate::control::load::load_config(cfg, None).map_err(|e| e.to_string())?;
    let settings = loaded
        .resolver
        .clone()
        .ok_or("--cache: the forwarding configuration has no resolver")?;
    Ok((loaded.engine, settings))
}

/// `--cache`: the engine measured forwards `origin` to `upstream` and answers from a cache
/// filled with every question of `qs` first.
fn cached(upstream: &Engine, origin: &str, qs: &[(WireName, u16)], o: &Opts) -> Result<(), String> {
    let (engine, settings) = forwarding_engine(origin)?;
    let (cache, f) = fill_cache(upstream, &settings, qs)?;
    let (msgs, sets, msg_bytes, set_bytes) = cache.size();
    println!(
        "Cache filled through the forwarder: {} questions, {} upstream queries, {} answered, in {:.3} s; \
         {} answers ({} bytes), {} RRsets ({} bytes)",
        f.questions, f.upstream_queries, f.answered, f.secs, msgs, msg_bytes, sets, set_bytes
    );
    if f.answered < f.questions {
        return Err(format!(
            "{} of {} questions got no answer while filling the cache",
            f.questions - f.answered,
            f.questions
        ));
    }
    let packets: Vec<Vec<u8>> = qs
        .iter()
        .enumerate()
        .map(|(i, (n, t))| crate::base::query::encode_query(i as u16, n, *t, o.edns, o.dnssec_ok))
        .collect();
    let sources: Vec<IpAddr> = (0..o.sources)
        .map(|i| IpAddr::V4(Ipv4Addr::from(0xc612_0000u32 + i)))
        .collect();
    let run = Run {
        packets: &packets,
        sources: &sources,
        transport: if o.tcp {
            Transport::Tcp
        } else {
            Transport::Udp
        },
        iterations: o.iterations,
    };
    let s = run.go_with(&engine, &*cache);
    s.print(&run, o.sources);
    // The figure is a cache-hit figure only if every query of the runs was one.
    if s.cached != s.replies || s.replies as f64 != run.queries() {
        return Err(format!(
            "only {} of {} queries were answered from the cache ({} replies): not a cache-hit figure",
            s.cached,
            run.queries(),
            s.replies
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--cache`: every distinct question is resolved once through the forwarder (a positive
    /// answer and an NXDOMAIN), then every query of a run is answered from the cache.
    #[test]
    fn cache_mode_fills_the_cache_and_answers_from_it() {
        let upstream = crate::control::load::load_str(
            "server:\n  access-control: 198.18.0.0/15 allow\n  local-zone: \"internal.\" static\n  \
             local-data: \"internal. 3600 IN SOA ns.internal. h.internal. 1 3600 900 604800 300\"\n  \
             local-data: \"h1.internal. 300 IN A 198.18.0.1\"\n  \
             local-data: \"h2.internal. 300 IN A 198.18.0.2\"\n",
            "<test upstream>",
        )
        .expect("upstream")
        .engine;
        let qs = read_queries("h1.internal. A\nh2.internal. A\nnx.internal. A\nH1.internal. A\n")
            .expect("queries");
        let (engine, settings) = forwarding_engine("internal.").expect("forwarding engine");
        let (cache, f) = fill_cache(&upstream, &settings, &qs).expect("fill");
        assert_eq!((f.questions, f.upstream_queries, f.answered), (3, 3, 3));
        let (msgs, _, _, _) = cache.size();
        assert_eq!(msgs, 3);
        let packets: Vec<Vec<u8>> = qs
            .iter()
            .enumerate()
            .map(|(i, (n, t))| crate::base::query::encode_query(i as u16, n, *t, None, false))
            .collect();
        let sources = [IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))];
        let run = Run {
            packets: &packets,
            sources: &sources,
            transport: Transport::Udp,
            iterations: 2,
        };
        let s = run.go_with(&engine, &*cache);
        assert_eq!((s.replies, s.cached, s.drops), (8, 8, 0));
        // Without the cache the same engine has nothing to answer them with.
        let s = run.go(&engine);
        assert_eq!((s.replies, s.cached, s.drops), (0, 0, 8));
    }
}
