//! The DNS health check: the appliance is healthy when its resolver answers a query it must
//! know, on the address clients use. skua-health.service runs it before boot-complete.target
//! on a counted (trial) boot, so a version whose skuad does not answer (fails its XDP
//! self-test with `--xdp-required`, cannot bind, lost its zones...) is never blessed.

use std::fmt;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

/// How a unit that systemd gave up on is reported (and recognised as final).
const FAILED: &str = "has failed (systemd stopped restarting it)";

/// One health check.
#[derive(Debug, Clone)]
pub struct Check {
    /// Where skuad listens.
    pub server: SocketAddr,
    /// The name to ask.
    pub name: String,
    /// The type to ask.
    pub qtype: RecordType,
    /// If set, one answer record must have this value (as its RDATA prints).
    pub expect: Option<String>,
    /// If set, this systemd unit must be `active` too: skuad (`Type=notify`) is active only
    /// once its start-up checks passed, while its kernel sockets may answer a little before
    /// an XDP self-test fails.
    pub unit: Option<String>,
}

/// Why a check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy(pub String);

impl fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unhealthy {}

impl Check {
    /// One query with a 1 s timeout: `Ok` with the answers' RDATA, or why it failed.
    pub fn once(&self, id: u16) -> Result<Vec<String>, Unhealthy> {
        if let Some(unit) = &self.unit {
            let out = std::process::Command::new("systemctl")
                .args(["is-active", unit])
                .output()
                .map_err(|e| Unhealthy(format!("systemctl is-active {unit}: {e}")))?;
            let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if state == "failed" {
                // Restart= gave up (start limit): waiting longer cannot help.
                return Err(Unhealthy(format!("{unit} {FAILED}")));
            }
            if state != "active" {
                return Err(Unhealthy(format!("{unit} is {state}")));
            }
        }
        let name = Name::from_ascii(&self.name)
            .map_err(|e| Unhealthy(format!("bad name {}: {e}", self.name)))?;
        let mut q = Message::new(id, MessageType::Query, OpCode::Query);
        q.metadata.recursion_desired = true;
        q.add_query(Query::query(name, self.qtype));
        let wire = q
            .to_vec()
            .map_err(|e| Unhealthy(format!("encode query: {e}")))?;
        let bind: SocketAddr = if self.server.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        let io = |e: std::io::Error| Unhealthy(format!("{}: {e}", self.server));
        let sock = UdpSocket::bind(bind).map_err(io)?;
        sock.set_read_timeout(Some(Duration::from_secs(1)))
            .map_err(io)?;
        sock.connect(self.server).map_err(io)?;
        sock.send(&wire).map_err(io)?;
        let mut buf = [0u8; 4096];
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            let n = sock
                .recv(&mut buf)
                .map_err(|e| Unhealthy(format!("no answer from {} ({e})", self.server)))?;
            // Malformed or unrelated datagrams are skipped, for at most the query's second.
            let r = match Message::from_vec(&buf[..n]) {
                Ok(r)
                    if r.metadata.id == id && r.metadata.message_type == MessageType::Response =>
                {
                    r
                }
                _ if Instant::now() > deadline => {
                    return Err(Unhealthy(format!(
                        "no matching answer from {} (malformed or unrelated responses only)",
                        self.server
                    )));
                }
                _ => continue,
            };
            if r.metadata.response_code != ResponseCode::NoError {
                return Err(Unhealthy(format!(
                    "{} {} answered {}",
                    self.name,
                    self.qtype,
                    rcode_name(r.metadata.response_code)
                )));
            }
            let got: Vec<String> = r
                .answers
                .iter()
                .filter(|a| a.record_type() == self.qtype)
                .map(|a| rdata_text(&a.data))
                .collect();
            if got.is_empty() {
                return Err(Unhealthy(format!(
                    "{} {}: no answer records",
                    self.name, self.qtype
                )));
            }
            if let Some(want) = &self.expect
                && !got.iter().any(|g| g == want)
            {
                return Err(Unhealthy(format!(
                    "{} {}: got {}, want {want}",
                    self.name,
                    self.qtype,
                    got.join(", ")
                )));
            }
            return Ok(got);
        }
    }

    /// Retries every second until the check passes or `wait` has passed; returns the last
    /// failure then. `progress` sees each failure (for the journal).
    pub fn wait(
        &self,
        wait: Duration,
        mut progress: impl FnMut(&Unhealthy),
    ) -> Result<Vec<String>, Unhealthy> {
        let deadline = Instant::now() + wait;
        let mut id = 0x5ca0u16;
        loop {
            let started = Instant::now();
            id = id.wrapping_add(1);
            match self.once(id) {
                Ok(v) => return Ok(v),
                Err(e) if Instant::now() >= deadline || e.0.ends_with(FAILED) => return Err(e),
                Err(e) => progress(&e),
            }
            let next = started + Duration::from_secs(1);
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    }
}

/// The mnemonic operators read in dig/kdig output (RFC 6895 section 2.3).
fn rcode_name(r: ResponseCode) -> String {
    match u16::from(r) {
        0 => "NOERROR".into(),
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        n => format!("RCODE{n}"),
    }
}

fn rdata_text(d: &RData) -> String {
    match d {
        RData::A(a) => a.0.to_string(),
        RData::AAAA(a) => a.0.to_string(),
        other => other.to_string(),
    }
}
