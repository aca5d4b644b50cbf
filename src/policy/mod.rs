//! Holdcall's rules: Cedar policies, compiled once, and the fixed precedence wrapper that turns
//! Cedar's answer into allow / ask / deny for one MCP `tools/call`.
//!
//! This module owns:
//! - the Cedar model (schema `schema/holdcall.cedarschema`: principal `Agent`, action
//!   `Action::"call"`, resource `Tool` with parents `Connector` and `ToolName`, empty context);
//! - checking a stored policy (`@id`, `@holdcall_effect`, the supported scope forms, strict
//!   validation) and deriving its effect and specificity from the scope alone;
//! - the decision: Cedar evaluates a permit-only and a forbid-only set (two calls, because
//!   `reason()` lists only the *determining* policies of one call) for each of the ≤ 4 buckets
//!   of the scope index a call can hit (exact tool, tool name, connector, every tool), then the
//!   most specific matching policy wins, ties to deny, then ask, then allow, then the oldest
//!   (lowest `seq`); a forbid that cannot be evaluated never lets the call through (fail
//!   closed);
//! - rendering rules made on the command line as Cedar text, name validation, explain output,
//!   unified diffs of policy text, and the precedence-table case parser shared with tests.
//!
//! It does no I/O: policies come in as text, decisions go out as values. Storage, the journal
//! and the socket live elsewhere. See `docs/decisions/0001-policy-in-cedar.md` for the why.

pub mod budget;
pub mod cases;
pub mod context;
pub mod file;

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use cedar_policy::{
    ActionConstraint, AuthorizationError, Authorizer, Decision as CedarDecision, Entities, Entity,
    EntityId, EntityTypeName, EntityUid, Policy, PolicyId, PrincipalConstraint, Request,
    ResourceConstraint, Response, Schema, Template, ValidationMode, ValidationWarning, Validator,
};

use crate::limits::{SCOPE_NAME_CHARS_MAX, TOOL_NAME_BYTES_MAX};
use crate::policy::context::CallContext;

/// The schema every policy is validated against, embedded so the binary cannot drift from it.
pub const SCHEMA_TEXT: &str = include_str!("../../schema/holdcall.cedarschema");

/// The annotation that carries Holdcall's three-valued effect on top of Cedar's two.
pub const EFFECT_ANNOTATION: &str = "holdcall_effect";

/// The annotation that names a policy; it must be the first one and agree with the stored id.
pub const ID_ANNOTATION: &str = "id";

/// Specificity weight of naming the exact tool. Larger than everything else a scope can name
/// together (agent 1 + connector 1 = 2), so an exact-tool rule always beats a default.
const TOOL_WEIGHT: i64 = 4;

/// The help line for every unsupported scope form: the full list of what is accepted.
const SCOPE_FORMS_HELP: &str = "Holdcall computes a rule's specificity from its scope, so only these forms are accepted: \
principal: `principal` or `principal == Agent::\"A\"`; action: `action` or `action == Action::\"call\"`; \
resource: `resource`, `resource == Tool::\"C/T\"`, `resource in ToolName::\"T\"` or `resource in Connector::\"C\"`. \
Rewrite the scope in one of these forms, or move the extra test into a `when { … }` clause (conditions add no specificity)";

// ---------------------------------------------------------------------------------------------
// Effects and scopes
// ---------------------------------------------------------------------------------------------

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
    pub fn parse(s: &str) -> Option<Effect> {
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

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Everything that can be wrong with a name or a policy. Every variant names the policy (when
/// there is one) and tells the user what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum PolicyError {
    #[error("invalid tool name {name:?}: {problem}")]
    #[diagnostic(code(holdcall::policy::tool_name))]
    InvalidToolName {
        name: String,
        problem: String,
        #[help]
        help: String,
    },

    #[error("invalid {kind} name {name:?}: {problem}")]
    #[diagnostic(
        code(holdcall::policy::scope_name),
        help(
            "{kind} names are 1 to 128 ASCII letters, digits, '_', '.' or '-', and start and end \
             with a letter or digit; pick a name of that form"
        )
    )]
    InvalidScopeName {
        kind: String,
        name: String,
        problem: String,
    },

    #[error("policy {id} is not valid Cedar: {message}")]
    #[diagnostic(
        code(holdcall::policy::syntax),
        help(
            "fix the Cedar syntax of policy {id}; each stored policy is exactly one static \
             `permit (…)` or `forbid (…)` ending with `;`"
        )
    )]
    Syntax { id: String, message: String },

    #[error("policy {id} is a template (it has a `?principal` or `?resource` slot)")]
    #[diagnostic(
        code(holdcall::policy::template),
        help(
            "Holdcall stores only static policies, whose text is what you read and diff: write \
             the entity out, e.g. `principal == Agent::\"name\"` instead of `principal == ?principal`"
        )
    )]
    Template { id: String },

    #[error("policy {id} has no @id annotation")]
    #[diagnostic(
        code(holdcall::policy::id_missing),
        help("add `@id(\"{id}\")` as the first line of the policy")
    )]
    MissingId { id: String },

    #[error("policy {id} is stored as {id:?} but its @id says {annotated:?}")]
    #[diagnostic(
        code(holdcall::policy::id_mismatch),
        help(
            "make the two agree: change the annotation to `@id(\"{id}\")`, or store the policy \
             under the id {annotated:?}"
        )
    )]
    IdMismatch { id: String, annotated: String },

    #[error("policy {id} has @id, but not as its first annotation")]
    #[diagnostic(
        code(holdcall::policy::id_not_first),
        help(
            "move `@id(\"{id}\")` above every other annotation, so the policy text starts with it"
        )
    )]
    IdNotFirst { id: String },

    #[error("policy {id} has an unknown annotation @{key}")]
    #[diagnostic(
        code(holdcall::policy::unknown_annotation),
        help(
            "the only Holdcall annotation besides @id is @holdcall_effect; check the spelling \
             (a misspelt effect would silently change what the rule does, so it is refused)"
        )
    )]
    UnknownAnnotation { id: String, key: String },

    #[error("policy {id} has an invalid @holdcall_effect: {problem}")]
    #[diagnostic(
        code(holdcall::policy::effect),
        help(
            "use `forbid` with @holdcall_effect(\"deny\") or @holdcall_effect(\"ask\"), or \
             `permit` with @holdcall_effect(\"allow\"); without the annotation a permit allows \
             and a forbid denies"
        )
    )]
    EffectAnnotation { id: String, problem: String },

    #[error("policy {id} has an unsupported {part} scope `{found}`")]
    #[diagnostic(code(holdcall::policy::scope), help("{SCOPE_FORMS_HELP}"))]
    UnsupportedScope {
        id: String,
        part: String,
        found: String,
    },

    #[error("policy {id} names an invalid {kind} in its scope: {problem}")]
    #[diagnostic(
        code(holdcall::policy::scope_entity),
        help(
            "use a name Holdcall accepts on the command line: an agent or connector name of 1 to \
             128 ASCII letters, digits, '_', '.' or '-'; a non-empty tool name without control \
             characters, other than `*`; and `Tool::\"<connector>/<tool>\"` for an exact tool"
        )
    )]
    InvalidScopeEntity {
        id: String,
        kind: String,
        problem: String,
    },

    #[error("policy {id} does not validate against Holdcall's schema: {message}")]
    #[diagnostic(
        code(holdcall::policy::validation),
        help(
            "every call is principal `Agent`, action `Action::\"call\"`, resource `Tool` (in \
             `Connector` and `ToolName`) with an empty context; fix policy {id} to fit \
             schema/holdcall.cedarschema"
        )
    )]
    Validation { id: String, message: String },

    #[error("policy {id} reads `context.{path}` without a `has` guard")]
    #[diagnostic(
        code(holdcall::policy::unguarded_argument),
        help(
            "a deny or ask rule whose condition errors would fail open in Cedar (Holdcall fails \
             closed instead, refusing every call it could apply to); guard the access: \
             `context has {path} && context.{path} …`"
        )
    )]
    UnguardedArgument { id: String, path: String },

    #[error("two stored policies have the id {id:?}")]
    #[diagnostic(
        code(holdcall::policy::duplicate_id),
        help("policy ids must be unique: rename one of them (its stored id and its @id together)")
    )]
    DuplicateId { id: String },

    #[error("Holdcall's embedded Cedar schema does not load: {message}")]
    #[diagnostic(
        code(holdcall::policy::schema),
        help("this is a bug in Holdcall, not in your rules; please report it")
    )]
    Schema { message: String },
}

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

/// A tool name a rule may name: non-empty, at most `TOOL_NAME_BYTES_MAX` bytes, no control
/// characters, and not `*` (which would read as "every tool").
pub fn validate_tool_name(name: &str) -> Result<(), PolicyError> {
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
pub fn validate_scope_name(kind: &str, name: &str) -> Result<(), PolicyError> {
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

// ---------------------------------------------------------------------------------------------
// Rendering rules made on the command line
// ---------------------------------------------------------------------------------------------

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
fn string_literal(s: &str) -> String {
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

// ---------------------------------------------------------------------------------------------
// Stored and compiled policies
// ---------------------------------------------------------------------------------------------

/// One row of the policy table: its insertion order, id and Cedar text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPolicy {
    pub seq: i64,
    pub id: String,
    pub text: String,
}

/// What Holdcall derived from one compiled policy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PolicyInfo {
    pub id: String,
    pub seq: i64,
    pub effect: Effect,
    pub specificity: i64,
    pub text: String,
}

/// A policy that passed every check, with what the wrapper needs about it.
struct Checked {
    policy: Policy,
    effect: Effect,
    specificity: i64,
    /// The scope read back from Cedar, for reasons ("deny tool X for every agent …").
    scope: Scope,
    /// Whether it has `when`/`unless`: shown in reasons because it matched only because of them.
    conditional: bool,
    /// Whether a condition reads `context.arguments`.
    reads_arguments: bool,
}

/// Type names and the action, parsed once so `decide` builds requests without parsing.
#[derive(Clone)]
struct Names {
    agent: EntityTypeName,
    connector: EntityTypeName,
    tool_name: EntityTypeName,
    tool: EntityTypeName,
    call: EntityUid,
}

impl Names {
    fn new() -> Result<Names, String> {
        let ty = |s: &str| s.parse::<EntityTypeName>().map_err(|e| e.to_string());
        Ok(Names {
            agent: ty("Agent")?,
            connector: ty("Connector")?,
            tool_name: ty("ToolName")?,
            tool: ty("Tool")?,
            call: EntityUid::from_type_name_and_id(ty("Action")?, EntityId::new("call")),
        })
    }
}

/// The policies of one index bucket, split by Cedar effect.
#[derive(Default)]
struct Halves {
    /// Only the permits: its `reason()` lists every matching permit.
    permits: cedar_policy::PolicySet,
    /// Only the forbids: its `reason()` lists every matching forbid (deny and ask).
    forbids: cedar_policy::PolicySet,
}

/// The policies indexed by their resource scope, the only part of a scope that names the
/// resource. Every supported resource form matches exactly one key of a request (the resource
/// is always `Tool::"C/T"` with parents `Connector::"C"` and `ToolName::"T"`, nothing else), and
/// Cedar never evaluates the conditions of a policy whose scope does not match, so evaluating
/// the ≤ 4 buckets a request can hit gives the same matches and the same errors as evaluating
/// every policy — at a cost that does not grow with rules about other tools.
#[derive(Default)]
struct Index {
    /// `resource == Tool::"C/T"`, keyed by the Tool's id `C/T`.
    tools: HashMap<String, Halves>,
    /// `resource in ToolName::"T"`, keyed by `T`.
    tool_names: HashMap<String, Halves>,
    /// `resource in Connector::"C"`, keyed by `C`.
    connectors: HashMap<String, Halves>,
    /// `resource`: every call.
    global: Halves,
}

impl Index {
    /// The bucket of a policy with this (already checked) scope.
    fn bucket_mut(&mut self, scope: &Scope) -> &mut Halves {
        match (&scope.tool, &scope.connector) {
            (Some(tool), Some(connector)) => {
                self.tools.entry(format!("{connector}/{tool}")).or_default()
            }
            (Some(tool), None) => self.tool_names.entry(tool.clone()).or_default(),
            (None, Some(connector)) => self.connectors.entry(connector.clone()).or_default(),
            (None, None) => &mut self.global,
        }
    }

    /// The buckets a request for `Tool::"<tool_id>"` can hit, most specific first.
    fn buckets<'a>(&'a self, tool_id: &str, req: &CallRequest<'_>) -> [Option<&'a Halves>; 4] {
        [
            self.tools.get(tool_id),
            self.tool_names.get(req.tool),
            self.connectors.get(req.connector),
            Some(&self.global),
        ]
    }
}

/// A compiled, immutable set of policies. Cheap to share (`Send + Sync`); rebuild it on change.
pub struct PolicySet {
    /// In seq order (ties by id, so the order is total).
    infos: Vec<PolicyInfo>,
    /// Parallel to `infos`.
    scopes: Vec<(Scope, bool)>,
    /// Parallel to `infos`: whether the policy reads `context.arguments`.
    reads_args: Vec<bool>,
    by_id: HashMap<String, usize>,
    /// Every policy, in the one bucket its resource scope puts it in.
    index: Index,
    authorizer: Authorizer,
    /// `None` only if Cedar refused our fixed type names, which would be a bug; `decide` then
    /// denies everything rather than guess.
    names: Option<Names>,
}

const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PolicySet>();
};

impl std::fmt::Debug for PolicySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySet")
            .field("policies", &self.infos)
            .finish_non_exhaustive()
    }
}

/// Whether the first thing in the text (after whitespace and `//` comments) is `@id`.
fn starts_with_id_annotation(text: &str) -> bool {
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if let Some(comment) = rest.strip_prefix("//") {
            rest = comment.split_once('\n').map_or("", |(_, after)| after);
        } else {
            break;
        }
    }
    let Some(after_at) = rest.strip_prefix('@') else {
        return false;
    };
    let Some(after_id) = after_at.trim_start().strip_prefix(ID_ANNOTATION) else {
        return false;
    };
    // `@identifier` must not count as `@id`.
    !after_id
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
}

fn render_principal(c: &PrincipalConstraint) -> String {
    match c {
        PrincipalConstraint::Any => "principal".to_string(),
        PrincipalConstraint::Eq(u) => format!("principal == {u}"),
        PrincipalConstraint::In(u) => format!("principal in {u}"),
        PrincipalConstraint::Is(t) => format!("principal is {t}"),
        PrincipalConstraint::IsIn(t, u) => format!("principal is {t} in {u}"),
    }
}

fn render_action(c: &ActionConstraint) -> String {
    match c {
        ActionConstraint::Any => "action".to_string(),
        ActionConstraint::Eq(u) => format!("action == {u}"),
        ActionConstraint::In(us) => {
            let list: Vec<String> = us.iter().map(ToString::to_string).collect();
            format!("action in [{}]", list.join(", "))
        }
    }
}

fn render_resource(c: &ResourceConstraint) -> String {
    match c {
        ResourceConstraint::Any => "resource".to_string(),
        ResourceConstraint::Eq(u) => format!("resource == {u}"),
        ResourceConstraint::In(u) => format!("resource in {u}"),
        ResourceConstraint::Is(t) => format!("resource is {t}"),
        ResourceConstraint::IsIn(t, u) => format!("resource is {t} in {u}"),
    }
}

fn is_type(uid: &EntityUid, name: &str) -> bool {
    uid.type_name().to_string() == name
}

/// Reads the scope into a `Scope`, refusing every form whose specificity we have not defined.
fn read_scope(id: &str, policy: &Policy) -> Result<Scope, PolicyError> {
    let unsupported = |part: &str, found: String| PolicyError::UnsupportedScope {
        id: id.to_string(),
        part: part.to_string(),
        found,
    };
    let bad_name = |kind: &str, e: PolicyError| PolicyError::InvalidScopeEntity {
        id: id.to_string(),
        kind: kind.to_string(),
        problem: e.to_string(),
    };
    let mut scope = Scope::default();

    let principal = policy.principal_constraint();
    match &principal {
        PrincipalConstraint::Any => {}
        PrincipalConstraint::Eq(u) if is_type(u, "Agent") => {
            let name = u.id().unescaped();
            // An empty name would match the unenrolled principal `Agent::""`.
            validate_scope_name("agent", name).map_err(|e| bad_name("agent", e))?;
            scope.agent = Some(name.to_string());
        }
        other => return Err(unsupported("principal", render_principal(other))),
    }

    let action = policy.action_constraint();
    match &action {
        ActionConstraint::Any => {}
        ActionConstraint::Eq(u) if is_type(u, "Action") && u.id().unescaped() == "call" => {}
        other => return Err(unsupported("action", render_action(other))),
    }

    let resource = policy.resource_constraint();
    match &resource {
        ResourceConstraint::Any => {}
        ResourceConstraint::Eq(u) if is_type(u, "Tool") => {
            // Connector names cannot contain `/`, so the first `/` splits the id.
            let Some((connector, tool)) = u.id().unescaped().split_once('/') else {
                return Err(PolicyError::InvalidScopeEntity {
                    id: id.to_string(),
                    kind: "tool".to_string(),
                    problem: format!(
                        "{u} has no `/`; an exact tool is written Tool::\"<connector>/<tool>\""
                    ),
                });
            };
            validate_scope_name("connector", connector).map_err(|e| bad_name("connector", e))?;
            validate_tool_name(tool).map_err(|e| bad_name("tool", e))?;
            scope.connector = Some(connector.to_string());
            scope.tool = Some(tool.to_string());
        }
        ResourceConstraint::In(u) if is_type(u, "ToolName") => {
            let tool = u.id().unescaped();
            validate_tool_name(tool).map_err(|e| bad_name("tool", e))?;
            scope.tool = Some(tool.to_string());
        }
        ResourceConstraint::In(u) if is_type(u, "Connector") => {
            let connector = u.id().unescaped();
            validate_scope_name("connector", connector).map_err(|e| bad_name("connector", e))?;
            scope.connector = Some(connector.to_string());
        }
        other => return Err(unsupported("resource", render_resource(other))),
    }
    Ok(scope)
}

/// Reads Holdcall's effect from Cedar's effect and the `@holdcall_effect` annotation.
fn read_effect(id: &str, policy: &Policy) -> Result<Effect, PolicyError> {
    let problem = |p: String| PolicyError::EffectAnnotation {
        id: id.to_string(),
        problem: p,
    };
    match (policy.effect(), policy.annotation(EFFECT_ANNOTATION)) {
        (cedar_policy::Effect::Permit, None | Some("allow")) => Ok(Effect::Allow),
        (cedar_policy::Effect::Permit, Some(v)) => Err(problem(format!(
            "{} on a permit; a permit can only allow (ask and deny rules are forbid policies, so \
             any tool reading the raw Cedar treats them as not allowed)",
            string_literal(v)
        ))),
        (cedar_policy::Effect::Forbid, None | Some("deny")) => Ok(Effect::Deny),
        (cedar_policy::Effect::Forbid, Some("ask")) => Ok(Effect::Ask),
        (cedar_policy::Effect::Forbid, Some(v)) => Err(problem(format!(
            "{} on a forbid; a forbid is \"deny\" or \"ask\"",
            string_literal(v)
        ))),
    }
}

/// Every check on one policy except schema validation (done with one validator for the set).
fn check_one(stored_id: &str, text: &str) -> Result<(Policy, Effect), PolicyError> {
    let id = stored_id.to_string();
    let policy = match Policy::parse(Some(PolicyId::new(stored_id)), text) {
        Ok(p) => p,
        Err(e) => {
            // `Policy::parse` refuses templates with a bare syntax error; say what it was.
            if Template::parse(Some(PolicyId::new(stored_id)), text).is_ok() {
                return Err(PolicyError::Template { id });
            }
            return Err(PolicyError::Syntax {
                id,
                message: e.to_string(),
            });
        }
    };
    match policy.annotation(ID_ANNOTATION) {
        None => return Err(PolicyError::MissingId { id }),
        Some(annotated) if annotated != stored_id => {
            return Err(PolicyError::IdMismatch {
                id,
                annotated: annotated.to_string(),
            });
        }
        Some(_) => {}
    }
    // Cedar keeps annotations in a map, so "first" can only be read from the text.
    if !starts_with_id_annotation(text) {
        return Err(PolicyError::IdNotFirst { id });
    }
    if let Some((key, _)) = policy
        .annotations()
        .find(|(k, _)| k.starts_with("holdcall_") && *k != EFFECT_ANNOTATION)
    {
        return Err(PolicyError::UnknownAnnotation {
            id,
            key: key.to_string(),
        });
    }
    let effect = read_effect(stored_id, &policy)?;
    Ok((policy, effect))
}

pub fn load_validator() -> Result<Validator, PolicyError> {
    let (schema, _warnings) =
        Schema::from_cedarschema_str(SCHEMA_TEXT).map_err(|e| PolicyError::Schema {
            message: e.to_string(),
        })?;
    Ok(Validator::new(schema))
}

/// Strict validation of one policy. Cedar reports a policy that can never apply (e.g.
/// `resource == ToolName::"x"`: the resource is always a `Tool`) only as a warning; such a rule
/// is always a mistake, so it is refused like an error. Other warnings (confusable or
/// bidirectional characters in names) are legitimate in tool names and are let through.
fn validate_one(validator: &Validator, id: &str, policy: &Policy) -> Result<(), PolicyError> {
    let problems = validation_problems(validator, id, policy);
    if problems.is_empty() {
        Ok(())
    } else {
        let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        Err(PolicyError::Validation {
            id: id.to_string(),
            message: messages.join("; "),
        })
    }
}

/// One finding of strict validation, with its byte span in the policy's text when Cedar gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationProblem {
    pub message: String,
    pub span: Option<(usize, usize)>,
    pub help: Option<String>,
}

fn problem_of(d: &(impl miette::Diagnostic + std::fmt::Display)) -> ValidationProblem {
    let span = d
        .labels()
        .and_then(|mut l| l.next())
        .map(|l| (l.offset(), l.len()));
    ValidationProblem {
        message: d.to_string(),
        span,
        help: d.help().map(|h| h.to_string()),
    }
}

/// Whether a validation error is only "this argument attribute is not declared": arguments
/// depend on the tool, so the schema cannot declare them (docs/decisions/0005).
fn is_argument_access(message: &str) -> bool {
    message.contains("attribute `arguments.") && message.contains("in context for")
}

/// Strict validation of one policy against the schema, every problem kept. Argument attributes
/// are the one thing the schema cannot declare: errors about them alone are dropped, and a policy
/// that reads them is also validated as a copy whose argument `has` tests are `true` (on the
/// empty `arguments` record Cedar types them `false` and stops checking what they guard), so the
/// rest of its condition is still type-checked.
pub fn validation_problems(
    validator: &Validator,
    id: &str,
    policy: &Policy,
) -> Vec<ValidationProblem> {
    let reads = reads_arguments(policy);
    let mut out: Vec<ValidationProblem> = Vec::new();
    let run = |p: &Policy, impossible_counts: bool, out: &mut Vec<ValidationProblem>| {
        let mut single = cedar_policy::PolicySet::new();
        if let Err(e) = single.add(p.clone()) {
            out.push(ValidationProblem {
                message: format!("policy {id}: {e}"),
                span: None,
                help: None,
            });
            return;
        }
        let result = validator.validate(&single, ValidationMode::Strict);
        for e in result.validation_errors() {
            let problem = problem_of(e);
            if !is_argument_access(&problem.message)
                && !out.iter().any(|o| o.message == problem.message)
            {
                out.push(problem);
            }
        }
        for w in result.validation_warnings() {
            let counts = match w {
                ValidationWarning::ImpossiblePolicy(_) => impossible_counts,
                ValidationWarning::InvalidActionApplication(_) => true,
                _ => false,
            };
            if counts {
                out.push(problem_of(w));
            }
        }
    };
    run(policy, !reads, &mut out);
    if reads {
        match argument_guards_as_true(id, policy) {
            Some(copy) => run(&copy, true, &mut out),
            None => out.push(ValidationProblem {
                message: format!(
                    "policy {id}: its argument conditions could not be prepared for validation"
                ),
                span: None,
                help: None,
            }),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Reading conditions (Cedar's JSON form, EST)
// ---------------------------------------------------------------------------------------------

fn est_bodies(policy: &Policy) -> Vec<serde_json::Value> {
    let Ok(est) = policy.to_json() else {
        return Vec::new();
    };
    est.get("conditions")
        .and_then(|c| c.as_array())
        .map(|cs| cs.iter().filter_map(|c| c.get("body").cloned()).collect())
        .unwrap_or_default()
}

/// The attribute path a `context.a.b…` expression reads (`[]` for `context` itself).
fn context_path(e: &serde_json::Value) -> Option<Vec<String>> {
    if e.get("Var").and_then(|v| v.as_str()) == Some("context") {
        return Some(Vec::new());
    }
    let dot = e.get(".")?;
    let mut p = context_path(dot.get("left")?)?;
    p.push(dot.get("attr")?.as_str()?.to_string());
    Some(p)
}

/// The path a `has` node tests: `left` then `attr`, which Cedar's JSON gives as one name, or
/// as a list of names for an extended `has` (`context has arguments.branch`).
fn has_path(node: &serde_json::Value) -> Option<Vec<String>> {
    let mut p = context_path(node.get("left")?)?;
    match node.get("attr")? {
        serde_json::Value::String(a) => p.push(a.clone()),
        serde_json::Value::Array(a) => {
            for x in a {
                p.push(x.as_str()?.to_string());
            }
        }
        _ => return None,
    }
    Some(p)
}

fn is_args_path(p: &[String]) -> bool {
    p.first().is_some_and(|a| a == "arguments")
}

/// Whether any condition reads `context.arguments` (by access or `has`).
pub fn reads_arguments(policy: &Policy) -> bool {
    fn walk(e: &serde_json::Value) -> bool {
        for key in [".", "has"] {
            if let Some(node) = e.get(key)
                && let Some(p) = has_path(node)
                && is_args_path(&p)
            {
                return true;
            }
        }
        match e {
            serde_json::Value::Object(m) => m.values().any(walk),
            serde_json::Value::Array(a) => a.iter().any(walk),
            _ => false,
        }
    }
    est_bodies(policy).iter().any(walk)
}

/// Paths known present when `e` is true: its `has` tests, through `&&`.
fn facts(e: &serde_json::Value, out: &mut HashSet<Vec<String>>) {
    if let Some(node) = e.get("has")
        && let Some(p) = has_path(node)
    {
        // `has a.b` makes `a` and `a.b` present.
        for n in 1..=p.len() {
            out.insert(p.iter().take(n).cloned().collect());
        }
    }
    if let Some(node) = e.get("&&") {
        if let Some(l) = node.get("left") {
            facts(l, out);
        }
        if let Some(r) = node.get("right") {
            facts(r, out);
        }
    }
}

/// The first `context.arguments.X…` access not guarded by a `has` that is true wherever it is
/// evaluated (the left of an `&&`, or the condition of an `if`).
fn unguarded(e: &serde_json::Value, guards: &HashSet<Vec<String>>) -> Option<Vec<String>> {
    if let Some(node) = e.get(".")
        && let (Some(left), Some(attr)) =
            (node.get("left"), node.get("attr").and_then(|a| a.as_str()))
    {
        if let Some(mut p) = context_path(left) {
            p.push(attr.to_string());
            if is_args_path(&p) && p.len() > 1 && !guards.contains(&p) {
                return Some(p);
            }
        }
        return unguarded(left, guards);
    }
    if let Some(node) = e.get("has") {
        return node.get("left").and_then(|l| unguarded(l, guards));
    }
    if let Some(node) = e.get("&&") {
        let left = node.get("left")?;
        if let Some(p) = unguarded(left, guards) {
            return Some(p);
        }
        let mut more = guards.clone();
        facts(left, &mut more);
        return node.get("right").and_then(|r| unguarded(r, &more));
    }
    if let Some(node) = e.get("if-then-else") {
        let cond = node.get("if")?;
        if let Some(p) = unguarded(cond, guards) {
            return Some(p);
        }
        let mut more = guards.clone();
        facts(cond, &mut more);
        if let Some(p) = node.get("then").and_then(|t| unguarded(t, &more)) {
            return Some(p);
        }
        return node.get("else").and_then(|x| unguarded(x, guards));
    }
    match e {
        serde_json::Value::Object(m) => m.values().find_map(|v| unguarded(v, guards)),
        serde_json::Value::Array(a) => a.iter().find_map(|v| unguarded(v, guards)),
        _ => None,
    }
}

/// The first unguarded argument access of a policy, as `arguments.x.y`.
pub fn unguarded_argument(policy: &Policy) -> Option<String> {
    est_bodies(policy)
        .iter()
        .find_map(|b| unguarded(b, &HashSet::new()))
        .map(|p| p.join("."))
}

/// A copy of the policy whose `has` tests on arguments are the literal `true`: validation only.
fn argument_guards_as_true(id: &str, policy: &Policy) -> Option<Policy> {
    fn rewrite(e: &mut serde_json::Value) {
        let is_args_has = e
            .get("has")
            .and_then(has_path)
            .is_some_and(|p| is_args_path(&p));
        if is_args_has {
            *e = serde_json::json!({ "Value": true });
            return;
        }
        match e {
            serde_json::Value::Object(m) => m.values_mut().for_each(rewrite),
            serde_json::Value::Array(a) => a.iter_mut().for_each(rewrite),
            _ => {}
        }
    }
    let mut est = policy.to_json().ok()?;
    if let Some(conds) = est.get_mut("conditions") {
        rewrite(conds);
    }
    Policy::from_json(Some(PolicyId::new(id)), est).ok()
}

/// Import warnings for one policy (they never refuse it): conditions that test the principal or
/// the resource like a scope would (they add no specificity). Whether a named agent is enrolled
/// is the daemon's check at import, not a lint.
pub fn lint_warnings(policy: &Policy) -> Vec<String> {
    fn scope_like(e: &serde_json::Value) -> bool {
        for key in ["==", "in", "is"] {
            if let Some(node) = e.get(key)
                && let Some(left) = node.get("left")
                && matches!(
                    left.get("Var").and_then(|v| v.as_str()),
                    Some("principal" | "resource")
                )
            {
                return true;
            }
        }
        match e {
            serde_json::Value::Object(m) => m.values().any(scope_like),
            serde_json::Value::Array(a) => a.iter().any(scope_like),
            _ => false,
        }
    }
    let mut out = Vec::new();
    if est_bodies(policy).iter().any(scope_like) {
        out.push(
            "a condition tests `principal` or `resource` like a scope would, but conditions add no \
             specificity: move the test into the scope (`principal == Agent::\"A\"`, `resource in \
             Connector::\"C\"`, …) if the rule should outrank less specific ones"
                .to_string(),
        );
    }
    out
}

/// Every agent a policy names as an entity literal, in its scope or its conditions
/// (`Agent::"X"` anywhere Cedar sees an entity), sorted and without repeats. `Agent::""`, the
/// unenrolled principal, is not a name and is left out: it can never be enrolled.
pub fn agents_named(policy: &Policy) -> Vec<String> {
    let mut out: Vec<String> = policy
        .entity_literals()
        .into_iter()
        .filter(|u| is_type(u, "Agent"))
        .map(|u| u.id().unescaped().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// [`agents_named`] for the text of a stored policy; a text that does not parse names none.
pub fn agents_named_in_text(text: &str) -> Vec<String> {
    Policy::parse(None, text)
        .map(|p| agents_named(&p))
        .unwrap_or_default()
}

/// The full check of one stored policy, in the order a user should fix things: syntax, id,
/// annotations and effect, schema, then scope form.
fn compile_one(validator: &Validator, id: &str, text: &str) -> Result<Checked, PolicyError> {
    let (policy, effect) = check_one(id, text)?;
    validate_one(validator, id, &policy)?;
    let scope = read_scope(id, &policy)?;
    // A permit that errors is skipped, which only takes an allow away; a forbid that errors
    // would fail open in Cedar, so its argument reads must be guarded.
    if effect != Effect::Allow
        && let Some(path) = unguarded_argument(&policy)
    {
        return Err(PolicyError::UnguardedArgument {
            id: id.to_string(),
            path,
        });
    }
    Ok(Checked {
        reads_arguments: reads_arguments(&policy),
        effect,
        specificity: specificity_of_scope(&scope),
        scope,
        conditional: policy.has_non_scope_constraint(),
        policy,
    })
}

/// Parses and checks one policy as `PolicySet::compile` would, returning what a row stores.
pub fn parse_effect_and_specificity(id: &str, text: &str) -> Result<(Effect, i64), PolicyError> {
    let validator = load_validator()?;
    let checked = compile_one(&validator, id, text)?;
    Ok((checked.effect, checked.specificity))
}

// ---------------------------------------------------------------------------------------------
// Requests, decisions, explanations
// ---------------------------------------------------------------------------------------------

/// One `tools/call` as the policy sees it. `agent: None` is a session with no enrolled agent;
/// `connector` may be `""` when unknown.
#[derive(Debug, Clone, Copy)]
pub struct CallRequest<'a> {
    pub agent: Option<&'a str>,
    pub connector: &'a str,
    pub tool: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    pub effect: Effect,
    /// The policy that decided: the winner, or the errored forbid that overrode it.
    pub policy_id: Option<String>,
    pub reason: String,
}

/// Cedar's own two answers, as it reported them, next to what Holdcall decided.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct CedarDiagnostics {
    pub permit_decision: String,
    pub permit_reasons: Vec<String>,
    pub forbid_decision: String,
    pub forbid_reasons: Vec<String>,
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Explanation {
    pub agent: Option<String>,
    pub connector: String,
    pub tool: String,
    pub decision: Decision,
    /// The policy named by `decision.policy_id` (the winner, or the errored forbid that
    /// overrode it); `None` when no rule applies.
    pub winner: Option<PolicyInfo>,
    /// Every matching policy, most specific first, in the order the wrapper ranks them.
    pub matching: Vec<PolicyInfo>,
    pub tie_break: String,
    pub cedar: CedarDiagnostics,
    /// Every policy that could apply (its scope's bucket is one the call hits), in seq order,
    /// with what became of it.
    #[serde(default)]
    pub considered: Vec<Considered>,
}

/// One policy that could apply to a call, and what its evaluation gave.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Considered {
    pub id: String,
    pub effect: Effect,
    pub specificity: i64,
    /// `matched`, `not matched`, `errored` or `not evaluated`.
    pub outcome: String,
    /// Cedar's error message, or why the rule was not evaluated.
    pub detail: Option<String>,
}

/// The wrapper's full result; `decide` keeps the decision, `explain` keeps everything.
struct Outcome {
    considered: Vec<Considered>,
    decision: Decision,
    decider: Option<usize>,
    matching: Vec<usize>,
    tie_break: String,
    cedar: CedarDiagnostics,
}

impl Outcome {
    /// A decision reached without ranking: fail closed.
    fn refuse(reason: String, cedar: CedarDiagnostics) -> Outcome {
        Outcome {
            considered: Vec::new(),
            decision: Decision {
                effect: Effect::Deny,
                policy_id: None,
                reason: reason.clone(),
            },
            decider: None,
            matching: Vec::new(),
            tie_break: reason,
            cedar,
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn article(effect: Effect) -> &'static str {
    match effect {
        Effect::Allow | Effect::Ask => "an",
        Effect::Deny => "a",
    }
}

fn verb(effect: Effect) -> &'static str {
    match effect {
        Effect::Allow => "allows",
        Effect::Ask => "asks",
        Effect::Deny => "denies",
    }
}

impl PolicySet {
    /// No policies: every call is allowed ("no rule applies").
    pub fn empty() -> PolicySet {
        PolicySet {
            infos: Vec::new(),
            scopes: Vec::new(),
            reads_args: Vec::new(),
            by_id: HashMap::new(),
            index: Index::default(),
            authorizer: Authorizer::new(),
            names: Names::new().ok(),
        }
    }

    /// Parses each policy under its stored id and checks it (`@id` first and equal to the id,
    /// `@holdcall_effect`, supported scope form, strict validation). The first failure, in
    /// seq order, is the error. Input order does not matter; `seq` does.
    pub fn compile(policies: &[StoredPolicy]) -> Result<PolicySet, PolicyError> {
        PolicySet::build(policies, true)
    }

    /// `compile`, with or without the scope index (`false` puts every policy in the global
    /// bucket: the reference the index is tested against).
    fn build(policies: &[StoredPolicy], indexed: bool) -> Result<PolicySet, PolicyError> {
        let names = Names::new().map_err(|message| PolicyError::Schema { message })?;
        let validator = load_validator()?;
        let mut sorted: Vec<&StoredPolicy> = policies.iter().collect();
        sorted.sort_by(|a, b| (a.seq, &a.id).cmp(&(b.seq, &b.id)));

        let mut set = PolicySet::empty();
        set.names = Some(names);
        for stored in sorted {
            if set.by_id.contains_key(&stored.id) {
                return Err(PolicyError::DuplicateId {
                    id: stored.id.clone(),
                });
            }
            let checked = compile_one(&validator, &stored.id, &stored.text)?;
            let bucket = if indexed {
                set.index.bucket_mut(&checked.scope)
            } else {
                &mut set.index.global
            };
            let half = match checked.effect {
                Effect::Allow => &mut bucket.permits,
                Effect::Ask | Effect::Deny => &mut bucket.forbids,
            };
            half.add(checked.policy)
                .map_err(|e| PolicyError::DuplicateId {
                    id: format!("{} ({e})", stored.id),
                })?;
            set.by_id.insert(stored.id.clone(), set.infos.len());
            set.infos.push(PolicyInfo {
                id: stored.id.clone(),
                seq: stored.seq,
                effect: checked.effect,
                specificity: checked.specificity,
                text: stored.text.clone(),
            });
            set.scopes.push((checked.scope, checked.conditional));
            set.reads_args.push(checked.reads_arguments);
        }
        Ok(set)
    }

    /// Every policy, in seq order.
    pub fn info(&self) -> &[PolicyInfo] {
        &self.infos
    }

    /// The whole set as Cedar text: policies in seq order, one blank line between them, a
    /// final newline; `""` when empty. Stable, so two versions can be diffed.
    pub fn text(&self) -> String {
        set_text(self.infos.iter().map(|i| i.text.as_str()))
    }

    /// The daemon's decision for one call. Pure; Cedar evaluations of the (at most four) buckets
    /// the call can hit, then a ranking.
    pub fn decide(&self, req: &CallRequest<'_>) -> Decision {
        self.evaluate(req, &CallContext::empty()).decision
    }

    /// `decide` with the call's arguments and the time. A rule that reads `context.arguments`
    /// is never evaluated on arguments that could not be read (omitted, beyond a cap,
    /// unreadable): such a deny or ask rule that could apply refuses or holds the call, and such
    /// an allow rule cannot allow it.
    pub fn decide_with(&self, req: &CallRequest<'_>, ctx: &CallContext) -> Decision {
        self.evaluate(req, ctx).decision
    }

    /// `explain` with the call's arguments and the time.
    pub fn explain_with(&self, req: &CallRequest<'_>, ctx: &CallContext) -> Explanation {
        let outcome = self.evaluate(req, ctx);
        self.explanation(req, outcome)
    }

    /// The same evaluation as `decide`, with every matching policy, the tie-break and Cedar's
    /// own diagnostics per half.
    pub fn explain(&self, req: &CallRequest<'_>) -> Explanation {
        let outcome = self.evaluate(req, &CallContext::empty());
        self.explanation(req, outcome)
    }

    fn explanation(&self, req: &CallRequest<'_>, outcome: Outcome) -> Explanation {
        let pick = |i: &usize| self.infos.get(*i).cloned();
        Explanation {
            agent: req.agent.map(str::to_string),
            connector: req.connector.to_string(),
            tool: req.tool.to_string(),
            winner: outcome.decider.as_ref().and_then(pick),
            matching: outcome.matching.iter().filter_map(pick).collect(),
            tie_break: outcome.tie_break,
            cedar: outcome.cedar,
            considered: outcome.considered,
            decision: outcome.decision,
        }
    }

    /// Builds the Cedar request and the entity slice: the Tool with its two parents, the
    /// parents themselves, and the Agent (`Agent::""` for an unenrolled session).
    fn request(
        &self,
        names: &Names,
        req: &CallRequest<'_>,
        tool_id: &str,
        ctx: &CallContext,
    ) -> Result<(Request, Entities), String> {
        let agent = EntityUid::from_type_name_and_id(
            names.agent.clone(),
            EntityId::new(req.agent.unwrap_or("")),
        );
        let connector =
            EntityUid::from_type_name_and_id(names.connector.clone(), EntityId::new(req.connector));
        let tool_name =
            EntityUid::from_type_name_and_id(names.tool_name.clone(), EntityId::new(req.tool));
        let tool = EntityUid::from_type_name_and_id(names.tool.clone(), EntityId::new(tool_id));
        let entities = Entities::from_entities(
            [
                Entity::new_no_attrs(
                    tool.clone(),
                    HashSet::from([connector.clone(), tool_name.clone()]),
                ),
                Entity::new_no_attrs(connector, HashSet::new()),
                Entity::new_no_attrs(tool_name, HashSet::new()),
                Entity::new_no_attrs(agent.clone(), HashSet::new()),
            ],
            None,
        )
        .map_err(|e| e.to_string())?;
        // No schema here: a call must be decided, never rejected for its shape.
        let request = Request::new(agent, names.call.clone(), tool, ctx.to_cedar()?, None)
            .map_err(|e| e.to_string())?;
        Ok((request, entities))
    }

    /// Ranking key: most specific first, then deny > ask > allow, then oldest (index order is
    /// seq order).
    fn rank_key(&self, i: usize) -> (Reverse<i64>, Reverse<Effect>, usize) {
        match self.infos.get(i) {
            Some(info) => (Reverse(info.specificity), Reverse(info.effect), i),
            None => (Reverse(i64::MIN), Reverse(Effect::Allow), i),
        }
    }

    fn summary(&self, i: usize) -> String {
        let (Some(info), Some((scope, conditional))) = (self.infos.get(i), self.scopes.get(i))
        else {
            return String::new();
        };
        let mut s = format!("rule {} ({} {}", info.id, info.effect, scope.describe());
        if *conditional {
            s.push_str(", when its conditions hold");
        }
        s.push(')');
        s
    }

    fn evaluate(&self, req: &CallRequest<'_>, ctx: &CallContext) -> Outcome {
        let Some(names) = &self.names else {
            return Outcome::refuse(
                "Holdcall could not set up its Cedar names, so every call is denied".to_string(),
                CedarDiagnostics::default(),
            );
        };
        let tool_id = format!("{}/{}", req.connector, req.tool);
        let (request, entities) = match self.request(names, req, &tool_id, ctx) {
            Ok(parts) => parts,
            Err(e) => {
                return Outcome::refuse(
                    format!(
                        "the call could not be turned into a Cedar request ({e}), so it is denied"
                    ),
                    CedarDiagnostics::default(),
                );
            }
        };
        // Two calls per bucket, not one: in a single set `reason()` hides every permit once any
        // forbid matches, and the wrapper needs every match. Only the buckets this request can
        // hit are asked (see `Index`), and an empty half has nothing to say.
        let mut permits: Vec<Response> = Vec::new();
        let mut forbids: Vec<Response> = Vec::new();
        for halves in self.index.buckets(&tool_id, req).into_iter().flatten() {
            if !halves.permits.is_empty() {
                permits.push(
                    self.authorizer
                        .is_authorized(&request, &halves.permits, &entities),
                );
            }
            if !halves.forbids.is_empty() {
                forbids.push(
                    self.authorizer
                        .is_authorized(&request, &halves.forbids, &entities),
                );
            }
        }
        let cedar = diagnostics(&permits, &forbids);

        let mut matching = Vec::new();
        for id in permits
            .iter()
            .chain(&forbids)
            .flat_map(|r| r.diagnostics().reason())
        {
            match self.by_id.get(AsRef::<str>::as_ref(id)) {
                Some(&i) => matching.push(i),
                None => {
                    return Outcome::refuse(
                        format!(
                            "Cedar reported rule {id}, which Holdcall does not know, so the call is denied"
                        ),
                        cedar,
                    );
                }
            }
        }
        let permit_errors: Vec<(usize, String)> = permits
            .iter()
            .flat_map(|r| r.diagnostics().errors())
            .filter_map(|err| {
                let AuthorizationError::PolicyEvaluationError(e) = err;
                self.by_id
                    .get(AsRef::<str>::as_ref(e.policy_id()))
                    .map(|&i| (i, e.inner().to_string()))
            })
            .collect();
        // Skip-on-error would make an erroring forbid fail open; collect them to escalate.
        let mut errored: Vec<(usize, String)> = Vec::new();
        for err in forbids.iter().flat_map(|r| r.diagnostics().errors()) {
            let AuthorizationError::PolicyEvaluationError(e) = err;
            match self.by_id.get(AsRef::<str>::as_ref(e.policy_id())) {
                Some(&i) => errored.push((i, e.inner().to_string())),
                None => {
                    return Outcome::refuse(
                        format!(
                            "a rule Holdcall does not know failed in Cedar ({err}), so the call is denied"
                        ),
                        cedar,
                    );
                }
            }
        }
        // Every policy the call's buckets hold could apply; Cedar said which matched or erred.
        let mut could_apply: Vec<usize> = self
            .index
            .buckets(&tool_id, req)
            .into_iter()
            .flatten()
            .flat_map(|h| h.permits.policies().chain(h.forbids.policies()))
            .filter_map(|p| self.by_id.get(AsRef::<str>::as_ref(p.id())).copied())
            .collect();
        could_apply.sort_unstable();
        could_apply.dedup();
        let reads = |i: usize| self.reads_args.get(i).copied().unwrap_or(true);
        // Arguments that could not be read: no rule that reads them decides on the stand-in
        // empty record. Their matches and errors are dropped; a deny or ask among them sets a
        // floor below (refuse or hold), an allow among them cannot allow.
        let args_problem = ctx.arguments.as_ref().err();
        if let Some(problem) = args_problem {
            matching.retain(|&i| !reads(i));
            errored.retain(|(i, _)| !reads(*i));
            for &i in &could_apply {
                if reads(i)
                    && self
                        .infos
                        .get(i)
                        .is_some_and(|info| info.effect != Effect::Allow)
                {
                    errored.push((i, format!("it reads the call's arguments, and {problem}")));
                }
            }
        }
        let considered: Vec<Considered> = could_apply
            .iter()
            .filter_map(|&i| {
                let info = self.infos.get(i)?;
                let (outcome, detail) = if let (true, Some(problem)) = (reads(i), args_problem) {
                    ("not evaluated", Some(problem.to_string()))
                } else if let Some((_, msg)) = errored.iter().find(|(e, _)| *e == i) {
                    ("errored", Some(msg.clone()))
                } else if let Some(msg) =
                    permit_errors.iter().find(|(e, _)| *e == i).map(|(_, m)| m)
                {
                    ("errored", Some(msg.clone()))
                } else if matching.contains(&i) {
                    ("matched", None)
                } else {
                    ("not matched", None)
                };
                Some(Considered {
                    id: info.id.clone(),
                    effect: info.effect,
                    specificity: info.specificity,
                    outcome: outcome.to_string(),
                    detail,
                })
            })
            .collect();
        matching.sort_by_key(|&i| self.rank_key(i));
        matching.dedup();

        let (mut decision, mut decider, mut tie_break) = self.rank(&matching);
        if let Some(problem) = args_problem
            && decision.effect == Effect::Allow
            && could_apply.iter().any(|&i| reads(i))
        {
            let _ = write!(
                decision.reason,
                "; rules that read the arguments were not evaluated: {problem}"
            );
        }

        // Fail closed: the strictest errored forbid sets a floor on the decision (whatever its
        // specificity: we cannot know whether it would have matched); among equals, the
        // best-ranked one is named.
        let floor = errored
            .iter()
            .filter_map(|(i, msg)| self.infos.get(*i).map(|info| (info, *i, msg)))
            .max_by_key(|(info, i, _)| (info.effect, Reverse(self.rank_key(*i))));
        if let Some((info, i, msg)) = floor {
            if decision.effect >= info.effect {
                let _ = write!(
                    decision.reason,
                    "; rule {} could not be evaluated ({msg}), but the call is {} anyway",
                    info.id,
                    match decision.effect {
                        Effect::Deny => "denied",
                        Effect::Ask => "asked about",
                        Effect::Allow => "allowed",
                    }
                );
            } else {
                let why = format!(
                    "rule {} could not be evaluated ({msg}), and {} {} rule that cannot be evaluated {}",
                    info.id,
                    article(info.effect),
                    info.effect,
                    verb(info.effect)
                );
                tie_break = why.clone();
                decision = Decision {
                    effect: info.effect,
                    policy_id: Some(info.id.clone()),
                    reason: why,
                };
                decider = Some(i);
            }
        }
        Outcome {
            considered,
            decision,
            decider,
            matching,
            tie_break,
            cedar,
        }
    }

    /// Picks the winner among ranked matches; returns the decision, its index, the tie-break.
    fn rank(&self, matching: &[usize]) -> (Decision, Option<usize>, String) {
        let (Some(&w), Some(winner)) = (
            matching.first(),
            matching.first().and_then(|&w| self.infos.get(w)),
        ) else {
            return (
                Decision {
                    effect: Effect::Allow,
                    policy_id: None,
                    reason: "no rule matches this call, so it is allowed".to_string(),
                },
                None,
                "no rule matches: allow".to_string(),
            );
        };
        let n = matching.len();
        let s = winner.specificity;
        let summary = self.summary(w);
        let runner_up = matching.get(1).and_then(|&i| self.infos.get(i));
        let (reason, tie_break) = match runner_up {
            None => (
                format!("{summary} is the only matching rule"),
                "only one rule matches".to_string(),
            ),
            Some(r) if r.specificity < s => (
                format!("{summary} is the most specific of {n} matching rules"),
                format!("highest specificity ({s})"),
            ),
            Some(r) if r.effect < winner.effect => {
                let tied: Vec<&PolicyInfo> = matching
                    .iter()
                    .filter_map(|&i| self.infos.get(i))
                    .filter(|i| i.specificity == s)
                    .collect();
                let mut lower: Vec<Effect> = tied
                    .iter()
                    .map(|i| i.effect)
                    .filter(|e| *e < winner.effect)
                    .collect();
                lower.sort_by(|a, b| b.cmp(a));
                lower.dedup();
                let lower: Vec<&str> = lower.iter().map(|e| e.as_str()).collect();
                let lower = lower.join(" and ");
                (
                    format!(
                        "{summary} ties with {} at specificity {s} (of {n} matching rules) and wins because {} goes before {lower}",
                        plural(tied.len().saturating_sub(1), "other rule"),
                        winner.effect
                    ),
                    format!(
                        "tie at specificity {s} went to {} over {lower}",
                        winner.effect
                    ),
                )
            }
            Some(_) => (
                format!(
                    "{summary} ties at specificity {s} with another {} rule (of {n} matching rules) and wins as the oldest",
                    winner.effect
                ),
                format!(
                    "tie at specificity {s} and {} went to the oldest rule",
                    winner.effect
                ),
            ),
        };
        (
            Decision {
                effect: winner.effect,
                policy_id: Some(winner.id.clone()),
                reason,
            },
            Some(w),
            tie_break,
        )
    }
}

/// Cedar's answers for the permit halves and the forbid halves of the buckets asked, reported
/// as if each kind had been one set: a permits-only set allows exactly when one of its permits
/// matches, and a forbids-only set always denies (a match denies; no match allows nothing).
fn diagnostics(permits: &[Response], forbids: &[Response]) -> CedarDiagnostics {
    let reasons = |rs: &[Response]| {
        let mut ids: Vec<String> = rs
            .iter()
            .flat_map(|r| r.diagnostics().reason())
            .map(ToString::to_string)
            .collect();
        ids.sort();
        ids
    };
    let mut errors: Vec<String> = permits
        .iter()
        .chain(forbids)
        .flat_map(|r| r.diagnostics().errors())
        .map(ToString::to_string)
        .collect();
    errors.sort();
    let permit_decision = if permits.iter().any(|r| r.decision() == CedarDecision::Allow) {
        CedarDecision::Allow
    } else {
        CedarDecision::Deny
    };
    CedarDiagnostics {
        permit_decision: format!("{permit_decision:?}"),
        permit_reasons: reasons(permits),
        forbid_decision: format!("{:?}", CedarDecision::Deny),
        forbid_reasons: reasons(forbids),
        errors,
    }
}

// ---------------------------------------------------------------------------------------------
// Diffs
// ---------------------------------------------------------------------------------------------

/// The text of a whole set from its policies' texts in seq order, as [`PolicySet::text`] gives
/// it (and as every `policy.change` diff is taken over): trimmed, one blank line between them,
/// a final newline; `""` when empty.
pub fn set_text<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    let parts: Vec<&str> = texts.into_iter().map(str::trim).collect();
    if parts.is_empty() {
        return String::new();
    }
    let mut out = parts.join("\n\n");
    out.push('\n');
    out
}

/// The `@id` of one policy's text, if it parses and has one.
pub fn id_of(text: &str) -> Option<String> {
    Policy::parse(None, text)
        .ok()
        .and_then(|p| p.annotation(ID_ANNOTATION).map(str::to_string))
}

/// A unified line diff with 3 lines of context and the given labels; `""` when equal.
pub fn unified_diff(before: &str, after: &str, before_label: &str, after_label: &str) -> String {
    if before == after {
        return String::new();
    }
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(before_label, after_label)
        .to_string()
}

/// Applies a unified diff made by `unified_diff` to `before` (the text it was made from).
/// `""` is no change. Used to rebuild past policy sets from the journal's diffs alone.
pub fn apply_unified_diff(before: &str, diff: &str) -> Result<String, String> {
    if diff.is_empty() {
        return Ok(before.to_string());
    }
    let old: Vec<&str> = before.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut pos = 0usize; // next line of `old` not yet copied
    for line in diff.split_inclusive('\n') {
        if line.starts_with("--- ") || line.starts_with("+++ ") {
            continue;
        }
        if let Some(header) = line.strip_prefix("@@ -") {
            let start = header
                .split([',', ' '])
                .next()
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| format!("bad hunk header {line:?}"))?;
            let count_zero = header.split(' ').next().is_some_and(|r| r.ends_with(",0"));
            // `-0,0` and `-N,0` name the line before the hunk; otherwise the hunk starts at N.
            let target = if count_zero {
                start
            } else {
                start.saturating_sub(1)
            };
            if target < pos {
                return Err(format!("hunk {line:?} goes backwards"));
            }
            for l in old.get(pos..target).ok_or("a hunk starts past the end")? {
                out.push_str(l);
            }
            pos = target;
            continue;
        }
        if line.starts_with('\\') {
            continue;
        }
        let (tag, body) = line.split_at(line.chars().next().map_or(0, char::len_utf8));
        match tag {
            " " | "-" => {
                if old.get(pos).copied() != Some(body) {
                    return Err(format!("line {} does not match the diff", pos + 1));
                }
                if tag == " " {
                    out.push_str(body);
                }
                pos += 1;
            }
            "+" => out.push_str(body),
            _ => return Err(format!("unexpected diff line {line:?}")),
        }
    }
    for l in old.get(pos..).unwrap_or(&[]) {
        out.push_str(l);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The precedence table (tests/policy/precedence.txt)
// ---------------------------------------------------------------------------------------------

/// One line of the precedence table: rules in insertion order (rule 1 is the oldest), the
/// expected effect, and the 1-based index of the winning rule (0 = no rule applies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrecedenceCase {
    pub rules: Vec<(Effect, Scope)>,
    pub expected: Effect,
    pub winner: usize,
}

impl PrecedenceCase {
    /// The request every case is decided for: agent `A`, connector `C`, tool `T`.
    pub const REQUEST: CallRequest<'static> = CallRequest {
        agent: Some("A"),
        connector: "C",
        tool: "T",
    };
}

/// Reads a table scope: `[agent:](tool|*)[@connector]`, e.g. `T`, `A:*@C`.
fn parse_table_scope(token: &str) -> Result<Scope, String> {
    let (agent, rest) = match token.split_once(':') {
        Some((a, rest)) => (Some(a), rest),
        None => (None, token),
    };
    let (tool, connector) = match rest.split_once('@') {
        Some((t, c)) => (t, Some(c)),
        None => (rest, None),
    };
    let part = |what: &str, v: &str| {
        if v.is_empty() {
            Err(format!("empty {what} in scope {token:?}"))
        } else {
            Ok(v.to_string())
        }
    };
    Ok(Scope {
        agent: agent.map(|a| part("agent", a)).transpose()?,
        tool: if tool == "*" {
            None
        } else {
            Some(part("tool", tool)?)
        },
        connector: connector.map(|c| part("connector", c)).transpose()?,
    })
}

/// Parses one line of `tests/policy/precedence.txt`:
/// `<effect> <scope> ; <effect> <scope> … => <effect> <winner index>`.
/// `None` for blank lines, `#` comments and the `request A C T` line (the request is fixed,
/// see `PrecedenceCase::REQUEST`; any other request line is an error).
pub fn parse_precedence_case(line: &str) -> Option<Result<PrecedenceCase, String>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    if let Some(request) = line.strip_prefix("request") {
        let words: Vec<&str> = request.split_whitespace().collect();
        if words == ["A", "C", "T"] {
            return None;
        }
        return Some(Err(format!(
            "the request is fixed as `request A C T`, not {line:?}"
        )));
    }
    Some(parse_case_line(line))
}

fn parse_case_line(line: &str) -> Result<PrecedenceCase, String> {
    let (rules_text, expected_text) = line
        .split_once("=>")
        .ok_or_else(|| format!("no `=>` in {line:?}"))?;
    let mut rules = Vec::new();
    for rule in rules_text.split(';') {
        let words: Vec<&str> = rule.split_whitespace().collect();
        let [effect, scope] = words.as_slice() else {
            return Err(format!("rule {rule:?} is not `<effect> <scope>`"));
        };
        let effect = Effect::parse(effect).ok_or_else(|| format!("unknown effect {effect:?}"))?;
        rules.push((effect, parse_table_scope(scope)?));
    }
    let words: Vec<&str> = expected_text.split_whitespace().collect();
    let [effect, winner] = words.as_slice() else {
        return Err(format!(
            "expectation {expected_text:?} is not `<effect> <winner>`"
        ));
    };
    let expected = Effect::parse(effect).ok_or_else(|| format!("unknown effect {effect:?}"))?;
    let winner: usize = winner
        .parse()
        .map_err(|_| format!("winner {winner:?} is not a number"))?;
    if winner > rules.len() {
        return Err(format!(
            "winner {winner} but only {} rules in {line:?}",
            rules.len()
        ));
    }
    Ok(PrecedenceCase {
        rules,
        expected,
        winner,
    })
}

#[cfg(test)]
#[allow(
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test reports failure by panicking; the crate-wide bans are for non-test code"
)]
mod tests {
    use super::*;

    fn scope(tool: Option<&str>, agent: Option<&str>, connector: Option<&str>) -> Scope {
        Scope {
            tool: tool.map(str::to_string),
            agent: agent.map(str::to_string),
            connector: connector.map(str::to_string),
        }
    }

    fn rule(seq: i64, effect: Effect, s: &Scope) -> StoredPolicy {
        let id = format!("rule-{seq}");
        StoredPolicy {
            seq,
            text: cli_rule_text(&id, effect, s),
            id,
        }
    }

    fn raw(seq: i64, id: &str, text: &str) -> StoredPolicy {
        StoredPolicy {
            seq,
            id: id.to_string(),
            text: text.to_string(),
        }
    }

    fn call<'a>(agent: Option<&'a str>, connector: &'a str, tool: &'a str) -> CallRequest<'a> {
        CallRequest {
            agent,
            connector,
            tool,
        }
    }

    fn compile(policies: &[StoredPolicy]) -> PolicySet {
        match PolicySet::compile(policies) {
            Ok(set) => set,
            Err(e) => panic!("compile failed: {e}"),
        }
    }

    fn compile_err(id: &str, text: &str) -> PolicyError {
        match PolicySet::compile(&[raw(1, id, text)]) {
            Ok(_) => panic!("policy {id} compiled but should not have:\n{text}"),
            Err(e) => e,
        }
    }

    #[test]
    fn the_embedded_schema_loads() {
        assert!(load_validator().is_ok());
    }

    #[test]
    fn no_rules_allow_every_call() {
        for set in [PolicySet::empty(), compile(&[])] {
            let d = set.decide(&call(Some("claude"), "github", "delete_file"));
            assert_eq!(d.effect, Effect::Allow);
            assert_eq!(d.policy_id, None);
            assert_eq!(d.reason, "no rule matches this call, so it is allowed");
            assert_eq!(set.text(), "");
        }
    }

    #[test]
    fn a_deny_rule_refuses_its_tool_and_nothing_else() {
        let set = compile(&[rule(
            1,
            Effect::Deny,
            &scope(Some("delete_file"), None, None),
        )]);
        let d = set.decide(&call(Some("claude"), "github", "delete_file"));
        assert_eq!(d.effect, Effect::Deny);
        assert_eq!(d.policy_id.as_deref(), Some("rule-1"));
        assert_eq!(
            d.reason,
            "rule rule-1 (deny tool delete_file for every agent on every connector) is the only matching rule"
        );
        assert_eq!(
            set.decide(&call(None, "", "delete_file")).effect,
            Effect::Deny
        );
        for tool in ["read_file", "delete_file2", "Delete_file", "delete", ""] {
            let d = set.decide(&call(Some("claude"), "github", tool));
            assert_eq!(d.effect, Effect::Allow, "tool {tool:?}");
            assert_eq!(d.policy_id, None);
        }
    }

    #[test]
    fn an_agent_named_rule_never_matches_the_unenrolled_principal() {
        let set = compile(&[
            rule(1, Effect::Deny, &scope(None, Some("claude"), None)),
            rule(
                2,
                Effect::Deny,
                &scope(Some("t"), Some("claude"), Some("c")),
            ),
        ]);
        assert_eq!(
            set.decide(&call(Some("claude"), "c", "t")).effect,
            Effect::Deny
        );
        assert_eq!(set.decide(&call(None, "c", "t")).effect, Effect::Allow);
        assert_eq!(set.decide(&call(Some(""), "c", "t")).effect, Effect::Allow);
        assert_eq!(
            set.decide(&call(Some("other"), "c", "t")).effect,
            Effect::Allow
        );
        // And a rule can't name the empty agent to target unenrolled sessions by the back door.
        let text = "@id(\"r\")\nforbid (principal == Agent::\"\", action, resource);";
        assert!(matches!(
            compile_err("r", text),
            PolicyError::InvalidScopeEntity { ref kind, .. } if kind == "agent"
        ));
    }

    #[test]
    fn every_agent_a_policy_names_is_found_in_its_scope_and_its_conditions() {
        let text = "@id(\"r\")\nforbid (principal == Agent::\"a\", action, resource)\n\
                    when { principal == Agent::\"c\" || [Agent::\"b\", Agent::\"\"].contains(principal) \
                    || resource == Tool::\"x/y\" };";
        assert_eq!(agents_named_in_text(text), vec!["a", "b", "c"]);
        assert!(
            agents_named_in_text("@id(\"r\") permit (principal, action, resource);").is_empty()
        );
    }

    #[test]
    fn ask_is_a_forbid_with_the_annotation_and_evaluates_as_ask() {
        let text = cli_rule_text("rule-1", Effect::Ask, &scope(Some("push"), None, None));
        assert!(
            text.contains("@holdcall_effect(\"ask\")\nforbid ("),
            "{text}"
        );
        let set = compile(&[raw(1, "rule-1", &text)]);
        let d = set.decide(&call(Some("claude"), "git", "push"));
        assert_eq!(d.effect, Effect::Ask);
        assert_eq!(d.policy_id.as_deref(), Some("rule-1"));
        // Cedar itself sees a forbid: anything reading the raw Cedar fails closed.
        let e = set.explain(&call(Some("claude"), "git", "push"));
        assert_eq!(e.cedar.forbid_reasons, vec!["rule-1".to_string()]);
        assert_eq!(e.cedar.permit_reasons, Vec::<String>::new());
        assert_eq!(e.cedar.permit_decision, "Deny");
        // A hand-written ask policy is the same thing.
        let hand = "@id(\"h\") @holdcall_effect(\"ask\") forbid (principal, action, resource in ToolName::\"push\");";
        assert_eq!(
            parse_effect_and_specificity("h", hand),
            Ok((Effect::Ask, 4))
        );
    }

    #[test]
    fn a_connector_scoped_rule_stops_at_its_connector() {
        let set = compile(&[
            rule(1, Effect::Deny, &scope(None, None, Some("github"))),
            rule(2, Effect::Ask, &scope(Some("push"), None, Some("gitlab"))),
        ]);
        assert_eq!(
            set.decide(&call(Some("a"), "github", "anything")).effect,
            Effect::Deny
        );
        assert_eq!(
            set.decide(&call(Some("a"), "github2", "anything")).effect,
            Effect::Allow
        );
        assert_eq!(
            set.decide(&call(Some("a"), "", "anything")).effect,
            Effect::Allow
        );
        assert_eq!(
            set.decide(&call(Some("a"), "gitlab", "push")).effect,
            Effect::Ask
        );
        assert_eq!(
            set.decide(&call(Some("a"), "gitlab", "pull")).effect,
            Effect::Allow
        );
        assert_eq!(
            set.decide(&call(Some("a"), "github", "push")).effect,
            Effect::Deny
        );
        assert_eq!(
            set.decide(&call(Some("a"), "other", "push")).effect,
            Effect::Allow
        );
    }

    #[test]
    fn insertion_order_does_not_matter_only_seq_does() {
        let policies = vec![
            rule(1, Effect::Allow, &scope(None, None, Some("c"))),
            rule(2, Effect::Deny, &scope(None, Some("a"), None)),
            rule(3, Effect::Ask, &scope(Some("t"), None, None)),
            rule(4, Effect::Allow, &scope(Some("t"), Some("a"), Some("c"))),
            rule(5, Effect::Deny, &scope(None, None, None)),
            rule(6, Effect::Allow, &scope(Some("t"), None, None)),
        ];
        let reference = compile(&policies);
        let requests = [
            call(Some("a"), "c", "t"),
            call(Some("a"), "c", "u"),
            call(Some("b"), "c", "t"),
            call(Some("b"), "d", "t"),
            call(None, "d", "u"),
            call(Some("a"), "d", "u"),
        ];
        // Every rotation and its reverse: enough orders to catch input-order dependence.
        for k in 0..policies.len() {
            let mut shuffled = policies.clone();
            shuffled.rotate_left(k);
            for order in [shuffled.clone(), shuffled.into_iter().rev().collect()] {
                let set = compile(&order);
                assert_eq!(set.info(), reference.info());
                assert_eq!(set.text(), reference.text());
                for r in &requests {
                    assert_eq!(set.decide(r), reference.decide(r), "{r:?}");
                }
            }
        }
        // And the same scope, same effect twice: the lower seq wins wherever it sits.
        let older = rule(1, Effect::Deny, &scope(Some("t"), None, None));
        let newer = rule(2, Effect::Deny, &scope(Some("t"), None, None));
        for order in [vec![older.clone(), newer.clone()], vec![newer, older]] {
            let d = compile(&order).decide(&call(Some("a"), "c", "t"));
            assert_eq!(d.policy_id.as_deref(), Some("rule-1"));
        }
    }

    #[test]
    fn the_oldest_rule_is_the_lowest_seq_not_the_smallest_id() {
        let s = scope(Some("t"), None, None);
        let set = compile(&[
            raw(2, "rule-9", &cli_rule_text("rule-9", Effect::Deny, &s)),
            raw(1, "rule-10", &cli_rule_text("rule-10", Effect::Deny, &s)),
        ]);
        let e = set.explain(&call(Some("a"), "c", "t"));
        assert_eq!(e.decision.policy_id.as_deref(), Some("rule-10"));
        assert_eq!(
            e.tie_break,
            "tie at specificity 4 and deny went to the oldest rule"
        );
        let ids: Vec<&str> = set.info().iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["rule-10", "rule-9"]);
    }

    /// Type-checks (so strict validation accepts it) but overflows when evaluated.
    const OVERFLOW: &str = "when { 9223372036854775807 + 1 > 0 }";

    #[test]
    fn a_forbid_whose_evaluation_errors_never_yields_allow() {
        let broken_deny = raw(
            2,
            "broken-deny",
            &format!("@id(\"broken-deny\")\nforbid (principal, action, resource) {OVERFLOW};"),
        );
        let broken_ask = raw(
            3,
            "broken-ask",
            &format!(
                "@id(\"broken-ask\")\n@holdcall_effect(\"ask\")\nforbid (principal, action, resource) {OVERFLOW};"
            ),
        );
        // The most specific possible allow matches; without the escalation it would win.
        let allow = rule(1, Effect::Allow, &scope(Some("t"), Some("a"), Some("c")));
        let req = call(Some("a"), "c", "t");

        let set = compile(&[allow.clone(), broken_deny.clone()]);
        let e = set.explain(&req);
        assert_eq!(e.decision.effect, Effect::Deny);
        assert_eq!(e.decision.policy_id.as_deref(), Some("broken-deny"));
        assert!(
            e.decision
                .reason
                .starts_with("rule broken-deny could not be evaluated ("),
            "{}",
            e.decision.reason
        );
        assert!(
            e.decision
                .reason
                .ends_with("and a deny rule that cannot be evaluated denies"),
            "{}",
            e.decision.reason
        );
        assert_eq!(
            e.winner.as_ref().map(|w| w.id.as_str()),
            Some("broken-deny")
        );
        assert_eq!(e.cedar.errors.len(), 1);
        assert!(e.cedar.errors.iter().all(|m| m.contains("broken-deny")));
        // The erroring forbid does not match (Cedar skips it); only the allow does.
        let matching: Vec<&str> = e.matching.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(matching, ["rule-1"]);

        let set = compile(&[allow.clone(), broken_ask.clone()]);
        let d = set.decide(&req);
        assert_eq!(d.effect, Effect::Ask);
        assert_eq!(d.policy_id.as_deref(), Some("broken-ask"));
        assert!(
            d.reason
                .ends_with("and an ask rule that cannot be evaluated asks"),
            "{}",
            d.reason
        );

        // Nothing else matching: still not allow.
        assert_eq!(
            compile(std::slice::from_ref(&broken_ask))
                .decide(&req)
                .effect,
            Effect::Ask
        );
        assert_eq!(
            compile(std::slice::from_ref(&broken_deny))
                .decide(&req)
                .effect,
            Effect::Deny
        );

        // A deny winner stays the decider next to an errored ask (the reason says both), and
        // an errored deny wins over an errored ask.
        let deny = rule(4, Effect::Deny, &scope(Some("t"), Some("a"), Some("c")));
        let d = compile(&[broken_ask.clone(), deny]).decide(&req);
        assert_eq!(d.effect, Effect::Deny);
        assert_eq!(d.policy_id.as_deref(), Some("rule-4"));
        assert!(
            d.reason.contains("rule broken-ask could not be evaluated"),
            "{}",
            d.reason
        );
        let d = compile(&[allow, broken_ask, broken_deny]).decide(&req);
        assert_eq!(d.effect, Effect::Deny);
        assert_eq!(d.policy_id.as_deref(), Some("broken-deny"));
    }

    #[test]
    fn a_permit_whose_evaluation_errors_is_only_skipped() {
        let broken_allow = raw(
            1,
            "broken-allow",
            &format!(
                "@id(\"broken-allow\")\npermit (principal, action, resource in ToolName::\"t\") {OVERFLOW};"
            ),
        );
        let ask = rule(2, Effect::Ask, &scope(None, None, None));
        let e = compile(&[broken_allow, ask]).explain(&call(Some("a"), "c", "t"));
        assert_eq!(e.decision.effect, Effect::Ask);
        assert_eq!(e.decision.policy_id.as_deref(), Some("rule-2"));
        assert_eq!(e.cedar.errors.len(), 1);
    }

    #[test]
    fn unsupported_scope_forms_are_refused() {
        let cases = [
            ("principal in Agent::\"x\", action, resource", "principal"),
            ("principal is Agent, action, resource", "principal"),
            (
                "principal is Agent in Agent::\"x\", action, resource",
                "principal",
            ),
            (
                "principal, action in [Action::\"call\"], resource",
                "action",
            ),
            ("principal, action in Action::\"call\"", "action"),
            ("principal, action, resource is Tool", "resource"),
            (
                "principal, action, resource is Tool in Connector::\"c\"",
                "resource",
            ),
            ("principal, action, resource in Tool::\"c/t\"", "resource"),
        ];
        for (scope_text, part) in cases {
            let text = if scope_text.matches(',').count() == 1 {
                format!("@id(\"x\") permit ({scope_text}, resource);")
            } else {
                format!("@id(\"x\") permit ({scope_text});")
            };
            match compile_err("x", &text) {
                PolicyError::UnsupportedScope { id, part: p, found } => {
                    assert_eq!((id.as_str(), p.as_str()), ("x", part), "{text}");
                    assert!(!found.is_empty());
                }
                other => panic!("{text}: expected an unsupported scope, got {other:?}"),
            }
        }
        // An action other than call does not even validate.
        let e = compile_err(
            "x",
            "@id(\"x\") permit (principal, action == Action::\"list\", resource);",
        );
        assert!(
            matches!(e, PolicyError::Validation { ref id, .. } if id == "x"),
            "{e:?}"
        );
        // Templates.
        let e = compile_err(
            "x",
            "@id(\"x\") permit (principal == ?principal, action, resource);",
        );
        assert_eq!(
            e,
            PolicyError::Template {
                id: "x".to_string()
            }
        );
        // Exact tools must be written connector/tool.
        let e = compile_err(
            "x",
            "@id(\"x\") permit (principal, action, resource == Tool::\"t\");",
        );
        assert!(matches!(e, PolicyError::InvalidScopeEntity { .. }), "{e:?}");
        let e = compile_err(
            "x",
            "@id(\"x\") forbid (principal, action, resource in ToolName::\"*\");",
        );
        assert!(matches!(e, PolicyError::InvalidScopeEntity { .. }), "{e:?}");
        let help = miette::Diagnostic::help(&PolicyError::UnsupportedScope {
            id: "x".into(),
            part: "principal".into(),
            found: "principal in Agent::\"x\"".into(),
        })
        .map(|h| h.to_string());
        assert!(help.is_some_and(|h| h.contains("resource in Connector::\"C\"")));
    }

    #[test]
    fn the_id_annotation_must_be_present_first_and_equal_to_the_stored_id() {
        let e = compile_err(
            "rule-1",
            "@id(\"rule-2\") permit (principal, action, resource);",
        );
        assert_eq!(
            e,
            PolicyError::IdMismatch {
                id: "rule-1".into(),
                annotated: "rule-2".into()
            }
        );
        let e = compile_err("rule-1", "permit (principal, action, resource);");
        assert_eq!(
            e,
            PolicyError::MissingId {
                id: "rule-1".into()
            }
        );
        let e = compile_err(
            "rule-1",
            "@holdcall_effect(\"allow\")\n@id(\"rule-1\")\npermit (principal, action, resource);",
        );
        assert_eq!(
            e,
            PolicyError::IdNotFirst {
                id: "rule-1".into()
            }
        );
        let e = compile_err(
            "rule-1",
            "@identity(\"x\") @id(\"rule-1\") permit (principal, action, resource);",
        );
        assert_eq!(
            e,
            PolicyError::IdNotFirst {
                id: "rule-1".into()
            }
        );
        // Comments and whitespace before it are fine.
        let ok =
            "// why this rule exists\n  @id(\"rule-1\")\npermit (principal, action, resource);";
        assert_eq!(
            parse_effect_and_specificity("rule-1", ok),
            Ok((Effect::Allow, 0))
        );
        // Duplicates across rows.
        let p = rule(1, Effect::Deny, &Scope::default());
        let q = StoredPolicy {
            seq: 2,
            ..p.clone()
        };
        assert_eq!(
            PolicySet::compile(&[p, q]).err(),
            Some(PolicyError::DuplicateId {
                id: "rule-1".into()
            })
        );
    }

    #[test]
    fn effect_annotations_must_fit_the_cedar_effect() {
        for (text, ok) in [
            (
                "@id(\"x\") @holdcall_effect(\"ask\") permit (principal, action, resource);",
                None,
            ),
            (
                "@id(\"x\") @holdcall_effect(\"deny\") permit (principal, action, resource);",
                None,
            ),
            (
                "@id(\"x\") @holdcall_effect(\"allow\") forbid (principal, action, resource);",
                None,
            ),
            (
                "@id(\"x\") @holdcall_effect(\"Ask\") forbid (principal, action, resource);",
                None,
            ),
            (
                "@id(\"x\") @holdcall_effect forbid (principal, action, resource);",
                None,
            ),
            (
                "@id(\"x\") @holdcall_effect(\"allow\") permit (principal, action, resource);",
                Some(Effect::Allow),
            ),
            (
                "@id(\"x\") permit (principal, action, resource);",
                Some(Effect::Allow),
            ),
            (
                "@id(\"x\") forbid (principal, action, resource);",
                Some(Effect::Deny),
            ),
            (
                "@id(\"x\") @holdcall_effect(\"deny\") forbid (principal, action, resource);",
                Some(Effect::Deny),
            ),
            (
                "@id(\"x\") @holdcall_effect(\"ask\") forbid (principal, action, resource);",
                Some(Effect::Ask),
            ),
        ] {
            match (parse_effect_and_specificity("x", text), ok) {
                (Ok((effect, 0)), Some(want)) => assert_eq!(effect, want, "{text}"),
                (Err(PolicyError::EffectAnnotation { id, .. }), None) => assert_eq!(id, "x"),
                (got, _) => panic!("{text}: got {got:?}"),
            }
        }
        let e = compile_err(
            "x",
            "@id(\"x\") @holdcall_efect(\"ask\") forbid (principal, action, resource);",
        );
        assert_eq!(
            e,
            PolicyError::UnknownAnnotation {
                id: "x".into(),
                key: "holdcall_efect".into()
            }
        );
        // Annotations outside Holdcall's prefix are the author's business.
        let text = "@id(\"x\") @reviewed(\"2026-01-01\") forbid (principal, action, resource);";
        assert_eq!(
            parse_effect_and_specificity("x", text),
            Ok((Effect::Deny, 0))
        );
    }

    #[test]
    fn a_policy_that_fails_validation_is_refused_with_its_id() {
        let good = rule(1, Effect::Allow, &Scope::default());
        for text in [
            "@id(\"bad\") forbid (principal, action, resource == ToolName::\"x\");",
            "@id(\"bad\") forbid (principal == Tool::\"c/t\", action, resource);",
            "@id(\"bad\") forbid (principal, action, resource) when { context.nosuch == 1 };",
            "@id(\"bad\") forbid (principal, action, resource) when { resource.owner == \"x\" };",
        ] {
            match PolicySet::compile(&[good.clone(), raw(2, "bad", text)]) {
                Err(PolicyError::Validation { id, message }) => {
                    assert_eq!(id, "bad");
                    assert!(!message.is_empty());
                    let shown = PolicyError::Validation { id, message }.to_string();
                    assert!(shown.starts_with("policy bad does not validate"), "{shown}");
                }
                other => panic!("{text}: expected a validation error, got {:?}", other.err()),
            }
        }
        let e = compile_err("bad", "@id(\"bad\") forbid (principal, action, resource)");
        assert!(
            matches!(e, PolicyError::Syntax { ref id, .. } if id == "bad"),
            "{e:?}"
        );
        let two = "@id(\"bad\") forbid (principal, action, resource); permit (principal, action, resource);";
        assert!(matches!(
            compile_err("bad", two),
            PolicyError::Syntax { .. }
        ));
    }

    #[test]
    fn a_tool_name_with_quotes_and_backslashes_round_trips() {
        for tool in [
            "a\"b\\c",
            "naïve ツール 🚀",
            "\"); permit (principal, action, resource); //",
            "x/y",
        ] {
            for s in [
                scope(Some(tool), None, None),
                scope(Some(tool), Some("agent"), Some("conn")),
            ] {
                let text = cli_rule_text("rule-1", Effect::Deny, &s);
                let set = compile(&[raw(1, "rule-1", &text)]);
                assert_eq!(set.info().len(), 1);
                let d = set.decide(&call(Some("agent"), "conn", tool));
                assert_eq!(d.effect, Effect::Deny, "{tool:?}\n{text}");
                assert_eq!(d.policy_id.as_deref(), Some("rule-1"));
                // A near miss does not match, so the text named exactly this tool.
                let other = format!("{tool}x");
                assert_eq!(
                    set.decide(&call(Some("agent"), "conn", &other)).effect,
                    Effect::Allow
                );
                assert_eq!(
                    parse_effect_and_specificity("rule-1", &text),
                    Ok((Effect::Deny, specificity_of_scope(&s)))
                );
            }
        }
        let text = cli_rule_text("rule-1", Effect::Deny, &scope(Some("a\"b\\c"), None, None));
        assert!(
            text.contains(r#"resource in ToolName::"a\"b\\c""#),
            "{text}"
        );
        // A newline is escaped too, so it can't end the literal; such a rule parses, but
        // compile refuses it because no rule may name a tool with a control character.
        let text = cli_rule_text(
            "rule-1",
            Effect::Deny,
            &scope(Some("line\nbreak"), None, None),
        );
        assert!(
            text.contains(r#"resource in ToolName::"line\nbreak""#),
            "{text}"
        );
        assert!(matches!(
            PolicySet::compile(&[raw(1, "rule-1", &text)]),
            Err(PolicyError::InvalidScopeEntity { .. })
        ));
        // Ids are escaped too.
        let text = cli_rule_text("odd \"id\"", Effect::Allow, &Scope::default());
        assert_eq!(
            parse_effect_and_specificity("odd \"id\"", &text),
            Ok((Effect::Allow, 0))
        );
    }

    #[test]
    fn cli_rule_text_renders_each_scope_form() {
        assert_eq!(
            cli_rule_text(
                "rule-7",
                Effect::Deny,
                &scope(Some("delete_file"), None, None)
            ),
            "@id(\"rule-7\")\n@holdcall_effect(\"deny\")\nforbid (\n  principal,\n  action == Action::\"call\",\n  resource in ToolName::\"delete_file\"\n);\n"
        );
        assert_eq!(
            cli_rule_text("r", Effect::Allow, &scope(Some("t"), Some("a"), Some("c"))),
            "@id(\"r\")\n@holdcall_effect(\"allow\")\npermit (\n  principal == Agent::\"a\",\n  action == Action::\"call\",\n  resource == Tool::\"c/t\"\n);\n"
        );
        assert!(cli_rule_text("r", Effect::Ask, &scope(None, None, Some("c")))
            .ends_with("forbid (\n  principal,\n  action == Action::\"call\",\n  resource in Connector::\"c\"\n);\n"));
        assert!(
            cli_rule_text("r", Effect::Ask, &Scope::default())
                .ends_with("  action == Action::\"call\",\n  resource\n);\n")
        );
    }

    #[test]
    fn specificity_comes_from_the_scope_alone() {
        let cases = [
            (scope(Some("t"), Some("a"), Some("c")), 6),
            (scope(Some("t"), None, Some("c")), 5),
            (scope(Some("t"), Some("a"), None), 5),
            (scope(Some("t"), None, None), 4),
            (scope(None, Some("a"), Some("c")), 2),
            (scope(None, Some("a"), None), 1),
            (scope(None, None, Some("c")), 1),
            (scope(None, None, None), 0),
        ];
        for (s, want) in cases {
            assert_eq!(specificity_of_scope(&s), want, "{s:?}");
            let text = cli_rule_text("r", Effect::Deny, &s);
            assert_eq!(
                parse_effect_and_specificity("r", &text),
                Ok((Effect::Deny, want))
            );
        }
        // A condition that reads like a scope adds nothing.
        let text = "@id(\"r\") forbid (principal, action, resource) when { resource in Connector::\"c\" && principal == Agent::\"a\" };";
        assert_eq!(
            parse_effect_and_specificity("r", text),
            Ok((Effect::Deny, 0))
        );
        // So an agent-named default (1) beats it even for its own connector.
        let set = compile(&[
            raw(1, "r", text),
            rule(2, Effect::Allow, &scope(None, Some("a"), None)),
        ]);
        assert_eq!(set.decide(&call(Some("a"), "c", "t")).effect, Effect::Allow);
        let d = set.decide(&call(Some("b"), "c", "t"));
        assert_eq!(d.effect, Effect::Allow, "{d:?}");
        let d = compile(&[raw(1, "r", text)]).decide(&call(Some("a"), "c", "t"));
        assert!(
            d.reason.contains("when its conditions hold"),
            "{}",
            d.reason
        );
    }

    #[test]
    fn explain_lists_every_matching_policy_even_when_a_forbid_fires() {
        let set = compile(&[
            rule(1, Effect::Allow, &scope(Some("t"), None, None)),
            rule(2, Effect::Deny, &scope(Some("t"), Some("a"), Some("c"))),
            rule(3, Effect::Allow, &scope(None, Some("a"), None)),
            rule(4, Effect::Ask, &scope(None, None, None)),
            rule(5, Effect::Deny, &scope(Some("u"), None, None)),
        ]);
        let e = set.explain(&call(Some("a"), "c", "t"));
        let ids: Vec<&str> = e.matching.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["rule-2", "rule-1", "rule-3", "rule-4"]);
        assert_eq!(e.decision.effect, Effect::Deny);
        assert_eq!(
            e.decision.reason,
            "rule rule-2 (deny tool t for agent a on connector c) is the most specific of 4 matching rules"
        );
        assert_eq!(e.winner.as_ref().map(|w| w.specificity), Some(6));
        assert_eq!(e.tie_break, "highest specificity (6)");
        assert_eq!(e.cedar.permit_decision, "Allow");
        assert_eq!(e.cedar.permit_reasons, ["rule-1", "rule-3"]);
        assert_eq!(e.cedar.forbid_decision, "Deny");
        assert_eq!(e.cedar.forbid_reasons, ["rule-2", "rule-4"]);
        assert!(e.cedar.errors.is_empty());
        assert_eq!(
            (e.agent.as_deref(), e.connector.as_str(), e.tool.as_str()),
            (Some("a"), "c", "t")
        );
        assert_eq!(set.decide(&call(Some("a"), "c", "t")), e.decision);

        // Tie-break wording.
        let tie = compile(&[
            rule(1, Effect::Allow, &scope(Some("t"), None, Some("c"))),
            rule(2, Effect::Deny, &scope(Some("t"), Some("a"), None)),
            rule(3, Effect::Ask, &scope(Some("t"), None, Some("c"))),
        ])
        .explain(&call(Some("a"), "c", "t"));
        assert_eq!(
            tie.tie_break,
            "tie at specificity 5 went to deny over ask and allow"
        );
        assert_eq!(tie.decision.policy_id.as_deref(), Some("rule-2"));
        let none = compile(&[rule(1, Effect::Deny, &scope(Some("u"), None, None))]).explain(&call(
            Some("b"),
            "d",
            "v",
        ));
        assert_eq!(none.tie_break, "no rule matches: allow");
        assert!(none.winner.is_none() && none.matching.is_empty());
        assert_eq!(none.cedar.forbid_reasons, Vec::<String>::new());
        let ask = set.explain(&call(Some("b"), "d", "v"));
        assert_eq!(ask.decision.effect, Effect::Ask);
        assert_eq!(ask.tie_break, "only one rule matches");
        // Explain serializes for `--json`.
        let json = serde_json::to_value(&e).map_err(|e| e.to_string());
        assert!(json.is_ok_and(|j| j["decision"]["effect"] == "deny"));
    }

    #[test]
    fn the_set_text_is_every_policy_in_seq_order() {
        let a = raw(
            2,
            "b",
            "@id(\"b\")\nforbid (principal, action, resource);\n\n",
        );
        let b = raw(1, "a", "  @id(\"a\") permit (principal, action, resource);");
        let set = compile(&[a, b]);
        assert_eq!(
            set.text(),
            "@id(\"a\") permit (principal, action, resource);\n\n@id(\"b\")\nforbid (principal, action, resource);\n"
        );
        let info: Vec<(&str, i64, Effect, i64)> = set
            .info()
            .iter()
            .map(|i| (i.id.as_str(), i.seq, i.effect, i.specificity))
            .collect();
        assert_eq!(
            info,
            [("a", 1, Effect::Allow, 0), ("b", 2, Effect::Deny, 0)]
        );
    }

    #[test]
    fn unified_diff_shows_changed_lines_and_is_empty_for_equal_text() {
        let before = cli_rule_text("rule-1", Effect::Deny, &scope(Some("t"), None, None));
        let after = cli_rule_text("rule-1", Effect::Ask, &scope(Some("t"), None, None));
        let diff = unified_diff(&before, &after, "rule-1 (deny, 4)", "rule-1 (ask, 4)");
        assert!(
            diff.starts_with("--- rule-1 (deny, 4)\n+++ rule-1 (ask, 4)\n@@"),
            "{diff}"
        );
        assert!(
            diff.contains("\n-@holdcall_effect(\"deny\")\n+@holdcall_effect(\"ask\")\n"),
            "{diff}"
        );
        assert!(diff.contains("\n @id(\"rule-1\")\n"), "{diff}");
        assert_eq!(unified_diff(&before, &before, "a", "b"), "");
        assert_eq!(unified_diff("", "", "a", "b"), "");
        assert!(unified_diff("", "x\n", "a", "b").contains("\n+x\n"));
    }

    #[test]
    fn validate_tool_name_rejects_empty_star_control_characters_and_long_names() {
        assert!(validate_tool_name("delete_file").is_ok());
        assert!(validate_tool_name("a\"b\\c ツール/x").is_ok());
        assert!(validate_tool_name(&"x".repeat(256)).is_ok());
        assert!(validate_tool_name(&"é".repeat(128)).is_ok());
        for bad in ["", "*", "a\nb", "tab\t", "nul\0", "del\u{7f}", "c1\u{85}"] {
            assert!(
                matches!(
                    validate_tool_name(bad),
                    Err(PolicyError::InvalidToolName { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(validate_tool_name(&"x".repeat(257)).is_err());
        assert!(validate_tool_name(&format!("{}é", "x".repeat(255))).is_err());
        let star = validate_tool_name("*").err();
        let help = star
            .as_ref()
            .and_then(miette::Diagnostic::help)
            .map(|h| h.to_string());
        assert!(help.is_some_and(|h| h.contains("holdcall policy default")));
    }

    #[test]
    fn validate_scope_name_rejects_bad_agent_and_connector_names() {
        for good in ["a", "claude", "A1", "my-agent.v2_x", "0", &"a".repeat(128)] {
            assert!(validate_scope_name("agent", good).is_ok(), "{good:?}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            ".a",
            "a.",
            "_a",
            "a_",
            "a b",
            "a/b",
            "a:b",
            "é",
            "a\n",
            "*",
            &"a".repeat(129),
        ] {
            match validate_scope_name("agent", bad) {
                Err(PolicyError::InvalidScopeName { kind, name, .. }) => {
                    assert_eq!((kind.as_str(), name.as_str()), ("agent", bad));
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        let e = validate_scope_name("connector", "git hub").err();
        let shown = e.as_ref().map(ToString::to_string);
        assert_eq!(
            shown.as_deref(),
            Some("invalid connector name \"git hub\": it contains ' '")
        );
        let help = e
            .as_ref()
            .and_then(miette::Diagnostic::help)
            .map(|h| h.to_string());
        assert!(help.is_some_and(|h| h.starts_with("connector names are 1 to 128")));
    }

    #[test]
    fn every_error_has_help() {
        let errors = [
            validate_tool_name("").err(),
            validate_scope_name("agent", "").err(),
            Some(compile_err("x", "nonsense")),
            Some(compile_err(
                "x",
                "@id(\"x\") permit (principal == ?principal, action, resource);",
            )),
            Some(compile_err("x", "permit (principal, action, resource);")),
            Some(compile_err(
                "x",
                "@id(\"y\") permit (principal, action, resource);",
            )),
            Some(compile_err(
                "x",
                "@a(\"\") @id(\"x\") permit (principal, action, resource);",
            )),
            Some(compile_err(
                "x",
                "@id(\"x\") @holdcall_x forbid (principal, action, resource);",
            )),
            Some(compile_err(
                "x",
                "@id(\"x\") @holdcall_effect(\"ask\") permit (principal, action, resource);",
            )),
            Some(compile_err(
                "x",
                "@id(\"x\") permit (principal in Agent::\"a\", action, resource);",
            )),
            Some(compile_err(
                "x",
                "@id(\"x\") permit (principal == Agent::\"-\", action, resource);",
            )),
            Some(compile_err(
                "x",
                "@id(\"x\") permit (principal, action, resource == ToolName::\"t\");",
            )),
            Some(PolicyError::DuplicateId { id: "x".into() }),
            Some(PolicyError::Schema {
                message: "m".into(),
            }),
        ];
        let mut seen = HashSet::new();
        for e in errors.into_iter().flatten() {
            let help = miette::Diagnostic::help(&e).map(|h| h.to_string());
            assert!(help.is_some_and(|h| !h.is_empty()), "{e:?}");
            seen.insert(std::mem::discriminant(&e));
        }
        assert_eq!(seen.len(), 14, "one case per variant");
    }

    #[test]
    fn scope_describe_reads_as_a_sentence() {
        assert_eq!(
            scope(Some("delete_file"), None, Some("github")).describe(),
            "tool delete_file for every agent on connector github"
        );
        assert_eq!(
            scope(None, Some("claude"), None).describe(),
            "every tool (the default) for agent claude on every connector"
        );
        assert_eq!(
            scope(Some("a \"b\"\nc"), None, None).describe(),
            "tool \"a \\\"b\\\"\\nc\" for every agent on every connector"
        );
    }

    #[test]
    fn effects_parse_print_and_rank() {
        for e in [Effect::Allow, Effect::Ask, Effect::Deny] {
            assert_eq!(Effect::parse(e.as_str()), Some(e));
            assert_eq!(
                serde_json::to_string(&e).ok(),
                Some(format!("\"{}\"", e.as_str()))
            );
        }
        assert_eq!(Effect::parse("Deny"), None);
        assert!(Effect::Allow < Effect::Ask && Effect::Ask < Effect::Deny);
    }

    #[test]
    fn the_precedence_parser_reads_cases_and_skips_the_rest() {
        assert_eq!(parse_precedence_case(""), None);
        assert_eq!(parse_precedence_case("  # comment"), None);
        assert_eq!(parse_precedence_case("request A C T"), None);
        assert!(matches!(
            parse_precedence_case("request B C T"),
            Some(Err(_))
        ));
        assert_eq!(
            parse_precedence_case("deny A:*@C ; allow T@C => allow 2"),
            Some(Ok(PrecedenceCase {
                rules: vec![
                    (Effect::Deny, scope(None, Some("A"), Some("C"))),
                    (Effect::Allow, scope(Some("T"), None, Some("C"))),
                ],
                expected: Effect::Allow,
                winner: 2,
            }))
        );
        for bad in [
            "deny T",
            "deny T => deny",
            "deny T => deny 2",
            "nope T => deny 1",
            "deny => deny 1",
            "deny A: => deny 1",
        ] {
            assert!(matches!(parse_precedence_case(bad), Some(Err(_))), "{bad}");
        }
    }

    #[test]
    fn the_precedence_table_holds() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/policy/precedence.txt");
        let table = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(table.lines().any(|l| l.trim() == "request A C T"));
        let mut cases = 0;
        for (n, line) in table.lines().enumerate() {
            let Some(case) = parse_precedence_case(line) else {
                continue;
            };
            let case = case.unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
            let stored: Vec<StoredPolicy> = case
                .rules
                .iter()
                .enumerate()
                .map(|(i, (effect, s))| {
                    let id = format!("rule-{}", i + 1);
                    StoredPolicy {
                        // Gaps in seq, as after deletions; only the order matters.
                        seq: 10 * (i as i64 + 1),
                        text: cli_rule_text(&id, *effect, s),
                        id,
                    }
                })
                .collect();
            let want_id = (case.winner > 0).then(|| format!("rule-{}", case.winner));
            let mut reversed = stored.clone();
            reversed.reverse();
            for order in [stored, reversed] {
                let d = compile(&order).decide(&PrecedenceCase::REQUEST);
                assert_eq!(
                    (d.effect, d.policy_id.as_deref()),
                    (case.expected, want_id.as_deref()),
                    "line {}: {line}\n{}",
                    n + 1,
                    d.reason
                );
            }
            cases += 1;
        }
        assert!(cases >= 252 + 9 * 2, "only {cases} cases");
    }

    /// Every rule form a bucket can hold, for the index tests: exact tools (one with a `/` in
    /// its tool name), tool names, connectors, defaults, agent-scoped ones, and `when` rules
    /// that hold, fail, or cannot be evaluated.
    fn index_universe() -> Vec<StoredPolicy> {
        let tools = ["t", "u", "x/y"];
        let connectors = ["c", "d"];
        let mut scopes = vec![scope(None, None, None), scope(None, Some("a"), None)];
        for c in connectors {
            scopes.push(scope(None, None, Some(c)));
            scopes.push(scope(None, Some("b"), Some(c)));
            for t in tools {
                scopes.push(scope(Some(t), None, Some(c)));
                scopes.push(scope(Some(t), Some("a"), Some(c)));
            }
        }
        for t in tools {
            scopes.push(scope(Some(t), None, None));
            scopes.push(scope(Some(t), Some("b"), None));
        }
        let mut out = Vec::new();
        for (n, s) in scopes.iter().enumerate() {
            let effect = [Effect::Allow, Effect::Deny, Effect::Ask][n % 3];
            out.push(rule(n as i64 + 1, effect, s));
        }
        let seq = out.len() as i64;
        let resources = [
            "resource",
            "resource == Tool::\"c/t\"",
            "resource in ToolName::\"u\"",
            "resource in Connector::\"d\"",
        ];
        let conditions = [
            OVERFLOW,
            "when { true }",
            "unless { principal == Agent::\"a\" }",
        ];
        for (r, resource) in resources.iter().enumerate() {
            for (k, condition) in conditions.iter().enumerate() {
                for (e, (keyword, effect)) in
                    [("permit", "allow"), ("forbid", "deny"), ("forbid", "ask")]
                        .iter()
                        .enumerate()
                {
                    let n = seq + 1 + (r * 9 + k * 3 + e) as i64;
                    let id = format!("cond-{n}");
                    out.push(raw(
                        n,
                        &id,
                        &format!(
                            "@id(\"{id}\")\n@holdcall_effect(\"{effect}\")\n{keyword} (principal, action, {resource}) {condition};"
                        ),
                    ));
                }
            }
        }
        out
    }

    /// A small deterministic generator (no dependency, same cases every run).
    struct Lcg(u64);
    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n
        }
    }

    #[test]
    fn the_scope_index_decides_exactly_as_evaluating_every_policy() {
        let universe = index_universe();
        let agents = [None, Some("a"), Some("b")];
        let connectors = ["c", "d", "e", ""];
        let tools = ["t", "u", "x/y", "y", "v"];
        let mut rng = Lcg(7);
        let mut compared = 0;
        for round in 0..60 {
            // A random subset of the universe, in a random order (seq still decides age).
            let mut chosen: Vec<StoredPolicy> = universe
                .iter()
                .filter(|_| rng.below(4) == 0 || round == 0)
                .cloned()
                .collect();
            for k in (1..chosen.len()).rev() {
                chosen.swap(k, rng.below(k + 1));
            }
            let indexed = compile(&chosen);
            let flat = PolicySet::build(&chosen, false).unwrap();
            for agent in agents {
                for connector in connectors {
                    for tool in tools {
                        let req = call(agent, connector, tool);
                        // `considered` lists what the buckets hold, so the flat set also lists
                        // rules whose scope cannot match; what matched or erred must agree.
                        let strip = |e: Explanation| {
                            let decided: Vec<Considered> = e
                                .considered
                                .iter()
                                .filter(|c| c.outcome != "not matched")
                                .cloned()
                                .collect();
                            let mut v = serde_json::to_value(Explanation {
                                considered: Vec::new(),
                                ..e
                            })
                            .unwrap();
                            v["decided"] = serde_json::to_value(decided).unwrap();
                            v
                        };
                        let got = strip(indexed.explain(&req));
                        let want = strip(flat.explain(&req));
                        assert_eq!(got, want, "round {round}, request {req:?}");
                        compared += 1;
                    }
                }
            }
        }
        assert_eq!(compared, 60 * 3 * 4 * 5);
    }

    #[test]
    fn a_call_evaluates_only_the_buckets_its_tool_name_and_connector_can_hit() {
        let set = compile(&index_universe());
        // Exact tool c/t, tool name t, connector c, and the global bucket: nothing else.
        let hit: usize = set
            .index
            .buckets("c/t", &call(None, "c", "t"))
            .into_iter()
            .flatten()
            .map(|h| h.permits.num_of_policies() + h.forbids.num_of_policies())
            .sum();
        let wanted = set
            .scopes
            .iter()
            .filter(|(s, _)| match (s.tool.as_deref(), s.connector.as_deref()) {
                (Some(t), Some(c)) => (c, t) == ("c", "t"),
                (Some(t), None) => t == "t",
                (None, Some(c)) => c == "c",
                (None, None) => true,
            })
            .count();
        assert_eq!(hit, wanted);
        assert!(hit < set.info().len() / 2, "{hit} of {}", set.info().len());
        // A tool name with a `/` lands in its exact-tool bucket, split at the connector's end.
        assert!(set.index.tools.contains_key("c/x/y"));
        assert!(set.index.tool_names.contains_key("x/y"));
    }
}
