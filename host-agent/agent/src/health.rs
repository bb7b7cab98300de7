//! Health checks that track DNS, with keepalived's `track_script` weight semantics.
//!
//! Kinds (`[[check]]` in the configuration):
//! - `dns-udp`, `dns-tcp`: a canary query (`query = "NAME TYPE"`) to `target`; passes on a
//!   reply with the expected rcode (`expect`, default `noerror`), and with at least one
//!   answer record when `expect = "answer"`.
//! - `skuad`: skuad's `GET /health` answers 200: it runs, and its dataplane (the XDP
//!   program's self-test included) is not degraded.
//! - `upstreams`: skuad's `GET /resolver/upstreams` lists at least one upstream that is not
//!   `down` (forwarding can still be done from this node).
//!
//! Each check runs every `interval_ms` on the checker thread (never on the VRRP loop, which
//! must not miss an advertisement), with `timeout_ms`. Hysteresis as keepalived's `fall`
//! and `rise`: a check fails after `fall` failures in a row and recovers after `rise`
//! successes in a row. A failing check with `weight < 0` lowers every instance's priority by
//! `-weight`; a passing check with `weight > 0` raises it by `weight`; a failing check
//! with `weight = 0` is critical: the instances give mastership up (priority 0) and the
//! anycast prefixes are withdrawn until it recovers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::skuad::{Client, Endpoint};

/// `[[check]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckConfig {
    /// A name for logs and metrics.
    pub name: String,
    /// `dns-udp`, `dns-tcp`, `skuad` or `upstreams`.
    pub kind: String,
    /// For `dns-*`: `ADDR:PORT` to ask (IPv6 as `[ADDR]:PORT`).
    #[serde(default)]
    pub target: Option<SocketAddr>,
    /// For `dns-*`: `NAME TYPE` (TYPE one of A, AAAA, NS, SOA, TXT, MX; default A).
    #[serde(default)]
    pub query: Option<String>,
    /// For `dns-*`: `noerror` (default), `nxdomain`, `answer` (NOERROR with records) or
    /// `any` (any reply).
    #[serde(default = "default_expect")]
    pub expect: String,
    /// Milliseconds between runs. Default 1000.
    #[serde(default = "default_interval")]
    pub interval_ms: u32,
    /// Milliseconds a run may take. Default 500.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u32,
    /// Failures in a row before the check fails. Default 2.
    #[serde(default = "default_two")]
    pub fall: u32,
    /// Successes in a row before it recovers. Default 2.
    #[serde(default = "default_two")]
    pub rise: u32,
    /// keepalived's `weight`: < 0 subtracted while failing, > 0 added while passing, 0
    /// critical (the default).
    #[serde(default)]
    pub weight: i32,
}

fn default_expect() -> String {
    "noerror".into()
}
fn default_interval() -> u32 {
    1000
}
fn default_timeout() -> u32 {
    500
}
fn default_two() -> u32 {
    2
}

/// The query type codes the canary accepts.
fn qtype(t: &str) -> Option<u16> {
    Some(match t.to_ascii_uppercase().as_str() {
        "A" => 1,
        "NS" => 2,
        "SOA" => 6,
        "MX" => 15,
        "TXT" => 16,
        "AAAA" => 28,
        _ => return None,
    })
}

impl CheckConfig {
    /// Checks the fields that depend on the kind (errors name the field).
    pub fn check(&self) -> Result<(), String> {
        match self.kind.as_str() {
            "dns-udp" | "dns-tcp" => {
                if self.target.is_none() {
                    return Err("target = \"ADDR:PORT\" is needed for a DNS check".into());
                }
                self.question()?;
                if !["noerror", "nxdomain", "answer", "any"].contains(&self.expect.as_str()) {
                    return Err(format!(
                        "expect = \"{}\": one of noerror, nxdomain, answer, any",
                        self.expect
                    ));
                }
            }
            "skuad" | "upstreams" => {}
            k => {
                return Err(format!(
                    "kind = \"{k}\": one of dns-udp, dns-tcp, skuad, upstreams"
                ));
            }
        }
        if self.interval_ms < 10 || self.timeout_ms < 1 || self.timeout_ms > self.interval_ms {
            return Err("interval_ms must be at least 10 and timeout_ms 1 to interval_ms".into());
        }
        if self.fall == 0 || self.rise == 0 {
            return Err("fall and rise must be at least 1".into());
        }
        if !(-254..=254).contains(&self.weight) {
            return Err("weight must be -254 to 254".into());
        }
        Ok(())
    }

    /// The canary's question in wire form, with its type.
    fn question(&self) -> Result<(Vec<u8>, u16), String> {
        let q = self.query.as_deref().unwrap_or("");
        let mut it = q.split_whitespace();
        let name = it
            .next()
            .ok_or("query = \"NAME TYPE\" is needed for a DNS check")?;
        let t = it.next().unwrap_or("A");
        let t = qtype(t).ok_or_else(|| format!("query type '{t}': one of A AAAA NS SOA TXT MX"))?;
        let mut wire = Vec::new();
        for label in name
            .trim_end_matches('.')
            .split('.')
            .filter(|l| !l.is_empty())
        {
            if label.len() > 63 {
                return Err(format!("query name '{name}': label longer than 63"));
            }
            wire.push(label.len() as u8);
            wire.extend_from_slice(label.as_bytes());
        }
        wire.push(0);
        if wire.len() > 255 {
            return Err(format!("query name '{name}': longer than 255 bytes"));
        }
        Ok((wire, t))
    }
}

/// One check's state, as metrics and `/status` show it.
#[derive(Debug, Clone, Serialize, Default)]
pub struct CheckState {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: String,
    /// Passing (after the hysteresis).
    pub ok: bool,
    /// Its weight.
    pub weight: i32,
    /// Failures in a row (raw).
    pub failures: u32,
    /// Successes in a row (raw).
    pub successes: u32,
    /// Times it changed between passing and failing.
    pub transitions: u64,
    /// The last run's duration in milliseconds.
    pub last_ms: Option<f64>,
    /// Why the last run failed.
    pub last_error: Option<String>,
    /// Has passed `rise` runs in a row since the agent started (a check is passing until
    /// proven otherwise, but the anycast prefixes are first announced only once every
    /// critical check has proven itself: see [`Verdict::unproven`]).
    pub proven: bool,
}

/// What the checks say now.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Sum of the weights in force (see the module docs).
    pub priority_delta: i32,
    /// A critical check fails: give mastership up, withdraw anycast.
    pub critical: Option<String>,
    /// A critical check has not passed `rise` runs in a row since the agent started: the
    /// anycast prefixes are not announced yet (a node just booted announces only once it
    /// has shown that it answers).
    pub unproven: Option<String>,
}

/// Every check's state (shared with the VRRP loop and the status server).
pub type Shared = Arc<Mutex<Vec<CheckState>>>;

/// The verdict of a set of states.
pub fn verdict(states: &[CheckState]) -> Verdict {
    let mut v = Verdict::default();
    for s in states {
        match (s.ok, s.weight) {
            (false, 0) if v.critical.is_none() => {
                v.critical = Some(format!(
                    "check {} fails: {}",
                    s.name,
                    s.last_error.as_deref().unwrap_or("?")
                ));
            }
            (true, 0) if !s.proven && v.unproven.is_none() => {
                v.unproven = Some(format!("check {} has not passed yet", s.name));
            }
            (false, w) if w < 0 => v.priority_delta += w,
            (true, w) if w > 0 => v.priority_delta += w,
            _ => {}
        }
    }
    v
}

/// Applies one run's result to a state with the fall/rise hysteresis; returns whether the
/// passing/failing state changed.
pub fn record(s: &mut CheckState, cfg: &CheckConfig, result: Result<(), String>) -> bool {
    match result {
        Ok(()) => {
            s.successes += 1;
            s.failures = 0;
            s.last_error = None;
        }
        Err(e) => {
            s.failures += 1;
            s.successes = 0;
            s.last_error = Some(e);
        }
    }
    if s.successes >= cfg.rise {
        s.proven = true;
    }
    let now_ok = if s.ok {
        s.failures < cfg.fall
    } else {
        s.successes >= cfg.rise
    };
    let changed = now_ok != s.ok;
    if changed {
        s.ok = now_ok;
        s.transitions += 1;
    }
    changed
}

fn dns(cfg: &CheckConfig, tcp: bool) -> Result<(), String> {
    let target = cfg.target.ok_or("no target")?;
    let timeout = Duration::from_millis(cfg.timeout_ms.into());
    let (qname, qt) = cfg.question()?;
    // A random ID (RFC 5452 §9.2): an off-path sender must not be able to answer the canary
    // for a dead server and keep a failing node in the election.
    let id = random_id().map_err(|e| format!("random query ID: {e}"))?;
    let mut q = Vec::with_capacity(qname.len() + 16);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    q.extend_from_slice(&qname);
    q.extend_from_slice(&qt.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    let reply = if tcp {
        let mut s = TcpStream::connect_timeout(&target, timeout)
            .map_err(|e| format!("tcp {target}: {e}"))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        let mut m = (q.len() as u16).to_be_bytes().to_vec();
        m.extend_from_slice(&q);
        s.write_all(&m).map_err(|e| format!("tcp {target}: {e}"))?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len)
            .map_err(|e| format!("tcp {target}: {e}"))?;
        let mut b = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut b)
            .map_err(|e| format!("tcp {target}: {e}"))?;
        b
    } else {
        let bind: SocketAddr = if target.is_ipv4() {
            "0.0.0.0:0".parse().expect("literal")
        } else {
            "[::]:0".parse().expect("literal")
        };
        let s = UdpSocket::bind(bind).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.connect(target)
            .map_err(|e| format!("udp {target}: {e}"))?;
        s.send(&q).map_err(|e| format!("udp {target}: {e}"))?;
        let mut b = vec![0u8; 4096];
        loop {
            let n = s
                .recv(&mut b)
                .map_err(|e| format!("udp {target}: no answer ({e})"))?;
            if n >= 12 && b[..2] == id.to_be_bytes() {
                b.truncate(n);
                break b;
            }
        }
    };
    if reply.len() < 12 || reply[..2] != id.to_be_bytes() || reply[2] & 0x80 == 0 {
        return Err("not a reply to the canary".into());
    }
    let rcode = reply[3] & 0x0f;
    let ancount = u16::from_be_bytes([reply[6], reply[7]]);
    let ok = match cfg.expect.as_str() {
        "any" => true,
        "nxdomain" => rcode == 3,
        "answer" => rcode == 0 && ancount > 0,
        _ => rcode == 0,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "rcode {rcode}, {ancount} answers (expected {})",
            cfg.expect
        ))
    }
}

/// 16 random bits from the kernel.
fn random_id() -> std::io::Result<u16> {
    let mut b = [0u8; 2];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(u16::from_ne_bytes(b))
}

fn skuad_check(cfg: &CheckConfig, client: &mut Client) -> Result<(), String> {
    match cfg.kind.as_str() {
        "skuad" => match client.call("GET", "/health", None) {
            Ok(r) if r.status == 200 => Ok(()),
            Ok(r) => Err(format!("skuad /health: {} {}", r.status, r.body.trim())),
            Err(e) => Err(format!("skuad unreachable: {e}")),
        },
        _ => match client.call("GET", "/resolver/upstreams", None) {
            Ok(r) if r.status == 200 => {
                let v: serde_json::Value =
                    serde_json::from_str(&r.body).map_err(|e| e.to_string())?;
                let list = v["upstreams"].as_array().cloned().unwrap_or_default();
                if list.iter().any(|u| u["state"] != "down") {
                    Ok(())
                } else {
                    Err(format!("all {} upstreams are down", list.len()))
                }
            }
            Ok(r) => Err(format!(
                "skuad /resolver/upstreams: {} {}",
                r.status,
                r.body.trim()
            )),
            Err(e) => Err(format!("skuad unreachable: {e}")),
        },
    }
}

/// Runs the checks forever on the calling thread, publishing into `shared`.
pub fn run(cfgs: Vec<CheckConfig>, skuad: Endpoint, token: Option<String>, shared: Shared) {
    let mut client = Client::new(skuad, token);
    let start = Instant::now();
    let mut next: Vec<Duration> = cfgs.iter().map(|_| Duration::ZERO).collect();
    loop {
        let now = start.elapsed();
        for (i, c) in cfgs.iter().enumerate() {
            if now < next[i] {
                continue;
            }
            next[i] = now + Duration::from_millis(c.interval_ms.into());
            let t0 = Instant::now();
            let r = match c.kind.as_str() {
                "dns-udp" => dns(c, false),
                "dns-tcp" => dns(c, true),
                _ => skuad_check(c, &mut client),
            };
            let ms = t0.elapsed().as_secs_f64() * 1000.0;
            let mut st = shared.lock().unwrap_or_else(|e| e.into_inner());
            let s = &mut st[i];
            s.last_ms = Some((ms * 1000.0).round() / 1000.0);
            if record(s, c, r) {
                crate::logging::log(
                    "health",
                    format_args!(
                        "check {} {}{}",
                        c.name,
                        if s.ok { "passes again" } else { "FAILS" },
                        s.last_error
                            .as_deref()
                            .map(|e| format!(": {e}"))
                            .unwrap_or_default()
                    ),
                );
            }
        }
        let wake = next.iter().min().copied().unwrap_or(Duration::from_secs(1));
        std::thread::sleep(
            wake.saturating_sub(start.elapsed())
                .max(Duration::from_millis(1)),
        );
    }
}

/// Initial states: every check passing until proven otherwise (`fall` failures).
pub fn initial(cfgs: &[CheckConfig]) -> Vec<CheckState> {
    cfgs.iter()
        .map(|c| CheckState {
            name: c.name.clone(),
            kind: c.kind.clone(),
            ok: true,
            weight: c.weight,
            ..CheckState::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(fall: u32, rise: u32, weight: i32) -> CheckConfig {
        CheckConfig {
            name: "c".into(),
            kind: "dns-udp".into(),
            target: Some("127.0.0.1:53".parse().unwrap()),
            query: Some("a.example. A".into()),
            expect: "noerror".into(),
            interval_ms: 100,
            timeout_ms: 50,
            fall,
            rise,
            weight,
        }
    }

    #[test]
    fn fall_and_rise_keep_one_blip_from_flapping() {
        let c = cfg(3, 2, -50);
        let mut s = initial(std::slice::from_ref(&c)).remove(0);
        let err = || Err("x".to_string());
        assert!(!record(&mut s, &c, err()) && s.ok, "1 failure of 3");
        assert!(!record(&mut s, &c, err()) && s.ok, "2 of 3");
        assert!(
            !record(&mut s, &c, Ok(())) && s.ok,
            "a success resets the count"
        );
        assert!(!record(&mut s, &c, err()) && !record(&mut s, &c, err()));
        assert!(record(&mut s, &c, err()) && !s.ok, "3 in a row: fails");
        assert!(!record(&mut s, &c, Ok(())) && !s.ok, "1 success of 2");
        assert!(!record(&mut s, &c, err()) && !s.ok);
        assert!(!record(&mut s, &c, Ok(())));
        assert!(record(&mut s, &c, Ok(())) && s.ok, "2 in a row: passes");
        assert_eq!(s.transitions, 2);
    }

    #[test]
    fn weights_as_keepalived_and_critical_checks() {
        let mk = |ok, weight| CheckState {
            name: format!("w{weight}"),
            ok,
            weight,
            last_error: Some("timeout".into()),
            ..CheckState::default()
        };
        let v = verdict(&[mk(false, -50), mk(true, -20), mk(true, 10), mk(false, 5)]);
        assert_eq!(
            v.priority_delta, -40,
            "-50 failing, +10 passing; others count nothing"
        );
        assert!(v.critical.is_none());
        let v = verdict(&[mk(true, 0), mk(false, 0)]);
        assert_eq!(v.critical.as_deref(), Some("check w0 fails: timeout"));
        assert_eq!(
            v.unproven.as_deref(),
            Some("check w0 has not passed yet"),
            "passing by default, not proven"
        );
    }

    #[test]
    fn a_critical_check_proves_itself_with_rise_successes_in_a_row() {
        let c = cfg(2, 3, 0);
        let mut st = initial(std::slice::from_ref(&c));
        assert!(st[0].ok && verdict(&st).critical.is_none());
        assert!(verdict(&st).unproven.is_some(), "not run yet");
        record(&mut st[0], &c, Ok(()));
        record(&mut st[0], &c, Ok(()));
        record(&mut st[0], &c, Err("x".into()));
        record(&mut st[0], &c, Ok(()));
        assert!(verdict(&st).unproven.is_some(), "3 in a row needed");
        record(&mut st[0], &c, Ok(()));
        record(&mut st[0], &c, Ok(()));
        assert!(verdict(&st).unproven.is_none());
        // Proven for good: a later failure is a critical failure, not "unproven".
        for _ in 0..2 {
            record(&mut st[0], &c, Err("x".into()));
        }
        let v = verdict(&st);
        assert!(v.critical.is_some() && v.unproven.is_none());
        // Weighted checks never hold the announcement back.
        let w = cfg(2, 2, -10);
        assert!(
            verdict(&initial(std::slice::from_ref(&w)))
                .unproven
                .is_none()
        );
    }

    #[test]
    fn config_errors_name_the_field() {
        let mut c = cfg(2, 2, 0);
        assert!(c.check().is_ok());
        c.kind = "ping".into();
        assert!(c.check().unwrap_err().contains("kind = \"ping\""));
        let mut c = cfg(2, 2, 0);
        c.query = Some("a.example. CNAMEX".into());
        assert!(c.check().unwrap_err().contains("query type 'CNAMEX'"));
        let mut c = cfg(2, 2, 0);
        c.target = None;
        assert!(c.check().unwrap_err().contains("target"));
        let mut c = cfg(0, 2, 0);
        c.fall = 0;
        assert!(c.check().unwrap_err().contains("fall and rise"));
        let mut c = cfg(2, 2, 300);
        c.weight = 300;
        assert!(c.check().unwrap_err().contains("weight"));
    }

    #[test]
    fn the_canary_asks_a_real_server_and_reads_its_rcode() {
        // A tiny UDP "server" answering NXDOMAIN with no records.
        let srv = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = srv.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut b = [0u8; 512];
            for _ in 0..3 {
                let (n, peer) = srv.recv_from(&mut b).unwrap();
                let mut r = b[..n].to_vec();
                r[2] |= 0x80;
                r[3] = (r[3] & 0xf0) | 3;
                srv.send_to(&r, peer).unwrap();
            }
        });
        let mut c = cfg(1, 1, 0);
        c.target = Some(addr);
        let e = dns(&c, false).unwrap_err();
        assert!(e.contains("rcode 3"), "{e}");
        c.expect = "nxdomain".into();
        assert!(dns(&c, false).is_ok());
        c.expect = "any".into();
        assert!(dns(&c, false).is_ok());
        // Nobody there: a timeout, reported.
        let dead = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.target = Some(dead.local_addr().unwrap());
        assert!(dns(&c, false).unwrap_err().contains("no answer"));
    }
}
