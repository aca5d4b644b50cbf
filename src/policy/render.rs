//! Policies and names as text: a rule made on the command line as Cedar, a scope as a sentence,
//! a name quoted when it is not a plain word, a Cedar scope constraint shown in an error.

use cedar_policy::{
    ActionConstraint, EntityId, EntityTypeName, EntityUid, PrincipalConstraint, ResourceConstraint,
};

use crate::policy::scope::{Effect, Scope};

impl Scope {
    /// A human sentence fragment, e.g. "tool delete_file for every agent on connector github".
    /// Names that are not plain words are shown quoted and escaped, so a newline or a quote in
    /// a tool name cannot forge extra text in a reason or a log line.
    pub fn describe(&self) -> String {
        let tool = match &self.tool {
            Some(t) => format!("tool {}", display_name(t)),
            None => "every tool (the default)".to_string(),
        };
        let agent = match &self.agent {
            Some(a) => format!("agent {}", display_name(a)),
            None => "every agent".to_string(),
        };
        let connector = match &self.connector {
            Some(c) => format!("connector {}", display_name(c)),
            None => "every connector".to_string(),
        };
        format!("{tool} for {agent} on {connector}")
    }
}

/// Shows plain names as they are and anything else as an escaped, quoted string, so a name
/// cannot forge text in a reason or a log line (policy scopes and budgets both use it).
pub(crate) fn display_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':'));
    if plain {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// Renders an entity reference through `EntityUid`'s Display, which escapes the id, so any
/// name (quotes, backslashes, newlines, unicode) stays a string literal and never becomes
/// policy syntax.
fn entity_ref(type_name: &str, id: &str) -> String {
    match type_name.parse::<EntityTypeName>() {
        Ok(ty) => EntityUid::from_type_name_and_id(ty, EntityId::new(id)).to_string(),
        // Unreachable for our fixed type names; the fallback escapes exactly as Display does.
        Err(_) => format!("{type_name}::\"{}\"", EntityId::new(id).escaped()),
    }
}

/// A Cedar string literal (with quotes) for an annotation value, escaped like an entity id.
pub(crate) fn string_literal(s: &str) -> String {
    format!("\"{}\"", EntityId::new(s).escaped())
}

/// The Cedar text of a rule made on the command line. Callers validate the names first
/// (`validate_tool_name`, `validate_scope_name`); a connector containing `/` would otherwise
/// shift the split of `Tool::"C/T"`.
pub fn cli_rule_text(id: &str, effect: Effect, scope: &Scope) -> String {
    let keyword = match effect {
        Effect::Allow => "permit",
        Effect::Ask | Effect::Deny => "forbid",
    };
    let principal = match &scope.agent {
        Some(agent) => format!("principal == {}", entity_ref("Agent", agent)),
        None => "principal".to_string(),
    };
    let resource = match (&scope.tool, &scope.connector) {
        (Some(tool), Some(connector)) => {
            format!(
                "resource == {}",
                entity_ref("Tool", &format!("{connector}/{tool}"))
            )
        }
        (Some(tool), None) => format!("resource in {}", entity_ref("ToolName", tool)),
        (None, Some(connector)) => format!("resource in {}", entity_ref("Connector", connector)),
        (None, None) => "resource".to_string(),
    };
    format!(
        "@id({id})\n@holdcall_effect(\"{effect}\")\n{keyword} (\n  {principal},\n  action == Action::\"call\",\n  {resource}\n);\n",
        id = string_literal(id),
        effect = effect.as_str(),
    )
}

pub(super) fn render_principal(c: &PrincipalConstraint) -> String {
    match c {
        PrincipalConstraint::Any => "principal".to_string(),
        PrincipalConstraint::Eq(u) => format!("principal == {u}"),
        PrincipalConstraint::In(u) => format!("principal in {u}"),
        PrincipalConstraint::Is(t) => format!("principal is {t}"),
        PrincipalConstraint::IsIn(t, u) => format!("principal is {t} in {u}"),
    }
}

pub(super) fn render_action(c: &ActionConstraint) -> String {
    match c {
        ActionConstraint::Any => "action".to_string(),
        ActionConstraint::Eq(u) => format!("action == {u}"),
        ActionConstraint::In(us) => {
            let list: Vec<String> = us.iter().map(ToString::to_string).collect();
            format!("action in [{}]", list.join(", "))
        }
    }
}

pub(super) fn render_resource(c: &ResourceConstraint) -> String {
    match c {
        ResourceConstraint::Any => "resource".to_string(),
        ResourceConstraint::Eq(u) => format!("resource == {u}"),
        ResourceConstraint::In(u) => format!("resource in {u}"),
        ResourceConstraint::Is(t) => format!("resource is {t}"),
        ResourceConstraint::IsIn(t, u) => format!("resource is {t} in {u}"),
    }
}
