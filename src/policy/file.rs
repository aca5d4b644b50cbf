//! Policy files: a file of hand-written Cedar policies split into one text per policy, each
//! checked exactly as a stored policy is (`policy::PolicySet::compile`), with every problem
//! reported at its file, line and column (miette), and the import lints.
//!
//! It does no I/O: the text comes in, policies or a report go out. The daemon applies an import;
//! the CLI uses this module to show a rich report before it sends anything.

use cedar_policy::{Policy, PolicyId};
use miette::{Diagnostic, NamedSource, SourceSpan};

use crate::policy::{self, PolicyError, StoredPolicy};

/// One problem in a file, at its span.
#[derive(Debug, Clone, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(holdcall::policy_file::problem))]
pub struct FileProblem {
    pub message: String,
    #[source_code]
    pub src: NamedSource<String>,
    #[label("{label}")]
    pub span: SourceSpan,
    pub label: String,
    #[help]
    pub help: Option<String>,
    /// `file:line:col`, for one-line reports and the daemon's answer.
    pub at: String,
}

/// A file that cannot be imported; nothing was changed.
#[derive(Debug, Clone, thiserror::Error, Diagnostic)]
#[error("{file} has {count} error(s); nothing was changed")]
#[diagnostic(
    code(holdcall::policy_file::refused),
    help("fix each error shown at its line and column, then run the command again")
)]
pub struct FileRefused {
    pub file: String,
    pub count: usize,
    #[related]
    pub problems: Vec<FileProblem>,
}

impl FileRefused {
    /// One line per problem, `file:line:col: message (help)`: what the daemon answers.
    pub(crate) fn plain(&self) -> String {
        let mut out = self.to_string();
        for p in &self.problems {
            out.push_str(&format!("\n{}: {}", p.at, p.message));
            if let Some(h) = &p.help {
                out.push_str(&format!(" (help: {h})"));
            }
        }
        out
    }
}

/// A policy of a checked file: its id, its canonical (formatted) text, and the lint warnings.
#[derive(Debug, Clone)]
pub(crate) struct FilePolicy {
    pub id: String,
    pub text: String,
    /// `file:line:col` of the policy's first character.
    pub at: String,
    /// The agents it names (`policy::agents_named`): an import needs each one enrolled.
    pub agents: Vec<String>,
}

/// A file that passed every check.
#[derive(Debug, Clone)]
pub(crate) struct CheckedFile {
    pub policies: Vec<FilePolicy>,
    /// `file:line:col: warning`, one per finding.
    pub warnings: Vec<String>,
}

/// Splits a file into policy statements: byte ranges ending at each top-level `;` (outside
/// strings and `//` comments), each starting after the previous one's end, leading whitespace
/// skipped, so comments above a policy stay with it. A non-blank tail is a last range.
pub(crate) fn split(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                i += 1;
                while let Some(&c) = bytes.get(i) {
                    i += 1;
                    if c == b'\\' {
                        i += 1;
                    } else if c == b'"' {
                        break;
                    }
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while bytes.get(i).is_some_and(|&c| c != b'\n') {
                    i += 1;
                }
                continue;
            }
            b';' => {
                out.push((start, i + 1));
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push((start, text.len()));
    out.into_iter()
        .filter_map(|(s, e)| {
            let seg = text.get(s..e)?;
            let skip = seg.len() - seg.trim_start().len();
            let s = s + skip;
            // A tail of only comments and blank lines is not a policy.
            let body = text.get(s..e)?;
            let meaningful = body
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//"));
            meaningful.then_some((s, e))
        })
        .collect()
}

/// The canonical text of one policy: Cedar's formatter with one fixed configuration, or the
/// trimmed text if the formatter declines.
pub(crate) fn canonical(text: &str) -> String {
    let config = cedar_policy_formatter::Config {
        line_width: 100,
        indent_width: 2,
    };
    match cedar_policy_formatter::policies_str_to_pretty(text.trim(), &config) {
        Ok(t) => format!("{}\n", t.trim()),
        Err(_) => format!("{}\n", text.trim()),
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Checks a whole file: every policy parses, has a unique `@id`, and passes every check of a
/// stored policy. Returns the canonical policies and the warnings, or every problem found.
pub(crate) fn check(file: &str, text: &str) -> Result<CheckedFile, FileRefused> {
    let src = NamedSource::new(file, text.to_string());
    let problems = std::cell::RefCell::new(Vec::new());
    let mut warnings = Vec::new();
    let mut policies: Vec<FilePolicy> = Vec::new();
    let problem =
        |offset: usize, len: usize, message: String, label: &str, help: Option<String>| {
            let (line, col) = line_col(text, offset);
            problems.borrow_mut().push(FileProblem {
                message,
                src: src.clone(),
                span: SourceSpan::new(offset.into(), len),
                label: label.to_string(),
                help,
                at: format!("{file}:{line}:{col}"),
            });
        };
    if text.len() > crate::limits::POLICY_FILE_BYTES_MAX {
        problem(
            0,
            0,
            format!(
                "the file is {} bytes; the limit is {} bytes",
                text.len(),
                crate::limits::POLICY_FILE_BYTES_MAX
            ),
            "here",
            Some("split the policy into several files".into()),
        );
    }
    let validator = match policy::load_validator() {
        Ok(v) => v,
        Err(e) => {
            problem(
                0,
                0,
                e.to_string(),
                "here",
                Some("this is a bug in Holdcall".into()),
            );
            return Err(refused(file, problems.into_inner()));
        }
    };
    for (start, end) in split(text) {
        let seg = text.get(start..end).unwrap_or("");
        let len = seg.trim_end().len();
        let parsed = match Policy::parse(None, seg) {
            Ok(p) => p,
            Err(e) => {
                let (offset, l, message, help) = syntax_problem(seg, len, &e);
                problem(start + offset, l, message, "here", help);
                continue;
            }
        };
        let Some(id) =
            policy::compile::annotation(&parsed, policy::ID_ANNOTATION).map(str::to_string)
        else {
            problem(start, len, "this policy has no @id".into(), "this policy", Some("give every policy a unique `@id(\"…\")` as its first line; it names the policy in the journal and on re-import".into()));
            continue;
        };
        if policies.iter().any(|p| p.id == id) {
            problem(
                start,
                len,
                format!("a second policy has the @id {id:?}"),
                "duplicate @id",
                Some("every @id in the policy set must be unique; rename one of them".into()),
            );
            continue;
        }
        let located = Policy::parse(Some(PolicyId::new(&id)), seg);
        match policy::parse_effect_and_specificity(&id, seg) {
            Ok(_) => {}
            Err(e) => {
                let (span, message, help) = policy_problem(&validator, &id, &located, len, &e);
                problem(start + span.0, span.1, message, "here", help);
                continue;
            }
        }
        let (accepted, lints) = accepted(file, text, start, seg, id, &located);
        warnings.extend(lints);
        policies.push(accepted);
    }
    let whole = if problems.borrow().is_empty() {
        whole_file_error(&policies)
    } else {
        None
    };
    if let Some(e) = whole {
        problem(0, 0, e.to_string(), "here", e.help().map(|h| h.to_string()));
    }
    let problems = problems.into_inner();
    if problems.is_empty() {
        Ok(CheckedFile { policies, warnings })
    } else {
        Err(refused(file, problems))
    }
}

fn refused(file: &str, problems: Vec<FileProblem>) -> FileRefused {
    FileRefused {
        file: file.into(),
        count: problems.len(),
        problems,
    }
}

/// A policy that passed every check, as the file gives it (`start`: where its segment `seg`
/// begins in `text`), and its lint warnings as `file:line:col: warning: …`.
fn accepted(
    file: &str,
    text: &str,
    start: usize,
    seg: &str,
    id: String,
    located: &Result<Policy, cedar_policy::ParseErrors>,
) -> (FilePolicy, Vec<String>) {
    let mut warnings = Vec::new();
    let (line, col) = line_col(text, start);
    if let Ok(p) = located {
        for w in policy::lint_warnings(p) {
            warnings.push(format!("{file}:{line}:{col}: warning: policy {id}: {w}"));
        }
    }
    let policy = FilePolicy {
        id,
        text: canonical(seg),
        at: format!("{file}:{line}:{col}"),
        agents: located
            .as_ref()
            .map(policy::agents_named)
            .unwrap_or_default(),
    };
    (policy, warnings)
}

/// Where and what a policy that does not parse gets wrong: `(offset, len, message, help)`,
/// the offset within its segment.
fn syntax_problem(
    seg: &str,
    len: usize,
    e: &cedar_policy::ParseErrors,
) -> (usize, usize, String, Option<String>) {
    let (offset, l) = e
        .labels()
        .and_then(|mut ls| ls.next())
        .map_or((0, len), |l| (l.offset(), l.len()));
    let is_template = cedar_policy::Template::parse(None, seg).is_ok();
    let (message, help) = if is_template {
        (
            "this is a template (it has a `?principal` or `?resource` slot)".to_string(),
            Some("Holdcall stores only static policies: write the entity out, e.g. `principal == Agent::\"name\"`".to_string()),
        )
    } else {
        (
            format!("not valid Cedar: {e}"),
            Some(e.help().map_or_else(|| "fix the Cedar syntax; each policy is one `permit (…)` or `forbid (…)` ending with `;`".to_string(), |h| h.to_string())),
        )
    };
    (offset, l, message, help)
}

/// Where and what a parsed policy that fails a stored policy's checks gets wrong:
/// `((offset, len), message, help)`, the offset within its segment. A schema problem points at
/// the first finding's span when Cedar gave one.
fn policy_problem(
    validator: &cedar_policy::Validator,
    id: &str,
    located: &Result<Policy, cedar_policy::ParseErrors>,
    len: usize,
    e: &PolicyError,
) -> ((usize, usize), String, Option<String>) {
    let mut span = (0, len);
    let mut message = e.to_string();
    let mut help = e.help().map(|h| h.to_string());
    if let (PolicyError::Validation { .. }, Ok(p)) = (e, located)
        && let Some(first) = policy::validation_problems(validator, id, p)
            .into_iter()
            .next()
    {
        message = format!(
            "policy {id} does not validate against Holdcall's schema: {}",
            first.message
        );
        if let Some(s) = first.span {
            span = s;
        }
        help = first.help.or(help);
    }
    (span, message, help)
}

/// The file as a whole must compile too (it always does when each policy does; kept so a
/// future cross-policy check cannot be skipped).
fn whole_file_error(policies: &[FilePolicy]) -> Option<PolicyError> {
    let stored: Vec<StoredPolicy> = policies
        .iter()
        .zip(1..)
        .map(|(p, seq)| StoredPolicy {
            seq,
            id: p.id.clone(),
            text: p.text.clone(),
        })
        .collect();
    policy::PolicySet::compile(&stored).err()
}
