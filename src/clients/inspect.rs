//! What a listing of configured servers shows of an entry (`inventory`, `init`): arguments
//! with credential-looking values masked, URLs without userinfo or secret query values, and
//! whether the server's package is pinned to one version.
//!
//! Owns: redaction and the pinned judgement. Must never: call something "pinned" it could not
//! parse (that is "unknown"), or return an unmasked value it judged secret. No I/O.

/// What replaces a value judged secret.
pub(crate) const MASK: &str = "••••";

/// Key words that make the value of a flag or `key=value` secret (compared lowercase, with `-`,
/// `_`, `.` and spaces removed). `auth` is judged on its own in [`secret_key`] (`oauth`,
/// `basic-auth`, but not `author`).
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "credential",
    "authorization",
    "cookie",
    "session",
    "dsn",
    "bearer",
];

/// Whole names that are secret too short to be a word above.
const SECRET_NAMES: &[&str] = &["key", "pass", "pat", "pw", "pwd"];

/// Short flags whose next argument is usually a password (`mysql -p`, `-p SECRET` in many
/// database and archive tools). Some programs use `-p` for a port or a path: that value is
/// masked too, which hides nothing secret and shows nothing that is.
const SECRET_SHORT_FLAGS: &[&str] = &["-p"];

/// Prefixes of well-known token formats.
const TOKEN_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "glpat-",
    "AKIA",
    "ASIA",
    "AIza",
    "eyJ",
    "pk_live_",
    "rk_live_",
    "npm_",
    "hf_",
];

fn normalized(key: &str) -> String {
    key.trim()
        .trim_start_matches('-')
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// A flag, key, environment or header name whose value is secret. The one judgement of a
/// secret name, for Holdcall's listings of client entries and holdmap's command lines alike.
pub(crate) fn secret_key(key: &str) -> bool {
    let n = normalized(key);
    if n.is_empty() {
        return false;
    }
    let trimmed = key.trim().trim_start_matches('-');
    SECRET_WORDS.iter().any(|w| n.contains(w))
        || SECRET_NAMES.contains(&n.as_str())
        || (n.contains("auth") && (n.contains("authoriz") || !n.contains("author")))
        // An environment-style name ending in `_KEY` (`OPENAI_KEY`).
        || (trimmed.ends_with("_KEY")
            && trimmed
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
}

/// A bare value that looks like a credential: a known token prefix, or a long run of letters
/// and digits with no path or package shape and high entropy.
pub(crate) fn looks_like_token(v: &str) -> bool {
    if TOKEN_PREFIXES
        .iter()
        .any(|p| v.starts_with(p) && v.len() >= p.len() + 8)
    {
        return true;
    }
    if v.len() < 24 || v.contains('/') || v.contains('@') || v.contains(' ') {
        return false;
    }
    if !v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '=' | '.'))
    {
        return false;
    }
    let has_digit = v.chars().any(|c| c.is_ascii_digit());
    let has_alpha = v.chars().any(|c| c.is_ascii_alphabetic());
    has_digit && has_alpha && entropy(v) >= 3.5
}

fn entropy(s: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in s.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let n = s.chars().count() as f64;
    counts
        .values()
        .map(|&k| {
            let p = k as f64 / n;
            -p * p.log2()
        })
        .sum()
}

/// A URL with its userinfo and secret query values masked.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    // No plain host and an `@` before the query: the userinfo may hold a `/`
    // (`https://user:pa/ss@host`). Everything up to that last `@` is masked.
    let before_query = rest.split(['?', '#']).next().unwrap_or("");
    let rest = match before_query.rfind('@') {
        Some(at) if super::settings::url_host(url).is_none() => {
            format!("{MASK}@{}", rest.get(at + 1..).unwrap_or(""))
        }
        _ => rest.to_string(),
    };
    let rest = rest.as_str();
    let (authority, tail) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rfind('@') {
        Some(at) => format!("{MASK}@{}", authority.get(at + 1..).unwrap_or("")),
        None => authority.to_string(),
    };
    let mask_path = |path: &str| -> String {
        path.split('/')
            .map(|seg| if looks_like_token(seg) { MASK } else { seg })
            .collect::<Vec<_>>()
            .join("/")
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let path = mask_path(path);
            let (query, frag) = match query.split_once('#') {
                Some((q, f)) => (q, format!("#{f}")),
                None => (query, String::new()),
            };
            let q: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, v)) if secret_key(&percent_decoded(k)) || looks_like_token(v) => {
                        format!("{k}={MASK}")
                    }
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}?{}{frag}", q.join("&"))
        }
        None => mask_path(tail),
    };
    format!("{scheme}{authority}{tail}")
}

/// `s` with its `%XX` escapes decoded (an undecodable escape is kept as written).
pub(crate) fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%'
            && let Some(v) = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Arguments with every credential-looking value masked: `--api-key=…` and `KEY=…` by key,
/// the value after a secret flag, `Bearer …`, URLs, and bare token-shaped values.
pub(crate) fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut mask_next = false;
    for a in args {
        if mask_next {
            mask_next = false;
            out.push(MASK.to_string());
            continue;
        }
        out.push(redact_one(a, &mut mask_next));
    }
    out
}

fn redact_one(a: &str, mask_next: &mut bool) -> String {
    let lower = a.to_ascii_lowercase();
    for scheme in ["bearer ", "basic ", "token "] {
        if let Some(i) = lower.find(scheme) {
            return format!("{}{MASK}", a.get(..i + scheme.len()).unwrap_or(""));
        }
    }
    if a.contains("://") {
        return redact_url(a);
    }
    if a.starts_with('-') {
        match a.split_once('=') {
            Some((k, _)) if secret_key(k) => return format!("{k}={MASK}"),
            Some((k, v)) if looks_like_token(v) => return format!("{k}={MASK}"),
            Some(_) => return a.to_string(),
            None => {
                // `--client-secret:VALUE`: some programs take `flag:value` as one argument.
                if let Some((k, v)) = a.split_once(':') {
                    if secret_key(k) || looks_like_token(v) {
                        return format!("{k}:{MASK}");
                    }
                    return a.to_string();
                }
                if secret_key(a) || SECRET_SHORT_FLAGS.contains(&a) {
                    *mask_next = true;
                }
                return a.to_string();
            }
        }
    }
    if let Some((k, v)) = a.split_once('=')
        && (secret_key(k) || looks_like_token(v) || v.contains("://") && v != redact_url(v))
    {
        return format!("{k}={MASK}");
    }
    // A header given as one argument: `Authorization: …`, `X-Api-Key: …`.
    if let Some((k, _)) = a.split_once(':')
        && !k.contains(' ')
        && secret_key(k)
    {
        return format!("{k}: {MASK}");
    }
    if looks_like_token(a) {
        return MASK.to_string();
    }
    a.to_string()
}

/// Whether an entry's server is pinned to one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pin {
    /// An exact version (`pkg@1.2.3`, `pkg==1.2.3`), an image digest, or a local absolute path.
    Pinned(String),
    /// A package without an exact version, or an image by tag.
    Unpinned(String),
    /// Holdcall could not tell (an unknown launcher or flag). Never counts as pinned.
    Unknown(String),
}

impl Pin {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Pin::Pinned(_) => "pinned",
            Pin::Unpinned(_) => "unpinned",
            Pin::Unknown(_) => "unknown",
        }
    }
    pub(crate) fn detail(&self) -> &str {
        match self {
            Pin::Pinned(d) | Pin::Unpinned(d) | Pin::Unknown(d) => d,
        }
    }
}

fn base(command: &str) -> &str {
    std::path::Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command)
}

/// An exact semantic version: `1.2.3`, optionally `-pre` and `+build`.
pub(crate) fn exact_version(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
}

/// What a server command launches, as holdcall reads it: one reading shared by the pinned
/// judgement (`pin`) and the connector name a `serve` without `--connector` derives
/// (`server_name`).
enum Launcher<'a> {
    /// An npm package runner, with the arguments after its own words and its known flags.
    Npm(&'a [String], &'static [&'static str]),
    /// A Python package runner (uvx, `uv tool run`, `pipx run`), with the arguments after its
    /// own words.
    Uv(&'a [String]),
    Docker(&'a [String]),
    /// An interpreter (its base name) and its arguments.
    Script(&'a str, &'a [String]),
    /// Anything else: the command itself.
    Binary,
}

fn launcher<'a>(command: &'a str, args: &'a [String]) -> Launcher<'a> {
    let first = args.first().map(String::as_str);
    match base(command) {
        "npx" | "bunx" => Launcher::Npm(
            args,
            &["-y", "--yes", "-q", "--quiet", "--no-install", "--no"],
        ),
        "pnpm" | "yarn" if first == Some("dlx") => {
            Launcher::Npm(args.get(1..).unwrap_or(&[]), &["-q", "--quiet", "--silent"])
        }
        "uvx" => Launcher::Uv(args),
        "uv" if first == Some("tool") && args.get(1).map(String::as_str) == Some("run") => {
            Launcher::Uv(args.get(2..).unwrap_or(&[]))
        }
        "pipx" if first == Some("run") => Launcher::Uv(args.get(1..).unwrap_or(&[])),
        "docker" | "podman" => Launcher::Docker(args),
        "node" | "python" | "python3" | "deno" | "bun" | "ruby" | "java" => {
            Launcher::Script(base(command), args)
        }
        _ => Launcher::Binary,
    }
}

/// The pinned judgement of a command and its arguments (the upstream ones, for a routed entry).
pub(crate) fn pin(command: &str, args: &[String]) -> Pin {
    match launcher(command, args) {
        Launcher::Npm(args, flags) => npm_pin(args, flags),
        Launcher::Uv(args) => uv_pin(args),
        Launcher::Docker(args) => docker_pin(args),
        Launcher::Script(interpreter, args) => match args.iter().find(|a| !a.starts_with('-')) {
            Some(script) if script.starts_with('/') => {
                Pin::Pinned(format!("local script {script}"))
            }
            _ => Pin::Unknown(format!("{interpreter} with no absolute script path")),
        },
        Launcher::Binary if command.starts_with('/') => {
            Pin::Pinned(format!("local binary {command}"))
        }
        Launcher::Binary => Pin::Unknown(format!(
            "{} is not a launcher holdcall reads",
            base(command)
        )),
    }
}

/// Script names that say nothing about the server (`…/my-server/dist/index.js`): the name is
/// taken from the directories above them instead.
const GENERIC_SCRIPTS: &[&str] = &["index", "main", "server", "cli", "__main__", "app", "run"];
/// Directories that say nothing about the server either (`dist`, `build`, `bin` …).
const GENERIC_DIRS: &[&str] = &[
    "dist", "build", "bin", "lib", "src", "out", "target", "release",
];

/// The name a server command suggests, and what it was read from, in words: the package an npm
/// or Python runner runs (without scope, version or extras), the image `docker run` runs, the
/// module of `python -m`, a script's name (or its project directory's, for `index.js` and
/// the like), else the command's own base name. Not yet a valid connector name: see
/// `routing::derived_connector`.
pub(crate) fn server_name(command: &str, args: &[String]) -> (String, String) {
    let fallback = || {
        (
            base(command).to_string(),
            format!("the command {}", crate::text::visible(base(command))),
        )
    };
    match launcher(command, args) {
        Launcher::Npm(args, flags) => match npm_package(args, flags) {
            Ok(spec) => {
                let (name, _) = npm_name_version(spec);
                let short = name.rsplit('/').next().unwrap_or(&name).to_string();
                (
                    short,
                    format!("the npm package {}", crate::text::visible(spec)),
                )
            }
            Err(_) => fallback(),
        },
        Launcher::Uv(args) => match uv_package(args) {
            Ok(spec) => {
                let name = spec
                    .split(['=', '<', '>', '~', '!', '@', '[', ';', ' '])
                    .next()
                    .unwrap_or(spec);
                (
                    name.to_string(),
                    format!("the Python package {}", crate::text::visible(spec)),
                )
            }
            Err(_) => fallback(),
        },
        Launcher::Docker(args) => match docker_image(args) {
            Ok(image) => {
                let no_digest = image.split('@').next().unwrap_or(image);
                let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
                let name = last.split(':').next().unwrap_or(last);
                (
                    name.to_string(),
                    format!("the image {}", crate::text::visible(image)),
                )
            }
            Err(_) => fallback(),
        },
        Launcher::Script(interpreter, args) => {
            if interpreter.starts_with("python")
                && let Some(at) = args.iter().position(|a| a == "-m")
                && let Some(module) = args.get(at + 1)
            {
                return (
                    module.clone(),
                    format!("the Python module {}", crate::text::visible(module)),
                );
            }
            let Some(script) = args.iter().find(|a| !a.starts_with('-')) else {
                return fallback();
            };
            let path = std::path::Path::new(script);
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let mut name = stem;
            if GENERIC_SCRIPTS.contains(&stem) {
                for dir in path.ancestors().skip(1) {
                    match dir.file_name().and_then(|d| d.to_str()) {
                        Some(d) if GENERIC_DIRS.contains(&d) => continue,
                        Some(d) => {
                            name = d;
                            break;
                        }
                        None => break,
                    }
                }
            }
            (
                name.to_string(),
                format!("the script {}", crate::text::visible(script)),
            )
        }
        Launcher::Binary => fallback(),
    }
}

/// `@scope/name@version` or `name@version`: the name and the version, if any.
fn npm_name_version(spec: &str) -> (String, Option<&str>) {
    match spec.strip_prefix('@') {
        Some(rest) => match rest.split_once('@') {
            Some((n, v)) => (format!("@{n}"), Some(v)),
            None => (spec.to_string(), None),
        },
        None => match spec.split_once('@') {
            Some((n, v)) => (n.to_string(), Some(v)),
            None => (spec.to_string(), None),
        },
    }
}

fn npm_pin(args: &[String], flags: &[&str]) -> Pin {
    let spec = match npm_package(args, flags) {
        Ok(s) => s,
        Err(p) => return p,
    };
    let (name, version) = npm_name_version(spec);
    match version {
        Some(v) if exact_version(v) => Pin::Pinned(format!("{name}@{v}")),
        Some(v) => Pin::Unpinned(format!("{name}@{v} is a tag or range")),
        None => Pin::Unpinned(format!("{name} without a version")),
    }
}

/// The package an npm runner runs (its `--package`, else its first word), or why it cannot be
/// told.
fn npm_package<'a>(args: &'a [String], flags: &[&str]) -> Result<&'a str, Pin> {
    let mut it = args.iter();
    let mut package: Option<&str> = None;
    while let Some(a) = it.next() {
        if a == "-p" || a == "--package" {
            match it.next() {
                Some(p) => package = Some(p),
                None => return Err(Pin::Unknown("--package without a value".into())),
            }
            continue;
        }
        if let Some(p) = a.strip_prefix("--package=") {
            package = Some(p);
            continue;
        }
        if a == "--" {
            break;
        }
        if a.starts_with('-') {
            if flags.contains(&a.as_str()) {
                continue;
            }
            return Err(Pin::Unknown(format!("unknown option {a}")));
        }
        if package.is_none() {
            package = Some(a);
        }
        break;
    }
    package.ok_or_else(|| Pin::Unknown("no package named".into()))
}

fn uv_pin(args: &[String]) -> Pin {
    let spec = match uv_package(args) {
        Ok(s) => s,
        Err(p) => return p,
    };
    if let Some((name, v)) = spec.split_once("==") {
        if exact_version(v)
            || v.split('.')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        {
            return Pin::Pinned(format!("{name}=={v}"));
        }
        return Pin::Unknown(format!("{spec} is not a plain version"));
    }
    if let Some((name, v)) = spec.split_once('@') {
        if exact_version(v) {
            return Pin::Pinned(format!("{name}@{v}"));
        }
        return Pin::Unpinned(format!("{spec} is a tag"));
    }
    if spec.contains(['>', '<', '~', '!', '=', '*']) {
        return Pin::Unpinned(format!("{spec} is a range"));
    }
    Pin::Unpinned(format!("{spec} without a version"))
}

/// The package a Python runner runs (its `--from`, else its first word), or why it cannot be
/// told.
fn uv_package(args: &[String]) -> Result<&str, Pin> {
    const VALUE: &[&str] = &[
        "--with",
        "--python",
        "-p",
        "--index-url",
        "--extra-index-url",
        "--index",
        "--spec",
    ];
    const FLAGS: &[&str] = &[
        "-q",
        "--quiet",
        "--isolated",
        "--offline",
        "-v",
        "--verbose",
        "-n",
        "--no-cache",
    ];
    let mut it = args.iter();
    let mut package: Option<&str> = None;
    while let Some(a) = it.next() {
        if a == "--from" {
            match it.next() {
                Some(p) => package = Some(p),
                None => return Err(Pin::Unknown("--from without a value".into())),
            }
            continue;
        }
        if let Some(p) = a.strip_prefix("--from=") {
            package = Some(p);
            continue;
        }
        if VALUE.contains(&a.as_str()) {
            it.next();
            continue;
        }
        if a.starts_with('-') {
            if FLAGS.contains(&a.as_str()) || VALUE.iter().any(|v| a.starts_with(&format!("{v}=")))
            {
                continue;
            }
            return Err(Pin::Unknown(format!("unknown option {a}")));
        }
        if package.is_none() {
            package = Some(a);
        }
        break;
    }
    package.ok_or_else(|| Pin::Unknown("no package named".into()))
}

fn docker_pin(args: &[String]) -> Pin {
    let a = match docker_image(args) {
        Ok(a) => a,
        Err(p) => return p,
    };
    match a.split_once("@sha256:") {
        Some((_, d)) if d.len() == 64 && d.chars().all(|c| c.is_ascii_hexdigit()) => {
            Pin::Pinned(a.to_string())
        }
        Some(_) => Pin::Unknown(format!("{a} has a malformed digest")),
        None => Pin::Unpinned(format!("{a} by tag, not digest")),
    }
}

/// The image `docker run` runs, or why it cannot be told.
fn docker_image(args: &[String]) -> Result<&str, Pin> {
    if args.first().map(String::as_str) != Some("run") {
        return Err(Pin::Unknown("not `docker run`".into()));
    }
    const VALUE: &[&str] = &[
        "-e",
        "--env",
        "-v",
        "--volume",
        "--name",
        "--network",
        "--net",
        "-p",
        "--publish",
        "--entrypoint",
        "-w",
        "--workdir",
        "-u",
        "--user",
        "--env-file",
        "--mount",
        "--platform",
        "-l",
        "--label",
        "--add-host",
        "--cap-add",
        "--cap-drop",
        "-m",
        "--memory",
        "--cpus",
        "--pull",
        "-h",
        "--hostname",
        "--security-opt",
        "--tmpfs",
        "--device",
        "--ulimit",
        "--log-driver",
    ];
    const FLAGS: &[&str] = &[
        "-i",
        "-t",
        "-it",
        "-ti",
        "--rm",
        "-d",
        "--init",
        "--interactive",
        "--tty",
        "--read-only",
        "--privileged",
        "-q",
        "--quiet",
    ];
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if VALUE.contains(&a.as_str()) {
            it.next();
            continue;
        }
        if a.starts_with('-') {
            if FLAGS.contains(&a.as_str()) || (a.starts_with("--") && a.contains('=')) {
                continue;
            }
            if VALUE
                .iter()
                .any(|v| a.starts_with(v) && !v.starts_with("--") && a.len() > 2)
            {
                // `-eKEY=v` style: a short option with its value attached.
                continue;
            }
            return Err(Pin::Unknown(format!("unknown option {a}")));
        }
        return Ok(a);
    }
    Err(Pin::Unknown("no image named".into()))
}

/// Arguments shown on one line: redacted, printable, quoted when they hold spaces.
pub(crate) fn show_command(command: &str, args: &[String]) -> String {
    let mut parts = vec![shell_word(&crate::text::visible(command))];
    parts.extend(
        redact_args(args)
            .iter()
            .map(|a| shell_word(&crate::text::visible(a))),
    );
    parts.join(" ")
}

fn shell_word(s: &str) -> String {
    if s.is_empty() || s.contains([' ', '"', '\'', '$', '`', '\\']) {
        format!("'{}'", s.replace('\'', "'\\''"))
    } else {
        s.to_string()
    }
}
