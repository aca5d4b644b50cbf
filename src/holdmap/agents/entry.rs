//! The runtime-entry parser: which script or module a runtime (node, nodejs, bun, deno, python,
//! py, pythonX.Y) was asked to run, read from its command line.
//!
//! Must never: treat a flag's value, inline code (`-e`, `-c`, `-p`, `--eval`) or a later argument
//! as the entry; guess past a flag it does not know (an unknown flag means "no entry").

/// What a runtime was asked to run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Entry<'a> {
    Script(&'a str),
    Module(&'a str),
}

pub(crate) fn is_python(runtime: &str) -> bool {
    runtime == "py"
        || runtime
            .strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Node's flags that take the next argument as their value.
const NODE_VALUE_FLAGS: &[&str] = &[
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "-C",
    "--conditions",
    "--title",
    "--inspect-port",
    "--env-file",
    "--max-old-space-size",
    "--stack-size",
];
/// Flags after which the arguments are code, not a script path.
const CODE_FLAGS: &[&str] = &["-e", "--eval", "-p", "--print", "-c", "--check", "-i"];
const PYTHON_VALUE_FLAGS: &[&str] = &["-X", "-W", "-Q"];
const PYTHON_BOOL_FLAGS: &[&str] = &[
    "-u", "-B", "-O", "-OO", "-E", "-s", "-S", "-I", "-b", "-bb", "-q", "-v", "-d", "-P",
];

/// The script or module a runtime's command line runs. `None` for code given inline, for an
/// unknown flag (its value could be mistaken for a script), or when `runtime` is not one.
pub(crate) fn entry<'a>(argv: &'a [String], runtime: &str) -> Option<Entry<'a>> {
    let mut args = argv.iter().skip(1).map(String::as_str).peekable();
    let python = is_python(runtime);
    match runtime {
        "node" | "nodejs" => {}
        "bun" | "deno" => {
            if args.peek().is_some_and(|a| *a == "run") {
                args.next();
            }
        }
        _ if python => {}
        _ => return None,
    }
    while let Some(a) = args.next() {
        if a == "--" {
            return args.next().map(Entry::Script);
        }
        if !a.starts_with('-') {
            return Some(Entry::Script(a));
        }
        if CODE_FLAGS.contains(&a) {
            return None;
        }
        if python {
            if a == "-m" {
                return args.next().map(Entry::Module);
            }
            if PYTHON_VALUE_FLAGS.contains(&a) {
                args.next();
            } else if !PYTHON_BOOL_FLAGS.contains(&a) {
                return None;
            }
            continue;
        }
        if a.starts_with("--") && a.contains('=') {
            continue;
        }
        if NODE_VALUE_FLAGS.contains(&a) {
            args.next();
        } else if !known_boolean_flag(runtime, a) {
            return None;
        }
    }
    None
}

fn known_boolean_flag(runtime: &str, a: &str) -> bool {
    const NODE: &[&str] = &[
        "--no-warnings",
        "--enable-source-maps",
        "--inspect",
        "--inspect-brk",
        "--trace-warnings",
        "--experimental-modules",
        "--no-deprecation",
        "--watch",
        "--preserve-symlinks",
    ];
    match runtime {
        "deno" => {
            a == "-A"
                || a.starts_with("--allow-")
                || a.starts_with("--deny-")
                || a.starts_with("--unstable")
                || a == "-q"
                || a == "--quiet"
        }
        "bun" => matches!(a, "--bun" | "--watch" | "--hot" | "--smol" | "--silent"),
        _ => NODE.contains(&a),
    }
}
