//! Counters for `/stats` (JSON) and `/metrics` (Prometheus text format 0.0.4).
//!
//! Everything is read from the workers' own counters at request time (relaxed loads, no
//! lock on the hot path): kernel-socket workers keep [`skua_engine::stats::Counters`], AF_XDP
//! queues their [`skua_xdp::worker::QueueStats`], the XDP program its per-CPU counters, the
//! resolver's cache its own counters and sizes, and the forwarder the snapshot of its
//! counters and upstreams that its task refreshes about once a second.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;
use skua_engine::stats::{DROPS, LATENCY_BOUNDS_NS, QTYPES, RCODES, Totals};

use crate::control::Control;

fn r(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// Totals of the kernel-socket workers (UDP and TCP).
pub fn socket_totals(ctl: &Control) -> Totals {
    ctl.serving.totals()
}

fn totals_json(t: &Totals) -> serde_json::Value {
    let named = |names: &[&str], v: &[u64]| -> serde_json::Map<String, serde_json::Value> {
        names
            .iter()
            .chain(std::iter::once(&"other"))
            .zip(v)
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| ((*k).to_string(), json!(n)))
            .collect()
    };
    let rcodes: Vec<&str> = RCODES.iter().map(|(_, n)| *n).collect();
    let qtypes: Vec<&str> = QTYPES.iter().map(|(_, n)| *n).collect();
    json!({
        "queries": t.queries,
        "replies": t.replies,
        "hot": t.hot,
        "truncated": t.truncated,
        "rcode": named(&rcodes, &t.rcode),
        "qtype": named(&qtypes, &t.qtype),
        "dropped": named(&DROPS[..DROPS.len() - 1], &t.dropped),
        "rrl": {"slipped": t.slipped, "would_drop": t.rrl_would_drop, "would_slip": t.rrl_would_slip},
    })
}

/// `/stats`.
pub fn stats_json(ctl: &Control) -> serde_json::Value {
    let sock = socket_totals(ctl);
    let queues: Vec<_> = ctl
        .planes()
        .queues()
        .iter()
        .map(|w| {
            let s = &w.stats;
            let drops: serde_json::Map<_, _> = skua_fastpath::Drop::ALL
                .iter()
                .map(|d| (d.as_str().to_string(), json!(r(&s.dropped[*d as usize]))))
                .collect();
            json!({
                "interface": w.ifname, "queue": w.queue,
                "rx": r(&s.rx), "answered": r(&s.answered), "hot": r(&s.hot),
                "slow_path": r(&s.slow_path), "not_dns": r(&s.not_dns),
                "tx_ring_full": r(&s.tx_ring_full), "dropped": drops,
                "slipped": r(&s.slipped),
                "rrl_would_drop": r(&s.rrl_would_drop), "rrl_would_slip": r(&s.rrl_would_slip),
                "kernel": {
                    "rx_dropped": r(&s.xsk.rx_dropped),
                    "rx_ring_full": r(&s.xsk.rx_ring_full),
                    "fill_ring_empty": r(&s.xsk.rx_fill_ring_empty_descs),
                    "rx_invalid_descs": r(&s.xsk.rx_invalid_descs),
                    "tx_invalid_descs": r(&s.xsk.tx_invalid_descs),
                },
            })
        })
        .collect();
    let programs: Vec<_> = ctl
        .planes()
        .programs()
        .iter()
        .map(|p| {
            let (ifname, st) = (&p.ifname, &p.counters);
            let m: serde_json::Map<_, _> = st
                .iter()
                .map(|(k, v)| ((*k).to_string(), json!(v)))
                .collect();
            json!({"interface": ifname, "counters": m})
        })
        .collect();
    json!({
        "uptime_seconds": ctl.started.elapsed().as_secs(),
        "generation": ctl.generation(),
        "socket": totals_json(&sock),
        "xdp": {"queues": queues, "programs": programs},
        "resolver": resolver_json(ctl),
        "reloads": {"ok": r(&ctl.reloads_ok), "failed": r(&ctl.reloads_failed)},
        "api_writes": {"ok": r(&ctl.writes_ok), "failed": r(&ctl.writes_failed)},
    })
}

/// The resolver's cache and forwarder counters for `/stats`; `null` without a resolver.
fn resolver_json(ctl: &Control) -> serde_json::Value {
    let Some(h) = ctl.serving.resolver() else {
        return serde_json::Value::Null;
    };
    let c = &h.cache.stats;
    let (msgs, sets, msg_bytes, set_bytes) = h.cache.size();
    let snap = h.snapshot.load();
    let f = &snap.forward;
    json!({
        "cache": {
            "hits": r(&c.hits), "misses": r(&c.misses), "stale": r(&c.stale),
            "prefetches": r(&c.prefetches), "evictions": r(&c.evictions),
            "messages": msgs, "rrsets": sets,
            "message_bytes": msg_bytes, "rrset_bytes": set_bytes,
        },
        "forwarder": {
            "queries": f.queries, "unwanted": f.unwanted, "servfail": f.servfail,
            "tcp_retries": f.tcp_retries, "coalesced": f.coalesced, "defences": f.defences,
            "host_addrs_refused": f.host_addrs_refused, "in_flight": snap.in_flight,
        },
    })
}

/// The cache, the forwarder and each upstream, when there is a resolver.
/// The service addresses' leases (`ha:`), when there are any.
fn ha_prometheus(p: &mut Prom, ctl: &Control) {
    let st = ctl.leases();
    if st.addresses.is_empty() {
        return;
    }
    p.head(
        "skua_ha_lease_serving",
        "gauge",
        "1 while this node holds the host agent's lease on the service address (answers it).",
    );
    for a in &st.addresses {
        p.line(
            "skua_ha_lease_serving",
            &[("address", &a.address.to_string())],
            u8::from(a.serving),
        );
    }
    p.head(
        "skua_ha_lease_remaining_seconds",
        "gauge",
        "Time left on the lease (0 when not held).",
    );
    for a in &st.addresses {
        p.line(
            "skua_ha_lease_remaining_seconds",
            &[("address", &a.address.to_string())],
            a.remaining_ms as f64 / 1000.0,
        );
    }
    p.head(
        "skua_ha_unleased_queries_total",
        "counter",
        "Queries to the service address left unanswered because this node held no lease.",
    );
    for a in &st.addresses {
        p.line(
            "skua_ha_unleased_queries_total",
            &[("address", &a.address.to_string())],
            a.unleased_queries,
        );
    }
    p.head(
        "skua_ha_lease_events_total",
        "counter",
        "Lease transitions (taken, released, expired) and renewals.",
    );
    for (event, v) in [
        ("taken", st.taken),
        ("renewed", st.renewed),
        ("released", st.released),
        ("expired", st.expired),
    ] {
        p.line("skua_ha_lease_events_total", &[("event", event)], v);
    }
}

/// The encrypted transports: TLS handshakes by transport and result, queries by
/// transport, DNS over HTTPS requests by result and the shared buffers in use.
fn encrypted_prometheus(p: &mut Prom, ctl: &Control) {
    let t = &ctl.serving.tls;
    let r = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    p.head(
        "skua_tls_handshakes_total",
        "counter",
        "TLS handshakes of the encrypted listeners by transport and result (ok includes resumed).",
    );
    for (transport, s) in [
        ("dot", &t.dot_handshakes),
        ("doh", &t.doh_handshakes),
        ("doq", &t.doq_handshakes),
    ] {
        for (result, v) in [
            ("ok", r(&s.ok)),
            ("resumed", r(&s.resumed)),
            ("failed", s.failed()),
            ("timeout", r(&s.timeout)),
        ] {
            p.line(
                "skua_tls_handshakes_total",
                &[("transport", transport), ("result", result)],
                v,
            );
        }
    }
    p.head(
        "skua_tls_handshake_failures_total",
        "counter",
        "Failed TLS handshakes by transport and reason: alpn (no application protocol in common), incompatible (no version or cipher in common), protocol (not TLS, malformed, an alert), closed (closed or reset first); timeouts are skua_tls_handshakes_total{result=\"timeout\"}.",
    );
    for (transport, s) in [
        ("dot", &t.dot_handshakes),
        ("doh", &t.doh_handshakes),
        ("doq", &t.doq_handshakes),
    ] {
        for why in crate::base::tls::HandshakeFailure::ALL {
            p.line(
                "skua_tls_handshake_failures_total",
                &[("transport", transport), ("reason", why.label())],
                r(&s.failures[why as usize]),
            );
        }
    }
    p.head(
        "skua_encrypted_queries_total",
        "counter",
        "Queries received over the encrypted transports (also counted in skua_queries_total).",
    );
    for (transport, v) in [
        ("dot", r(&t.dot_queries)),
        ("doh", r(&t.doh_queries)),
        ("doq", r(&t.doq_queries)),
    ] {
        p.line(
            "skua_encrypted_queries_total",
            &[("transport", transport)],
            v,
        );
    }
    let d = &t.doh_stats;
    p.head(
        "skua_doh_requests_total",
        "counter",
        "DNS over HTTPS requests by result (answered: 200; refused: 4xx, not a DNS query; unavailable: 503, no room or no answer).",
    );
    for (result, v) in [
        ("answered", r(&d.answered)),
        ("refused", r(&d.refused)),
        ("unavailable", r(&d.unavailable)),
    ] {
        p.line("skua_doh_requests_total", &[("result", result)], v);
    }
    p.head(
        "skua_doh_idle_closed_total",
        "counter",
        "DNS over HTTPS connections closed after the idle timeout with no request in progress.",
    );
    p.line("skua_doh_idle_closed_total", &[], r(&d.idle_closed));
    p.head(
        "skua_doh_buffer_bytes",
        "gauge",
        "Bytes of DNS over HTTPS queries held and answers waiting now (http-query-buffer-size, http-response-buffer-size).",
    );
    let u =
        |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::Relaxed) as u64;
    p.line(
        "skua_doh_buffer_bytes",
        &[("buffer", "query")],
        u(&t.query_bytes),
    );
    p.line(
        "skua_doh_buffer_bytes",
        &[("buffer", "response")],
        u(&t.response_bytes),
    );
    p.head(
        "skua_doq_refused_total",
        "counter",
        "DNS over QUIC connections refused before a handshake (access list, connection limits).",
    );
    p.line("skua_doq_refused_total", &[], r(&t.doq_refused));
    p.head(
        "skua_doq_protocol_errors_total",
        "counter",
        "DNS over QUIC connections closed with DOQ_PROTOCOL_ERROR (message ID not 0, bad length: RFC 9250).",
    );
    p.line(
        "skua_doq_protocol_errors_total",
        &[],
        r(&t.doq_protocol_errors),
    );
    p.head(
        "skua_tcp_connection_limit_closed_total",
        "counter",
        "Connections (TCP, TLS, HTTPS, QUIC) closed or refused at once: their netblock was at its tcp-connection-limit.",
    );
    p.line(
        "skua_tcp_connection_limit_closed_total",
        &[],
        r(&ctl.serving.per_client_refused),
    );
    let st = &ctl.serving.streams;
    p.head(
        "skua_stream_connections",
        "gauge",
        "Stream connections (TCP, TLS, HTTPS, QUIC) open now.",
    );
    p.line("skua_stream_connections", &[], u(&st.open));
    p.head(
        "skua_stream_connection_slots",
        "gauge",
        "Stream connection slots (incoming-num-tcp x num-threads); past half of them in use the idle timeout shortens.",
    );
    p.line("skua_stream_connection_slots", &[], u(&st.slots));
    p.head(
        "skua_stream_connections_closed_total",
        "counter",
        "Stream connections closed for the connection limits: evicted (idle longest, to make room for a new one when every slot was taken), idle-pressure (an idle timeout shortened because the slots were filling), per-source-limit (refused at once: the source was at tcp-connection-limit-per-source).",
    );
    for (reason, v) in [
        ("evicted", r(&st.evicted)),
        ("idle-pressure", r(&st.idle_pressure)),
        ("per-source-limit", r(&st.per_source)),
    ] {
        p.line(
            "skua_stream_connections_closed_total",
            &[("reason", reason)],
            v,
        );
    }
}

/// Sync (`sync:`): what this node sent and took, and whether it follows a source now.
fn sync_prometheus(p: &mut Prom, ctl: &Control) {
    let st = ctl.sync_status();
    let follower = ctl.sync.settings().is_some();
    if !follower && st.served == 0 {
        return;
    }
    p.head(
        "skua_sync_events_total",
        "counter",
        "Versions of configuration and API data sent to followers (served), taken from a source (applied), or not taken (failed).",
    );
    for (event, v) in [
        ("served", st.served),
        ("applied", st.applied),
        ("failed", st.failed),
    ] {
        p.line("skua_sync_events_total", &[("event", event)], v);
    }
    if follower {
        p.head(
            "skua_sync_following",
            "gauge",
            "1 while this node follows a source (with ha: addresses, it holds no lease and the source does): API writes are refused here.",
        );
        p.line("skua_sync_following", &[], u8::from(st.following.is_some()));
        if let Some(l) = &st.last_applied {
            p.head(
                "skua_sync_last_applied_age_seconds",
                "gauge",
                "Time since a source's version was last taken.",
            );
            p.line("skua_sync_last_applied_age_seconds", &[], l.age_s);
        }
    }
}

fn resolver_prometheus(p: &mut Prom, ctl: &Control) {
    let Some(h) = ctl.serving.resolver() else {
        return;
    };
    let c = &h.cache.stats;
    for (name, help, v) in [
        (
            "skua_cache_hits_total",
            "Answers sent from the resolver's cache while fresh.",
            &c.hits,
        ),
        (
            "skua_cache_misses_total",
            "Cache lookups that found nothing to send (the question went to the resolver).",
            &c.misses,
        ),
        (
            "skua_cache_stale_answers_total",
            "Stale answers sent (serve-expired, RFC 8767).",
            &c.stale,
        ),
        (
            "skua_cache_prefetches_total",
            "Refreshes started because a name was asked in the last 10 % of its TTL (prefetch).",
            &c.prefetches,
        ),
        (
            "skua_cache_evictions_total",
            "Cache entries (answers and RRsets) evicted to make room.",
            &c.evictions,
        ),
    ] {
        p.head(name, "counter", help);
        p.line(name, &[], r(v));
    }
    let (msgs, sets, msg_bytes, set_bytes) = h.cache.size();
    let cfg = h.cache.config();
    p.head(
        "skua_cache_entries",
        "gauge",
        "Entries in each cache store (message: answers; rrset: RRsets).",
    );
    p.line("skua_cache_entries", &[("store", "message")], msgs);
    p.line("skua_cache_entries", &[("store", "rrset")], sets);
    p.head(
        "skua_cache_bytes",
        "gauge",
        "Bytes used by each cache store (msg-cache-size and rrset-cache-size bound them).",
    );
    p.line("skua_cache_bytes", &[("store", "message")], msg_bytes);
    p.line("skua_cache_bytes", &[("store", "rrset")], set_bytes);
    p.head(
        "skua_cache_max_bytes",
        "gauge",
        "Configured size of each cache store.",
    );
    p.line(
        "skua_cache_max_bytes",
        &[("store", "message")],
        cfg.msg_bytes,
    );
    p.line(
        "skua_cache_max_bytes",
        &[("store", "rrset")],
        cfg.rrset_bytes,
    );

    let snap = h.snapshot.load_full();
    let f = &snap.forward;
    for (name, help, v) in [
        (
            "skua_resolver_upstream_queries_total",
            "Queries sent to upstreams (retries included).",
            f.queries,
        ),
        (
            "skua_resolver_unwanted_replies_total",
            "Replies that matched no query sent (wrong ID, question or address).",
            f.unwanted,
        ),
        (
            "skua_resolver_servfail_total",
            "Questions the resolver answered SERVFAIL (upstreams failed or timed out).",
            f.servfail,
        ),
        (
            "skua_resolver_tcp_retries_total",
            "Questions retried over TCP after a truncated reply.",
            f.tcp_retries,
        ),
        (
            "skua_resolver_coalesced_total",
            "Questions that joined an identical one in flight.",
            f.coalesced,
        ),
        (
            "skua_resolver_cache_defences_total",
            "Cache flushes after unwanted-reply-threshold unwanted replies.",
            f.defences,
        ),
        (
            "skua_resolver_host_addresses_refused_total",
            "Addresses in forward-host/stub-host answers left out as upstreams (do-not-query-localhost, multicast, broadcast, link-local).",
            f.host_addrs_refused,
        ),
    ] {
        p.head(name, "counter", help);
        p.line(name, &[], v);
    }
    p.head(
        "skua_resolver_in_flight",
        "gauge",
        "Questions waiting for an upstream.",
    );
    p.line("skua_resolver_in_flight", &[], snap.in_flight);

    // Every configured upstream once (an address may serve several zones), with what the
    // forwarder knows of it; one never asked has no RTT yet.
    let fwd = h.forward.load();
    let mut addrs: Vec<std::net::SocketAddr> = Vec::new();
    for u in fwd.zones.iter().flat_map(|z| z.upstreams.iter()) {
        if !addrs.contains(&u.addr) {
            addrs.push(u.addr);
        }
    }
    let hosts: Vec<(String, Option<&skua_resolver::infra::Host>)> = addrs
        .iter()
        .map(|a| (a.to_string(), snap.upstreams.iter().find(|h| h.addr == *a)))
        .collect();
    p.head(
        "skua_upstream_srtt_seconds",
        "gauge",
        "Smoothed round-trip time of each upstream (absent until it replied).",
    );
    for (a, host) in &hosts {
        if let Some(h) = host.filter(|h| h.replies > 0) {
            p.line(
                "skua_upstream_srtt_seconds",
                &[("upstream", a)],
                f64::from(h.rtt.srtt) / 1e3,
            );
        }
    }
    p.head(
        "skua_upstream_rto_seconds",
        "gauge",
        "Retransmission timeout of each upstream (backs off on timeouts; 120 s: down).",
    );
    for (a, host) in &hosts {
        let rto = host.map_or(skua_resolver::infra::UNKNOWN_RTO, |h| h.rtt.rto);
        p.line(
            "skua_upstream_rto_seconds",
            &[("upstream", a)],
            f64::from(rto) / 1e3,
        );
    }
    for (name, help, get) in [
        (
            "skua_upstream_replies_total",
            "Replies received from each upstream.",
            (|h: &skua_resolver::infra::Host| h.replies) as fn(&skua_resolver::infra::Host) -> u64,
        ),
        (
            "skua_upstream_timeouts_total",
            "Queries to each upstream that timed out.",
            |h| h.lost,
        ),
        (
            "skua_upstream_errors_total",
            "Error replies (SERVFAIL, REFUSED, FORMERR, NOTIMP) and connection failures of each upstream.",
            |h| h.errors,
        ),
    ] {
        p.head(name, "counter", help);
        for (a, host) in &hosts {
            p.line(name, &[("upstream", a)], host.map_or(0, get));
        }
    }
    p.head(
        "skua_upstream_up",
        "gauge",
        "1 while an upstream is asked, 0 while it is down (only probes go to it).",
    );
    for (a, host) in &hosts {
        let up = host.is_none_or(|h| !h.is_down());
        p.line("skua_upstream_up", &[("upstream", a)], u8::from(up));
    }
}

struct Prom(String);

impl Prom {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }
    fn line(&mut self, name: &str, labels: &[(&str, &str)], v: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                // Label values here are our own names, interface names and numbers; escape
                // the three characters the format requires anyway.
                let esc = val
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.0, "{k}=\"{esc}\"");
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {v}");
    }
}

/// `/metrics`.
pub fn prometheus(ctl: &Control) -> String {
    let mut p = Prom(String::with_capacity(8192));
    let sock = socket_totals(ctl);
    let workers = ctl.planes().queues();
    let xdp_sum = |f: fn(&skua_xdp::worker::QueueStats) -> &AtomicU64| -> u64 {
        workers.iter().map(|w| r(f(&w.stats))).sum()
    };
    let prog: Vec<_> = ctl
        .planes()
        .programs()
        .into_iter()
        .map(|p| (p.ifname, p.counters))
        .collect();
    let prog_answered: u64 = prog
        .iter()
        .flat_map(|(_, st)| st.iter())
        // Local answers and cached answers, both sent by the program itself.
        .filter(|(k, _)| *k == "answered" || *k == "answered_cached")
        .map(|(_, v)| *v)
        .sum();

    p.head("skua_build_info", "gauge", "Version of skuad.");
    p.line(
        "skua_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
    p.head(
        "skua_uptime_seconds",
        "gauge",
        "Seconds since skuad started.",
    );
    p.line("skua_uptime_seconds", &[], ctl.started.elapsed().as_secs());
    let v = ctl.view();
    p.head(
        "skua_config_generation",
        "gauge",
        "Engine generation serving (increases at each reload or API write).",
    );
    p.line("skua_config_generation", &[], ctl.generation());
    p.head("skua_config_records", "gauge", "Records loaded.");
    p.line("skua_config_records", &[], v.records);
    p.head("skua_config_names", "gauge", "Names in the answer tables.");
    p.line("skua_config_names", &[], v.names);
    p.head("skua_config_reloads_total", "counter", "Reloads by result.");
    p.line(
        "skua_config_reloads_total",
        &[("result", "ok")],
        r(&ctl.reloads_ok),
    );
    p.line(
        "skua_config_reloads_total",
        &[("result", "failed")],
        r(&ctl.reloads_failed),
    );
    p.head(
        "skua_api_writes_total",
        "counter",
        "API zone and record changes by result.",
    );
    p.line(
        "skua_api_writes_total",
        &[("result", "ok")],
        r(&ctl.writes_ok),
    );
    p.line(
        "skua_api_writes_total",
        &[("result", "failed")],
        r(&ctl.writes_failed),
    );

    p.head(
        "skua_xfr_refused_total",
        "counter",
        "Zone transfer and NOTIFY requests refused (access, TSIG, zone); the audit log records the first of a source and actor per minute and a summary of the rest.",
    );
    p.line("skua_xfr_refused_total", &[], r(&ctl.xfr_refused));
    p.head(
        "skua_xfr_events_dropped_total",
        "counter",
        "Zone transfer events (refusals, transfers served) not logged nor audited because their queue to the control core was full.",
    );
    p.line(
        "skua_xfr_events_dropped_total",
        &[],
        r(&ctl.serving.xfr.dropped),
    );

    p.head("skua_queries_total", "counter", "Queries received, by path (socket: kernel sockets UDP+TCP; xdp: AF_XDP workers; xdp_program: answered inside the XDP program).");
    p.line("skua_queries_total", &[("path", "socket")], sock.queries);
    p.line("skua_queries_total", &[("path", "xdp")], xdp_sum(|s| &s.rx));
    p.line(
        "skua_queries_total",
        &[("path", "xdp_program")],
        prog_answered,
    );
    p.head(
        "skua_responses_total",
        "counter",
        "Responses by path and RCODE.",
    );
    for (i, n) in sock.rcode.iter().enumerate() {
        let name = RCODES.get(i).map(|(_, n)| *n).unwrap_or("other");
        p.line(
            "skua_responses_total",
            &[("path", "socket"), ("rcode", name)],
            n,
        );
    }
    let mut xdp_t = Totals::default();
    for w in &workers {
        w.stats.replies.sum_into(&mut xdp_t);
    }
    for (i, n) in xdp_t.rcode.iter().enumerate() {
        let name = RCODES.get(i).map(|(_, n)| *n).unwrap_or("other");
        p.line(
            "skua_responses_total",
            &[("path", "xdp"), ("rcode", name)],
            n,
        );
    }
    p.line(
        "skua_responses_total",
        &[("path", "xdp_program"), ("rcode", "NOERROR_OR_NXDOMAIN")],
        prog_answered,
    );
    p.head(
        "skua_queries_by_qtype_total",
        "counter",
        "Answered queries by path and QTYPE.",
    );
    for (i, n) in sock.qtype.iter().enumerate() {
        let name = QTYPES.get(i).map(|(_, n)| *n).unwrap_or("other");
        p.line(
            "skua_queries_by_qtype_total",
            &[("path", "socket"), ("qtype", name)],
            n,
        );
    }
    for (i, n) in xdp_t.qtype.iter().enumerate() {
        let name = QTYPES.get(i).map(|(_, n)| *n).unwrap_or("other");
        p.line(
            "skua_queries_by_qtype_total",
            &[("path", "xdp"), ("qtype", name)],
            n,
        );
    }
    p.head("skua_rrl_responses_total", "counter", "Response rate limiting, by path and action: dropped, slipped (sent truncated, or an error sent instead of dropped), and with log-only what would have been dropped or slipped.");
    let socket_rl =
        sock.dropped[skua_engine::stats::drop_slot(skua_engine::engine::DropReason::RateLimited)];
    let xdp_rl: u64 = workers.iter().map(|w| w.stats.rate_limited()).sum();
    for (path, drop, slip, wd, ws) in [
        (
            "socket",
            socket_rl,
            sock.slipped,
            sock.rrl_would_drop,
            sock.rrl_would_slip,
        ),
        (
            "xdp",
            xdp_rl,
            xdp_sum(|s| &s.slipped),
            xdp_sum(|s| &s.rrl_would_drop),
            xdp_sum(|s| &s.rrl_would_slip),
        ),
    ] {
        p.line(
            "skua_rrl_responses_total",
            &[("path", path), ("action", "drop")],
            drop,
        );
        p.line(
            "skua_rrl_responses_total",
            &[("path", path), ("action", "slip")],
            slip,
        );
        p.line(
            "skua_rrl_responses_total",
            &[("path", path), ("action", "would_drop")],
            wd,
        );
        p.line(
            "skua_rrl_responses_total",
            &[("path", path), ("action", "would_slip")],
            ws,
        );
    }
    p.head(
        "skua_dropped_total",
        "counter",
        "Queries dropped, by path and reason.",
    );
    for (i, n) in sock.dropped.iter().enumerate() {
        p.line(
            "skua_dropped_total",
            &[("path", "socket"), ("reason", DROPS[i])],
            n,
        );
    }
    for d in skua_fastpath::Drop::ALL {
        let n: u64 = workers
            .iter()
            .map(|w| r(&w.stats.dropped[d as usize]))
            .sum();
        p.line(
            "skua_dropped_total",
            &[("path", "xdp"), ("reason", d.as_str())],
            n,
        );
    }
    p.head("skua_query_duration_seconds", "histogram", "Per query, the time from its batch's pickup to the batch's replies being handed to the kernel (sendmmsg on the socket path, the TX ring kick on the AF_XDP path).");
    for (path, t) in [("socket", &sock), ("xdp", &xdp_t)] {
        let mut cum = 0u64;
        for (i, n) in t.latency.iter().enumerate() {
            cum += n;
            let le = LATENCY_BOUNDS_NS
                .get(i)
                .map(|b| format!("{}", *b as f64 / 1e9))
                .unwrap_or_else(|| "+Inf".into());
            p.line(
                "skua_query_duration_seconds_bucket",
                &[("path", path), ("le", &le)],
                cum,
            );
        }
        p.line(
            "skua_query_duration_seconds_sum",
            &[("path", path)],
            t.latency_sum_ns as f64 / 1e9,
        );
        p.line("skua_query_duration_seconds_count", &[("path", path)], cum);
    }

    p.head(
        "skua_xdp_queue_packets_total",
        "counter",
        "AF_XDP queue counters (ours and the kernel's XDP_STATISTICS).",
    );
    for w in &workers {
        let q = w.queue.to_string();
        let s = &w.stats;
        for (what, v) in [
            ("rx", r(&s.rx)),
            ("answered", r(&s.answered)),
            ("hot", r(&s.hot)),
            ("slow_path", r(&s.slow_path)),
            ("not_dns", r(&s.not_dns)),
            ("tx_ring_full", r(&s.tx_ring_full)),
            ("dropped", s.dropped_total()),
            ("kernel_rx_dropped", r(&s.xsk.rx_dropped)),
            ("kernel_rx_ring_full", r(&s.xsk.rx_ring_full)),
            ("kernel_fill_ring_empty", r(&s.xsk.rx_fill_ring_empty_descs)),
            ("kernel_rx_invalid_descs", r(&s.xsk.rx_invalid_descs)),
            ("kernel_tx_invalid_descs", r(&s.xsk.tx_invalid_descs)),
        ] {
            p.line(
                "skua_xdp_queue_packets_total",
                &[("interface", &w.ifname), ("queue", &q), ("counter", what)],
                v,
            );
        }
    }
    p.head(
        "skua_xdp_program_packets_total",
        "counter",
        "XDP program counters per interface.",
    );
    for (ifname, st) in &prog {
        for (k, v) in st {
            p.line(
                "skua_xdp_program_packets_total",
                &[("interface", ifname), ("counter", k)],
                v,
            );
        }
    }
    resolver_prometheus(&mut p, ctl);
    ha_prometheus(&mut p, ctl);
    sync_prometheus(&mut p, ctl);
    encrypted_prometheus(&mut p, ctl);
    p.0
}
