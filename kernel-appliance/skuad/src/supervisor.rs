//! The supervisor: wires the process and runs it until SIGTERM/SIGINT.
//!
//! It loads the configuration, starts the dataplanes ([`crate::dataplane`]), hands them to
//! the control core ([`crate::control`]), opens the API ([`crate::api`]) on top, then turns
//! signals into control operations (SIGHUP reloads, SIGUSR1 logs the counters) and stops
//! everything in order. It is the only module that knows every layer.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::acme;
use crate::api::{self, Api};
use crate::base::planes::{DataplaneState, Dataplanes};
use crate::base::serving::Serving;
use crate::base::settings::Settings;
use crate::base::{log, notify};
use crate::control::source::Source;
use crate::control::{Boot, Control};
use crate::dataplane::Planes;
use crate::dataplane::xdp::XdpOptions;

/// Runs the daemon until SIGTERM/SIGINT.
pub fn run(source: Source, xdp_opts: &XdpOptions) -> Result<(), String> {
    let started = Instant::now();
    log::install_bridge();
    let mut boot = Boot::load(&source)?;
    // The API's certificate and key are read now: a bad one stops the start before any
    // socket is bound.
    let api_settings = api::settings(&boot.config).map_err(|e| format!("api: {e}"))?;
    // ACME: checked now (a clause that cannot work stops the start); read at start only.
    let acme_settings = acme::AcmeSettings::from_config(&boot.config, boot.dir())?;
    acme::warn_at_start(&boot.config);
    let acme = acme_settings
        .as_ref()
        .map(|_| Arc::new(acme::Acme::default()));
    check_descriptors(&boot.settings, &boot.config.api);
    let engine = boot
        .take_engine()
        .ok_or_else(|| "internal: no engine loaded".to_string())?;
    skua_netio::release_free_memory();
    // The runtime and the signal handlers come first: a SIGHUP or SIGTERM that arrives as
    // soon as we answer must find its handler, not the default action (which kills).
    //
    // It also serves every stream connection (TCP, DNS over TLS, HTTPS and QUIC), so it
    // gets as many threads as the UDP workers: encrypted DNS is not held to one core on a
    // machine with many (a change of num-threads takes effect at the next start).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(boot.settings.threads.max(1))
        .thread_name("stream")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"))?;
    let sigs = {
        use tokio::signal::unix::{SignalKind, signal};
        let _guard = rt.enter();
        let mk =
            |k: SignalKind| signal(k).map_err(|e| format!("cannot install signal handler: {e}"));
        Signals {
            usr1: mk(SignalKind::user_defined1())?,
            hup: mk(SignalKind::hangup())?,
            term: mk(SignalKind::terminate())?,
            int: mk(SignalKind::interrupt())?,
        }
    };
    let serving = Arc::new(Serving::new(engine));
    serving.tls.service.store(boot.take_tls());
    serving
        .tls
        .doh
        .store(Arc::new(crate::control::tls::doh_params(
            &boot.config.server,
        )));
    let settings = boot.settings.clone();
    let cfg = boot.config.clone();
    let planes = {
        let _guard = rt.enter();
        Arc::new(Planes::start_sockets(
            &settings,
            serving.clone(),
            xdp_opts.clone(),
        )?)
    };
    let stop_planes = || {
        serving.stop.store(true, Ordering::Relaxed);
        let _guard = rt.enter();
        planes.stop();
    };
    let api_listeners = match rt.block_on(api::bind(&cfg)) {
        Ok(l) => l,
        Err(e) => {
            stop_planes();
            return Err(format!("api: {e}"));
        }
    };
    let ctl = Arc::new(Control::new(
        source,
        serving.clone(),
        planes.clone(),
        boot,
        started,
    ));
    let api = Api::new(ctl.clone(), &cfg, api_settings, acme.clone());
    let control_socket = match api::local::bind(&cfg) {
        Ok(s) => s,
        Err(e) => {
            stop_planes();
            return Err(e);
        }
    };
    let _remove_socket = control_socket
        .as_ref()
        .map(api::local::ControlSocket::cleanup);
    // XDP comes after the sockets: the kernel path is always there to fall back to, and
    // what the XDP program passes (TCP, fragments, other queues) lands on it.
    let state = match planes.start_xdp(&settings) {
        Ok(s) => s,
        Err(e) => {
            stop_planes();
            return Err(e);
        }
    };
    let on_xdp = state == DataplaneState::Xdp;
    ctl.record(
        skua_audit::kind::START,
        "system",
        None,
        serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "config": ctl.source.describe(),
            "dataplane": state,
            "generation": ctl.generation(),
        }),
    );
    let result = rt.block_on(async {
        // A follower takes its source's configuration and data before its API opens (so
        // before its agent can take a lease with stale data).
        let follower = api::sync::catch_up(&ctl).await;
        let (api_stop, api_stopped) = tokio::sync::watch::channel(false);
        for l in api_listeners {
            let mut rx = api_stopped.clone();
            let addr = l.local_addr().map_err(|e| e.to_string())?;
            let stop = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            let scheme = if api.is_tls() { "https" } else { "http" };
            log::info(format_args!("api: listening on {scheme}://{addr}"));
            tokio::spawn(api::serve(l, api.clone(), stop));
        }
        if let Some(sock) = control_socket {
            let mut rx = api_stopped.clone();
            let stop = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            tokio::spawn(sock.serve(api::router(api.clone()), stop));
        }
        // Summaries of refused API requests, when their window ends.
        let c = ctl.clone();
        let mut ticker = tokio::time::interval(Duration::from_secs(5));
        let flusher = tokio::spawn(async move {
            loop {
                ticker.tick().await;
                let c = c.clone();
                let _ = tokio::task::spawn_blocking(move || c.flush_refusals(false)).await;
            }
        });
        // Zone transfers: the dataplanes' reports into the log and the audit log and the
        // secondary zones' updates, the NOTIFY sender, the secondary.
        let xfr_events = tokio::spawn(crate::control::xfr::run(ctl.clone()));
        let notifier = tokio::spawn(crate::dataplane::notify::run(serving.clone()));
        let secondary = tokio::spawn(crate::dataplane::xfrin::run(serving.clone()));
        // Leases of the service addresses that run out: logged and audited (answering
        // stops by itself, at the expiry, in every dataplane).
        let c = ctl.clone();
        let lease_watch = tokio::spawn(async move {
            loop {
                let c = c.clone();
                let wait = tokio::task::spawn_blocking(move || c.check_leases())
                    .await
                    .unwrap_or(Duration::from_millis(200));
                tokio::time::sleep(wait).await;
            }
        });
        let follower = tokio::spawn(api::sync::follow(follower));
        let acme_task = match (acme, acme_settings) {
            (Some(a), Some(s)) => Some(tokio::spawn(acme::run(ctl.clone(), a, s))),
            _ => None,
        };
        notify::notify(&format!(
            "READY=1\nSTATUS=serving on {} ({})",
            settings
                .udp
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            if on_xdp { "AF_XDP" } else { "kernel sockets" }
        ));
        let r = signals(sigs, &ctl, &*planes).await;
        let _ = api_stop.send(true);
        flusher.abort();
        follower.abort();
        if let Some(t) = acme_task {
            t.abort();
        }
        lease_watch.abort();
        secondary.abort();
        xfr_events.abort();
        notifier.abort();
        r
    });
    stop_planes();
    rt.shutdown_timeout(Duration::from_millis(500));
    ctl.flush_refusals(true);
    let t = serving.totals();
    ctl.record(
        skua_audit::kind::STOP,
        "system",
        None,
        serde_json::json!({"queries": t.queries, "replies": t.replies, "result": result.as_ref().err()}),
    );
    log::info(format_args!("stopped: {}", socket_summary(&serving)));
    result
}

/// Raises the process's soft descriptor limit to what the configured caps can use at once
/// ([`descriptors_needed`]) when it is lower, as far as the hard limit allows (as Unbound
/// does at start), and warns when even that is below. The appliance's unit sets
/// `LimitNOFILE=65536`; a shell's soft default (1024) is below the defaults' need (about
/// 1,300 with `incoming-num-tcp: 1000`), its hard one (4096 or more) is not.
fn check_descriptors(settings: &Settings, api: &skua_config::Api) {
    let Some(soft) = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
                .and_then(|v| v.parse::<u64>().ok())
        })
    else {
        return;
    };
    let need = descriptors_needed(settings, api);
    let soft = if soft < need {
        match skua_netio::raise_open_files(need) {
            Ok(now) => {
                if now > soft {
                    log::info(format_args!(
                        "raised the descriptor limit from {soft} to {now} (connections and sockets need {need})"
                    ));
                }
                now
            }
            Err(e) => {
                log::warn(format_args!("cannot raise the descriptor limit: {e}"));
                soft
            }
        }
    } else {
        soft
    };
    if soft < need {
        log::warn(format_args!(
            "the descriptor limit is {soft}, below the {need} that connections over TCP, TLS and HTTPS (incoming-num-tcp), the API (max-connections), the listening sockets (UDP, TCP, TLS, HTTPS, QUIC) and the rest can use at once: raise it (LimitNOFILE=, ulimit -n) or lower those caps"
        ));
    }
}

/// The descriptors the configured caps can hold at once:
/// - the connections over TCP, TLS (RFC 7858) and HTTPS (RFC 8484), one descriptor each:
///   at most `incoming-num-tcp` × threads, the one limit all stream listeners share
///   (docs/configuration.md; the dataplane's slots, `dataplane::slots`), and one more per
///   stream listener: a connection accepted while every slot is taken waits for one (the
///   idle one asked to make room closes first). A DNS over QUIC connection takes a place
///   under that limit too but no descriptor: QUIC connections share their listener's UDP
///   socket (RFC 9250 §5.5 connections are multiplexed by connection ID);
/// - the listening sockets: a UDP socket per thread and address, one per TCP, TLS and
///   HTTPS address, one UDP socket per DNS over QUIC address;
/// - the API's connections (`max-connections` per API address);
/// - 256 for the rest: files, the resolver's upstream sockets, AF_XDP, epoll, timers.
pub(crate) fn descriptors_needed(settings: &Settings, api: &skua_config::Api) -> u64 {
    let streams = settings.tcp.len() + settings.tls.len() + settings.https.len();
    let connections = if streams + settings.doq.len() > 0 {
        (settings.tcp_limit + streams) as u64
    } else {
        0
    };
    let listening =
        (settings.udp.len() * settings.threads.max(1) + streams + settings.doq.len()) as u64;
    let api = if api.enable {
        u64::from(api.max_connections) * api.interfaces.len().max(1) as u64
    } else {
        0
    };
    connections + listening + api + 256
}

/// Kernel-socket counters, one line.
fn socket_summary(serving: &Serving) -> String {
    let t = serving.totals();
    let dropped: u64 = t.dropped.iter().sum();
    format!(
        "{} queries, {} replies ({} hot path), {} dropped (kernel sockets)",
        t.queries, t.replies, t.hot, dropped
    )
}

/// The signals the daemon handles, registered before it starts answering.
struct Signals {
    usr1: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

/// SIGHUP reloads (a bad configuration is rejected and the old one keeps serving);
/// SIGUSR1 logs the counters; SIGTERM and SIGINT stop.
async fn signals(sigs: Signals, ctl: &Arc<Control>, planes: &dyn Dataplanes) -> Result<(), String> {
    let Signals {
        mut usr1,
        mut hup,
        mut term,
        mut int,
    } = sigs;
    loop {
        tokio::select! {
            _ = hup.recv() => {
                notify::notify("RELOADING=1");
                match ctl.reload("signal", None).await {
                    Ok(a) => log::info(format_args!("reloaded: {} records in {:.1} ms", a.records, a.elapsed_ms)),
                    Err(e) => log::error(format_args!("reload rejected, still serving the previous configuration: {}", e.message())),
                }
                // Old or new, a configuration is serving again.
                notify::notify("READY=1");
            }
            _ = usr1.recv() => {
                log::info(format_args!("stats: {}", socket_summary(&ctl.serving)));
                for line in planes.summary() {
                    log::info(format_args!("{line}"));
                }
            }
            _ = term.recv() => {
                notify::notify("STOPPING=1");
                return Ok(());
            }
            _ = int.recv() => {
                notify::notify("STOPPING=1");
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::descriptors_needed;
    use crate::control::load::load_str;

    /// The encrypted listeners count: their listening sockets (TLS, HTTPS, QUIC), and the
    /// shared stream connection limit covers connections over TLS and HTTPS too.
    #[test]
    fn the_descriptor_need_counts_the_encrypted_listeners() {
        let api = skua_config::Api::default();
        let api_part = if api.enable {
            u64::from(api.max_connections) * api.interfaces.len().max(1) as u64
        } else {
            0
        };
        let plain = load_str(
            "server:\n  interface: 127.0.0.1\n  port: 5353\n  num-threads: 2\n  incoming-num-tcp: 100\n",
            "t.conf",
        )
        .unwrap();
        // 200 connections (100 x 2 threads) and one waiting for a slot per stream
        // listener, 2 UDP sockets + 1 TCP listener, 256.
        assert_eq!(
            descriptors_needed(&plain.settings, &api),
            200 + 1 + 3 + api_part + 256
        );

        let cert = "  tls-service-pem: /nonexistent/c.pem\n  tls-service-key: /nonexistent/k.pem\n";
        let enc = load_str(
            &format!(
                "server:\n  interface: 127.0.0.1\n  interface: 127.0.0.1@853\n  interface: 127.0.0.2@853\n  \
                 interface: 127.0.0.1@443\n  port: 5353\n  num-threads: 2\n  incoming-num-tcp: 100\n{cert}"
            ),
            "t.conf",
        )
        .unwrap();
        let s = &enc.settings;
        assert_eq!((s.tls.len(), s.https.len(), s.doq.len()), (2, 1, 2));
        // The same 200 connections, 4 waiting (one per TCP, TLS, HTTPS listener);
        // listening: 2 UDP + 1 TCP + 2 TLS + 1 HTTPS + 2 QUIC.
        assert_eq!(descriptors_needed(s, &api), 200 + 4 + 8 + api_part + 256);

        // Encrypted listeners only (no plain DNS address): their connections still count.
        let only = load_str(
            &format!(
                "server:\n  interface: 127.0.0.1@853\n  port: 5353\n  incoming-num-tcp: 50\n{cert}"
            ),
            "t.conf",
        )
        .unwrap();
        let s = &only.settings;
        assert!(s.udp.is_empty() && s.tcp.is_empty(), "{s:?}");
        assert_eq!(descriptors_needed(s, &api), 50 + 1 + 2 + api_part + 256);
    }
}
