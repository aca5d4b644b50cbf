//! Everything that can be wrong with a name or a policy, each variant with the help line that
//! says what to do (`PolicyError`).

/// The help line for every unsupported scope form: the full list of what is accepted.
const SCOPE_FORMS_HELP: &str = "Holdcall computes a rule's specificity from its scope, so only these forms are accepted: \
principal: `principal` or `principal == Agent::\"A\"`; action: `action` or `action == Action::\"call\"`; \
resource: `resource`, `resource == Tool::\"C/T\"`, `resource in ToolName::\"T\"` or `resource in Connector::\"C\"`. \
Rewrite the scope in one of these forms, or move the extra test into a `when { … }` clause (conditions add no specificity)";

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
