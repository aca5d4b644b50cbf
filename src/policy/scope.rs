//! What a rule says and what it applies to: `Effect` and `Scope`, the specificity a scope gives,
//! and the names a scope may hold.

use crate::limits::{SCOPE_NAME_CHARS_MAX, TOOL_NAME_BYTES_MAX};
use crate::policy::error::PolicyError;

/// Specificity weight of naming the exact tool. Larger than everything else a scope can name
/// together (agent 1 + connector 1 = 2), so an exact-tool rule always beats a default.
const TOOL_WEIGHT: i64 = 4;

/// What Holdcall does with a call. The derived order (`Allow < Ask < Deny`) is the tie-break
/// rank: at equal specificity the stricter effect wins.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Allow,
    Ask,
    Deny,
}

impl Effect {
    /// The lowercase word used in rules, annotations, the journal and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Ask => "ask",
            Effect::Deny => "deny",
        }
    }

    /// Parses the lowercase word; anything else (including other cases) is `None`, because a
    /// rule's effect is too important to guess.
    pub(crate) fn parse(s: &str) -> Option<Effect> {
        match s {
            "allow" => Some(Effect::Allow),
            "ask" => Some(Effect::Ask),
            "deny" => Some(Effect::Deny),
            _ => None,
        }
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a rule made on the command line applies to. `None` means "every".
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Scope {
    /// `None` = every tool (a default rule).
    pub tool: Option<String>,
    pub agent: Option<String>,
    pub connector: Option<String>,
}

/// Specificity of a scope: `4 * names_exact_tool + names_agent + names_connector`.
/// The same formula `PolicySet::compile` applies to a policy's Cedar scope.
pub fn specificity_of_scope(scope: &Scope) -> i64 {
    let mut s = 0;
    if scope.tool.is_some() {
        s += TOOL_WEIGHT;
    }
    if scope.agent.is_some() {
        s += 1;
    }
    if scope.connector.is_some() {
        s += 1;
    }
    s
}

/// A tool name a rule may name: non-empty, at most `TOOL_NAME_BYTES_MAX` bytes, no control
/// characters, and not `*` (which would read as "every tool").
pub(crate) fn validate_tool_name(name: &str) -> Result<(), PolicyError> {
    let fail = |problem: String, help: &str| {
        Err(PolicyError::InvalidToolName {
            name: name.to_string(),
            problem,
            help: help.to_string(),
        })
    };
    if name.is_empty() {
        return fail(
            "it is empty".to_string(),
            "give the tool's name exactly as the MCP server lists it in tools/list",
        );
    }
    if name.len() > TOOL_NAME_BYTES_MAX {
        return fail(
            format!(
                "it is {} bytes long; the limit is {TOOL_NAME_BYTES_MAX} bytes of UTF-8",
                name.len()
            ),
            "check that you passed the tool's name and not something else; no MCP tool name is that long",
        );
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return fail(
            format!("it contains the control character {c:?}"),
            "remove the control character; tool names never contain them",
        );
    }
    if name == "*" {
        return fail(
            "`*` is reserved: it would mean every tool".to_string(),
            "to make a rule for every tool, use `holdcall policy default …`",
        );
    }
    Ok(())
}

/// An agent or connector name: `^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?$`, checked
/// by hand. `kind` ("agent", "connector") goes into the error so the user knows which one.
pub(crate) fn validate_scope_name(kind: &str, name: &str) -> Result<(), PolicyError> {
    let fail = |problem: String| {
        Err(PolicyError::InvalidScopeName {
            kind: kind.to_string(),
            name: name.to_string(),
            problem,
        })
    };
    let chars: Vec<char> = name.chars().collect();
    let (Some(first), Some(last)) = (chars.first(), chars.last()) else {
        return fail("it is empty".to_string());
    };
    if chars.len() > SCOPE_NAME_CHARS_MAX {
        return fail(format!(
            "it is {} characters long; the limit is {SCOPE_NAME_CHARS_MAX}",
            chars.len()
        ));
    }
    if !first.is_ascii_alphanumeric() {
        return fail(format!("it starts with {first:?}, not a letter or digit"));
    }
    if !last.is_ascii_alphanumeric() {
        return fail(format!("it ends with {last:?}, not a letter or digit"));
    }
    if let Some(c) = chars
        .iter()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return fail(format!("it contains {c:?}"));
    }
    Ok(())
}
