//! One order (RFC 8555 §7.4): account, authorizations and their challenges, finalization
//! with our own request, the files written, the reload that puts them in force.

use std::sync::Arc;
use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, CertificateIdentifier, ChallengeType, Identifier, NewOrder,
    OrderStatus, RetryPolicy,
};

use super::alpn::alpn_certificate;
use super::client::account;
use super::dns01;
use super::failure::{Failure, FailureKind, Written, classify, refused_replaces};
use super::files::{install, read_cert};
use super::responder::http_server;
use super::{Acme, AcmeSettings};
use crate::base::log;
use crate::control::Control;

/// The most one order takes, account to certificate (challenges validated by the server
/// included; pebble and Let's Encrypt take seconds): a stalled server must not hold the
/// task (and POST /tls/renew) for ever.
pub(super) const ISSUE_TIMEOUT: Duration = Duration::from_secs(600);

/// One order: account, authorizations, challenges, finalization, the files written, a
/// reload to serve them.
pub(super) async fn issue(
    ctl: &Arc<Control>,
    acme: &Arc<Acme>,
    s: &AcmeSettings,
    replaces: Option<CertificateIdentifier<'static>>,
) -> Result<Option<String>, Failure> {
    // One deadline for the whole order; the challenges are taken down whatever comes of it.
    let deadline = tokio::time::Instant::now() + ISSUE_TIMEOUT;
    let late = || {
        Failure::from(format!(
            "no certificate after {} minutes (the ACME server stalled?)",
            ISSUE_TIMEOUT.as_secs() / 60
        ))
    };
    let account = tokio::time::timeout_at(deadline, account(s, None))
        .await
        .map_err(|_| late())??;
    if let Some(p) = &s.profile {
        profile_offered(&account, p)?;
    }
    let ids: Vec<Identifier> = s.names.iter().map(|n| Identifier::Dns(n.clone())).collect();
    let new_order = |replaces: Option<CertificateIdentifier<'static>>| {
        let mut o = NewOrder::new(&ids);
        if let Some(p) = &s.profile {
            o = o.profile(p);
        }
        if let Some(r) = replaces {
            o = o.replaces(r);
        }
        o
    };
    let first = tokio::time::timeout_at(deadline, account.new_order(&new_order(replaces.clone())))
        .await
        .map_err(|_| late())?;
    let mut order = match first {
        Ok(o) => o,
        // RFC 9773 §5: a server refuses `replaces` for a certificate already replaced, or
        // one it does not know (after a change of CA, say): the renewal is still wanted, so
        // it is ordered once more without it. Any other refusal is not one of `replaces`.
        Err(e) if replaces.is_some() && refused_replaces(&e) => {
            let f = classify("new order", &e);
            log::warn(format_args!(
                "acme: the order replacing the certificate in force was refused ({}); ordering without 'replaces'",
                crate::control::ha::printable_max(&f.msg, 256)
            ));
            tokio::time::timeout_at(deadline, account.new_order(&new_order(None)))
                .await
                .map_err(|_| late())?
                .map_err(|e| classify("new order", &e))?
        }
        Err(e) => return Err(classify("new order", &e)),
    };
    // What the server's order object says it replaces (shown once the order succeeds).
    let replaced = order.state().replaces.as_ref().map(|r| r.to_string());
    // HTTP-01: the tokens are served while the order is validated.
    let server = if s.challenge == skua_config::AcmeChallenge::Http01 {
        Some(http_server(s.http_interface, acme.clone()).await?)
    } else {
        None
    };
    let mut added: Vec<String> = Vec::new();
    let mut alpn_names: Vec<String> = Vec::new();
    let result = tokio::time::timeout_at(deadline, async {
        let mut auths = order.authorizations();
        while let Some(a) = auths.next().await {
            let mut a = a.map_err(|e| classify("authorization", &e))?;
            match a.status {
                AuthorizationStatus::Pending => {}
                AuthorizationStatus::Valid => continue,
                other => return Err(Failure::from(format!("authorization {other:?}"))),
            }
            let kind = match s.challenge {
                skua_config::AcmeChallenge::Dns01 => ChallengeType::Dns01,
                skua_config::AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
                skua_config::AcmeChallenge::Http01 => ChallengeType::Http01,
            };
            let mut ch = a
                .challenge(kind.clone())
                .ok_or_else(|| Failure::from(format!("the server offers no {kind:?} challenge")))?;
            let ka = ch.key_authorization();
            match kind {
                ChallengeType::Dns01 => {
                    let name = ours(&ch.identifier().to_string(), &s.names)?;
                    added.push(dns01::add(ctl, &name, &ka.dns_value()).await?);
                }
                ChallengeType::TlsAlpn01 => {
                    let name = ours(&ch.identifier().to_string(), &s.names)?;
                    let cert = alpn_certificate(&name, ka.digest().as_ref())?;
                    crate::base::tls::alpn_challenges()
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(name.clone(), cert);
                    alpn_names.push(name);
                }
                _ => acme
                    .http_tokens
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((ch.token.clone(), ka.as_str().to_string())),
            }
            ch.set_ready()
                .await
                .map_err(|e| classify("challenge", &e))?;
        }
        let status = order
            .poll_ready(&RetryPolicy::default())
            .await
            .map_err(|e| classify("validation", &e))?;
        if status != OrderStatus::Ready {
            return Err(Failure::from(format!("the order is {status:?}, not ready")));
        }
        // Our own CSR, the first name in its subject (instant-acme's leaves it empty).
        let (csr_der, key_pem) = csr(&s.names)?;
        order
            .finalize_csr(&csr_der)
            .await
            .map_err(|e| classify("finalize", &e))?;
        let cert_pem = order
            .poll_certificate(&RetryPolicy::default())
            .await
            .map_err(|e| classify("certificate", &e))?;
        Ok::<_, Failure>((cert_pem, key_pem))
    })
    .await
    .unwrap_or_else(|_| Err(late()));
    // Challenges taken down whatever came of it.
    acme.http_tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    if let Some(server) = server {
        server.abort();
    }
    {
        let mut m = crate::base::tls::alpn_challenges()
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for n in &alpn_names {
            m.remove(n);
        }
    }
    dns01::remove(ctl, added).await;
    let (cert_pem, key_pem) = result?;
    install(s, &cert_pem, &key_pem)?;
    let (_, f) = read_cert(&s.cert).ok_or("the certificate received does not parse")?;
    let (nb, na) = (f.not_before, f.not_after);
    tokio::task::block_in_place(|| {
        ctl.record(
            skua_audit::kind::TLS_ISSUED,
            "acme",
            None,
            serde_json::json!({"names": s.names, "not_before": nb, "not_after": na, "serial": f.serial}),
        )
    });
    put_in_force(ctl).await.map_err(|e| Failure {
        written: Some(Written {
            replaced: replaced.clone(),
        }),
        ..Failure::from(e)
    })?;
    log::info(format_args!(
        "acme: certificate for {} issued, valid until {na} (Unix), in force",
        s.names.join(", ")
    ));
    Ok(replaced)
}

/// The reload that serves the certificate written (a failure names why: another part of
/// the configuration, say; the next attempt reloads again, without a new order).
pub(super) async fn put_in_force(ctl: &Arc<Control>) -> Result<(), String> {
    ctl.reload("acme", None)
        .await
        .map(|_| ())
        .map_err(|e| format!("{RELOAD_FAILED}{}", e.message()))
}

/// How a failure of [`put_in_force`] begins.
const RELOAD_FAILED: &str = "the new certificate is written but did not load: ";

/// The profile asked for must be one the directory lists (draft-ietf-acme-profiles §3):
/// an error naming it and the ones offered otherwise.
pub(super) fn profile_offered(acct: &Account, profile: &str) -> Result<(), Failure> {
    let mut offered: Vec<&str> = acct.profiles().map(|p| p.name).collect();
    if offered.contains(&profile) {
        return Ok(());
    }
    offered.sort_unstable();
    Err(Failure {
        kind: FailureKind::Profile,
        msg: if offered.is_empty() {
            format!("profile '{profile}': the ACME server offers no profiles (remove profile:)")
        } else {
            format!(
                "profile '{profile}': the ACME server does not offer it (it offers: {})",
                offered.join(", ")
            )
        },
        not_before: None,
        written: None,
    })
}

/// Longest common name (RFC 5280, appendix A.1: `ub-common-name` is 64).
pub(super) const MAX_COMMON_NAME: usize = 64;

/// A certificate signing request (PKCS #10, RFC 2986) for `names` with a new ECDSA P-256
/// key: DER, and the key as PEM. Every name is a subjectAltName, and the first that fits
/// in a common name (64 octets) is the subject's CN too: a CA that copies the request's
/// subject (step-ca) otherwise issues a certificate with an empty subject, which some
/// clients refuse (kdig 3.2 with GnuTLS: "handshake failed"). Let's Encrypt does the same
/// with the names it is given (its `classic` profile's CN is the first name that fits).
pub fn csr(names: &[String]) -> Result<(Vec<u8>, String), String> {
    let mut params = rcgen::CertificateParams::new(names.to_vec())
        .map_err(|e| format!("the certificate request: {e}"))?;
    let mut dn = rcgen::DistinguishedName::new();
    if let Some(cn) = names.iter().find(|n| n.len() <= MAX_COMMON_NAME) {
        dn.push(rcgen::DnType::CommonName, cn.as_str());
    }
    params.distinguished_name = dn;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| format!("the certificate key: {e}"))?;
    let req = params
        .serialize_request(&key)
        .map_err(|e| format!("the certificate request: {e}"))?;
    Ok((req.der().to_vec(), key.serialize_pem()))
}

/// The configured name an authorization is for: the server's identifier must be one of
/// `names` (it goes into a record and a certificate: nothing the server sends is taken
/// as it is).
pub(super) fn ours(identifier: &str, names: &[String]) -> Result<String, String> {
    let id = identifier.trim_end_matches('.').to_ascii_lowercase();
    names
        .iter()
        .find(|n| **n == id)
        .cloned()
        .ok_or_else(|| "the server asked to validate a name that was not ordered".to_string())
}
