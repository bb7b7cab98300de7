//! Zone transfers in the control core: the transfer state that follows each load (the
//! versions the engine serves, the journals that lead to them), the NOTIFY jobs for the
//! zones whose serial moved, the dataplanes' reports turned into log lines and audit
//! entries (`xfr-out` for each transfer served; `xfr-refused` for refused requests and
//! NOTIFYs and `xfr-in-failed` for a secondary's failed refreshes, both aggregated per
//! source and minute like the API's `auth-failure`, so a flood or a dead primary cannot
//! flood the audit log), and the secondary zones' updates: a transfer received is compiled
//! with the configuration in force off the hot path and swapped in like a reload, then
//! written to the zone's `zonefile:` (temporary file, rename) and audited (`xfr-in`); an
//! expired copy stops being served (`xfr-expired`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use skua_xfr::zone::{Diff, Journal};

use super::load::{SecondaryData, XfrLoaded};
use crate::base::log;
use crate::base::xfr::{Event, NotifyJob, Transfers, Update, Zone};

/// The transfer state after a load, given the state before it: each zone's journal is
/// the previous one plus the diff from the previous version when the serial moved (a new
/// journal when the zone is new or its `ixfr-*` bounds changed), and a NOTIFY job for
/// each zone with `notify:` targets whose serial moved (every such zone on the first load).
pub fn next(prev: &Transfers, loaded: XfrLoaded) -> (Transfers, Vec<NotifyJob>) {
    let mut zones = HashMap::with_capacity(loaded.zones.len());
    let mut jobs = Vec::new();
    for z in loaded.zones {
        let version = z.version;
        let fresh = || Journal::new(z.ixfr_number, z.ixfr_size);
        let (journal, moved) = match prev.zones.get(&z.apex) {
            Some(p) if p.version.serial() == version.serial() => (p.journal.clone(), false),
            Some(p) => {
                let mut j = if p.journal_bounds() == (z.ixfr_number, z.ixfr_size) {
                    (*p.journal).clone()
                } else {
                    fresh()
                };
                // A transfer's own diffs when they lead from the version served to this
                // one (a chained secondary then answers IXFR at each serial the primary
                // had), else the one difference.
                let chained = z.diffs.first().map(Diff::from_serial) == Some(p.version.serial())
                    && z.diffs.last().map(Diff::to_serial) == Some(version.serial());
                if chained {
                    for d in z.diffs {
                        j.push(d);
                    }
                } else {
                    j.push(Diff::between(&p.version, &version));
                }
                (Arc::new(j), true)
            }
            None => (Arc::new(fresh()), true),
        };
        if moved && !z.notify.is_empty() {
            jobs.push(NotifyJob {
                apex: version.apex().clone(),
                soa: version.soa().clone(),
                targets: z.notify.clone(),
                keys: loaded.keys.clone(),
            });
        }
        zones.insert(
            z.apex,
            Zone {
                version,
                journal,
                allow: z.allow,
                notify: z.notify,
            },
        );
    }
    (
        Transfers {
            keys: loaded.keys,
            zones,
            secondaries: loaded.secondaries,
        },
        jobs,
    )
}

/// The serials to persist after a load (docs/zone-transfer.md): `kept` with every
/// transferred zone's serial where it is new or higher; `None` when nothing changes. With
/// `save_to`, they are written there too (best effort, logged).
pub fn keep_serials(
    loaded: &XfrLoaded,
    kept: &std::collections::BTreeMap<String, u32>,
    save_to: Option<&std::path::Path>,
) -> Option<std::collections::BTreeMap<String, u32>> {
    let mut out = kept.clone();
    let mut changed = false;
    for z in &loaded.zones {
        let name = z.version.apex().to_lowercase().to_string();
        let s = z.version.serial();
        if kept
            .get(&name)
            .is_none_or(|&k| skua_xfr::zone::serial_lt(k, s))
        {
            out.insert(name, s);
            changed = true;
        }
    }
    if !changed {
        return None;
    }
    if let Some(p) = save_to
        && let Err(e) = super::state::save_serials(p, &out)
    {
        log::warn(format_args!(
            "xfr: cannot keep the zones' serials in {}: {e}",
            super::state::serials_path(p).display()
        ));
        return None;
    }
    Some(out)
}

/// The transferred zones whose serial differs between `prev` and `loaded`: zone → serial.
pub fn moved_serials(
    prev: &Transfers,
    loaded: &XfrLoaded,
) -> std::collections::BTreeMap<String, u32> {
    loaded
        .zones
        .iter()
        .filter(|z| {
            prev.zones
                .get(&z.apex)
                .is_none_or(|p| p.version.serial() != z.version.serial())
        })
        .map(|z| {
            (
                z.version.apex().to_lowercase().to_string(),
                z.version.serial(),
            )
        })
        .collect()
}

impl super::Control {
    /// Puts a load's transfer state in force (after its engine, which serves the same
    /// serials) and queues its NOTIFY jobs.
    pub(super) fn install_xfr(&self, loaded: XfrLoaded) {
        let prev = self.serving.zones();
        let (t, jobs) = next(&prev, loaded);
        for (apex, z) in &t.zones {
            let before = prev.zones.get(apex).map(|p| p.version.serial());
            if before != Some(z.version.serial()) {
                log::info(format_args!(
                    "xfr: {} serial {} ({} records, journal {} diffs{})",
                    z.version.apex(),
                    z.version.serial(),
                    z.version.records().len() + 1,
                    z.journal.len(),
                    before.map_or(String::new(), |b| format!(", was {b}"))
                ));
            }
        }
        self.serving.set_zones(Arc::new(t));
        // The secondary's task looks at the zones again (new, gone, new copies).
        self.serving.xfr.changed.notify_one();
        for j in jobs {
            if !self.serving.xfr.notify(j) {
                log::warn(format_args!("xfr: NOTIFY queue full; a NOTIFY is dropped"));
            }
        }
    }

    /// Logs and audits one report of the TCP dataplane. Blocking (the audit log).
    pub fn xfr_event(&self, e: Event) {
        match e {
            Event::Served {
                client,
                zone,
                kind,
                from,
                to,
                key,
                records,
                messages,
                complete,
            } => {
                log::info(format_args!(
                    "xfr: {} {zone} to {client}{}: serial {}{to}, {records} records in {messages} messages{}",
                    kind.as_str(),
                    key.as_deref()
                        .map_or(String::new(), |k| format!(" (key {k})")),
                    from.map_or(String::new(), |f| format!("{f} -> ")),
                    if complete { "" } else { ", cut short" }
                ));
                self.record(
                    skua_audit::kind::XFR_OUT,
                    key.as_deref().unwrap_or("anonymous"),
                    Some(client),
                    serde_json::json!({
                        "zone": zone,
                        "type": kind.as_str(),
                        "from_serial": from,
                        "serial": to,
                        "key": key,
                        "records": records,
                        "messages": messages,
                        "complete": complete,
                    }),
                );
            }
            Event::Notified {
                client,
                zone,
                serial,
            } => {
                log::info(format_args!(
                    "xfr: NOTIFY for {zone} from {client}{}: checking the primary",
                    serial.map_or(String::new(), |s| format!(" (serial {s})"))
                ));
            }
            Event::InFailed {
                zone,
                primary,
                key,
                stage,
                reason,
                error,
            } => {
                let actor = key.as_deref().unwrap_or("anonymous");
                let due = self.xfr_in_failures.note(
                    primary.ip(),
                    actor,
                    stage,
                    &zone,
                    &format!("{reason}: {error}"),
                    Instant::now(),
                );
                self.record_xfr_in_failures(due);
            }
            Event::Refused { client, refusal } | Event::NotifyRefused { client, refusal } => {
                let qtype = match refusal.qtype {
                    Some(252) => "AXFR",
                    Some(251) => "IXFR",
                    Some(6) => "NOTIFY",
                    _ => "?",
                };
                use skua_xfr::server::Reason;
                // The actor is a key that verified; a key named by a request whose TSIG
                // failed is only a claim, kept in the reason.
                let tsig_failed = matches!(
                    refusal.reason,
                    Reason::BadKey | Reason::BadSig | Reason::BadTime | Reason::BadTrunc
                );
                let (actor, reason) = match (&refusal.key, tsig_failed) {
                    (Some(k), false) => (k.clone(), refusal.reason.as_str().to_string()),
                    (Some(k), true) => (
                        "anonymous".to_string(),
                        format!("{} (key {k})", refusal.reason.as_str()),
                    ),
                    (None, _) => ("anonymous".to_string(), refusal.reason.as_str().to_string()),
                };
                let zone = refusal.zone.clone().unwrap_or_else(|| "?".into());
                let due =
                    self.xfr_refusals
                        .note(client, &actor, qtype, &zone, &reason, Instant::now());
                self.record_xfr_refusals(due);
                // Counted once logged or held for the minute's summary, so a reader of the
                // metric knows the audit log has seen the refusal.
                self.xfr_refused
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// Logs and audits the failures of secondary zones' refreshes (see
    /// [`super::auth::RefusalLog`]: the first of a primary and key in a minute at once, the
    /// others counted).
    pub(super) fn record_xfr_in_failures(&self, records: Vec<super::auth::RefusalRecord>) {
        for r in records {
            let d = &r.detail;
            let detail = if d["aggregated"] == true {
                log::warn(format_args!(
                    "xfr: primary {} ({}): {} more failed refreshes in the last {} s: {}",
                    r.source, r.actor, d["count"], d["window_seconds"], d["reasons"]
                ));
                serde_json::json!({
                    "aggregated": true,
                    "count": d["count"],
                    "window_seconds": d["window_seconds"],
                    "reasons": d["reasons"],
                    "requests": d["routes"],
                })
            } else {
                log::warn(format_args!(
                    "xfr: {} from primary {} ({}): {} failed: {} (more failures this minute are counted, not logged one by one)",
                    d["route"].as_str().unwrap_or(""),
                    r.source,
                    r.actor,
                    d["method"].as_str().unwrap_or(""),
                    d["reason"].as_str().unwrap_or("")
                ));
                serde_json::json!({
                    "zone": d["route"],
                    "type": d["method"],
                    "reason": d["reason"],
                    "count": 1,
                })
            };
            self.record(
                skua_audit::kind::XFR_IN_FAILED,
                &r.actor,
                Some(r.source),
                detail,
            );
        }
    }

    /// Puts a secondary zone's new copy (or its expiry: `None`) in force: the
    /// configuration in force compiled again with it, off the hot path, and swapped in
    /// like a reload. An error (the copy does not compile, the zone is no longer a
    /// secondary) changes nothing.
    async fn load_secondary(&self, apex: Vec<u8>, data: SecondaryData) -> Result<(), String> {
        let inner = self.inner.lock().await;
        let mut merged = inner.base.clone();
        if let Some(p) = &inner.state_path {
            inner.overlay.merge_into(&mut merged.server, p);
        }
        let (dir, state_path, serials) = (
            inner.base_dir.clone(),
            inner.state_path.clone(),
            inner.serials.clone(),
        );
        let prev = self.serving.zones();
        let m2 = merged.clone();
        let sp = state_path.clone();
        let key = apex.clone();
        let loaded = tokio::task::spawn_blocking(move || {
            let map = HashMap::from([(key, data)]);
            let after = super::load::After {
                prev: Some(&prev),
                state: sp.as_deref(),
                serials: Some(&serials),
                secondary: Some(&map),
            };
            super::load::load_config_after(m2, dir, &after)
        })
        .await
        .map_err(|e| format!("compile task: {e}"))?
        .map_err(|e| e.0)?;
        if !loaded.xfr.secondaries.contains_key(&apex) {
            return Err("the zone is no longer a secondary zone of the configuration".into());
        }
        let view = super::make_view(&merged, &loaded, state_path.as_deref());
        self.install(loaded, view);
        drop(inner);
        Ok(())
    }

    /// Handles one request of the secondary's task (see [`Update`]).
    pub async fn secondary_update(&self, u: Update) {
        match u {
            Update::Confirmed(apex) => {
                let state = self.serving.zones();
                if let Some(path) = state
                    .secondaries
                    .get(&apex)
                    .and_then(|s| s.zonefile.clone())
                {
                    let _ = tokio::task::spawn_blocking(move || {
                        // The file's time says when the copy was last known current
                        // (a restart counts EXPIRE from it).
                        std::fs::File::options()
                            .write(true)
                            .open(&path)
                            .and_then(|f| f.set_modified(std::time::SystemTime::now()))
                    })
                    .await;
                }
            }
            Update::Expired(apex, reply) => {
                let zone = display_apex(&apex);
                let r = self
                    .load_secondary(
                        apex,
                        SecondaryData {
                            version: None,
                            diffs: Vec::new(),
                        },
                    )
                    .await;
                match &r {
                    Ok(()) => {
                        log::error(format_args!(
                            "xfr: {zone}: no successful refresh within the SOA's EXPIRE: the zone is no longer served (SERVFAIL) until a primary answers"
                        ));
                        tokio::task::block_in_place(|| {
                            self.record(
                                skua_audit::kind::XFR_EXPIRED,
                                "system",
                                None,
                                serde_json::json!({ "zone": zone }),
                            )
                        });
                    }
                    Err(e) => log::error(format_args!(
                        "xfr: {zone}: cannot drop the expired copy: {e}"
                    )),
                }
                let _ = reply.send(r);
            }
            Update::Transfer(r, reply) => {
                let r = *r;
                let zone = r.version.apex().to_lowercase().to_string();
                let serial = r.version.serial();
                let (added, removed): (usize, usize) = r
                    .diffs
                    .iter()
                    .fold((0, 0), |(a, d), x| (a + x.added.len(), d + x.removed.len()));
                let ndiffs = r.diffs.len();
                let version = Arc::new(r.version);
                let res = self
                    .load_secondary(
                        r.apex.clone(),
                        SecondaryData {
                            version: Some(version.clone()),
                            diffs: r.diffs,
                        },
                    )
                    .await;
                if let Err(e) = &res {
                    log::error(format_args!(
                        "xfr: {zone} serial {serial} from {}: not served: {e}",
                        r.primary
                    ));
                    let _ = reply.send(res);
                    return;
                }
                log::info(format_args!(
                    "xfr: {} {zone} from {}{}: serial {}{serial}, {} records ({} bytes in {} messages)",
                    r.kind,
                    r.primary,
                    r.key
                        .as_deref()
                        .map_or(String::new(), |k| format!(" (key {k})")),
                    r.from.map_or(String::new(), |f| format!("{f} -> ")),
                    version.records().len() + 1,
                    r.bytes,
                    r.messages
                ));
                let state = self.serving.zones();
                let path = state
                    .secondaries
                    .get(&r.apex)
                    .and_then(|s| s.zonefile.clone());
                let mut written = None;
                if let Some(path) = path {
                    let v = version.clone();
                    let p2 = path.clone();
                    let w = tokio::task::spawn_blocking(move || write_zone_file(&p2, &v))
                        .await
                        .map_err(|e| std::io::Error::other(e.to_string()))
                        .and_then(|r| r);
                    match w {
                        Ok(()) => written = Some(path.display().to_string()),
                        Err(e) => log::error(format_args!(
                            "xfr: {zone}: cannot write {}: {e} (the zone is served; a restart transfers it again)",
                            path.display()
                        )),
                    }
                }
                tokio::task::block_in_place(|| {
                    self.record(
                        skua_audit::kind::XFR_IN,
                        r.key.as_deref().unwrap_or("anonymous"),
                        Some(r.primary.ip()),
                        serde_json::json!({
                            "zone": zone,
                            "primary": r.primary.to_string(),
                            "type": r.kind,
                            "from_serial": r.from,
                            "serial": serial,
                            "key": r.key,
                            "records": version.records().len() + 1,
                            "diffs": ndiffs,
                            "added": added,
                            "removed": removed,
                            "bytes": r.bytes,
                            "messages": r.messages,
                            "zonefile": written,
                        }),
                    )
                });
                let _ = reply.send(Ok(()));
            }
        }
    }

    /// Logs and audits refusal records of transfer requests (see [`super::auth::RefusalLog`]).
    pub(super) fn record_xfr_refusals(&self, records: Vec<super::auth::RefusalRecord>) {
        for r in records {
            let d = &r.detail;
            let detail = if d["aggregated"] == true {
                log::warn(format_args!(
                    "xfr: {} ({}): {} more refused transfer requests in the last {} s: {}",
                    r.source, r.actor, d["count"], d["window_seconds"], d["reasons"]
                ));
                serde_json::json!({
                    "aggregated": true,
                    "count": d["count"],
                    "window_seconds": d["window_seconds"],
                    "reasons": d["reasons"],
                    "requests": d["routes"],
                })
            } else {
                log::warn(format_args!(
                    "xfr: {} ({}): {} {} refused: {} (more refusals this minute are counted, not logged one by one)",
                    r.source,
                    r.actor,
                    d["method"].as_str().unwrap_or(""),
                    d["route"].as_str().unwrap_or(""),
                    d["reason"].as_str().unwrap_or("")
                ));
                serde_json::json!({
                    "zone": d["route"],
                    "type": d["method"],
                    "reason": d["reason"],
                    "count": 1,
                })
            };
            self.record(
                skua_audit::kind::XFR_REFUSED,
                &r.actor,
                Some(r.source),
                detail,
            );
        }
    }
}

impl Zone {
    /// The bounds its journal was made with.
    fn journal_bounds(&self) -> (usize, usize) {
        self.journal.bounds()
    }
}

/// The zone's name in presentation form, from its lower-cased wire form.
fn display_apex(apex: &[u8]) -> String {
    skua_engine::name::WireName::from_wire(apex)
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Writes a secondary zone's copy to `path` so a restart serves it at once: a temporary
/// file in the same directory, flushed, renamed over `path` (readers see the old file or
/// the new one, never a part), the directory flushed. One record per line, SOA first,
/// every field explicit.
pub fn write_zone_file(path: &std::path::Path, v: &skua_xfr::zone::Version) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file());
        writeln!(
            w,
            "; {} serial {}, transferred by skuad (rewritten at each transfer)",
            v.apex(),
            v.serial()
        )?;
        for r in v.iter() {
            writeln!(w, "{}", skua_engine::text::rr_to_string(r))?;
        }
        w.flush()?;
    }
    tmp.as_file().sync_all()?;
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )?;
    tmp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Drains the dataplanes' reports into the log and the audit log, and puts the secondary
/// zones' updates in force, until the queues close or the task is aborted.
pub async fn run(ctl: Arc<super::Control>) {
    let events = ctl.serving.xfr.take_events();
    let updates = ctl.serving.xfr.take_updates();
    let c = ctl.clone();
    let reports = async move {
        let Some(mut events) = events else {
            return;
        };
        while let Some(e) = events.recv().await {
            let c = c.clone();
            let _ = tokio::task::spawn_blocking(move || c.xfr_event(e)).await;
        }
    };
    let secondary = async move {
        let Some(mut updates) = updates else {
            return;
        };
        while let Some(u) = updates.recv().await {
            ctl.secondary_update(u).await;
        }
    };
    tokio::join!(reports, secondary);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::xfr::NotifyTarget;
    use crate::control::load::XfrZoneLoaded;
    use skua_engine::name::WireName;
    use skua_engine::text::parse_rr;
    use skua_xfr::zone::Version;

    fn loaded(serial: u32, extra: &str, notify: bool) -> XfrLoaded {
        let apex = WireName::parse("example.", None).unwrap();
        let recs = vec![
            parse_rr(
                &format!("example. 300 IN SOA ns.example. a.example. {serial} 1 1 1 1"),
                None,
                0,
            )
            .unwrap(),
            parse_rr(extra, None, 300).unwrap(),
        ];
        XfrLoaded {
            keys: Vec::new(),
            zones: vec![XfrZoneLoaded {
                apex: apex.to_lowercase().as_bytes().to_vec(),
                version: Arc::new(Version::new(&apex, recs).unwrap()),
                diffs: Vec::new(),
                allow: Vec::new(),
                notify: if notify {
                    vec![NotifyTarget {
                        addr: "198.18.0.2:53".parse().unwrap(),
                        key: None,
                    }]
                } else {
                    Vec::new()
                },
                ixfr_number: 10,
                ixfr_size: 1 << 20,
            }],
            secondaries: Default::default(),
        }
    }

    #[test]
    fn journals_grow_with_serials_and_notify_follows() {
        let (t1, jobs) = next(
            &Transfers::default(),
            loaded(1, "a.example. A 198.18.0.1", true),
        );
        assert_eq!(jobs.len(), 1, "first load: NOTIFY");
        let z = &t1.zones[&b"\x07example\x00"[..]];
        assert!(z.journal.is_empty());
        // Same serial: same journal, no NOTIFY.
        let (t2, jobs) = next(&t1, loaded(1, "a.example. A 198.18.0.1", true));
        assert!(jobs.is_empty());
        assert!(Arc::ptr_eq(
            &t2.zones[&b"\x07example\x00"[..]].journal,
            &z.journal
        ));
        // New serial: one diff, NOTIFY with the new SOA.
        let (t3, jobs) = next(&t2, loaded(2, "b.example. A 198.18.0.2", true));
        let z3 = &t3.zones[&b"\x07example\x00"[..]];
        assert_eq!(z3.journal.len(), 1);
        assert!(z3.journal.chain(1, 2).is_some());
        assert_eq!(skua_xfr::zone::serial_of(&jobs[0].soa), 2);
        // Without notify: targets, no job.
        let (_, jobs) = next(&t3, loaded(3, "c.example. A 198.18.0.3", false));
        assert!(jobs.is_empty());
    }

    #[test]
    fn serials_follow_the_file_or_go_up_and_are_kept() {
        use crate::control::load::zone_serial;
        let v = |serial, extra| {
            let l = loaded(serial, extra, false);
            Arc::unwrap_or_clone(l.zones.into_iter().next().unwrap().version)
        };
        let a = v(10, "a.example. A 198.18.0.1");
        assert_eq!(zone_serial(None, &a), 10);
        assert_eq!(zone_serial(Some(&a), &v(10, "a.example. A 198.18.0.1")), 10);
        assert_eq!(
            zone_serial(Some(&a), &v(10, "a.example. A 198.18.0.2")),
            11,
            "same serial, other data"
        );
        assert_eq!(
            zone_serial(Some(&a), &v(7, "a.example. A 198.18.0.2")),
            11,
            "lower serial"
        );
        assert_eq!(
            zone_serial(Some(&a), &v(20, "a.example. A 198.18.0.1")),
            20,
            "higher file serial"
        );
        let bumped = a.with_serial(11);
        assert_eq!(
            zone_serial(Some(&bumped), &v(10, "a.example. A 198.18.0.1")),
            11,
            "kept"
        );

        let dir = std::env::temp_dir().join(format!("skuad-serials-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let state = dir.join("state.conf");
        let l = loaded(12, "a.example. A 198.18.0.1", false);
        let kept = keep_serials(&l, &Default::default(), Some(&state)).unwrap();
        assert_eq!(kept, [("example.".to_string(), 12)].into());
        assert_eq!(crate::control::state::load_serials(&state).unwrap(), kept);
        assert_eq!(keep_serials(&l, &kept, None), None, "nothing new");
        let l = loaded(9, "a.example. A 198.18.0.1", false);
        assert_eq!(keep_serials(&l, &kept, None), None, "never lower");
        std::fs::write(crate::control::state::serials_path(&state), "example. x\n").unwrap();
        assert!(
            crate::control::state::load_serials(&state)
                .unwrap_err()
                .contains(":1: expected")
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
