//! The daemon's part of the secret-leak check: the fingerprints of each connector's secret it
//! read this run (never the secret), the journal's `secret.leak` entries, and the check of a
//! call's arguments for another connector's secret (the model pasting one server's token into
//! another's tool).
//!
//! Must never: keep a secret (only `leak::Matcher`s), or write a secret, a form of it or the
//! text it was found in to the journal or a log.

use std::collections::HashSet;
use std::sync::Arc;

use crate::daemon::Shared;
use crate::daemon::dispatch::{SessionNext, report, violation};
use crate::ipc::LeakWithheld;
use crate::journal::{Fields, Kind};
use crate::leak::{Encoding, Fingerprints, Hit, Matcher, View};

/// The fingerprints a session's relay is handed for `secret`, remembered (as a scanner) for
/// the arguments of other connectors' calls; `None`, and the connector forgotten, when the
/// secret is too short to check or no key can be drawn.
pub(crate) fn fingerprints_for(
    state: &Shared,
    connector: &str,
    secret: &crate::vault::Secret,
) -> Option<Fingerprints> {
    let made = crate::leak::fingerprint(secret.expose().as_bytes());
    let matcher = made.as_ref().ok().and_then(Matcher::new);
    if let Ok(mut m) = state.leaks.lock() {
        match matcher {
            Some(matcher) => {
                m.insert(connector.to_string(), Arc::new(matcher));
            }
            None => {
                m.remove(connector);
            }
        }
    }
    match made {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!("connector {connector}: {e}");
            None
        }
    }
}

/// Forgets a connector's fingerprints (its registration was removed or replaced).
pub(crate) fn forget(state: &Shared, connector: &str) {
    if let Ok(mut m) = state.leaks.lock() {
        m.remove(connector);
    }
}

/// Why a call to `connector` must be refused: its arguments carry another connector's secret,
/// or they were too large to be sent and so cannot be checked while another connector's
/// secret is known. `None` lets the rules decide. Also says which connector and form, for
/// the journal.
pub(crate) struct ArgumentsLeak {
    pub(crate) reason: String,
    pub(crate) secret_of: Option<String>,
    pub(crate) hit: Option<Hit>,
}

pub(crate) fn in_arguments(
    state: &Shared,
    connector: &str,
    arguments: Option<&str>,
    omitted: bool,
) -> Option<ArgumentsLeak> {
    let others: Vec<(String, Arc<Matcher>)> = state
        .leaks
        .lock()
        .ok()?
        .iter()
        .filter(|(name, _)| name.as_str() != connector)
        .map(|(name, m)| (name.clone(), Arc::clone(m)))
        .collect();
    if others.is_empty() {
        return None;
    }
    let Some(arguments) = arguments else {
        return omitted.then(|| ArgumentsLeak {
            reason: format!(
                "Holdcall refused this call: its arguments are over {} bytes, too large to check \
                 for the secrets of other connectors ({}) before they reach this server",
                crate::limits::ARGUMENTS_BYTES_MAX,
                names(&others)
            ),
            secret_of: None,
            hit: None,
        });
    };
    others.iter().find_map(|(name, m)| {
        m.find(arguments.as_bytes()).map(|hit| ArgumentsLeak {
            reason: format!(
                "Holdcall refused this call: its arguments carry connector {name}'s secret ({}); \
                 one server's credential is never sent to another. Do not retry with it.",
                hit.describe()
            ),
            secret_of: Some(name.clone()),
            hit: Some(hit),
        })
    })
}

fn names(others: &[(String, Arc<Matcher>)]) -> String {
    let mut n: Vec<&str> = others.iter().map(|(name, _)| name.as_str()).collect();
    n.sort_unstable();
    n.join(", ")
}

/// Journals the refusal of a call whose arguments carry another connector's secret.
pub(crate) async fn record_arguments_leak(
    state: &Shared,
    session_id: &str,
    seq: i64,
    (connector, tool): (&str, &str),
    leak: &ArgumentsLeak,
) -> Result<(), String> {
    let detail = serde_json::json!({
        "direction": "arguments",
        "secret_of": leak.secret_of,
        "encoding": leak.hit.map(|h| h.encoding.as_str()),
        "view": leak.hit.map(|h| h.view.as_str()),
        "action": "call-refused",
    });
    let fields = Fields {
        session_id: Some(session_id.to_string()),
        seq: Some(seq),
        connector: Some(connector.to_string()),
        tool: Some(tool.to_string()),
        reason: Some(leak.reason.clone()),
        detail: Some(detail.to_string()),
        ..Fields::default()
    };
    state
        .writer
        .append(Kind::SecretLeak, fields)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// `secret.leak` from a relay: a server line carried its own injected secret and was withheld.
pub(crate) async fn result_leak(
    state: &Shared,
    conn: &crate::daemon::dispatch::ConnCtx,
    owned: &HashSet<String>,
    session_id: String,
    seq: Option<i64>,
    (encoding, view, withheld): (Encoding, View, LeakWithheld),
) -> SessionNext {
    let connector = state
        .sessions
        .lock()
        .ok()
        .and_then(|s| s.get(&session_id).map(|s| s.connector.clone()));
    let Some(connector) = connector else {
        return violation("that session has ended");
    };
    let hit = Hit { encoding, view };
    let reason = match (withheld, seq) {
        (LeakWithheld::Answer, Some(seq)) => format!(
            "the answer to call {seq} carried connector {connector}'s own secret ({}); the client \
             got an error instead",
            hit.describe()
        ),
        (LeakWithheld::Answer, None) => format!(
            "an answer carried connector {connector}'s own secret ({}); the client got an error \
             instead",
            hit.describe()
        ),
        (other, _) => format!(
            "a {} from the server carried connector {connector}'s own secret ({}); it was dropped",
            other.as_str(),
            hit.describe()
        ),
    };
    let detail = serde_json::json!({
        "direction": "result",
        "encoding": encoding.as_str(),
        "view": view.as_str(),
        "withheld": withheld.as_str(),
    });
    report(
        state,
        conn,
        owned,
        Kind::SecretLeak,
        Fields {
            session_id: Some(session_id),
            seq,
            connector: Some(connector),
            reason: Some(reason),
            detail: Some(detail.to_string()),
            ..Fields::default()
        },
    )
    .await
}
