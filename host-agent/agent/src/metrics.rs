//! The agent's Prometheus exposition (`GET /metrics`): VRRP instances, leases, health
//! checks, anycast prefixes.

use std::fmt::Write as _;

use crate::anycast::AnycastStatus;
use crate::health::CheckState;
use crate::instance::Status;

/// A per-instance counter: name, help, how to read it.
type Counter = (&'static str, &'static str, fn(&Status) -> u64);

/// One metric family: its `HELP`/`TYPE` lines and one line per (labels, value).
fn family(o: &mut String, name: &str, kind: &str, help: &str, rows: Vec<(String, String)>) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, v) in rows {
        let _ = writeln!(o, "{name}{{{labels}}} {v}");
    }
}

/// The exposition of everything the agent runs.
pub fn render(st: &[Status], hc: &[CheckState], any: &[AnycastStatus]) -> String {
    let mut o = String::new();
    let inst = |s: &Status| format!("instance=\"{}\"", s.name);
    let states = ["initialize", "backup", "master", "fault"];
    family(
        &mut o,
        "skua_agent_vrrp_state",
        "gauge",
        "1 for the instance's current VRRP state.",
        st.iter()
            .flat_map(|s| {
                states.iter().map(move |x| {
                    (
                        format!("instance=\"{}\",state=\"{x}\"", s.name),
                        u8::from(s.state == *x).to_string(),
                    )
                })
            })
            .collect(),
    );
    family(
        &mut o,
        "skua_agent_vrrp_priority",
        "gauge",
        "Effective priority.",
        st.iter()
            .map(|s| (inst(s), s.priority.to_string()))
            .collect(),
    );
    let counters: [Counter; 9] = [
        (
            "skua_agent_vrrp_transitions_total",
            "VRRP state changes.",
            |s| s.transitions,
        ),
        (
            "skua_agent_vrrp_adverts_sent_total",
            "Advertisements sent (one per destination).",
            |s| s.adverts_sent,
        ),
        (
            "skua_agent_vrrp_adverts_received_total",
            "Advertisements received.",
            |s| s.adverts_received,
        ),
        (
            "skua_agent_vrrp_adverts_dropped_total",
            "Advertisements dropped by the receive checks (RFC 9568 7.1).",
            |s| s.adverts_dropped,
        ),
        (
            "skua_agent_lease_takes_total",
            "Leases taken in skuad.",
            |s| s.lease_takes,
        ),
        ("skua_agent_lease_renewals_total", "Lease renewals.", |s| {
            s.lease_renewals
        }),
        (
            "skua_agent_lease_failures_total",
            "Failed lease takes or renewals.",
            |s| s.lease_failures,
        ),
        (
            "skua_agent_step_downs_total",
            "Mastership given up because skuad could not be used.",
            |s| s.step_downs,
        ),
        (
            "skua_agent_conflicts_total",
            "Times another node was found answering or announcing the address (held back or gave it up).",
            |s| s.conflicts,
        ),
    ];
    for (name, help, f) in counters {
        family(
            &mut o,
            name,
            "counter",
            help,
            st.iter().map(|s| (inst(s), f(s).to_string())).collect(),
        );
    }
    family(
        &mut o,
        "skua_agent_lease_age_seconds",
        "gauge",
        "Time since the lease was last taken or renewed (absent when not held).",
        st.iter()
            .filter_map(|s| {
                s.lease_age_ms
                    .map(|a| (inst(s), (a as f64 / 1000.0).to_string()))
            })
            .collect(),
    );
    let check = |c: &CheckState| format!("check=\"{}\"", c.name);
    family(
        &mut o,
        "skua_agent_check_ok",
        "gauge",
        "1 while the health check passes (after fall/rise).",
        hc.iter()
            .map(|c| {
                (
                    format!("check=\"{}\",kind=\"{}\"", c.name, c.kind),
                    u8::from(c.ok).to_string(),
                )
            })
            .collect(),
    );
    family(
        &mut o,
        "skua_agent_check_transitions_total",
        "counter",
        "Times the check changed between passing and failing.",
        hc.iter()
            .map(|c| (check(c), c.transitions.to_string()))
            .collect(),
    );
    family(
        &mut o,
        "skua_agent_check_duration_seconds",
        "gauge",
        "The last run's duration.",
        hc.iter()
            .filter_map(|c| c.last_ms.map(|ms| (check(c), (ms / 1000.0).to_string())))
            .collect(),
    );
    family(
        &mut o,
        "skua_agent_anycast_announced",
        "gauge",
        "1 while the prefix is on the anycast interface (announced by the routing daemon).",
        any.iter()
            .flat_map(|a| {
                a.prefixes.iter().map(move |p| {
                    (
                        format!("anycast=\"{}\",prefix=\"{}\"", a.name, p.prefix),
                        u8::from(p.announced).to_string(),
                    )
                })
            })
            .collect(),
    );
    family(
        &mut o,
        "skua_agent_anycast_transitions_total",
        "counter",
        "Announce/withdraw transitions.",
        any.iter()
            .map(|a| (format!("anycast=\"{}\"", a.name), a.transitions.to_string()))
            .collect(),
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_have_help_type_and_one_line_per_label_set() {
        let st = Status {
            name: "dns4".into(),
            state: "master".into(),
            priority: 150,
            lease_age_ms: Some(40),
            adverts_sent: 7,
            conflicts: 1,
            ..Status::default()
        };
        let hc = CheckState {
            name: "canary".into(),
            kind: "dns-udp".into(),
            ok: false,
            last_ms: Some(2.5),
            ..CheckState::default()
        };
        let m = render(&[st], &[hc], &[]);
        for line in [
            "# TYPE skua_agent_vrrp_state gauge",
            "skua_agent_vrrp_state{instance=\"dns4\",state=\"master\"} 1",
            "skua_agent_vrrp_state{instance=\"dns4\",state=\"backup\"} 0",
            "skua_agent_vrrp_priority{instance=\"dns4\"} 150",
            "skua_agent_vrrp_adverts_sent_total{instance=\"dns4\"} 7",
            "skua_agent_conflicts_total{instance=\"dns4\"} 1",
            "skua_agent_lease_age_seconds{instance=\"dns4\"} 0.04",
            "skua_agent_check_ok{check=\"canary\",kind=\"dns-udp\"} 0",
            "skua_agent_check_duration_seconds{check=\"canary\"} 0.0025",
        ] {
            assert!(m.lines().any(|l| l == line), "missing {line:?} in\n{m}");
        }
        assert!(!m.contains("anycast"), "no anycast section: no family");
        assert_eq!(m.matches("# TYPE skua_agent_vrrp_state ").count(), 1);
    }
}
