//! `skuad bench`: the engine in-process, no network, after BIND 10's `query_bench`.
//!
//! Loads a configuration (or a single zone file), reads a queryperf-style file
//! (`qname qtype` per line), encodes every query once, then answers them `-n` times in a
//! loop and prints queries per second and nanoseconds per query. `-s N` spreads the queries
//! over N client addresses (in 198.18.0.0/15), which matters once rate limiting exists.

use std::path::PathBuf;
use std::time::Instant;

use skua_config::{Loc, Located};
use skua_engine::name::WireName;
use skua_engine::{Outcome, Request, Transport, text};

const HELP: &str = "\
usage: skuad bench (--config FILE | --zone FILE --origin NAME) [-n ITERATIONS] [-s SOURCES]
                   [--edns SIZE] [--do] [--tcp] QUERYFILE
  QUERYFILE   one query per line: 'qname qtype' (queryperf format); '#' or ';' comments
  -n N        passes over the query file (default 10)
  -s N        spread queries over N client addresses in 198.18.0.0/15 (default 1)
  --edns SIZE add an OPT record advertising SIZE; --do sets the DO bit
  --tcp       answer as over TCP (no truncation)";

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
    Ok(o)
}

/// Encodes one query: ID, RD, one question, optional OPT.
pub fn encode_query(
    id: u16,
    name: &WireName,
    qtype: u16,
    edns: Option<u16>,
    dnssec_ok: bool,
) -> Vec<u8> {
    let mut p = Vec::with_capacity(12 + name.len() + 4 + 11);
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(edns.is_some())]);
    p.extend_from_slice(name.as_bytes());
    p.extend_from_slice(&qtype.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    if let Some(size) = edns {
        p.extend_from_slice(&[0, 0, 0x29]);
        p.extend_from_slice(&size.to_be_bytes());
        p.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
    }
    p
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
    // Every bench client is allowed, whatever the file says (the bench measures answering).
    let loc = Loc::new("<bench>", 0);
    for nb in ["0.0.0.0/0", "::/0"] {
        cfg.server.access_control.push(Located {
            value: (nb.to_string(), "allow".to_string()),
            loc: loc.clone(),
        });
    }
    let base = o
        .config
        .as_ref()
        .and_then(|c| c.parent().map(PathBuf::from));
    let rss0 = skua_netio::rss_bytes().unwrap_or(0);
    let loaded = crate::load::load_config(cfg, base).map_err(|e| e.to_string())?;
    skua_netio::release_free_memory();
    let rss1 = skua_netio::rss_bytes().unwrap_or(0);
    let engine = loaded.engine;
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
    let packets: Vec<Vec<u8>> = qs
        .iter()
        .enumerate()
        .map(|(i, (n, t))| encode_query(i as u16, n, *t, o.edns, o.dnssec_ok))
        .collect();
    let sources: Vec<std::net::IpAddr> = (0..o.sources)
        .map(|i| std::net::IpAddr::V4(std::net::Ipv4Addr::from(0xc612_0000u32 + i)))
        .collect();
    let transport = if o.tcp {
        Transport::Tcp
    } else {
        Transport::Udp
    };
    let mut out = vec![0u8; 65535];
    let (mut replies, mut drops, mut hot, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    let start = Instant::now();
    let mut k = 0usize;
    for _ in 0..o.iterations {
        for p in &packets {
            let req = Request {
                src: sources[k % sources.len()],
                transport,
            };
            k += 1;
            match engine.handle_query(&req, p, &mut out) {
                Outcome::Reply { len, info } => {
                    replies += 1;
                    hot += u64::from(info.hot);
                    bytes += len as u64;
                }
                Outcome::Drop { .. } => drops += 1,
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let n = (o.iterations * packets.len()) as f64;
    println!(
        "Processed {} queries ({} distinct, {} sources) in {:.6} s ({:.2} qps), {:.1} ns/query",
        n as u64,
        packets.len(),
        o.sources,
        secs,
        n / secs,
        secs * 1e9 / n
    );
    println!(
        "Replies: {replies} (hot path {:.1} %, {:.1} bytes average), drops: {drops}",
        100.0 * hot as f64 / replies.max(1) as f64,
        bytes as f64 / replies.max(1) as f64
    );
    Ok(())
}
