//! The relay-session protocol: what a relay asks the daemon about the session it runs (start,
//! each call, outcomes, anomalies, end) and what it is answered, including the word on a held
//! call pushed unasked.

use serde::{Deserialize, Serialize};

/// Something a relay asks of the daemon about its session. Every request gets exactly one
/// response, in order; a connection that sends one sends only these (see `ipc::Incoming`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum SessionRequest {
    /// A relay opens a session; the connection then speaks only for the sessions it opened.
    #[serde(rename = "session.start")]
    SessionStart {
        session_id: String,
        connector: String,
        client: Option<String>,
        /// When the relay was given no `--connector`: what it derived the name from, in words
        /// (journaled with the session's start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        connector_from: Option<String>,
    },
    /// A readable tools/call. The relay never states a verdict; it only describes the call.
    #[serde(rename = "call.request")]
    CallRequest {
        session_id: String,
        seq: i64,
        tool: String,
        args_digest: String,
        /// The raw `params.arguments` text, when small enough to send.
        arguments: Option<String>,
        arguments_omitted: bool,
        /// The seq of the call this one retries with `inputResponses` (same tool and arguments,
        /// carrying the `requestState` the server answered that call with): the same call, so
        /// a budget does not charge it again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_of: Option<i64>,
    },
    #[serde(rename = "call.outcome")]
    CallOutcome {
        session_id: String,
        seq: i64,
        ok: bool,
        duration_ms: i64,
    },
    #[serde(rename = "anomaly")]
    Anomaly { session_id: String, anomaly: String },
    /// A server line carried the secret Holdcall injected into the server, in the encoding
    /// and view named (never the secret or the line), and was withheld from the client.
    #[serde(rename = "secret.leak")]
    SecretLeak {
        session_id: String,
        /// The call whose answer it was, when it was one.
        seq: Option<i64>,
        encoding: crate::leak::Encoding,
        view: crate::leak::View,
        withheld: LeakWithheld,
    },
    /// The tools one `tools/list` answer of the session's server defined, read from its bytes
    /// (`mcp::tools`). The daemon pins them and answers which to hide (`tools.seen`).
    #[serde(rename = "tools.listed")]
    ToolsListed {
        session_id: String,
        tools: Vec<crate::mcp::tools::ToolDefinition>,
        /// Entries that were not a readable tool.
        unreadable: usize,
        /// The listing is whole (no `nextCursor`): a pinned tool missing from it is gone.
        complete: bool,
        /// The definitions were over `limits::TOOLS_LISTING_BYTES_MAX`, so none were sent.
        #[serde(default)]
        too_large: bool,
    },
    #[serde(rename = "session.end")]
    SessionEnd {
        session_id: String,
        protocol_version: Option<String>,
        /// Why the session ended, as the relay saw it; journaled as the entry's reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ended: Option<SessionEnded>,
    },
}

impl SessionRequest {
    /// Every `kind` this protocol has, in the order of the variants.
    pub(crate) const KINDS: &'static [&'static str] = &[
        "session.start",
        "call.request",
        "call.outcome",
        "anomaly",
        "secret.leak",
        "tools.listed",
        "session.end",
    ];
}

/// What the relay withheld from the client because it carried the injected secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum LeakWithheld {
    /// An answer to a request of the client's: replaced by an error for the same id.
    Answer,
    /// A notification: dropped.
    Notification,
    /// A request of the server's (sampling, elicitation…): dropped, so never answered.
    Request,
    /// A line that is not one JSON-RPC object (a batch, not JSON): dropped.
    Line,
}

impl LeakWithheld {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LeakWithheld::Answer => "answer",
            LeakWithheld::Notification => "notification",
            LeakWithheld::Request => "request",
            LeakWithheld::Line => "line",
        }
    }
}

/// Why a relay ended its session: each is an ordinary end, unlike a connection that closes
/// before `session.end` (which the daemon journals as an alarm).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SessionEnded {
    /// The client closed the relay's input (a client that quits, or a health check that
    /// connects, initializes and closes).
    ClientClosed,
    /// The server exited or stopped reading.
    ServerExited,
    /// The relay got SIGTERM, SIGHUP or SIGINT (a client stopping its servers).
    Stopped,
}

impl SessionEnded {
    /// The journal's reason for the session's end.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            SessionEnded::ClientClosed => "the client closed the connection",
            SessionEnded::ServerExited => "the server exited",
            SessionEnded::Stopped => "the client stopped the relay (SIGTERM, SIGHUP or SIGINT)",
        }
    }
}

/// The daemon's verdict on one call, as the relay receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    Allow,
    Deny,
    /// A rule says a person decides: the call is held in the daemon, and its final word comes
    /// later as a pushed [`SessionResponse::Released`]. The relay keeps pumping meanwhile.
    Held,
    /// The daemon could not decide (for example, the journal could not be written).
    Undecided,
    /// The rules allowed the call, but a budget had no room left.
    #[serde(rename = "over-budget")]
    OverBudget,
}

/// What the daemon answers a relay, or pushes to it unasked ([`SessionResponse::Released`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum SessionResponse {
    #[serde(rename = "ok")]
    Ok,
    /// The answer to `session.start`: the session is open; `launch` is set when the connector is
    /// registered, and then the relay runs that command with that secret and nothing else.
    #[serde(rename = "session.opened")]
    SessionOpened {
        launch: Option<crate::connector::Launch>,
    },
    /// The connector is registered but its secret cannot be read: the relay must not start a
    /// server. `message` says which and why (never the secret).
    #[serde(rename = "credential.unavailable")]
    CredentialUnavailable { connector: String, message: String },
    #[serde(rename = "error")]
    Error { message: String },
    /// The answer to `tools.listed`: the tools to take out of the listing before it is
    /// forwarded (empty unless the connector's hide-denied is on).
    #[serde(rename = "tools.seen")]
    ToolsSeen { hide: Vec<String> },
    #[serde(rename = "decision")]
    Decision {
        session_id: String,
        seq: i64,
        decision: Verdict,
        policy_id: Option<String>,
        reason: String,
        /// Present exactly when `decision` is `held`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold: Option<HoldTicket>,
    },
    /// Pushed, unasked, on a relay's connection: the final word on a held call. It names the
    /// call by session, seq and argument digest, all three of which the relay checks.
    #[serde(rename = "call.released")]
    Released {
        session_id: String,
        seq: i64,
        args_digest: String,
        verdict: Release,
        /// Why: `person`, `timeout`, `session-ended`, `connection-dropped`,
        /// `arguments-unknown` (see `approval::Cause`).
        cause: String,
        /// The person's reason for a rejection, if they gave one.
        reason: Option<String>,
    },
    /// Pushed, unasked, on a relay's connection: one of its reports (`call.outcome`,
    /// `anomaly`, `secret.leak`) could not be journaled. A report has no answer otherwise, so
    /// the relay never waits on one (issue 18); this is how it learns one was lost.
    #[serde(rename = "report.unrecorded")]
    ReportUnrecorded { message: String },
}

/// What the relay learns when its call is held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HoldTicket {
    pub(crate) id: String,
    /// How long the daemon will wait for a person before rejecting the call (milliseconds).
    pub(crate) timeout_ms: u64,
}

/// The final word on a held call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Release {
    Approved,
    Rejected,
    /// The word could not be recorded in the journal, so it is no word: refused.
    Undecided,
}
