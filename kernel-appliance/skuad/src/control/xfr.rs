//! Zone transfers in the control core: the transfer state that follows each load (the
//! versions the engine serves, the journals that lead to them), the NOTIFY jobs for the
//! zones whose serial moved, and the TCP dataplane's reports turned into log lines and
//! audit entries (`xfr-out` for each transfer served; `xfr-refused`, aggregated per
//! source and minute like the API's `auth-failure`, so a flood of refused requests cannot
//! flood the audit log).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use skua_xfr::zone::{Diff, Journal};

use super::load::XfrLoaded;
use crate::base::log;
use crate::base::xfr::{Event, NotifyJob, Transfers, Zone};

/// The transfer state after a load, given the state before it: each zone's journal is
/// the previous one plus the diff from the previous version when the serial moved (a new
/// journal when the zone is new or its `ixfr-*` bounds changed), and a NOTIFY job for
/// each zone with `notify:` targets whose serial moved (every such zone on the first load).
pub fn next(prev: &Transfers, loaded: XfrLoaded) -> (Transfers, Vec<NotifyJob>) {
    let mut zones = HashMap::with_capacity(loaded.zones.len());
    let mut jobs = Vec::new();
    for z in loaded.zones {
        let version = Arc::new(z.version);
        let fresh = || Journal::new(z.ixfr_number, z.ixfr_size);
        let (journal, moved) = match prev.zones.get(&z.apex) {
            Some(p) if p.version.serial() == version.serial() => (p.journal.clone(), false),
            Some(p) => {
                let mut j = if p.journal_bounds() == (z.ixfr_number, z.ixfr_size) {
                    (*p.journal).clone()
                } else {
                    fresh()
                };
                j.push(Diff::between(&p.version, &version));
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
        let prev = self.serving.xfr.state.load_full();
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
        self.serving.xfr.state.store(Arc::new(t));
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
            Event::Refused { client, refusal } => {
                let qtype = match refusal.qtype {
                    Some(252) => "AXFR",
                    Some(251) => "IXFR",
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

/// Drains the TCP dataplane's reports into the log and the audit log until the queue
/// closes or the task is aborted.
pub async fn run(ctl: Arc<super::Control>) {
    let Some(mut events) = ctl.serving.xfr.take_events() else {
        return;
    };
    while let Some(e) = events.recv().await {
        let c = ctl.clone();
        let _ = tokio::task::spawn_blocking(move || c.xfr_event(e)).await;
    }
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
                version: Version::new(&apex, recs).unwrap(),
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
            l.zones.into_iter().next().unwrap().version
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
