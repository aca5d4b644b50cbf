//! The server pump's leak screen: every line a credentialed server writes is scanned for the
//! secret Holdcall injected into it (`crate::leak`, from the fingerprints the daemon handed
//! over with the launch) before it is relayed. A line that carries it never reaches the client:
//! an answer is replaced by a JSON-RPC error for the same id, anything else (a notification, a
//! request of the server's, a line that is not one JSON-RPC object) is dropped. Each is reported
//! to the daemon, which journals `secret.leak`.
//!
//! Must never: hold the secret (only its fingerprints), put the secret, the line or any part of
//! it in a report, a log line or the replacement, or change a line that does not carry it.

use super::in_flight::InFlight;
use super::link::Link;
use crate::ipc::{LeakWithheld, SessionRequest};
use crate::leak::{Fingerprints, Matcher};
use crate::mcp::envelope;
use crate::mcp::json::escape::push_json_string;

/// JSON-RPC error code of a withheld answer: the implementation-defined server error range.
const WITHHELD_CODE: &str = "-32003";

/// The screen of one session; a session without an injected secret (or one too short to check)
/// passes every line.
pub(super) struct Screen {
    matcher: Option<Matcher>,
    connector: String,
    link: Link,
    session_id: String,
}

impl Screen {
    /// The screen of a session started with `launch`; says on stderr when the secret is too
    /// short to be checked. Fails closed: a secret long enough to be checked whose
    /// fingerprints are missing or malformed starts no server (`RelayError::BadLaunch`), since
    /// its answers would otherwise reach the client unchecked.
    pub(super) fn for_launch(
        launch: Option<&crate::connector::Launch>,
        connector: &str,
        link: &Link,
        session_id: &str,
    ) -> Result<Screen, super::RelayError> {
        let matcher = matcher_for(launch).map_err(super::RelayError::BadLaunch)?;
        if launch.is_some() && matcher.is_none() {
            eprintln!(
                "holdcall: connector {connector}'s secret is under {} bytes: the server's \
                 answers are not checked for it",
                crate::limits::LEAK_SECRET_BYTES_MIN
            );
        }
        Ok(Screen {
            matcher,
            connector: connector.to_string(),
            link: link.clone(),
            session_id: session_id.to_string(),
        })
    }

    /// What to relay in place of `line`: the line itself when it does not carry the secret, an
    /// error for its id when it is an answer that does, nothing otherwise.
    pub(super) fn screen(&self, line: Vec<u8>, in_flight: &InFlight) -> Option<Vec<u8>> {
        let Some(m) = &self.matcher else {
            return Some(line);
        };
        let Some(hit) = m.find(&line) else {
            return Some(line);
        };
        let msg = envelope::inspect_server_line(&line);
        let (withheld, replacement, seq) = match (msg.id, msg.method.is_some()) {
            (Some(id), false) => {
                let seq = in_flight.lock().ok().and_then(|m| m.get(id).map(|f| f.seq));
                let text = format!(
                    "Holdcall withheld this answer: it carried connector {}'s secret ({}). The \
                     server returned its own credential; nothing of it was shown.",
                    self.connector,
                    hit.describe()
                );
                (LeakWithheld::Answer, Some(withheld_error(id, &text)), seq)
            }
            (None, true) => (LeakWithheld::Notification, None, None),
            (Some(_), true) => (LeakWithheld::Request, None, None),
            (None, false) => (LeakWithheld::Line, None, None),
        };
        eprintln!(
            "holdcall: withheld a {} from the server of connector {}: it carried the connector's secret ({})",
            withheld.as_str(),
            self.connector,
            hit.describe()
        );
        self.link.report(SessionRequest::SecretLeak {
            session_id: self.session_id.clone(),
            seq,
            encoding: hit.encoding,
            view: hit.view,
            withheld,
        });
        replacement
    }
}

/// The scanner a launch asks for: none without a launch or for a secret under the minimum;
/// an error when a secret long enough to check comes without valid fingerprints.
pub(super) fn matcher_for(
    launch: Option<&crate::connector::Launch>,
) -> Result<Option<Matcher>, String> {
    let Some(l) = launch else {
        return Ok(None);
    };
    if l.secret.len() < crate::limits::LEAK_SECRET_BYTES_MIN {
        return Ok(None);
    }
    let prints: &Fingerprints = l.leak.as_ref().ok_or_else(|| {
        "it carries no leak fingerprints for the secret, so the server's answers could not be \
         checked for it"
            .to_string()
    })?;
    Matcher::new(prints).map(Some).ok_or_else(|| {
        "its leak fingerprints are malformed, so the server's answers could not be checked for \
         the secret"
            .to_string()
    })
}

/// A JSON-RPC error answering `id` (copied verbatim), as one compact line ending in `\n`.
fn withheld_error(id: &[u8], text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(id.len() + text.len() + 64);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(if id.is_empty() { b"null" } else { id });
    out.extend_from_slice(br#","error":{"code":"#);
    out.extend_from_slice(WITHHELD_CODE.as_bytes());
    out.extend_from_slice(br#","message":"#);
    push_json_string(&mut out, text);
    out.extend_from_slice(b"}}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::matcher_for;
    use crate::connector::Launch;
    use crate::vault::Secret;

    fn launch(secret: &str, leak: Option<crate::leak::Fingerprints>) -> Launch {
        Launch {
            command: vec!["/usr/bin/env".into()],
            env_key: "API_TOKEN".into(),
            secret: Secret::new(secret.into()),
            pass_env: vec![],
            cwd: "/".into(),
            pinned_env: vec![],
            leak,
        }
    }

    #[test]
    fn a_secret_long_enough_to_check_without_fingerprints_starts_no_server() {
        let l = launch("hc-canary-0123456789abcdef", None);
        let why = matcher_for(Some(&l)).unwrap_err();
        assert!(why.contains("no leak fingerprints"), "{why}");
    }

    #[test]
    fn malformed_fingerprints_start_no_server() {
        let mut prints = crate::leak::fingerprint(b"hc-canary-0123456789abcdef").unwrap();
        prints.spoil_key_for_tests();
        let l = launch("hc-canary-0123456789abcdef", Some(prints));
        let why = matcher_for(Some(&l)).unwrap_err();
        assert!(why.contains("malformed"), "{why}");
    }

    #[test]
    fn a_short_secret_or_no_launch_is_passed_unchecked_and_a_good_launch_is_checked() {
        assert!(matcher_for(None).unwrap().is_none());
        let short = "a".repeat(crate::limits::LEAK_SECRET_BYTES_MIN - 1);
        assert!(matcher_for(Some(&launch(&short, None))).unwrap().is_none());
        let secret = "hc-canary-0123456789abcdef";
        let prints = crate::leak::fingerprint(secret.as_bytes()).unwrap();
        let m = matcher_for(Some(&launch(secret, Some(prints))))
            .unwrap()
            .unwrap();
        assert!(
            m.find(format!("{{\"text\":\"{secret}\"}}").as_bytes())
                .is_some()
        );
    }
}
