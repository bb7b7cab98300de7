//! NOTIFY sender (RFC 1996): for each job the control core queues (a zone whose serial
//! moved), one task per target sends a NOTIFY over UDP from an ephemeral port, signed with
//! the target's TSIG key, and waits for the matching reply (its TSIG verified), retrying
//! after 1, 2, 4, 8 and 16 s (§3.6: "periodically ... until a response is received").
//! A newer job for the same zone and target ends the retries of the older one.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use skua_xfr::notify;
use skua_xfr::tsig::{self, StreamVerifier};
use tokio::net::UdpSocket;

use crate::base::log;
use crate::base::serving::Serving;
use crate::base::xfr::{NotifyJob, NotifyTarget};

/// Waits before each retry (the first send is at once).
const RETRIES: [Duration; 5] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(16),
];
/// How long one send waits for its reply before the next retry's wait starts.
const REPLY_WAIT: Duration = Duration::from_secs(2);

/// Runs until the queue closes (the serving handle is dropped) or the task is aborted.
pub async fn run(serving: Arc<Serving>) {
    let Some(mut jobs) = serving.xfr.take_notify_jobs() else {
        return;
    };
    // The latest job per (zone, target): an older task stops when it is not the latest.
    let mut latest: HashMap<(Vec<u8>, SocketAddr), Arc<AtomicU64>> = HashMap::new();
    let mut seq = 0u64;
    while let Some(job) = jobs.recv().await {
        seq += 1;
        let job = Arc::new(job);
        for t in &job.targets {
            let key = (job.apex.to_lowercase().as_bytes().to_vec(), t.addr);
            let latest_job = latest.entry(key).or_default().clone();
            latest_job.store(seq, Ordering::Relaxed);
            tokio::spawn(send(job.clone(), t.clone(), latest_job, seq));
        }
    }
}

/// A random message ID (queries and NOTIFYs skuad sends).
pub(crate) fn random_id() -> u16 {
    let mut b = [0u8; 2];
    if getrandom::fill(&mut b).is_err() {
        // The ID only pairs a reply with its request; the TSIG MAC authenticates it.
        b = (crate::base::clock::mono_ns() as u16).to_be_bytes();
    }
    u16::from_be_bytes(b)
}

/// Sends one job's NOTIFY to one target until it is answered, the retries run out, or a
/// newer job for the same zone and target takes over.
async fn send(job: Arc<NotifyJob>, target: NotifyTarget, latest_job: Arc<AtomicU64>, mine: u64) {
    let serial = skua_xfr::zone::serial_of(&job.soa);
    let zone = job.apex.to_string();
    let local: IpAddr = match target.addr {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let sock = match UdpSocket::bind(SocketAddr::new(local, 0)).await {
        Ok(s) => s,
        Err(e) => {
            log::warn(format_args!("notify {zone} to {}: {e}", target.addr));
            return;
        }
    };
    let key = target.key.and_then(|i| job.keys.get(i));
    let mut last_error = String::from("no reply");
    for (attempt, wait) in std::iter::once(Duration::ZERO).chain(RETRIES).enumerate() {
        tokio::time::sleep(wait).await;
        if latest_job.load(Ordering::Relaxed) != mine {
            return;
        }
        let id = random_id();
        let mut msg = notify::message(id, &job.apex, Some(&job.soa));
        let mac = key.map(|k| tsig::sign_request(&mut msg, k, crate::base::clock::unix_secs()));
        if let Err(e) = sock.send_to(&msg, target.addr).await {
            last_error = e.to_string();
            continue;
        }
        let mut buf = vec![0u8; 4096];
        let deadline = tokio::time::Instant::now() + REPLY_WAIT;
        loop {
            let r = tokio::time::timeout_at(deadline, sock.recv_from(&mut buf)).await;
            let Ok(Ok((n, from))) = r else {
                break;
            };
            if from != target.addr {
                continue;
            }
            let reply = &buf[..n];
            let Some(rcode) = notify::reply_rcode(reply, id, &job.apex) else {
                continue;
            };
            if let (Some(k), Some(mac)) = (key, &mac) {
                let mut v = StreamVerifier::new(k, mac);
                if let Err(e) = v.verify(reply, crate::base::clock::unix_secs()) {
                    last_error = format!("reply's TSIG: {e}");
                    continue;
                }
            }
            if rcode == 0 {
                log::info(format_args!(
                    "notify {zone} serial {serial} to {}: acknowledged (attempt {})",
                    target.addr,
                    attempt + 1
                ));
            } else {
                log::warn(format_args!(
                    "notify {zone} serial {serial} to {}: answered with RCODE {rcode}",
                    target.addr
                ));
            }
            return;
        }
    }
    log::warn(format_args!(
        "notify {zone} serial {serial} to {}: gave up after {} attempts ({last_error})",
        target.addr,
        RETRIES.len() + 1
    ));
}
