//! Building a `PolicySet` from stored rows: parsing each policy under its stored id, the checks
//! (`@id`, `@holdcall_effect`, scope form, strict schema validation, guarded argument reads),
//! and the compiled set itself.

use std::collections::HashMap;

use cedar_policy::{
    ActionConstraint, Authorizer, EntityId, EntityTypeName, EntityUid, Policy, PolicyId,
    PrincipalConstraint, ResourceConstraint, Schema, Template, ValidationMode, ValidationWarning,
    Validator,
};

use crate::policy::conditions::{
    argument_guards_as_true, argument_guards_as_true_in, context_attributes_in, est_of,
    reads_arguments, reads_arguments_in, unguarded_argument_in,
};
use crate::policy::context::ContextReads;
use crate::policy::diff::set_text;
use crate::policy::error::PolicyError;
use crate::policy::index::Index;
use crate::policy::render::{render_action, render_principal, render_resource, string_literal};
use crate::policy::request::PlanCache;
use crate::policy::scope::{
    Effect, Scope, specificity_of_scope, validate_scope_name, validate_tool_name,
};

/// The schema every policy is validated against, embedded so the binary cannot drift from it.
pub(crate) const SCHEMA_TEXT: &str = include_str!("../../schema/holdcall.cedarschema");

/// The annotation that carries Holdcall's three-valued effect on top of Cedar's two.
pub(crate) const EFFECT_ANNOTATION: &str = "holdcall_effect";

/// The annotation that names a policy; it must be the first one and agree with the stored id.
pub(crate) const ID_ANNOTATION: &str = "id";

/// The value of a policy's annotation `key`. Cedar's own `Policy::annotation` parses the key
/// as an identifier on every call, building a fresh lexer each time (a sixth of a 10,000-rule
/// daemon start went there); its keys are unique per policy, so a scan of them is the same.
pub(crate) fn annotation<'a>(policy: &'a Policy, key: &str) -> Option<&'a str> {
    policy
        .annotations()
        .find_map(|(k, v)| (k == key).then_some(v))
}

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
    /// The context attributes its conditions name; `None`: the whole context.
    context_reads: Option<std::collections::BTreeSet<String>>,
}

/// Type names and the action, parsed once so `decide` builds requests without parsing.
#[derive(Clone)]
pub(super) struct Names {
    pub(super) agent: EntityTypeName,
    pub(super) connector: EntityTypeName,
    pub(super) tool_name: EntityTypeName,
    pub(super) tool: EntityTypeName,
    pub(super) call: EntityUid,
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

/// A compiled, immutable set of policies. Cheap to share (`Send + Sync`); rebuild it on change.
pub struct PolicySet {
    /// In seq order (ties by id, so the order is total).
    pub(super) infos: Vec<PolicyInfo>,
    /// Parallel to `infos`.
    pub(super) scopes: Vec<(Scope, bool)>,
    /// Parallel to `infos`: whether the policy reads `context.arguments`.
    pub(super) reads_args: Vec<bool>,
    /// Parallel to `infos`: each policy's summary in reasons, written when first needed.
    pub(super) summaries: Vec<std::sync::OnceLock<String>>,
    /// The context attributes any policy can read: a call's context holds only these.
    pub(super) context_reads: ContextReads,
    /// The Cedar parts of the calls decided so far (see [`PlanCache`]).
    pub(super) plans: PlanCache,
    pub(super) by_id: HashMap<String, usize>,
    /// Every policy, in the one bucket its resource scope puts it in.
    pub(super) index: Index,
    pub(super) authorizer: Authorizer,
    /// `None` only if Cedar refused our fixed type names, which would be a bug; `decide` then
    /// denies everything rather than guess.
    pub(super) names: Option<Names>,
    /// The set's [`validation_key`], which the daemon keeps once it has validated the set.
    pub(super) validation_key: String,
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

pub(super) fn is_type(uid: &EntityUid, name: &str) -> bool {
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
    match (policy.effect(), annotation(policy, EFFECT_ANNOTATION)) {
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

/// One policy's text parsed under its stored id.
fn parse_one(stored_id: &str, text: &str) -> Result<Policy, PolicyError> {
    let id = stored_id.to_string();
    match Policy::parse(Some(PolicyId::new(stored_id)), text) {
        Ok(p) => Ok(p),
        Err(e) => {
            // `Policy::parse` refuses templates with a bare syntax error; say what it was.
            if Template::parse(Some(PolicyId::new(stored_id)), text).is_ok() {
                return Err(PolicyError::Template { id });
            }
            Err(PolicyError::Syntax {
                id,
                message: e.to_string(),
            })
        }
    }
}

/// What strict validation of a set depends on, as one SHA-256: every policy as stored, in seq
/// order (seq, id and text, each length-prefixed), the schema, Cedar's version and this build's.
/// Two sets with one key validate alike, so a set validated once need not be again (the daemon
/// keeps the key of the set it validated, `journal::Journal::set_validated_policies`).
#[cfg(test)]
pub(crate) fn validation_key(policies: &[StoredPolicy]) -> String {
    let mut sorted: Vec<&StoredPolicy> = policies.iter().collect();
    sorted.sort_by(|a, b| (a.seq, &a.id).cmp(&(b.seq, &b.id)));
    validation_key_of(&sorted)
}

fn validation_key_of(sorted: &[&StoredPolicy]) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(b"holdcall validated policy set v1");
    field(crate::VERSION.as_bytes());
    field(cedar_policy::get_sdk_version().to_string().as_bytes());
    field(SCHEMA_TEXT.as_bytes());
    for p in sorted {
        field(&p.seq.to_le_bytes());
        field(p.id.as_bytes());
        field(p.text.as_bytes());
    }
    crate::ids::hex(&h.finalize())
}

/// Every policy of a set parsed in one pass, in the order given, or `None` when that pass cannot
/// stand for parsing each text alone (then each is parsed alone, which also names the error).
///
/// Why: Cedar's lexer builds its automaton's states afresh for every text it is given, which
/// made parsing 10,000 rules one by one most of a daemon's start (issue 18); one pass over the
/// texts joined by newlines builds them once. It stands for the texts alone only when Cedar
/// read exactly one static policy from each, and the text of each is, character for character,
/// its own stored text (trimmed): a policy parsed from the same characters is the same policy,
/// whatever the texts around it. Anything else (a template, a text holding two policies or
/// half of one, a trailing comment) falls back.
pub(super) fn parse_together(texts: &[&str]) -> Option<Vec<Policy>> {
    let joined = texts.join("\n");
    let set: cedar_policy::PolicySet = joined.parse().ok()?;
    if set.templates().next().is_some() {
        return None;
    }
    let mut out: Vec<Option<Policy>> = vec![None; texts.len()];
    for p in set.policies() {
        // Cedar names the policies of one text `policy0`, `policy1`, … in order.
        let k: usize = AsRef::<str>::as_ref(p.id())
            .strip_prefix("policy")?
            .parse()
            .ok()?;
        let slot = out.get_mut(k)?;
        if slot.is_some() || p.to_string() != texts.get(k)?.trim() {
            return None;
        }
        *slot = Some(p.clone());
    }
    out.into_iter().collect()
}

/// Every check on one policy except schema validation (done with one validator for the set).
fn check_one(stored_id: &str, text: &str) -> Result<(Policy, Effect), PolicyError> {
    check_parsed(stored_id, text, parse_one(stored_id, text)?)
}

/// [`check_one`] on a policy already parsed from `text`.
fn check_parsed(
    stored_id: &str,
    text: &str,
    policy: Policy,
) -> Result<(Policy, Effect), PolicyError> {
    let id = stored_id.to_string();
    match annotation(&policy, ID_ANNOTATION) {
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

pub(crate) fn load_validator() -> Result<Validator, PolicyError> {
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
pub(crate) struct ValidationProblem {
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
pub(crate) fn validation_problems(
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

/// The ids, among `policies` (each under its stored id), that strict validation of the whole set
/// at once cannot clear, or `None` when the set could not be put together. A policy not named
/// here would get no problem from [`validation_problems`] either; one named here is validated
/// alone, which finds and words its problems exactly.
///
/// Why: validating 10,000 rules one set of one at a time made up most of a daemon's start
/// (issue 18). Cedar validates each policy of a set on its own, so one call over the set finds
/// what the calls one by one find; anything it reports that could count (any error other than
/// an undeclared argument attribute, any impossible-policy or action warning, on a policy or
/// on its copy with argument tests taken as true) sends that policy to the exact check.
fn needs_validating_alone(
    validator: &Validator,
    policies: &[(&str, &Policy, Option<&serde_json::Value>)],
) -> Option<std::collections::HashSet<String>> {
    /// Marks the copy of a policy whose argument tests are taken as true (no stored id holds it:
    /// ids are checked names without control characters).
    const COPY: &str = "\u{0}args-as-true";
    let mut set = cedar_policy::PolicySet::new();
    let mut flagged: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (id, p, est) in policies {
        set.add((*p).clone()).ok()?;
        // No conditions: nothing read from the arguments, nothing to take as true.
        if !p.has_non_scope_constraint() {
            continue;
        }
        // No JSON form: nothing can be said of its arguments here; the exact check decides.
        let Some(est) = est else {
            flagged.insert((*id).to_string());
            continue;
        };
        if reads_arguments_in(est) {
            let copy_id = format!("{id}{COPY}");
            match argument_guards_as_true_in(&copy_id, (*est).clone()) {
                Some(copy) => set.add(copy).ok()?,
                None => {
                    flagged.insert((*id).to_string());
                }
            }
        }
    }
    let owner = |pid: &PolicyId| {
        let pid: &str = pid.as_ref();
        pid.strip_suffix(COPY).unwrap_or(pid).to_string()
    };
    let result = validator.validate(&set, ValidationMode::Strict);
    for e in result.validation_errors() {
        if !is_argument_access(&e.to_string()) {
            flagged.insert(owner(e.policy_id()));
        }
    }
    for w in result.validation_warnings() {
        if matches!(
            w,
            ValidationWarning::ImpossiblePolicy(_) | ValidationWarning::InvalidActionApplication(_)
        ) {
            flagged.insert(owner(w.policy_id()));
        }
    }
    Some(flagged)
}

/// The full check of one stored policy, in the order a user should fix things: syntax, id,
/// annotations and effect, schema, then scope form.
fn compile_one(
    validator: &Validator,
    id: &str,
    text: &str,
    parsed: Option<(Policy, bool, Option<serde_json::Value>)>,
) -> Result<Checked, PolicyError> {
    let (policy, effect, cleared, est) = match parsed {
        Some((p, cleared, est)) => {
            let (p, e) = check_parsed(id, text, p)?;
            (p, e, cleared, est)
        }
        None => {
            let (p, e) = check_one(id, text)?;
            (p, e, false, None)
        }
    };
    if !cleared {
        validate_one(validator, id, &policy)?;
    }
    // Read once: every question below is asked of it (see `conditions::est_of`). A policy
    // without conditions has none to ask about.
    let est = if policy.has_non_scope_constraint() {
        est.or_else(|| est_of(&policy))
    } else {
        None
    };
    let scope = read_scope(id, &policy)?;
    // A permit that errors is skipped, which only takes an allow away; a forbid that errors
    // would fail open in Cedar, so its argument reads must be guarded.
    if effect != Effect::Allow
        && let Some(path) = est.as_ref().and_then(unguarded_argument_in)
    {
        return Err(PolicyError::UnguardedArgument {
            id: id.to_string(),
            path,
        });
    }
    let context_reads = if policy.has_non_scope_constraint() {
        est.as_ref().and_then(context_attributes_in)
    } else {
        Some(std::collections::BTreeSet::new())
    };
    Ok(Checked {
        reads_arguments: est.as_ref().is_some_and(reads_arguments_in),
        context_reads,
        effect,
        specificity: specificity_of_scope(&scope),
        scope,
        conditional: policy.has_non_scope_constraint(),
        policy,
    })
}

/// Parses and checks one policy as `PolicySet::compile` would, returning what a row stores.
pub(crate) fn parse_effect_and_specificity(
    id: &str,
    text: &str,
) -> Result<(Effect, i64), PolicyError> {
    let validator = load_validator()?;
    let checked = compile_one(&validator, id, text, None)?;
    Ok((checked.effect, checked.specificity))
}

impl PolicySet {
    /// No policies: every call is allowed ("no rule applies").
    pub(crate) fn empty() -> PolicySet {
        PolicySet {
            infos: Vec::new(),
            scopes: Vec::new(),
            reads_args: Vec::new(),
            summaries: Vec::new(),
            context_reads: ContextReads::default(),
            plans: PlanCache::default(),
            by_id: HashMap::new(),
            index: Index::default(),
            authorizer: Authorizer::new(),
            names: Names::new().ok(),
            validation_key: String::new(),
        }
    }

    /// Parses each policy under its stored id and checks it (`@id` first and equal to the id,
    /// `@holdcall_effect`, supported scope form, strict validation). The first failure, in
    /// seq order, is the error. Input order does not matter; `seq` does.
    pub fn compile(policies: &[StoredPolicy]) -> Result<PolicySet, PolicyError> {
        PolicySet::build(policies, true, None)
    }

    /// `compile`, without strict validation when `validated` is the set's own
    /// [`validation_key`]: the same texts in the same order, validated by this build against
    /// this schema and Cedar before, would be found valid again. Every other check (ids,
    /// effects, scopes, guarded argument reads) is made as always.
    pub(crate) fn compile_validated(
        policies: &[StoredPolicy],
        validated: Option<&str>,
    ) -> Result<PolicySet, PolicyError> {
        PolicySet::build(policies, true, validated)
    }

    /// What a strict validation of this set stood for (see [`validation_key`]).
    pub(crate) fn validation_key(&self) -> &str {
        &self.validation_key
    }

    /// `compile`, with or without the scope index (`false` puts every policy in the global
    /// bucket: the reference the index is tested against).
    pub(super) fn build(
        policies: &[StoredPolicy],
        indexed: bool,
        validated: Option<&str>,
    ) -> Result<PolicySet, PolicyError> {
        let names = Names::new().map_err(|message| PolicyError::Schema { message })?;
        let validator = load_validator()?;
        let mut sorted: Vec<&StoredPolicy> = policies.iter().collect();
        sorted.sort_by(|a, b| (a.seq, &a.id).cmp(&(b.seq, &b.id)));
        let key = validation_key_of(&sorted);
        let known_valid = validated == Some(key.as_str());

        let texts: Vec<&str> = sorted.iter().map(|p| p.text.as_str()).collect();
        // Parsed in one pass and validated as one set where that stands for each alone; a
        // policy either cannot clear is parsed or validated alone in the loop below.
        let together: Vec<Policy> = parse_together(&texts)
            .unwrap_or_default()
            .into_iter()
            .zip(&sorted)
            .map(|(p, stored)| p.new_id(PolicyId::new(&stored.id)))
            .collect();
        // A policy without conditions reads nothing (its scope names no argument): only the
        // conditional ones need their JSON form, which Cedar makes by parsing the text again.
        let ests: Vec<Option<serde_json::Value>> = together
            .iter()
            .map(|p| p.has_non_scope_constraint().then(|| est_of(p)).flatten())
            .collect();
        let named: Vec<(&str, &Policy, Option<&serde_json::Value>)> = sorted
            .iter()
            .map(|p| p.id.as_str())
            .zip(&together)
            .zip(&ests)
            .map(|((id, p), est)| (id, p, est.as_ref()))
            .collect();
        let flagged = if known_valid {
            Some(std::collections::HashSet::new())
        } else {
            needs_validating_alone(&validator, &named)
        };
        let mut parsed = together.into_iter().zip(ests).map(|(p, est)| {
            let id: &str = p.id().as_ref();
            let cleared = flagged.as_ref().is_some_and(|f| !f.contains(id));
            (p, cleared, est)
        });

        let mut set = PolicySet::empty();
        set.names = Some(names);
        set.validation_key = key;
        for stored in sorted {
            if set.by_id.contains_key(&stored.id) {
                return Err(PolicyError::DuplicateId {
                    id: stored.id.clone(),
                });
            }
            let checked = compile_one(&validator, &stored.id, &stored.text, parsed.next())?;
            set.index
                .add(
                    set.infos.len(),
                    &checked.scope,
                    checked.effect,
                    checked.policy,
                    indexed,
                )
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
            set.summaries.push(std::sync::OnceLock::new());
            set.context_reads.add(checked.context_reads);
        }
        Ok(set)
    }

    /// Every policy, in seq order.
    pub(crate) fn info(&self) -> &[PolicyInfo] {
        &self.infos
    }

    /// The whole set as Cedar text: policies in seq order, one blank line between them, a
    /// final newline; `""` when empty. Stable, so two versions can be diffed.
    pub fn text(&self) -> String {
        set_text(self.infos.iter().map(|i| i.text.as_str()))
    }
}
