//! `holdcall policy test`: a TOML file of calls and the decisions expected for them, evaluated
//! with the daemon's own decision function (`policy::PolicySet::decide_with`) on a context built
//! exactly as the daemon builds it (`context::CallContext::from_call`).
//!
//! The format (documented in `policies/README.md`), one `[[case]]` table per call:
//!
//! ```toml
//! [[case]]
//! name = "a push to main is held"
//! agent = "claude"                 # optional; absent = a session with no enrolled agent
//! connector = "git"                # optional; absent = unknown connector ("")
//! tool = "git_push"
//! arguments = '{"branch":"main"}'  # optional; JSON text, or an inline table
//! time = "2026-01-05T10:00:00+01:00" # optional RFC 3339 with offset; absent = now
//! session = { tool_calls = 20 }    # optional context.session counts; absent = 0
//! expect = "ask"                   # allow | deny | ask
//! ```
//!
//! Must never: decide differently from the daemon, or accept a case it cannot read (every
//! problem is reported at its file, line and column). It does no I/O.

use miette::{Diagnostic, NamedSource, SourceSpan};
use serde::Deserialize;
use toml::Spanned;

use crate::policy::budget::SessionCounts;
use crate::policy::context::{CallContext, Clock};
use crate::policy::{self, CallRequest, Decision, Effect, PolicySet};

/// A cases file that cannot be read; no case was run.
#[derive(Debug, Clone, thiserror::Error, Diagnostic)]
#[error("{at}: {message}")]
#[diagnostic(code(holdcall::policy_test::cases))]
pub struct CasesError {
    pub message: String,
    #[source_code]
    pub src: NamedSource<String>,
    #[label("here")]
    pub span: SourceSpan,
    #[help]
    pub help: String,
    /// `file:line:col`.
    pub at: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    case: Vec<Spanned<RawCase>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: String,
    agent: Option<Spanned<String>>,
    connector: Option<Spanned<String>>,
    tool: Spanned<String>,
    arguments: Option<Spanned<toml::Value>>,
    time: Option<Spanned<String>>,
    session: Option<Spanned<RawSession>>,
    expect: Spanned<String>,
}

/// `context.session` for one case; an absent count is 0.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSession {
    #[serde(default)]
    calls: i64,
    #[serde(default)]
    allowed: i64,
    #[serde(default)]
    refused: i64,
    #[serde(default)]
    tool_calls: i64,
}

/// One call to decide and what is expected of it.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub name: String,
    /// `file:line:col` of the case's table.
    pub at: String,
    pub agent: Option<String>,
    pub connector: String,
    pub tool: String,
    /// The JSON text of the arguments, as the relay would send it (`None`: no arguments).
    pub arguments: Option<String>,
    /// `None`: the current time.
    pub clock: Option<Clock>,
    /// The session's counts before the call (`context.session`); zeros when not given.
    pub session: SessionCounts,
    pub expect: Effect,
}

/// What became of one case.
#[derive(Debug, Clone)]
pub(crate) struct CaseResult {
    pub case: Case,
    pub decision: Decision,
}

impl CaseResult {
    pub(crate) fn passed(&self) -> bool {
        self.decision.effect == self.case.expect
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Reads a cases file. `file` names it in reports.
pub(crate) fn parse(file: &str, text: &str) -> Result<Vec<Case>, Box<CasesError>> {
    let fail = |span: std::ops::Range<usize>, message: String, help: &str| {
        let (line, col) = line_col(text, span.start);
        Box::new(CasesError {
            message,
            src: NamedSource::new(file, text.to_string()),
            span: SourceSpan::new(span.start.into(), span.end.saturating_sub(span.start)),
            help: help.to_string(),
            at: format!("{file}:{line}:{col}"),
        })
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        fail(
            e.span().unwrap_or(0..0),
            format!("not a cases file: {}", e.message()),
            "each case is a [[case]] table with name, tool and expect, and optionally agent, \
             connector, arguments (JSON text or an inline table), time (RFC 3339) and session (context.session counts)",
        )
    })?;
    if raw.case.is_empty() {
        return Err(fail(
            0..0,
            "the file holds no [[case]] tables".into(),
            "add at least one [[case]] with name, tool and expect",
        ));
    }
    raw.case
        .into_iter()
        .map(|spanned| read_case(file, text, spanned, &fail))
        .collect()
}

/// One `[[case]]` table, checked; `fail` locates a problem in the file.
fn read_case(
    file: &str,
    text: &str,
    spanned: Spanned<RawCase>,
    fail: &impl Fn(std::ops::Range<usize>, String, &str) -> Box<CasesError>,
) -> Result<Case, Box<CasesError>> {
    let span = spanned.span();
    let (line, col) = line_col(text, span.start);
    let c = spanned.into_inner();
    let tool = c.tool.get_ref();
    policy::validate_tool_name(tool).map_err(|e| {
        fail(
            c.tool.span(),
            e.to_string(),
            "a tool name is what the server lists in tools/list",
        )
    })?;
    for (kind, v) in [("agent", &c.agent), ("connector", &c.connector)] {
        if let Some(v) = v {
            policy::validate_scope_name(kind, v.get_ref()).map_err(|e| {
                fail(
                    v.span(),
                    e.to_string(),
                    "leave the key out for a call with no agent or an unknown connector",
                )
            })?;
        }
    }
    let expect = match c.expect.get_ref().as_str() {
        "allow" => Effect::Allow,
        "deny" => Effect::Deny,
        "ask" => Effect::Ask,
        other => {
            return Err(fail(
                c.expect.span(),
                format!("expect is {other:?}"),
                "expect is one of \"allow\", \"deny\" or \"ask\"",
            ));
        }
    };
    let clock = match &c.time {
        None => None,
        Some(t) => Some(Clock::parse(t.get_ref()).ok_or_else(|| {
            fail(
                t.span(),
                format!("time {:?} is not an RFC 3339 time", t.get_ref()),
                "write the time with its offset, e.g. \"2026-01-05T19:30:00+01:00\"; hour \
                 and weekday are read in that offset",
            )
        })?),
    };
    let arguments = match &c.arguments {
        None => None,
        Some(a) => Some(arguments_text(a.get_ref()).map_err(|why| {
            fail(
                a.span(),
                why,
                "arguments is a JSON object as text ('{\"path\":\"/tmp/x\"}') or an inline \
                 table ({ path = \"/tmp/x\" })",
            )
        })?),
    };
    let session = read_session(c.session, fail)?;
    Ok(Case {
        name: c.name,
        at: format!("{file}:{line}:{col}"),
        agent: c.agent.map(Spanned::into_inner),
        connector: c.connector.map(Spanned::into_inner).unwrap_or_default(),
        tool: c.tool.into_inner(),
        arguments,
        clock,
        session,
        expect,
    })
}

/// A case's `session` counts (`context.session`); zeros when it gives none.
fn read_session(
    session: Option<Spanned<RawSession>>,
    fail: &impl Fn(std::ops::Range<usize>, String, &str) -> Box<CasesError>,
) -> Result<SessionCounts, Box<CasesError>> {
    Ok(match session {
        None => SessionCounts::default(),
        Some(sp) => {
            let span = sp.span();
            let r = sp.into_inner();
            if [r.calls, r.allowed, r.refused, r.tool_calls]
                .iter()
                .any(|n| *n < 0)
            {
                return Err(fail(
                    span,
                    "a session count is negative".into(),
                    "session counts are 0 or more: { calls = 3, allowed = 2, refused = 1, tool_calls = 2 }",
                ));
            }
            SessionCounts {
                calls: r.calls,
                allowed: r.allowed,
                refused: r.refused,
                tool_calls: r.tool_calls,
            }
        }
    })
}

/// The JSON text of a case's arguments: a string is JSON text, checked to be JSON but passed
/// on as written (so the daemon's reader sees exactly it, caps included); a table is converted.
fn arguments_text(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => serde_json::from_str::<serde::de::IgnoredAny>(s)
            .map(|_| s.clone())
            .map_err(|e| format!("arguments is not JSON: {e}")),
        toml::Value::Table(_) => serde_json::to_string(v)
            .map_err(|e| format!("arguments cannot be written as JSON: {e}")),
        _ => Err("arguments is neither JSON text nor a table".into()),
    }
}

/// Decides every case with `set`, as the daemon would.
pub(crate) fn run(set: &PolicySet, cases: &[Case]) -> Vec<CaseResult> {
    cases
        .iter()
        .map(|case| {
            let clock = case.clock.unwrap_or_else(Clock::system);
            let ctx = CallContext::from_call(case.arguments.as_deref(), false, clock)
                .with_session(case.session);
            let decision = set.decide_with(
                &CallRequest {
                    agent: case.agent.as_deref(),
                    connector: &case.connector,
                    tool: &case.tool,
                },
                &ctx,
            );
            CaseResult {
                case: case.clone(),
                decision,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_can_set_the_session_counts_and_absent_ones_are_zero() {
        let cases = parse(
            "c.toml",
            "[[case]]\nname = \"a\"\ntool = \"echo\"\nsession = { tool_calls = 20, refused = 2 }\nexpect = \"deny\"\n\n\
             [[case]]\nname = \"b\"\ntool = \"echo\"\nexpect = \"allow\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cases[0].session,
            SessionCounts {
                calls: 0,
                allowed: 0,
                refused: 2,
                tool_calls: 20
            }
        );
        assert_eq!(cases[1].session, SessionCounts::default());
    }

    #[test]
    fn a_negative_or_unknown_session_count_is_a_mistake_in_the_file() {
        let negative = parse(
            "c.toml",
            "[[case]]\nname = \"a\"\ntool = \"echo\"\nsession = { calls = -1 }\nexpect = \"deny\"\n",
        )
        .err()
        .unwrap_or_else(|| panic!("accepted"));
        assert_eq!(negative.at, "c.toml:4:11");
        assert!(negative.message.contains("negative"));
        let unknown = parse(
            "c.toml",
            "[[case]]\nname = \"a\"\ntool = \"echo\"\nsession = { call = 1 }\nexpect = \"deny\"\n",
        )
        .err()
        .unwrap_or_else(|| panic!("accepted"));
        assert!(unknown.message.contains("call"), "{}", unknown.message);
    }

    #[test]
    fn a_cases_file_reads_json_text_and_inline_tables_alike() {
        let cases = parse(
            "c.toml",
            "[[case]]\nname = \"a\"\ntool = \"echo\"\narguments = '{\"n\":1}'\nexpect = \"allow\"\n\n\
             [[case]]\nname = \"b\"\nagent = \"claude\"\nconnector = \"fs\"\ntool = \"write_file\"\n\
             arguments = { path = \"/tmp/x\", n = 1 }\ntime = \"2026-01-05T19:30:00+01:00\"\nexpect = \"ask\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[0].arguments.as_deref(), Some("{\"n\":1}"));
        assert_eq!(cases[0].connector, "");
        assert_eq!(cases[1].at, "c.toml:7:1");
        assert_eq!(
            cases[1].arguments.as_deref(),
            Some("{\"n\":1,\"path\":\"/tmp/x\"}")
        );
        assert_eq!(cases[1].clock.map(|c| c.hour()), Some(19));
        assert_eq!(cases[1].expect, Effect::Ask);
    }

    #[test]
    fn every_mistake_in_a_cases_file_is_reported_at_its_line() {
        let bad = [
            (
                "[[case]]\nname = \"a\"\ntool = \"echo\"\nexpect = \"permit\"\n",
                "c.toml:4:10",
            ),
            (
                "[[case]]\nname = \"a\"\ntool = \"echo\"\n\nexpect = \"allow\"\ntime = \"yesterday\"\n",
                "c.toml:6:8",
            ),
            (
                "[[case]]\nname = \"a\"\ntool = \"echo\"\narguments = '{\"a\":'\nexpect = \"allow\"\n",
                "c.toml:4:13",
            ),
            (
                "[[case]]\nname = \"a\"\ntool = \"echo\"\nexpect = \"allow\"\ncolour = 1\n",
                "c.toml:5:1",
            ),
            ("[[case]]\nname = \"a\"\nexpect = \"allow\"\n", "c.toml:1:1"),
            (
                "[[case]]\nname = \"a\"\ntool = \"\"\nexpect = \"allow\"\n",
                "c.toml:3:8",
            ),
            ("# nothing\n", "c.toml:1:1"),
        ];
        for (text, at) in bad {
            match parse("c.toml", text) {
                Ok(_) => panic!("accepted {text:?}"),
                Err(e) => assert_eq!(e.at, at, "{text:?}: {e}"),
            }
        }
    }
}
