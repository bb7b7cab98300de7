//! Zone transfers as the dataplanes see them: the versions of the auth zones that may be
//! transferred, their journals, who may transfer them and with which TSIG key, behind an
//! [`ArcSwap`] the control core replaces at every load; and the queue on which the TCP
//! dataplane reports each transfer served or refused, for the control core's log and
//! audit log (which may block on `fdatasync`, so the dataplane never writes it itself).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use skua_xfr::server::{Allow, Kind, Refusal};
use skua_xfr::tsig::Key;
use skua_xfr::zone::{Journal, Version};

/// Events queued for the control core before the newest are dropped (and counted).
pub const EVENT_QUEUE: usize = 1024;

/// A secondary to NOTIFY (`notify:`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifyTarget {
    /// Where.
    pub addr: SocketAddr,
    /// The key to sign with (index in [`Transfers::keys`]), `None` for `NOKEY`.
    pub key: Option<usize>,
}

/// One auth zone that may be transferred.
#[derive(Clone, Debug)]
pub struct Zone {
    /// The version served (the engine serves the same records and SOA).
    pub version: Arc<Version>,
    /// The diffs that lead to it.
    pub journal: Arc<Journal>,
    /// `provide-xfr:` entries.
    pub allow: Vec<Allow>,
    /// `notify:` targets.
    pub notify: Vec<NotifyTarget>,
}

/// Everything a transfer request is answered from.
#[derive(Clone, Debug, Default)]
pub struct Transfers {
    /// The `tsig-key:` keys, in configuration order.
    pub keys: Vec<Key>,
    /// Zones by lower-cased apex (wire form).
    pub zones: HashMap<Vec<u8>, Zone>,
}

/// What the TCP dataplane reports.
#[derive(Clone, Debug)]
pub enum Event {
    /// A transfer was sent (or cut short: `complete` false).
    Served {
        /// The client.
        client: IpAddr,
        /// Zone, lower case.
        zone: String,
        /// AXFR, IXFR, ...
        kind: Kind,
        /// The client's serial (IXFR).
        from: Option<u32>,
        /// The serial sent.
        to: u32,
        /// The key that signed the request.
        key: Option<String>,
        /// Records sent.
        records: usize,
        /// Messages sent.
        messages: usize,
        /// Whether every message was written.
        complete: bool,
    },
    /// A request was refused.
    Refused {
        /// The client.
        client: IpAddr,
        /// Why, and what it asked.
        refusal: Refusal,
    },
}

/// A zone whose serial moved: its secondaries are to be NOTIFYed (RFC 1996).
#[derive(Clone, Debug)]
pub struct NotifyJob {
    /// The zone's apex.
    pub apex: skua_engine::name::WireName,
    /// Its new SOA (sent in the answer section, RFC 1996 §3.7).
    pub soa: skua_engine::rr::Rr,
    /// Who to tell.
    pub targets: Vec<NotifyTarget>,
    /// The keys the targets name.
    pub keys: Vec<Key>,
}

/// NOTIFY jobs queued before new ones are dropped (each zone's latest job supersedes the
/// earlier ones anyway).
pub const NOTIFY_QUEUE: usize = 256;

/// The transfer state shared by the control core and the TCP dataplane.
pub struct Xfr {
    /// What requests are answered from.
    pub state: ArcSwap<Transfers>,
    events: tokio::sync::mpsc::Sender<Event>,
    receiver: Mutex<Option<tokio::sync::mpsc::Receiver<Event>>>,
    /// Events dropped because the queue was full.
    pub dropped: AtomicU64,
    notify: tokio::sync::mpsc::Sender<NotifyJob>,
    notify_rx: Mutex<Option<tokio::sync::mpsc::Receiver<NotifyJob>>>,
}

impl Default for Xfr {
    fn default() -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel(EVENT_QUEUE);
        let (ntx, nrx) = tokio::sync::mpsc::channel(NOTIFY_QUEUE);
        Xfr {
            state: ArcSwap::from_pointee(Transfers::default()),
            events: tx,
            receiver: Mutex::new(Some(rx)),
            dropped: AtomicU64::new(0),
            notify: ntx,
            notify_rx: Mutex::new(Some(nrx)),
        }
    }
}

impl Xfr {
    /// Queues an event; a full queue drops it (counted): a flood of refused requests must
    /// not hold the dataplane.
    pub fn report(&self, e: Event) {
        if self.events.try_send(e).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Queues a NOTIFY job for the dataplane's sender; `false` when the queue is full.
    pub fn notify(&self, job: NotifyJob) -> bool {
        self.notify.try_send(job).is_ok()
    }

    /// The receiving end of the NOTIFY jobs (once: the dataplane's sender).
    pub fn take_notify_jobs(&self) -> Option<tokio::sync::mpsc::Receiver<NotifyJob>> {
        self.notify_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The receiving end of the events (once: the control core's).
    pub fn take_events(&self) -> Option<tokio::sync::mpsc::Receiver<Event>> {
        self.receiver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}
