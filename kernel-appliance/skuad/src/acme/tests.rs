use super::client::*;
use super::failure::*;
use super::files::*;
use super::order::*;
use super::schedule::*;
use super::*;
use crate::control::tls::CertFacts;
use std::time::{Duration, UNIX_EPOCH};

fn problem(kind: &str, detail: &str) -> instant_acme::Error {
    let p: instant_acme::Problem =
        serde_json::from_value(serde_json::json!({"type": kind, "detail": detail, "status": 429}))
            .unwrap();
    instant_acme::Error::Api(p)
}

#[test]
fn failures_are_classified_by_problem_type() {
    // Let's Encrypt's wording of a rate limit (RFC 8555 §6.7 type).
    let f = classify(
        "new order",
        &problem(
            "urn:ietf:params:acme:error:rateLimited",
            "too many certificates (5) already issued for this exact set of identifiers in the last 168h0m0s, retry after 2025-01-02 03:04:05 UTC: see https://letsencrypt.org/docs/rate-limits/",
        ),
    );
    assert_eq!(f.kind, FailureKind::RateLimited);
    assert!(f.msg.starts_with("rate-limited: new order: "), "{}", f.msg);
    // 2025-01-02T03:04:05Z
    assert_eq!(f.not_before, Some(1_735_787_045));
    // Without a time in the detail: the back-off alone.
    let f = classify(
        "new order",
        &problem("urn:ietf:params:acme:error:rateLimited", "slow down"),
    );
    assert_eq!((f.kind, f.not_before), (FailureKind::RateLimited, None));
    let f = classify(
        "new order",
        &problem(
            "urn:ietf:params:acme:error:invalidProfile",
            "unrecognized profile",
        ),
    );
    assert_eq!(f.kind, FailureKind::Profile);
    let f = classify(
        "validation",
        &problem("urn:ietf:params:acme:error:unauthorized", "no"),
    );
    assert_eq!(f.kind, FailureKind::AcmeServer);
    assert!(f.msg.starts_with("validation: "), "{}", f.msg);
    let f = classify("account", &instant_acme::Error::Str("network"));
    assert_eq!(f.kind, FailureKind::Other);
    assert_eq!(Failure::from("x").kind, FailureKind::Other);
}

#[test]
fn retry_after_in_a_problem_detail() {
    assert_eq!(
        retry_after_in_detail("retry after 1970-01-01 00:00:00 UTC"),
        Some(0)
    );
    assert_eq!(
        retry_after_in_detail("Retry after 2000-03-01 00:00:01 UTC: see"),
        Some(951_868_801)
    );
    // Malformed or absent: no time, never a panic.
    for d in [
        "",
        "retry after",
        "retry after 2025-13-01 00:00:00 UTC",
        "retry after 2025-01-01T00:00:00 UTC",
        "retry after 2025-01-01 00:00:00 CET",
        "retry after 2025-01-01 00:00:0",
        "retry after 2025-01-01 0x:00:00 UTC",
        "retry after +025-01-01 00:00:00 UTC",
        "retry after ĳĳĳĳĳĳĳĳĳĳ UTC",
    ] {
        assert_eq!(retry_after_in_detail(d), None, "{d}");
    }
}

#[test]
fn a_time_inside_the_window_and_the_next_check() {
    for _ in 0..1000 {
        let t = pick_in(100, 160);
        assert!((100..=160).contains(&t));
    }
    // A one-second window, and one reversed (never a panic; the caller refuses it).
    assert_eq!(pick_in(5, 5), 5);
    assert_eq!(pick_in(9, 5), 9);
    // Retry-After held between 1 minute and 6 hours, never after the renewal time.
    assert_eq!(next_check(1000, 0, 1_000_000), 1060);
    assert_eq!(next_check(1000, 600, 1_000_000), 1600);
    assert_eq!(next_check(1000, 86_400, 1_000_000), 1000 + 6 * 3600);
    assert_eq!(next_check(1000, 86_400, 5000), 5000);
    assert_eq!(next_check(1000, 86_400, 1010), 1060);
}

/// A local HTTP server answering every request with `retry_after` and `body_len` bytes:
/// its address.
async fn hostile_server(retry_after: &'static str, body_len: usize) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = l.accept().await {
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req| async move {
                    let mut r = hyper::Response::new(http_body_util::Full::new(
                        hyper::body::Bytes::from(vec![b'x'; body_len]),
                    ));
                    r.headers_mut().insert(
                        hyper::header::RETRY_AFTER,
                        hyper::header::HeaderValue::from_static(retry_after),
                    );
                    Ok::<_, std::convert::Infallible>(r)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

async fn fetch(addr: SocketAddr) -> Result<instant_acme::BytesResponse, instant_acme::Error> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<hyper::body::Bytes>>();
    let rsp = client
        .get(format!("http://{addr}/").parse().unwrap())
        .await
        .unwrap();
    guard_response(rsp).await
}

#[tokio::test]
async fn a_hostile_retry_after_and_a_huge_body_over_http() {
    // u64::MAX seconds: instant-acme would add it to the clock and panic; it is cut to
    // a week before instant-acme sees it.
    let addr = hostile_server("18446744073709551615", 100).await;
    let mut r = fetch(addr).await.unwrap();
    assert_eq!(r.parts.headers[hyper::header::RETRY_AFTER], "604800");
    assert_eq!(r.body.into_bytes().await.unwrap().len(), 100);
    // A body of 1 MiB passes; one byte more is an error, not read on.
    let addr = hostile_server("5", MAX_BODY).await;
    let mut r = fetch(addr).await.unwrap();
    assert_eq!(r.parts.headers[hyper::header::RETRY_AFTER], "5");
    assert_eq!(r.body.into_bytes().await.unwrap().len(), MAX_BODY);
    let addr = hostile_server("5", 8 * MAX_BODY).await;
    let e = fetch(addr)
        .await
        .err()
        .expect("a body above 1 MiB is refused");
    assert!(e.to_string().contains("larger than 1 MiB"), "{e}");
    // Neither a number nor a date: removed.
    let addr = hostile_server("soon", 10).await;
    let r = fetch(addr).await.unwrap();
    assert!(r.parts.headers.get(hyper::header::RETRY_AFTER).is_none());
}

#[test]
fn retry_after_values_made_safe() {
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let run = |vals: &[&str]| {
        let mut h = hyper::HeaderMap::new();
        for v in vals {
            h.append(
                hyper::header::RETRY_AFTER,
                hyper::header::HeaderValue::from_str(v).unwrap(),
            );
        }
        sane_retry_after(&mut h, now);
        h.get(hyper::header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let week = Some("604800".to_string());
    assert_eq!(run(&["3600"]), Some("3600".into()));
    assert_eq!(run(&["604800"]), week);
    assert_eq!(run(&["604801"]), week);
    assert_eq!(run(&["18446744073709551615"]), week);
    assert_eq!(run(&["99999999999999999999999999"]), week);
    // Dates: near ones kept, far ones cut to a week, past ones kept (instant-acme
    // treats them as now).
    assert_eq!(
        run(&["Wed, 15 Nov 2023 00:00:00 GMT"]),
        Some("Wed, 15 Nov 2023 00:00:00 GMT".into())
    );
    assert_eq!(run(&["Fri, 31 Dec 9999 23:59:59 GMT"]), week);
    assert_eq!(
        run(&["Thu, 01 Jan 1970 00:00:00 GMT"]),
        Some("Thu, 01 Jan 1970 00:00:00 GMT".into())
    );
    // Not a value of RFC 9110 §10.2.3, or two of them: removed.
    for v in ["", "-1", "+5", "1.5", "soon", "5 s"] {
        assert_eq!(run(&[v]), None, "{v:?}");
    }
    assert_eq!(run(&["5", "6"]), None);
    assert_eq!(run(&[]), None);
}

fn facts(not_before: u64, not_after: u64) -> CertFacts {
    CertFacts {
        names: vec!["a.example".into()],
        serial: "01".into(),
        issuer: String::new(),
        not_before,
        not_after,
    }
}

#[test]
fn an_ari_time_is_bounded_by_the_age_and_the_expiry() {
    let day = 86_400;
    // A 90-day certificate issued by this task at 1000: a window already past asks for
    // now, held until an hour after the issuance (a revoked one is replaced soon, a
    // server's mistake cannot start order after order), and that is said.
    let f = facts(1000, 1000 + 90 * day);
    assert_eq!(ari_due(0, 1010, &f, Some(1000)), (1000 + 3600, true));
    // Not issued by this task (found at start, or an operator's): no floor.
    assert_eq!(ari_due(0, 1010, &f, None), (1010, false));
    // Past the floor, the pick as it is.
    assert_eq!(
        ari_due(1000 + 60 * day, 1010, &f, Some(1000)),
        (1000 + 60 * day, false)
    );
    // A window sliding past the expiry: at most 9 days (a tenth) before it.
    assert_eq!(
        ari_due(1000 + 95 * day, 1010, &f, None),
        (1000 + 81 * day, false)
    );
    // A short certificate: the floor is an hour, the expiry bound an hour too.
    let f = facts(0, 10 * 3600);
    assert_eq!(ari_due(0, 10, &f, Some(0)), (3600, true));
    assert_eq!(ari_due(10 * 3600, 10, &f, Some(0)), (9 * 3600, false));
    // Shorter than three hours (pebble's 60 s): a third of the lifetime each side.
    let f = facts(100, 160);
    assert_eq!(ari_due(130, 110, &f, Some(100)), (130, false));
    assert_eq!(ari_due(100, 110, &f, Some(100)), (120, true));
    assert_eq!(ari_due(155, 110, &f, None), (140, false));
    // Never in the past.
    assert_eq!(ari_due(100, 150, &f, Some(100)), (150, false));
}

#[test]
fn renewal_information_errors_back_off() {
    let h = 3600;
    let waits: Vec<u64> = (1..=8).map(|n| ari_retry(n, None)).collect();
    assert_eq!(
        waits,
        [h, 2 * h, 4 * h, 8 * h, 16 * h, 24 * h, 24 * h, 24 * h]
    );
    assert_eq!(ari_retry(u32::MAX, None), 24 * h);
    // A 429's or 503's Retry-After, held between a minute and a day.
    assert_eq!(ari_retry(1, Some(300)), 300);
    assert_eq!(ari_retry(5, Some(300)), 300);
    assert_eq!(ari_retry(1, Some(0)), 60);
    assert_eq!(ari_retry(1, Some(u64::MAX)), 24 * h);
}

#[test]
fn only_a_refusal_of_replaces_orders_without_it() {
    let p = |kind: &str, status: u16, detail: &str| {
        instant_acme::Error::Api(
            serde_json::from_value(
                serde_json::json!({"type": kind, "detail": detail, "status": status}),
            )
            .unwrap(),
        )
    };
    // RFC 9773 §5.
    assert!(refused_replaces(&p(
        "urn:ietf:params:acme:error:alreadyReplaced",
        409,
        "certificate with serial 01 already has a replacement order"
    )));
    // pebble 2.10, a certificate it does not know.
    assert!(refused_replaces(&p(
        "urn:ietf:params:acme:error:serverInternal",
        500,
        "could not find an order for the given certificate: not found"
    )));
    // Not found (Boulder).
    assert!(refused_replaces(&p(
        "urn:ietf:params:acme:error:malformed",
        404,
        "request included `replaces` field, but no current certificate with serial \"01\" exists"
    )));
    // Anything else is a failure like any other.
    for e in [
        p("urn:ietf:params:acme:error:rateLimited", 429, "slow down"),
        p("urn:ietf:params:acme:error:invalidProfile", 400, "no"),
        p("urn:ietf:params:acme:error:serverInternal", 500, "oops"),
        instant_acme::Error::Str("network"),
        instant_acme::Error::Other("replaces field mismatch: expected a, found b".into()),
    ] {
        assert!(!refused_replaces(&e), "{e}");
    }
}

/// An AcmeHttp for `addr` (a test server) trusting a throw-away certificate: what
/// matters is what happens before any TLS.
fn client_for_tests(timeout: Duration) -> (AcmeHttp, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, cert.pem()).unwrap();
    let mut c = AcmeHttp::new(Some(&ca)).unwrap();
    c.timeout = timeout;
    (c, dir)
}

#[tokio::test]
async fn a_stalled_acme_server_times_out() {
    use instant_acme::HttpClient as _;
    // Accepts, and says nothing (not even the TLS handshake).
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = l.accept().await {
            conns.push(c);
        }
    });
    let (c, _dir) = client_for_tests(Duration::from_secs(1));
    let req = hyper::Request::get(format!("https://{addr}/dir"))
        .body(instant_acme::BodyWrapper::default())
        .unwrap();
    let t = std::time::Instant::now();
    let e = c.request(req).await.err().expect("no answer is an error");
    assert!(e.to_string().contains("did not answer in 1 s"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
    held.abort();
}

fn settings_of(text: &str, base: &Path) -> Result<Option<AcmeSettings>, String> {
    let cfg = skua_config::parse_str(text, "t.conf").map_err(|e| e.to_string())?;
    AcmeSettings::from_config(&cfg, Some(base))
}

/// The files ACME writes are in the configuration or the data directory, and a clause
/// without the TLS service files is refused (checked at start, at reloads and on a sync
/// source's version alike: `Reconfigure::prepare`).
#[test]
fn acme_writes_only_in_the_configuration_and_data_directories() {
    let d = tempfile::tempdir().unwrap();
    let (conf, data) = (d.path().join("conf"), d.path().join("data"));
    let text = |server: &str, acme: &str| {
        format!(
            "server:\n{server}api:\n  state-file: \"{}\"\nacme:\n  directory: https://acme.example/dir\n  name: dns.example\n{acme}",
            data.join("state.conf").display()
        )
    };
    let both = "  tls-service-pem: tls/cert.pem\n  tls-service-key: tls/key.pem\n";
    let s = settings_of(&text(both, ""), &conf).unwrap().unwrap();
    assert_eq!(s.account_file, conf.join("tls/acme-account.json"));
    let in_data = format!("  account-file: \"{}\"\n", data.join("a.json").display());
    assert!(settings_of(&text(both, &in_data), &conf).is_ok());
    for (server, acme, want) in [
        (
            both,
            "  account-file: /etc/passwd\n",
            "t.conf:9: acme: account-file: /etc/passwd is outside",
        ),
        (both, "  account-file: ../x.json\n", "account-file:"),
        (both, "  account-file: tls/../../x.json\n", "account-file:"),
        (
            "  tls-service-pem: tls/cert.pem\n  tls-service-key: /etc/ssl/x.key\n",
            "",
            "t.conf:3: tls-service-key: /etc/ssl/x.key is outside",
        ),
        ("", "", "set both"),
        ("  tls-service-pem: tls/cert.pem\n", "", "set both"),
    ] {
        let e = settings_of(&text(server, acme), &conf)
            .map(|_| ())
            .unwrap_err();
        assert!(e.contains(want), "{server:?} {acme:?}: {e}");
    }
}

fn settings_with_account(account_file: PathBuf) -> AcmeSettings {
    AcmeSettings {
        // Nothing listens there: an attempt to reach the server fails at once.
        directory: "https://127.0.0.1:9/dir".into(),
        contacts: vec![],
        names: vec!["dns.example".into()],
        challenge: skua_config::AcmeChallenge::Http01,
        http_interface: SocketAddr::from(([127, 0, 0, 1], 0)),
        ca_bundle: None,
        cert: account_file.with_file_name("cert.pem"),
        key: account_file.with_file_name("key.pem"),
        account_file,
        profile: None,
    }
}

/// An account file as skuad writes it (instant-acme's credentials) for `directory`.
fn account_json(directory: &str) -> String {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    serde_json::json!({
        "id": "https://acme.example/acct/1",
        "key_pkcs8": data_encoding::BASE64URL_NOPAD.encode(&key.serialize_der()),
        "directory": directory,
    })
    .to_string()
}

/// Issue 28, finding 1: the account code renamed whatever was at `account-file:` to
/// `NAME.previous` before it reached the ACME server. A file it did not write is now
/// an error naming it, and stays as it was; so does a foreign file at `.previous`.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_acme_did_not_write_is_never_renamed_or_replaced() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim.conf");
    std::fs::write(&victim, "precious\n").unwrap();
    let e = account(&settings_with_account(victim.clone()), None)
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(e.msg.contains("is not an ACME account file"), "{}", e.msg);
    assert!(e.msg.contains(&victim.display().to_string()), "{}", e.msg);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!d.path().join("victim.conf.previous").exists());
    // JSON that is not an account (no key) is not one either.
    let json = d.path().join("other.json");
    std::fs::write(&json, "{\"directory\": \"https://other.example/dir\"}").unwrap();
    let e = account(&settings_with_account(json.clone()), None)
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(e.msg.contains("is not an ACME account file"), "{}", e.msg);
    assert!(!d.path().join("other.json.previous").exists());
    // Not a regular file: refused without reading it (a FIFO would block).
    let e = account(&settings_with_account(d.path().to_path_buf()), None)
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(e.msg.contains("is not an ACME account file"), "{}", e.msg);
    // skuad's own account for another directory is kept as .previous, but not over
    // a file skuad did not write.
    let acct = d.path().join("acct.json");
    let ours = account_json("https://other.example/dir");
    std::fs::write(&acct, &ours).unwrap();
    std::fs::write(d.path().join("acct.json.previous"), "precious\n").unwrap();
    let e = account(&settings_with_account(acct.clone()), None)
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(
        e.msg
            .contains("acct.json.previous is not an ACME account file"),
        "{}",
        e.msg
    );
    assert_eq!(std::fs::read_to_string(&acct).unwrap(), ours);
    assert_eq!(
        std::fs::read_to_string(d.path().join("acct.json.previous")).unwrap(),
        "precious\n"
    );
    // Without that file it is moved aside (then the unreachable server fails the
    // attempt, and no account file is written).
    std::fs::remove_file(d.path().join("acct.json.previous")).unwrap();
    assert!(
        account(&settings_with_account(acct.clone()), None)
            .await
            .is_err()
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("acct.json.previous")).unwrap(),
        ours
    );
    assert!(!acct.exists());
}

/// The certificate and key replace only PEM files of their kind.
#[test]
fn a_certificate_or_key_replaces_only_its_own_kind() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f");
    assert!(replaceable(&p, Pem::Key).is_ok(), "nothing there");
    std::fs::write(&p, "precious\n").unwrap();
    for kind in [Pem::Key, Pem::Certificates] {
        let e = replaceable(&p, kind).unwrap_err();
        assert!(e.contains("is not a PEM"), "{e}");
    }
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    std::fs::write(&p, key.serialize_pem()).unwrap();
    assert!(replaceable(&p, Pem::Key).is_ok());
    assert!(replaceable(&p, Pem::Certificates).is_err());
    let cert = rcgen::CertificateParams::new(vec!["dns.example".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(&p, cert.pem()).unwrap();
    assert!(replaceable(&p, Pem::Certificates).is_ok());
}

/// Issue 28, finding 11(a): the CSR carries the first name as its subject's CN (a CA
/// that copies the subject issues a certificate kdig accepts) and every name as a SAN.
#[test]
fn the_request_names_the_first_name_in_its_subject() {
    use x509_parser::prelude::*;
    let cn_of = |names: &[&str]| {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let (der, key_pem) = csr(&names).unwrap();
        assert!(key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let (_, req) = X509CertificationRequest::from_der(&der).unwrap();
        let info = &req.certification_request_info;
        let cn: Vec<String> = info
            .subject
            .iter_common_name()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let mut sans = Vec::new();
        for ext in req.requested_extensions().into_iter().flatten() {
            if let ParsedExtension::SubjectAlternativeName(san) = ext {
                for g in &san.general_names {
                    if let GeneralName::DNSName(n) = g {
                        sans.push(n.to_string());
                    }
                }
            }
        }
        assert_eq!(sans, names);
        cn
    };
    assert_eq!(
        cn_of(&["dns.example.net", "doh.example.net"]),
        ["dns.example.net"]
    );
    // A name longer than a CN may be (64 octets) is a SAN only; the next that fits is CN.
    let long = format!("{}.example.net", "a".repeat(60));
    assert_eq!(cn_of(&[&long, "dns.example.net"]), ["dns.example.net"]);
    assert!(cn_of(&[&long]).is_empty());
}
