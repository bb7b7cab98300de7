//! The ACME task: plans the next attempt (renewal information asked when offered), waits
//! for it or an operator's request, orders, and records what came of it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use instant_acme::{Account, CertificateIdentifier};

use super::client::{Throttle, account};
use super::dns01;
use super::failure::{Failure, Written};
use super::files::read_cert;
use super::order::{issue, profile_offered, put_in_force};
use super::schedule::{
    Due, Pick, ari_due, ari_retry, backoff, base_schedule, next_check, pick_in, unix,
};
use super::{Acme, AcmeSettings, AcmeStatus};
use crate::base::log;
use crate::control::Control;
use crate::control::tls::CertFacts;

/// The most one renewal-information check (the directory, the account, the answer) takes.
pub(super) const ARI_CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// Asks the renewal information for `der`, directory and account included, in at most
/// [`ARI_CHECK_TIMEOUT`]. An error comes with the Retry-After (seconds) of a 429 or 503
/// answer, if there was one.
pub(super) async fn ari_check(
    acme: &Acme,
    s: &AcmeSettings,
    der: &rustls_pki_types::CertificateDer<'_>,
) -> Result<Option<((u64, u64), u64)>, (String, Option<u64>)> {
    let throttle = Throttle::default();
    let r = tokio::time::timeout(ARI_CHECK_TIMEOUT, async {
        let acct = account(s, Some(throttle.clone()))
            .await
            .map_err(|f| f.msg)?;
        check_profile(acme, &acct, s);
        renewal_info(&acct, der).await
    })
    .await
    .unwrap_or_else(|_| Err(format!("no answer in {} s", ARI_CHECK_TIMEOUT.as_secs())));
    r.map_err(|e| {
        let retry = *throttle.lock().unwrap_or_else(|e| e.into_inner());
        (crate::control::ha::printable_max(&e, 256), retry)
    })
}

/// Asks the ACME server's renewal information for `der` (RFC 9773 §4.3): the suggested
/// window (Unix seconds) and the Retry-After (seconds). `Ok(None)`: the directory offers
/// no `renewalInfo`.
pub(super) async fn renewal_info(
    account: &Account,
    der: &rustls_pki_types::CertificateDer<'_>,
) -> Result<Option<((u64, u64), u64)>, String> {
    let id = CertificateIdentifier::try_from(der)?;
    let r = tokio::time::timeout(Duration::from_secs(30), account.renewal_info(&id))
        .await
        .map_err(|_| "no answer in 30 s".to_string())?;
    let (info, retry) = match r {
        Ok(v) => v,
        Err(instant_acme::Error::Unsupported(_)) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let w = &info.suggested_window;
    let (start, end) = (w.start.unix_timestamp(), w.end.unix_timestamp());
    // §4.2: a window whose end is not after its start is invalid; the client decides.
    if end <= start {
        return Err(format!("an invalid suggested window ({start} .. {end})"));
    }
    Ok(Some((
        (start.max(0) as u64, end.max(0) as u64),
        retry.as_secs(),
    )))
}

/// Where the task stands between two attempts.
#[derive(Debug)]
enum Phase {
    /// No attempt failed since the last that succeeded (or since start): the next is
    /// planned from the certificate in force, with renewal information when offered.
    Planned,
    /// The last `failures` attempts failed: the next is at `at` (the back-off, or a rate
    /// limit's time), for `why`.
    Failing {
        failures: u32,
        at: u64,
        why: Due,
        /// The last attempt wrote a certificate whose reload failed: the next one puts it
        /// in force, it does not order again (a new order would count against the CA's
        /// limits for nothing).
        written: Option<Written>,
    },
}

/// Runs the ACME task: issues when there is no certificate for the names, renews when
/// due, until the process ends.
pub async fn run(ctl: Arc<Control>, acme: Arc<Acme>, s: AcmeSettings) {
    let mut phase = Phase::Planned;
    // The directory offered renewal information when last asked.
    let mut ari_offered = false;
    let mut pick: Option<Pick> = None;
    acme.status().profile = s.profile.clone();
    // DNS-01 records left by an order a stop cut short: taken out first.
    dns01::remove_stale(&ctl, &s.names).await;
    // Renewal-information checks failed in a row (asked again after 1, 2, 4 ... hours).
    let mut ari_errors: u32 = 0;
    // When this task last issued (Unix seconds): the floor of ARI-started renewals.
    let mut last_issued: Option<u64> = None;
    // The certificate "too young to renew" was logged for (once per certificate).
    let mut young_warned: Option<Vec<u8>> = None;
    loop {
        let now = unix(SystemTime::now());
        let current = read_cert(&s.cert);
        let ours = current
            .as_ref()
            .filter(|(_, f)| s.names.iter().all(|n| f.names.contains(n)));
        let (mut due, mut reason) = base_schedule(current.as_ref().map(|c| &c.1), &s.names, now);
        // Shown at once (failures aside): renewal information, asked below, may take a
        // while to answer.
        if matches!(phase, Phase::Planned) {
            show(
                &mut acme.status(),
                current.as_ref().map(|c| &c.1),
                due,
                reason,
            );
        }
        // RFC 9773 §4.2: the server's window, when it offers one, decides.
        let mut window = None;
        let mut recheck = None;
        // The certificate the order replaces (§5), when the server offers ARI.
        let mut replaces: Option<CertificateIdentifier<'static>> = None;
        let replacing = |der: &rustls_pki_types::CertificateDer<'_>| {
            CertificateIdentifier::try_from(der)
                .ok()
                .map(CertificateIdentifier::into_owned)
        };
        let mut asked = false;
        if let Some((der, _)) = ours
            && matches!(phase, Phase::Failing { .. })
            && ari_offered
        {
            // A retry: its time is the back-off's; the order still names what it replaces.
            replaces = replacing(der);
        } else if let Some((der, facts)) = ours
            && !matches!(
                phase,
                Phase::Failing {
                    written: Some(_),
                    ..
                }
            )
        {
            // An operator's request is not held up by a slow check.
            let checked = tokio::select! {
                c = ari_check(&acme, &s, der) => Some(c),
                _ = acme.renew_now.notified() => None,
            };
            match checked {
                None => {
                    asked = true;
                    if ari_offered {
                        replaces = replacing(der);
                    }
                }
                Some(Ok(Some((w, retry)))) => {
                    ari_offered = true;
                    ari_errors = 0;
                    let at = match pick {
                        Some(p) if p.window == w => p.at,
                        _ => pick_in(w.0, w.1),
                    };
                    pick = Some(Pick { window: w, at });
                    // §4.2 step 3: a time already past means now; bounded by the
                    // certificate's age and expiry (see ari_due).
                    let held;
                    (due, held) = ari_due(at, now, facts, last_issued);
                    if held && young_warned.as_deref() != Some(der.as_ref()) {
                        young_warned = Some(der.to_vec());
                        log::warn(format_args!(
                            "acme: renewal information asks to renew a certificate issued {} s ago: not before {due} (Unix; an hour after its issuance, or a third of its lifetime if shorter)",
                            now.saturating_sub(last_issued.unwrap_or(now))
                        ));
                    }
                    reason = Due::RenewalInformation;
                    window = Some(w);
                    recheck = Some(next_check(now, retry, due));
                    replaces = replacing(der);
                }
                Some(Ok(None)) => {
                    ari_offered = false;
                    ari_errors = 0;
                }
                Some(Err((e, retry_after))) => {
                    // §4.2: no usable answer, the client decides: two thirds; asked again
                    // (a revocation must not wait for the two-thirds mark to be seen) after
                    // the server's Retry-After or a back-off (§4.3.2: not hammered).
                    ari_errors = ari_errors.saturating_add(1);
                    let wait = ari_retry(ari_errors, retry_after);
                    log::warn(format_args!(
                        "acme: renewal information: {e} (renewal at two thirds of the certificate's lifetime; asked again in {wait} s)"
                    ));
                    recheck = Some((now + wait).min(due.max(now + 60)));
                }
            }
        }
        if let Phase::Failing { at, why, .. } = &phase {
            (due, reason) = ((*at).max(now), *why);
            recheck = None;
        }
        {
            let mut st = acme.status();
            show(&mut st, current.as_ref().map(|c| &c.1), due, reason);
            st.window_start = window.map(|w| w.0);
            st.window_end = window.map(|w| w.1);
            st.renewal_info_next = recheck;
        }
        // Wakes at the renewal time, or earlier to ask ARI again; an operator's request
        // orders at once.
        let wake = recheck.map_or(due, |r| r.min(due));
        if !asked && wake > now {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(wake - now)) => {}
                _ = acme.renew_now.notified() => asked = true,
            }
            if !asked && wake < due {
                continue;
            }
        }
        // The sleep may have lasted hours: an operator who put another certificate in
        // force meanwhile gets a plan for it, not an order naming the one it replaced
        // (RFC 9773 §5 `replaces`) and timed for that one. Asked for, the order goes on,
        // naming the certificate now in force.
        let now_der = read_cert(&s.cert);
        if now_der.as_ref().map(|c| &c.0) != current.as_ref().map(|c| &c.0) {
            if !asked {
                log::info(format_args!(
                    "acme: the certificate file changed while waiting: renewal planned again"
                ));
                pick = None;
                continue;
            }
            replaces = replaces.and_then(|_| {
                now_der
                    .as_ref()
                    .filter(|(_, f)| s.names.iter().all(|n| f.names.contains(n)))
                    .and_then(|(der, _)| replacing(der))
            });
        }
        // A certificate written whose reload failed is put in force again, not ordered
        // again (a new order would count against the CA's limits for nothing).
        let r = match &phase {
            Phase::Failing {
                written: Some(w), ..
            } => put_in_force(&ctl)
                .await
                .map(|()| w.replaced.clone())
                .map_err(|e| Failure {
                    written: Some(Written::default()),
                    ..Failure::from(e)
                }),
            _ => issue(&ctl, &acme, &s, replaces).await,
        };
        match r {
            Ok(replaced) => {
                phase = Phase::Planned;
                pick = None;
                last_issued = Some(unix(SystemTime::now()));
                young_warned = None;
                // The new certificate and its plan shown with the count, in one step.
                let c = read_cert(&s.cert).map(|c| c.1);
                let now = unix(SystemTime::now());
                let (due, reason) = base_schedule(c.as_ref(), &s.names, now);
                let mut st = acme.status();
                show(&mut st, c.as_ref(), due, reason);
                st.window_start = None;
                st.window_end = None;
                st.renewal_info_next = None;
                st.issued += 1;
                st.last_replaced = replaced;
                st.last_error = None;
                st.last_error_reason = None;
                st.last_issued = Some(unix(SystemTime::now()));
            }
            Err(f) => {
                // The reason quotes the ACME server's problem document: one bounded line
                // before it reaches the log, the audit log and GET /tls.
                let e = crate::control::ha::printable_max(&f.msg, 512);
                let (failures, before) = match phase {
                    Phase::Failing {
                        failures, written, ..
                    } => (failures.saturating_add(1), written),
                    Phase::Planned => (1, None),
                };
                // A certificate written whose reload failed (again): what its order
                // replaced is kept until it is in force.
                let written = f.written.clone().map(|w| Written {
                    replaced: w.replaced.or(before.and_then(|b| b.replaced)),
                });
                let now = unix(SystemTime::now());
                let mut retry_at = now + backoff(failures);
                let mut retry_reason = Due::RetryAfterFailure;
                // A rate limit: not before the time the server named (at most a week).
                if let Some(t) = f.not_before
                    && t > retry_at
                {
                    retry_at = t.min(now + 7 * 86_400);
                    retry_reason = Due::RetryAfterRateLimit;
                }
                phase = Phase::Failing {
                    failures,
                    at: retry_at,
                    why: retry_reason,
                    written,
                };
                log::warn(format_args!(
                    "acme: {e} (the certificate in force keeps serving; next try in {} s)",
                    retry_at.saturating_sub(now)
                ));
                tokio::task::block_in_place(|| {
                    ctl.record(
                        skua_audit::kind::TLS_FAILED,
                        "acme",
                        None,
                        serde_json::json!({"names": s.names, "error": e, "reason": f.kind.as_str()}),
                    )
                });
                let mut st = acme.status();
                st.failures += 1;
                *st.failures_by_reason
                    .entry(f.kind.as_str().to_string())
                    .or_default() += 1;
                st.last_error = Some(e);
                st.last_error_reason = Some(f.kind.as_str().to_string());
                // The retry shown with the failure, in one step.
                st.next_attempt = Some(retry_at);
                st.next_reason = retry_reason.as_str().into();
                st.renewal_info_next = None;
            }
        }
    }
}

/// The certificate `c` and the next attempt put in the status.
pub(super) fn show(st: &mut AcmeStatus, c: Option<&CertFacts>, due: u64, reason: Due) {
    if let Some(f) = c {
        st.not_before = Some(f.not_before);
        st.not_after = Some(f.not_after);
        st.names = f.names.clone();
    }
    st.next_attempt = Some(due);
    st.next_reason = reason.as_str().into();
}

/// Shows at once, before any order, that `profile:` names a profile the directory does
/// not list (the order would fail: the operator learns it now, not at renewal time).
pub(super) fn check_profile(acme: &Acme, acct: &Account, s: &AcmeSettings) {
    let Some(p) = &s.profile else { return };
    if let Err(f) = profile_offered(acct, p) {
        let mut st = acme.status();
        if st.last_error.is_none() {
            // The profile names come from the server: one bounded line, as its other text.
            let msg = crate::control::ha::printable_max(&f.msg, 512);
            log::warn(format_args!("acme: {msg}"));
            st.last_error = Some(msg);
            st.last_error_reason = Some(f.kind.as_str().to_string());
        }
    }
}
