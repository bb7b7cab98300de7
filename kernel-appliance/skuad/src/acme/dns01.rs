//! DNS-01 (RFC 8555 §8.4): the TXT record put into skuad's own data through the control
//! core's audited writes (skuad must answer for the name), and taken out after.

use std::sync::Arc;

use super::failure::Failure;
use crate::base::log;
use crate::control::{Change, Control};

/// Puts the TXT record of a DNS-01 challenge for `name` holding `value` (the key
/// authorization's digest); returns the record, to be taken out by [`remove`].
pub(super) async fn add(ctl: &Arc<Control>, name: &str, value: &str) -> Result<String, Failure> {
    let rr = format!("_acme-challenge.{name}. 60 IN TXT \"{value}\"");
    ctl.write(vec![Change::AddRecord { rr: rr.clone() }], "acme", None)
        .await
        .map_err(|e| Failure::from(format!("dns-01 record for {name}: {}", e.message())))?;
    Ok(rr)
}

/// Takes the records [`add`] put out again (a failure is logged: the order's outcome does
/// not depend on it).
pub(super) async fn remove(ctl: &Arc<Control>, records: Vec<String>) {
    for rr in records {
        if let Err(e) = ctl
            .write(vec![Change::RemoveRecord { rr: rr.clone() }], "acme", None)
            .await
        {
            log::warn(format_args!("acme: removing {rr}: {}", e.message()));
        }
    }
}

/// Takes out the DNS-01 records for `names` an order left when a stop cut it short: API
/// TXT records at `_acme-challenge.NAME.`.
pub(super) async fn remove_stale(ctl: &Arc<Control>, names: &[String]) {
    let stale: Vec<String> = ctl
        .view()
        .local_data
        .iter()
        .filter(|r| {
            r.origin.source == "api"
                && r.rr.split_whitespace().nth(3) == Some("TXT")
                && names
                    .iter()
                    .any(|n| r.rr.starts_with(&format!("_acme-challenge.{n}.")))
        })
        .map(|r| r.rr.clone())
        .collect();
    remove(ctl, stale).await;
}
