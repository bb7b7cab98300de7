//! The forwarding section of a load: `forward-zone:` and `stub-zone:` clauses, their
//! upstreams and hosts, and the cache and outgoing-port settings, as the resolver's.

use skua_config::{Config, Loc};
use skua_engine::name::WireName;

use super::{LoadError, at};
use crate::base::resolving::ResolverSettings;

/// The resolver's settings from `forward-zone:`, `stub-zone:` and the cache and upstream
/// directives of `server:`; `None` without any zone (names outside local data are then
/// REFUSED, as before). Errors name the line: a zone or host name that is not a domain
/// name, a zone defined twice, an address that can never be an upstream (multicast,
/// broadcast, link-local: `skua_resolver::forward::upstream_addr`), a `tls-cert-bundle:`
/// that cannot be read or holds no certificate. `forward-host:`/`stub-host:` names are resolved by the forwarder itself
/// (`skua_resolver::forward::HostConfig`); a warning names each one that cannot be (a
/// loop, or no zone holds its name).
pub(super) fn resolver_settings(
    cfg: &Config,
    warnings: &mut Vec<String>,
) -> Result<Option<ResolverSettings>, LoadError> {
    use skua_resolver::forward::{
        HostConfig, HostPlan, Limits, Upstream, ZoneConfig, plan_hosts, upstream_addr,
    };
    let s = &cfg.server;
    if cfg.forward_zones.is_empty() {
        return Ok(None);
    }
    let mut zones: Vec<ZoneConfig> = Vec::new();
    // Each host, with the line it came from, as written, and the index of its zone.
    let mut hosts: Vec<(HostConfig, Loc, String, usize)> = Vec::new();
    let mut seen: Vec<(Vec<u8>, Loc)> = Vec::new();
    for fz in &cfg.forward_zones {
        let clause = fz.kind.clause();
        let name = WireName::parse(&fz.name.value, None)
            .map_err(|e| {
                at(
                    &fz.name.loc,
                    format!("{clause} name '{}': {e}", fz.name.value),
                )
            })?
            .to_lowercase();
        if let Some((_, first)) = seen.iter().find(|(n, _)| n == name.as_bytes()) {
            return Err(at(
                &fz.name.loc,
                format!("{clause} '{}' is already defined at {first}", fz.name.value),
            ));
        }
        seen.push((name.as_bytes().to_vec(), fz.name.loc.clone()));
        let tls = fz.tls_upstream || s.tls_upstream;
        let mut upstreams = Vec::new();
        for a in &fz.addrs {
            // The same check as for the addresses hosts resolve to, and the same form
            // (an IPv4-mapped address as IPv4).
            let addr = match upstream_addr(a.value.socket_addr(), s.do_not_query_localhost) {
                Ok(addr) => addr,
                // Unbound's default: never query the host itself (a loop when it
                // forwards to itself); Unbound says nothing, we say which line lost its
                // address.
                Err(why) if why.is_localhost() => {
                    warnings.push(format!(
                        "{}: {clause} address {} is not used: {why}; set do-not-query-localhost to no to forward to this host",
                        a.loc, a.value
                    ));
                    continue;
                }
                Err(why) => {
                    return Err(at(
                        &a.loc,
                        format!(
                            "{clause} address {}: {why}, which cannot be an upstream",
                            a.value
                        ),
                    ));
                }
            };
            upstreams.push(Upstream {
                addr,
                tls_name: if tls {
                    Some(a.value.tls_name.as_deref().unwrap_or("").into())
                } else {
                    None
                },
            });
        }
        for h in &fz.hosts {
            let host = WireName::parse(&h.value.name, None)
                .map_err(|e| {
                    at(
                        &h.loc,
                        format!("{clause} host name '{}': {e}", h.value.name),
                    )
                })?
                .to_lowercase();
            let hc = HostConfig {
                zone: name.as_bytes().to_vec(),
                name: host.as_bytes().to_vec(),
                port: h.value.port_or_default(),
                // With TLS the certificate must carry `#NAME`, or else the host's name
                // (what the configuration trusts, rather than the address it resolved to),
                // in lower case like the host's name: `NS.example` and `ns.example` are one
                // host (names compare without case, RFC 4343 §3).
                tls_name: tls.then(|| match h.value.tls_name.as_deref() {
                    Some(name) => name.into(),
                    None => h
                        .value
                        .name
                        .trim_end_matches('.')
                        .to_ascii_lowercase()
                        .into(),
                }),
            };
            if !hosts.iter().any(|(o, _, _, _)| *o == hc) {
                hosts.push((hc, h.loc.clone(), h.value.to_string(), zones.len()));
            }
        }
        if fz.first {
            warnings.push(format!(
                "{}: {clause} '{}': {}-first has no effect yet (recursion is not built): when its upstreams fail, names get SERVFAIL",
                fz.loc,
                fz.name.value,
                if fz.kind == skua_config::ZoneKind::Forward { "forward" } else { "stub" }
            ));
        }
        if fz.prime {
            warnings.push(format!(
                "{}: stub-prime is accepted but not applied yet: the stub addresses are asked directly",
                fz.loc
            ));
        }
        let mut z = ZoneConfig {
            name: name.as_bytes().to_vec(),
            kind: fz.kind,
            upstreams,
            no_cache: fz.no_cache,
            first: fz.first,
            tls,
            tcp: fz.tcp_upstream,
            id: 0,
        };
        let own: Vec<&HostConfig> = hosts
            .iter()
            .filter(|h| h.3 == zones.len())
            .map(|h| &h.0)
            .collect();
        z.id = zone_id(&z, &own);
        zones.push(z);
    }
    // Which hosts can be resolved, and which zones have an address at all.
    let host_configs: Vec<HostConfig> = hosts.iter().map(|h| h.0.clone()).collect();
    let plans = plan_hosts(&skua_resolver::forward::ForwardConfig {
        zones: zones.clone(),
        hosts: host_configs.clone(),
        ..Default::default()
    });
    for ((_, loc, written, zi), plan) in hosts.iter().zip(&plans) {
        let fz = &cfg.forward_zones[*zi];
        let clause = fz.kind.clause();
        let addr = match fz.kind {
            skua_config::ZoneKind::Forward => "forward-addr",
            skua_config::ZoneKind::Stub => "stub-addr",
        };
        match plan {
            HostPlan::Via(_) | HostPlan::NoZone => {}
            HostPlan::Loop(v) => {
                let inner = &cfg.forward_zones[*v];
                warnings.push(format!(
                    "{loc}: {clause} host '{written}' cannot be resolved: its name is inside {} '{}', which has no address that does not depend on this host (a loop); give its address with {addr}",
                    inner.kind.clause(),
                    inner.name.value
                ));
            }
            HostPlan::Outside => warnings.push(format!(
                "{loc}: {clause} host '{written}' cannot be resolved: no forward-zone or stub-zone contains its name (recursion is not built); add one that does, or give its address with {addr}"
            )),
        }
    }
    for (i, z) in zones.iter().enumerate() {
        let resolvable = hosts
            .iter()
            .zip(&plans)
            .any(|(h, p)| h.3 == i && matches!(p, HostPlan::Via(_)));
        if z.upstreams.is_empty() && !resolvable {
            let fz = &cfg.forward_zones[i];
            warnings.push(format!(
                "{}: {} '{}' has no usable address: its names get SERVFAIL",
                fz.loc,
                fz.kind.clause(),
                fz.name.value
            ));
        }
    }
    for (what, set) in [
        ("caps-exempt", !s.caps_exempt.is_empty()),
        ("infra-host-ttl", s.infra_host_ttl != 900),
        ("jostle-timeout", s.jostle_timeout_ms != 200),
        ("serve-expired-ttl-reset", s.serve_expired_ttl_reset),
    ] {
        if set {
            warnings.push(format!("'{what}' is accepted but not applied yet"));
        }
    }
    if let Some(b) = &s.tls_cert_bundle {
        check_bundle(&b.value).map_err(|e| at(&b.loc, e))?;
    }
    let forward = skua_resolver::forward::ForwardConfig {
        zones,
        hosts: host_configs,
        do_not_query_localhost: s.do_not_query_localhost,
        do_ip4: s.do_ip4,
        do_ip6: s.do_ip6,
        edns_buffer_size: s.edns_buffer_size,
        use_caps_for_id: s.use_caps_for_id,
        tcp_upstream: s.tcp_upstream,
        unwanted_reply_threshold: s.unwanted_reply_threshold,
        limits: Limits {
            // outgoing-range bounds Unbound's sockets in flight per thread; here it
            // bounds the questions in flight.
            flights: s.outgoing_range.max(1) * s.num_threads.max(1),
            ..Limits::default()
        },
    };
    let cache = skua_resolver::cache::CacheConfig {
        msg_bytes: s.msg_cache_size,
        rrset_bytes: s.rrset_cache_size,
        shards: s.msg_cache_slabs.max(s.rrset_cache_slabs).max(64),
        min_ttl: s.cache_min_ttl,
        max_ttl: s.cache_max_ttl,
        max_negative_ttl: s.cache_max_negative_ttl,
        prefetch: s.prefetch,
        serve_expired: s.serve_expired,
        serve_expired_ttl: s.serve_expired_ttl,
        serve_expired_reply_ttl: s.serve_expired_reply_ttl,
        serve_expired_client_timeout: s.serve_expired_client_timeout_ms,
    };
    Ok(Some(ResolverSettings {
        forward,
        cache,
        ports: port_ranges(&s.outgoing_port_rules),
        tls_cert_bundle: s.tls_cert_bundle.as_ref().map(|b| b.value.clone()),
        tls_system_cert: s.tls_system_cert,
    }))
}

/// A `tls-cert-bundle:` must be readable and hold at least one PEM certificate: checked
/// at load, so a reload with a bad bundle keeps the old configuration serving.
pub(super) fn check_bundle(path: &str) -> Result<(), String> {
    use rustls_pki_types::pem::PemObject;
    let pem = std::fs::read(path).map_err(|e| format!("tls-cert-bundle '{path}': {e}"))?;
    let n = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
        .filter(Result::is_ok)
        .count();
    if n == 0 {
        return Err(format!(
            "tls-cert-bundle '{path}': no PEM certificate in it"
        ));
    }
    Ok(())
}

/// A zone's identity for the cache: equal while its configuration (its hosts included)
/// is (FNV-1a over its fields), so a reload keeps what was resolved through unchanged
/// zones.
pub(super) fn zone_id(
    z: &skua_resolver::forward::ZoneConfig,
    hosts: &[&skua_resolver::forward::HostConfig],
) -> u32 {
    let text = format!(
        "{:?}|{:?}|{:?}|{}|{}|{}|{}|{:?}",
        z.name, z.kind, z.upstreams, z.no_cache, z.first, z.tls, z.tcp, hosts
    );
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The source ports UDP queries may use: 1024-65535 (Unbound's default), then each
/// `outgoing-port-permit:`/`-avoid:` in order; empty means the default range.
pub(super) fn port_ranges(
    rules: &[skua_config::Located<skua_config::PortRule>],
) -> Vec<(u16, u16)> {
    if rules.is_empty() {
        return Vec::new();
    }
    let mut ok = vec![false; 65536];
    for p in ok.iter_mut().skip(1024) {
        *p = true;
    }
    for r in rules {
        let allow = r.value.action == skua_config::PortAction::Permit;
        for p in &mut ok[usize::from(r.value.low)..=usize::from(r.value.high)] {
            *p = allow;
        }
    }
    ok[0] = false;
    let mut ranges = Vec::new();
    let mut start = None;
    for (port, &allowed) in ok.iter().enumerate() {
        match (allowed, start) {
            (true, None) => start = Some(port),
            (false, Some(a)) => {
                ranges.push((a as u16, (port - 1) as u16));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(a) = start {
        ranges.push((a as u16, 65535));
    }
    ranges
}
