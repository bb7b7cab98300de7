//! The secondary (docs/zone-transfer.md, "Secondary"): keeps each secondary zone
//! (`primary:`, `request-xfr:`) current from its primaries.
//!
//! One task holds each zone's [`Schedule`] (REFRESH, RETRY, EXPIRE from the SOA held,
//! RFC 1035 §3.3.13; at once on an accepted NOTIFY, RFC 1996 §4.7). A due zone is checked
//! in a task of its own, primary by primary in configuration order until one answers: the
//! SOA over UDP (TCP when truncated), TSIG-signed with the primary's key; when the
//! primary's serial is newer (RFC 1982), an IXFR from the serial held over TCP (an AXFR
//! when nothing is held), falling back to an AXFR when the primary refuses the IXFR or its
//! diffs do not apply. Every message is read by skua-xfr's [`Incoming`] (TSIG on each
//! message, RFC 8945 §5.3.1; the zone's `size-limit-xfr:`/`xfr-max-records:`), with a
//! timeout per message and one for the whole transfer. The new version is built off the
//! async workers and handed to the control core, which compiles and swaps it in and writes
//! the zone file; the check waits for its answer. A copy past its EXPIRE is dropped
//! (the control core then serves SERVFAIL for the zone).
//!
//! Failures (no answer, refused, a bad TSIG, a transfer that is malformed, too large or
//! does not apply) are reported to the control core as [`Event::InFailed`], which logs and
//! audits them aggregated; the copy in force keeps serving.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use skua_engine::name::WireName;
use skua_engine::rr::Rr;
use skua_xfr::client::{self, ClientError, Incoming, Limits, Transfer};
use skua_xfr::secondary::Schedule;
use skua_xfr::tsig::{self, Key, StreamVerifier};
use skua_xfr::zone::{Diff, Version, serial_lt, serial_of};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::task::JoinSet;

use crate::base::clock;
use crate::base::log;
use crate::base::serving::Serving;
use crate::base::xfr::{Event, Received, Secondary, Update};

/// How long one SOA query over UDP waits for its answer.
const SOA_WAIT: Duration = Duration::from_secs(2);
/// SOA queries over UDP before the primary counts as not answering.
const SOA_TRIES: usize = 2;
/// How long a TCP connection to a primary may take.
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// How long the next message of a transfer may take (a primary that stalls).
const IDLE: Duration = Duration::from_secs(10);
/// How long a whole transfer may take (a primary that trickles).
const TRANSFER_MAX: Duration = Duration::from_secs(600);

/// How a zone's check ended.
#[derive(Debug)]
enum Outcome {
    /// A primary answered: the copy held is current, with this SOA.
    Current(Rr),
    /// No primary could be used.
    Failed,
}

/// Why one primary could not be used.
#[derive(Debug)]
enum PrimaryError {
    /// What it sent is not usable.
    Client(ClientError),
    /// No answer in time.
    Timeout(&'static str),
    /// A socket error.
    Io(String),
    /// The control core did not put the transfer in force.
    Install(String),
}

impl PrimaryError {
    fn reason(&self) -> &'static str {
        match self {
            PrimaryError::Client(e) => e.kind(),
            PrimaryError::Timeout(_) => "timeout",
            PrimaryError::Io(_) => "io",
            PrimaryError::Install(_) => "not-served",
        }
    }

    /// Whether an IXFR that failed so is tried again as an AXFR: the primary refused it
    /// or does not implement it, or its diffs are malformed or do not apply to the copy
    /// held (RFC 1995 §4 lets the primary answer with the whole zone; a secondary may ask
    /// for it).
    fn falls_back(&self) -> bool {
        match self {
            PrimaryError::Client(ClientError::Rcode(c)) => *c != skua_xfr::wire::rcode::NOTAUTH,
            PrimaryError::Client(
                ClientError::DoesNotApply(_)
                | ClientError::Form(_)
                | ClientError::Zone(_)
                | ClientError::OutOfZone(_),
            ) => true,
            _ => false,
        }
    }
}

impl std::fmt::Display for PrimaryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrimaryError::Client(e) => write!(f, "{e}"),
            PrimaryError::Timeout(what) => write!(f, "{what}"),
            PrimaryError::Io(e) => write!(f, "{e}"),
            PrimaryError::Install(e) => write!(f, "transferred but not served: {e}"),
        }
    }
}

impl From<std::io::Error> for PrimaryError {
    fn from(e: std::io::Error) -> Self {
        PrimaryError::Io(e.to_string())
    }
}

impl From<ClientError> for PrimaryError {
    fn from(e: ClientError) -> Self {
        PrimaryError::Client(e)
    }
}

/// The schedule of a zone new to the task: checked at once; a copy read from its zone
/// file expires EXPIRE after the file was last written or confirmed.
fn schedule_for(sec: &Secondary, now: u64) -> Schedule {
    match &sec.version {
        Some(v) => Schedule::held(now, v.soa(), sec.confirmed.unwrap_or(now)),
        None => Schedule::empty(now),
    }
}

/// Runs until the task is aborted (at stop).
pub async fn run(serving: Arc<Serving>) {
    let Some(mut notifies) = serving.xfr.take_notify_in() else {
        return;
    };
    let mut zones: HashMap<Vec<u8>, Schedule> = HashMap::new();
    let mut checks: JoinSet<(Vec<u8>, Outcome)> = JoinSet::new();
    let mut running: HashMap<tokio::task::Id, Vec<u8>> = HashMap::new();
    loop {
        let now = clock::unix_secs();
        let state = serving.zones();
        zones.retain(|apex, _| state.secondaries.contains_key(apex));
        for (apex, sec) in &state.secondaries {
            zones
                .entry(apex.clone())
                .or_insert_with(|| schedule_for(sec, now));
        }
        for (apex, sched) in &mut zones {
            let held = state
                .secondaries
                .get(apex)
                .is_some_and(|s| s.version.is_some());
            if held && sched.expired(now) {
                let (tx, rx) = tokio::sync::oneshot::channel();
                if serving.xfr.update(Update::Expired(apex.clone(), tx)).await {
                    let _ = rx.await;
                }
                sched.drop_copy();
            }
        }
        for (apex, sched) in &mut zones {
            if sched.due(now) {
                sched.start();
                let (s, a) = (serving.clone(), apex.clone());
                let h = checks.spawn(async move {
                    let o = check_zone(&s, &a).await;
                    (a, o)
                });
                running.insert(h.id(), apex.clone());
            }
        }
        let wait = zones
            .values()
            .filter_map(Schedule::next_event)
            .min()
            .map_or(Duration::from_secs(3600), |t| {
                Duration::from_secs(t.saturating_sub(now).max(1))
            });
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            Some(n) = notifies.recv() => {
                if let Some(s) = zones.get_mut(&n.zone) {
                    s.notified(clock::unix_secs());
                }
            }
            Some(r) = checks.join_next_with_id(), if !checks.is_empty() => {
                let now = clock::unix_secs();
                let (apex, outcome) = match r {
                    Ok((id, (apex, o))) => {
                        running.remove(&id);
                        (apex, o)
                    }
                    Err(e) => match running.remove(&e.id()) {
                        Some(apex) => {
                            log::error(format_args!("xfr: a zone check ended abnormally: {e}"));
                            (apex, Outcome::Failed)
                        }
                        None => continue,
                    },
                };
                if let Some(s) = zones.get_mut(&apex) {
                    match outcome {
                        Outcome::Current(soa) => s.succeeded(now, &soa),
                        Outcome::Failed => s.failed(now),
                    }
                }
            }
            _ = serving.xfr.changed.notified() => {}
        }
    }
}

/// Checks one zone against its primaries, in order, until one answers.
async fn check_zone(serving: &Serving, apex: &[u8]) -> Outcome {
    let state = serving.zones();
    let Some(sec) = state.secondaries.get(apex) else {
        return Outcome::Failed;
    };
    for p in &sec.primaries {
        let key = p.key.and_then(|i| state.keys.get(i));
        match check_primary(serving, apex, sec, p.addr, key).await {
            Ok(soa) => return Outcome::Current(soa),
            Err((stage, e)) => report(serving, sec, p.addr, key, stage, &e),
        }
    }
    Outcome::Failed
}

fn report(
    serving: &Serving,
    sec: &Secondary,
    primary: SocketAddr,
    key: Option<&Key>,
    stage: &'static str,
    e: &PrimaryError,
) {
    serving.xfr.report(Event::InFailed {
        zone: sec.apex.to_lowercase().to_string(),
        primary,
        key: key.map(|k| k.name().to_string()),
        stage,
        reason: e.reason(),
        error: e.to_string(),
    });
}

/// One primary: its SOA, then a transfer when its serial is newer. The SOA of the copy
/// now current, or the stage that failed and why.
async fn check_primary(
    serving: &Serving,
    apex: &[u8],
    sec: &Secondary,
    addr: SocketAddr,
    key: Option<&Key>,
) -> Result<Rr, (&'static str, PrimaryError)> {
    let soa = soa_query(addr, &sec.apex, key)
        .await
        .map_err(|e| ("SOA", e))?;
    let theirs = serial_of(&soa);
    if let Some(v) = &sec.version
        && !serial_lt(v.serial(), theirs)
    {
        if serial_lt(theirs, v.serial()) {
            log::warn(format_args!(
                "xfr: {}: primary {addr} has serial {theirs}, older than the {} held; keeping the copy held",
                sec.apex,
                v.serial()
            ));
        }
        serving.xfr.update(Update::Confirmed(apex.to_vec())).await;
        return Ok(v.soa().clone());
    }
    let held = sec.version.clone();
    let first = transfer(serving, apex, sec, addr, key, held.as_deref()).await;
    let r = match first {
        Err(e) if held.is_some() && e.falls_back() => {
            report(serving, sec, addr, key, "IXFR", &e);
            log::warn(format_args!(
                "xfr: {}: IXFR from {addr} failed ({e}); trying AXFR",
                sec.apex
            ));
            transfer(serving, apex, sec, addr, key, None)
                .await
                .map_err(|e| ("AXFR", e))
        }
        Err(e) => Err((if held.is_some() { "IXFR" } else { "AXFR" }, e)),
        Ok(v) => Ok(v),
    }?;
    Ok(r.unwrap_or(soa))
}

fn unspecified(addr: SocketAddr) -> SocketAddr {
    let ip = match addr {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}

/// The primary's SOA (RFC 1035 §4.3.5): over UDP, asked again once, over TCP when the
/// answer is truncated.
async fn soa_query(
    addr: SocketAddr,
    apex: &WireName,
    key: Option<&Key>,
) -> Result<Rr, PrimaryError> {
    let sock = UdpSocket::bind(unspecified(addr)).await?;
    // Connected: datagrams from elsewhere are not delivered, and an ICMP "port
    // unreachable" comes back as an error.
    sock.connect(addr).await?;
    let mut buf = vec![0u8; 65535];
    for _ in 0..SOA_TRIES {
        let id = super::notify::random_id();
        let mut q = client::soa_query(id, apex);
        let mac = key.map(|k| tsig::sign_request(&mut q, k, clock::unix_secs()));
        sock.send(&q).await?;
        let deadline = tokio::time::Instant::now() + SOA_WAIT;
        loop {
            let n = match tokio::time::timeout_at(deadline, sock.recv(&mut buf)).await {
                Err(_) => break,
                Ok(r) => r?,
            };
            let msg = &buf[..n];
            if msg.len() < 12 || u16::from_be_bytes([msg[0], msg[1]]) != id {
                continue;
            }
            if msg[2] & 0x02 != 0 {
                return soa_query_tcp(addr, apex, key).await;
            }
            let mut v = key
                .zip(mac.as_ref())
                .map(|(k, m)| StreamVerifier::new(k, m));
            return Ok(client::soa_answer(
                msg,
                id,
                apex,
                v.as_mut(),
                clock::unix_secs(),
            )?);
        }
    }
    Err(PrimaryError::Timeout("no answer to the SOA query"))
}

async fn soa_query_tcp(
    addr: SocketAddr,
    apex: &WireName,
    key: Option<&Key>,
) -> Result<Rr, PrimaryError> {
    let mut s = connect(addr).await?;
    let id = super::notify::random_id();
    let mut q = client::soa_query(id, apex);
    let mac = key.map(|k| tsig::sign_request(&mut q, k, clock::unix_secs()));
    send(&mut s, &q).await?;
    let msg = read_message(&mut s).await?;
    let mut v = key
        .zip(mac.as_ref())
        .map(|(k, m)| StreamVerifier::new(k, m));
    Ok(client::soa_answer(
        &msg,
        id,
        apex,
        v.as_mut(),
        clock::unix_secs(),
    )?)
}

async fn connect(addr: SocketAddr) -> Result<TcpStream, PrimaryError> {
    match tokio::time::timeout(CONNECT_WAIT, TcpStream::connect(addr)).await {
        Err(_) => Err(PrimaryError::Timeout("no TCP connection")),
        Ok(r) => {
            let s = r?;
            let _ = s.set_nodelay(true);
            Ok(s)
        }
    }
}

async fn send(s: &mut TcpStream, msg: &[u8]) -> Result<(), PrimaryError> {
    let mut framed = Vec::with_capacity(2 + msg.len());
    // Cannot truncate: requests are a few hundred bytes.
    framed.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    framed.extend_from_slice(msg);
    match tokio::time::timeout(IDLE, s.write_all(&framed)).await {
        Err(_) => Err(PrimaryError::Timeout(
            "the primary does not read the request",
        )),
        Ok(r) => Ok(r?),
    }
}

/// The next message on a TCP connection (RFC 1035 §4.2.2 framing), within [`IDLE`].
async fn read_message(s: &mut TcpStream) -> Result<Vec<u8>, PrimaryError> {
    let read = async {
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await?;
        let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut m).await?;
        Ok::<_, std::io::Error>(m)
    };
    match tokio::time::timeout(IDLE, read).await {
        Err(_) => Err(PrimaryError::Timeout("the primary stopped sending")),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(PrimaryError::Io(
            "the primary closed the connection before the end".into(),
        )),
        Ok(r) => Ok(r?),
    }
}

/// Reads a whole transfer from `s` into `inc`.
async fn read_transfer(
    s: &mut TcpStream,
    inc: &mut Incoming<'_>,
) -> Result<Transfer, PrimaryError> {
    loop {
        let msg = read_message(s).await?;
        if let Some(t) = inc.feed(&msg, clock::unix_secs())? {
            return Ok(t);
        }
    }
}

/// One transfer from `addr`: an IXFR from `held`, or an AXFR without it. The new version
/// is handed to the control core; `Ok(Some(soa))` once it serves, `Ok(None)` when the
/// primary said the copy held is current.
async fn transfer(
    serving: &Serving,
    apex: &[u8],
    sec: &Secondary,
    addr: SocketAddr,
    key: Option<&Key>,
    held: Option<&Version>,
) -> Result<Option<Rr>, PrimaryError> {
    let limits: Limits = sec.limits;
    let mut s = connect(addr).await?;
    let id = super::notify::random_id();
    let mut q = client::transfer_request(id, &sec.apex, held.map(Version::soa));
    let mac = key.map(|k| tsig::sign_request(&mut q, k, clock::unix_secs()));
    send(&mut s, &q).await?;
    let verifier = key
        .zip(mac.as_ref())
        .map(|(k, m)| StreamVerifier::new(k, m));
    let mut inc = Incoming::new(&sec.apex, id, held.map(Version::serial), limits, verifier);
    let t = match tokio::time::timeout(TRANSFER_MAX, read_transfer(&mut s, &mut inc)).await {
        Err(_) => return Err(PrimaryError::Timeout("the transfer took too long")),
        Ok(r) => r?,
    };
    drop(s);
    let (bytes, _, messages) = inc.counts();
    let kind = match (&t, held) {
        (_, None) => "AXFR",
        (Transfer::Incremental { .. }, Some(_)) => "IXFR",
        (Transfer::Full { .. }, Some(_)) => "IXFR (whole zone)",
        (Transfer::UpToDate(_), Some(_)) => return Ok(None),
    };
    let name = sec.apex.clone();
    let base = held.cloned();
    let built: Option<(Version, Vec<Diff>)> =
        tokio::task::spawn_blocking(move || client::build(&name, base.as_ref(), t))
            .await
            .map_err(|e| PrimaryError::Io(format!("build task: {e}")))??;
    let Some((version, diffs)) = built else {
        return Ok(None);
    };
    if let Some(h) = held
        && serial_lt(version.serial(), h.serial())
    {
        return Err(PrimaryError::Client(ClientError::Form(
            "the zone sent is older than the copy held",
        )));
    }
    let soa = version.soa().clone();
    let records = version.records().len() + 1;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let r = Received {
        apex: apex.to_vec(),
        version,
        diffs,
        kind,
        primary: addr,
        key: key.map(|k| k.name().to_string()),
        from: held.map(Version::serial),
        records,
        bytes,
        messages,
    };
    if !serving.xfr.update(Update::Transfer(Box::new(r), tx)).await {
        return Err(PrimaryError::Install("the control core is gone".into()));
    }
    match rx.await {
        Ok(Ok(())) => Ok(Some(soa)),
        Ok(Err(e)) => Err(PrimaryError::Install(e)),
        Err(_) => Err(PrimaryError::Install(
            "no answer from the control core".into(),
        )),
    }
}
