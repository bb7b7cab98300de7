//! Fuzz target: the DNS over HTTPS request checks (`skua_engine::doh`) and the freshness
//! reader of answers.
//!
//! The input is a request as a client would send it: one byte choosing the method, the
//! request target up to a NUL byte, the `Content-Type` up to the next NUL, then the body.
//! Properties: nothing panics; a query `check_target` takes from a GET is between a DNS
//! header and 65535 octets and, whenever a strict base64url decoder (data-encoding's)
//! takes the `dns` parameter, is exactly what it decodes; every refusal maps to a 4xx
//! status; `max_age` on any bytes ends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skua_engine::doh::{self, Method};

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else {
        return;
    };
    let method = match m % 3 {
        0 => Method::Get,
        1 => Method::Post,
        _ => Method::Other,
    };
    let mut parts = rest.splitn(3, |&b| b == 0);
    let target = parts.next().unwrap_or(&[]);
    let ctype = parts.next();
    let body = parts.next().unwrap_or(&[]);
    let Ok(target) = std::str::from_utf8(target) else {
        return;
    };
    match doh::check_target(method, target, "/dns-query") {
        Ok(Some(q)) => {
            assert_eq!(method, Method::Get);
            assert!(q.len() >= 12 && q.len() <= 65535);
            assert!(doh::check_query(&q).is_ok());
            let param = target
                .split_once('?')
                .and_then(|(_, p)| p.split('&').find_map(|p| p.strip_prefix("dns=")))
                .expect("a query without a dns parameter");
            let strict = data_encoding::BASE64URL_NOPAD.decode(param.trim_end_matches('=').as_bytes());
            if let Ok(s) = strict {
                assert_eq!(s, q, "decoders disagree on {param:?}");
            }
        }
        Ok(None) => {
            assert_eq!(method, Method::Post);
            if doh::check_post(ctype, Some(body.len() as u64)).is_ok() {
                let _ = doh::check_query(body);
            }
        }
        Err(r) => {
            assert!((400..500).contains(&r.status()), "{r:?}");
            if r == doh::Refusal::BadBase64 {
                let param = target
                    .split_once('?')
                    .and_then(|(_, p)| p.split('&').find_map(|p| p.strip_prefix("dns=")))
                    .unwrap_or("");
                let strict =
                    data_encoding::BASE64URL_NOPAD.decode(param.trim_end_matches('=').as_bytes());
                assert!(strict.is_err(), "refused what a strict decoder takes: {param:?}");
            }
        }
    }
    if let Err(r) = doh::check_post(ctype, None) {
        assert!((400..500).contains(&r.status()));
    }
    let _ = doh::max_age(body);
});
