//! Zone transfers as the dataplanes see them: the versions of the auth zones that may be
//! transferred, their journals, who may transfer them and with which TSIG key, and the
//! secondary zones (their primaries, who may NOTIFY them, the copy held), behind an
//! [`ArcSwap`] the control core replaces at every load; the queue on which the dataplanes
//! report each transfer served or refused, each NOTIFY refused and each incoming transfer
//! that failed, for the control core's log and audit log (which may block on `fdatasync`,
//! so the dataplane never writes it itself); the queue of accepted NOTIFYs for the
//! secondary's task, and the queue on which that task hands transfers to the control core.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use skua_xfr::client::Limits;
use skua_xfr::server::{Allow, Kind, Refusal};
use skua_xfr::tsig::Key;
use skua_xfr::zone::{Diff, Journal, Version};

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

/// A primary of a secondary zone (`primary:`, `request-xfr:`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Primary {
    /// Where.
    pub addr: SocketAddr,
    /// The key to sign with (index in [`Transfers::keys`]), `None` for `NOKEY`.
    pub key: Option<usize>,
}

/// One secondary zone (skuad transfers it from its primaries).
#[derive(Clone, Debug)]
pub struct Secondary {
    /// The apex.
    pub apex: skua_engine::name::WireName,
    /// Its primaries, in the order tried.
    pub primaries: Vec<Primary>,
    /// Who may NOTIFY it: `allow-notify:`, then each primary's address with its key.
    pub allow_notify: Vec<Allow>,
    /// The copy served; `None` before the first transfer or after it expired (the engine
    /// answers SERVFAIL for the zone).
    pub version: Option<Arc<Version>>,
    /// When the copy was last known current, seconds since the epoch (its zone file's
    /// modification time at start, then the last successful refresh).
    pub confirmed: Option<u64>,
    /// Bounds on one transfer (`size-limit-xfr:`, `xfr-max-records:`).
    pub limits: Limits,
    /// Where the copy is written (`zonefile:`), if anywhere.
    pub zonefile: Option<std::path::PathBuf>,
}

/// Everything a transfer request is answered from.
#[derive(Clone, Debug, Default)]
pub struct Transfers {
    /// The `tsig-key:` keys, in configuration order.
    pub keys: Vec<Key>,
    /// Zones by lower-cased apex (wire form).
    pub zones: HashMap<Vec<u8>, Zone>,
    /// Secondary zones by lower-cased apex (wire form).
    pub secondaries: HashMap<Vec<u8>, Secondary>,
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
    /// A NOTIFY was refused (skuad as a secondary).
    NotifyRefused {
        /// The sender.
        client: IpAddr,
        /// Why.
        refusal: Refusal,
    },
    /// A NOTIFY was accepted: the zone is checked at once.
    Notified {
        /// The sender.
        client: IpAddr,
        /// The zone, lower case.
        zone: String,
        /// The serial it announced.
        serial: Option<u32>,
    },
    /// Checking or transferring a secondary zone from one primary failed.
    InFailed {
        /// The zone, lower case.
        zone: String,
        /// The primary.
        primary: SocketAddr,
        /// The key the requests were signed with.
        key: Option<String>,
        /// `SOA`, `IXFR` or `AXFR`.
        stage: &'static str,
        /// A stable short reason (`timeout`, `refused`, `tsig`, ...).
        reason: &'static str,
        /// The whole message.
        error: String,
    },
}

/// A transfer a secondary zone received, for the control core to put in force.
#[derive(Debug)]
pub struct Received {
    /// The zone's apex, lower case, wire form.
    pub apex: Vec<u8>,
    /// The new version.
    pub version: Version,
    /// The diffs from the version held to it (IXFR's, or the one difference of a whole
    /// zone), for the zone's own journal.
    pub diffs: Vec<Diff>,
    /// `IXFR`, `AXFR`, `IXFR (whole zone)`.
    pub kind: &'static str,
    /// The primary.
    pub primary: SocketAddr,
    /// The key that signed the transfer.
    pub key: Option<String>,
    /// The serial held before, if any.
    pub from: Option<u32>,
    /// Records, bytes and messages received.
    pub records: usize,
    /// Bytes received.
    pub bytes: usize,
    /// Messages received.
    pub messages: usize,
}

/// What the secondary's task asks of the control core.
#[derive(Debug)]
pub enum Update {
    /// Serve this transfer: compile, swap, write the zone file, audit. The answer says
    /// whether it serves.
    Transfer(
        Box<Received>,
        tokio::sync::oneshot::Sender<Result<(), String>>,
    ),
    /// The zone's copy expired (RFC 1035 §3.3.13): stop serving it.
    Expired(Vec<u8>, tokio::sync::oneshot::Sender<Result<(), String>>),
    /// The primary confirmed the copy (same serial): remember when (the zone file's
    /// modification time), so a restart counts EXPIRE from here.
    Confirmed(Vec<u8>),
}

/// An accepted NOTIFY, for the secondary's task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifyIn {
    /// The zone, lower-cased apex, wire form.
    pub zone: Vec<u8>,
    /// The serial announced.
    pub serial: Option<u32>,
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

/// Accepted NOTIFYs queued for the secondary's task before new ones are dropped (a
/// NOTIFY only makes a zone due; one per zone is enough).
pub const NOTIFY_IN_QUEUE: usize = 256;

/// The transfer state shared by the control core and the dataplanes.
pub struct Xfr {
    events: tokio::sync::mpsc::Sender<Event>,
    receiver: Mutex<Option<tokio::sync::mpsc::Receiver<Event>>>,
    /// Events dropped because the queue was full.
    pub dropped: AtomicU64,
    notify: tokio::sync::mpsc::Sender<NotifyJob>,
    notify_rx: Mutex<Option<tokio::sync::mpsc::Receiver<NotifyJob>>>,
    notify_in: tokio::sync::mpsc::Sender<NotifyIn>,
    notify_in_rx: Mutex<Option<tokio::sync::mpsc::Receiver<NotifyIn>>>,
    updates: tokio::sync::mpsc::Sender<Update>,
    updates_rx: Mutex<Option<tokio::sync::mpsc::Receiver<Update>>>,
    /// Signalled when the transfer tables in force change (a load,
    /// [`crate::base::serving::Serving::set_zones`]): the secondary's task looks at the
    /// secondary zones again.
    pub changed: tokio::sync::Notify,
}

impl Default for Xfr {
    fn default() -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel(EVENT_QUEUE);
        let (ntx, nrx) = tokio::sync::mpsc::channel(NOTIFY_QUEUE);
        let (itx, irx) = tokio::sync::mpsc::channel(NOTIFY_IN_QUEUE);
        let (utx, urx) = tokio::sync::mpsc::channel(16);
        Xfr {
            events: tx,
            receiver: Mutex::new(Some(rx)),
            dropped: AtomicU64::new(0),
            notify: ntx,
            notify_rx: Mutex::new(Some(nrx)),
            notify_in: itx,
            notify_in_rx: Mutex::new(Some(irx)),
            updates: utx,
            updates_rx: Mutex::new(Some(urx)),
            changed: tokio::sync::Notify::new(),
        }
    }
}

/// The door reads keys and the secondary zones' `allow-notify:` from the tables in force.
impl skua_serve::Zones for Transfers {
    fn keys(&self) -> &[Key] {
        &self.keys
    }
    fn has_secondaries(&self) -> bool {
        !self.secondaries.is_empty()
    }
    fn allow_notify(&self, apex: &[u8]) -> Option<&[Allow]> {
        self.secondaries
            .get(apex)
            .map(|s| s.allow_notify.as_slice())
    }
}

impl Xfr {
    /// What the front door reports from `client` (any dataplane, any thread): an accepted
    /// NOTIFY makes the zone due for the secondary's task and is reported; refusals are
    /// reported to the control core.
    pub fn door_event(&self, client: IpAddr, e: skua_serve::Event) {
        let client = client.to_canonical();
        match e {
            skua_serve::Event::Notified { zone, serial } => {
                self.notified(NotifyIn {
                    zone: zone.as_bytes().to_vec(),
                    serial,
                });
                self.report(Event::Notified {
                    client,
                    zone: zone.to_string(),
                    serial,
                });
            }
            skua_serve::Event::NotifyRefused(refusal) => {
                self.report(Event::NotifyRefused { client, refusal })
            }
            skua_serve::Event::Refused(refusal) => self.report(Event::Refused { client, refusal }),
        }
    }

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

    /// Queues an accepted NOTIFY for the secondary's task (from any thread); a full queue
    /// drops it (the zone's REFRESH still comes).
    pub fn notified(&self, n: NotifyIn) {
        let _ = self.notify_in.try_send(n);
    }

    /// The receiving end of the accepted NOTIFYs (once: the secondary's task).
    pub fn take_notify_in(&self) -> Option<tokio::sync::mpsc::Receiver<NotifyIn>> {
        self.notify_in_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Hands an update to the control core (waits while its queue is full).
    pub async fn update(&self, u: Update) -> bool {
        self.updates.send(u).await.is_ok()
    }

    /// The receiving end of the secondary's updates (once: the control core's).
    pub fn take_updates(&self) -> Option<tokio::sync::mpsc::Receiver<Update>> {
        self.updates_rx
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
