//! What kind of server a process is, from its name and command line (vite, next, webpack,
//! python -m http.server, flask, uvicorn, rails, cargo run …), by one table of rules.
//!
//! Owns: the rule table, the process's shown name (`shown_name`: the kernel's 15-byte name
//! restored from the command line) and its runtime entry (`entry`: the script or module a
//! `node`, `python`, `ruby` … runs). Must never: read the file system, or decide whether a
//! process may be stopped (that is `protect`'s), or whether it is a dev server when no rule
//! matches (`listeners` decides that from the project).

use crate::os::procs::Proc;

/// A recognised framework or server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Framework {
    pub(crate) name: &'static str,
    pub(crate) category: Category,
}

/// What the framework says about the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    /// A development server (vite, next dev, http.server …).
    Dev,
    /// An application or database server a developer runs (postgres, redis …).
    App,
    /// Part of the system (sshd, cupsd, systemd-resolved …).
    System,
}

impl Category {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Category::Dev => "dev",
            Category::App => "app",
            Category::System => "system",
        }
    }
}

/// When a rule applies to the tool it names.
#[derive(Debug, Clone, Copy)]
enum When {
    Always,
    /// One of the arguments after the tool is one of these words (a subcommand or a flag).
    AnyArg(&'static [&'static str]),
}

/// One rule: a tool (an exact lowercase name, or a prefix when it ends in `*`), when it
/// applies, and what it is.
struct Rule(&'static str, When, &'static str, Category);

use Category::{App, Dev, System};
use When::{Always, AnyArg};

/// The rules, first match wins, so a tool's narrower rule (`next dev`) comes before its broader
/// one (`next`). The tool is matched against the runtime entry, then the command's basename,
/// then the process name.
const RULES: &[Rule] = &[
    // Development servers.
    Rule("vite", Always, "vite", Dev),
    Rule("next", AnyArg(&["dev"]), "next", Dev),
    Rule("next", Always, "next", App),
    Rule("next-server", Always, "next", Dev),
    Rule("nuxt", Always, "nuxt", Dev),
    Rule("nuxi", Always, "nuxt", Dev),
    Rule("webpack-dev-server", Always, "webpack-dev-server", Dev),
    Rule(
        "webpack",
        AnyArg(&["serve", "--watch", "-w"]),
        "webpack",
        Dev,
    ),
    Rule("react-scripts", Always, "react-scripts", Dev),
    Rule("astro", Always, "astro", Dev),
    Rule("remix", Always, "remix", Dev),
    Rule("svelte-kit", Always, "svelte-kit", Dev),
    Rule("parcel", Always, "parcel", Dev),
    Rule("esbuild", AnyArg(&["--serve", "--watch"]), "esbuild", Dev),
    Rule("ng", AnyArg(&["serve", "s", "dev"]), "angular", Dev),
    Rule("vue-cli-service", AnyArg(&["serve"]), "vue-cli", Dev),
    Rule("gatsby", AnyArg(&["develop"]), "gatsby", Dev),
    Rule("ember", AnyArg(&["serve", "s"]), "ember", Dev),
    Rule("storybook", Always, "storybook", Dev),
    Rule("start-storybook", Always, "storybook", Dev),
    Rule("live-server", Always, "live-server", Dev),
    Rule("http-server", Always, "http-server", Dev),
    Rule("browser-sync", Always, "browser-sync", Dev),
    Rule("nodemon", Always, "nodemon", Dev),
    Rule("tsx", AnyArg(&["watch"]), "tsx", Dev),
    Rule("wrangler", AnyArg(&["dev"]), "wrangler", Dev),
    Rule("netlify", AnyArg(&["dev"]), "netlify", Dev),
    Rule("vercel", AnyArg(&["dev"]), "vercel", Dev),
    Rule("expo", AnyArg(&["start"]), "expo", Dev),
    Rule("http.server", Always, "http.server", Dev),
    Rule("simplehttpserver", Always, "http.server", Dev),
    Rule("flask", Always, "flask", Dev),
    Rule("uvicorn", Always, "uvicorn", Dev),
    Rule("fastapi", AnyArg(&["dev", "run"]), "fastapi", Dev),
    Rule("gunicorn", AnyArg(&["--reload"]), "gunicorn", Dev),
    Rule("gunicorn", Always, "gunicorn", App),
    Rule("manage", AnyArg(&["runserver"]), "django", Dev),
    Rule("django", AnyArg(&["runserver"]), "django", Dev),
    Rule("django-admin", AnyArg(&["runserver"]), "django", Dev),
    Rule("streamlit", Always, "streamlit", Dev),
    Rule("mkdocs", AnyArg(&["serve"]), "mkdocs", Dev),
    Rule("sphinx-autobuild", Always, "sphinx-autobuild", Dev),
    Rule("jupyter-lab", Always, "jupyter", Dev),
    Rule("jupyter-notebook", Always, "jupyter", Dev),
    Rule("jupyter", AnyArg(&["lab", "notebook"]), "jupyter", Dev),
    Rule("rails", AnyArg(&["s", "server"]), "rails", Dev),
    Rule("puma", AnyArg(&["development"]), "puma", Dev),
    Rule("puma", Always, "puma", App),
    Rule("rackup", Always, "rack", Dev),
    Rule("jekyll", AnyArg(&["serve", "s"]), "jekyll", Dev),
    Rule("hugo", AnyArg(&["server", "serve"]), "hugo", Dev),
    Rule("zola", AnyArg(&["serve"]), "zola", Dev),
    Rule(
        "cargo",
        AnyArg(&["run", "watch", "leptos"]),
        "cargo run",
        Dev,
    ),
    Rule("trunk", AnyArg(&["serve"]), "trunk", Dev),
    Rule("dx", AnyArg(&["serve"]), "dioxus", Dev),
    Rule("air", Always, "air", Dev),
    Rule("php", AnyArg(&["-s"]), "php -S", Dev),
    Rule("artisan", AnyArg(&["serve"]), "laravel", Dev),
    Rule(
        "npm",
        AnyArg(&["dev", "start", "serve", "develop", "watch"]),
        "npm run",
        Dev,
    ),
    Rule(
        "npm-cli",
        AnyArg(&["dev", "start", "serve", "develop", "watch"]),
        "npm run",
        Dev,
    ),
    Rule(
        "pnpm",
        AnyArg(&["dev", "start", "serve", "develop", "watch"]),
        "pnpm",
        Dev,
    ),
    Rule(
        "yarn",
        AnyArg(&["dev", "start", "serve", "develop", "watch"]),
        "yarn",
        Dev,
    ),
    Rule("bun", AnyArg(&["dev", "--watch", "--hot"]), "bun", Dev),
    Rule("deno", AnyArg(&["dev", "--watch"]), "deno", Dev),
    // Application and database servers.
    Rule("postgres", Always, "postgres", App),
    Rule("postmaster", Always, "postgres", App),
    Rule("mysqld", Always, "mysql", App),
    Rule("mariadbd", Always, "mariadb", App),
    Rule("redis-server", Always, "redis", App),
    Rule("valkey-server", Always, "valkey", App),
    Rule("mongod", Always, "mongodb", App),
    Rule("mongos", Always, "mongodb", App),
    Rule("memcached", Always, "memcached", App),
    Rule("nginx", Always, "nginx", App),
    Rule("httpd", Always, "httpd", App),
    Rule("apache2", Always, "apache", App),
    Rule("caddy", Always, "caddy", App),
    Rule("traefik", Always, "traefik", App),
    Rule("haproxy", Always, "haproxy", App),
    Rule("envoy", Always, "envoy", App),
    Rule("docker-proxy", Always, "docker-proxy", App),
    Rule("rootlessport", Always, "rootlessport", App),
    Rule("gvproxy", Always, "gvproxy", App),
    Rule("slirp4netns", Always, "slirp4netns", App),
    Rule("pasta", Always, "pasta", App),
    Rule("vpnkit", Always, "vpnkit", App),
    Rule("wslrelay", Always, "wslrelay", App),
    Rule("ollama", Always, "ollama", App),
    Rule("etcd", Always, "etcd", App),
    Rule("minio", Always, "minio", App),
    Rule("clickhouse-server", Always, "clickhouse", App),
    Rule("influxd", Always, "influxdb", App),
    Rule("prometheus", Always, "prometheus", App),
    Rule("grafana", Always, "grafana", App),
    Rule("grafana-server", Always, "grafana", App),
    Rule("consul", Always, "consul", App),
    Rule("beam.smp", Always, "erlang", App),
    Rule("epmd", Always, "erlang", App),
    Rule("couchdb", Always, "couchdb", App),
    Rule("syncthing", Always, "syncthing", App),
    // The system.
    Rule("sshd", Always, "sshd", System),
    Rule("systemd*", Always, "systemd", System),
    Rule("cupsd", Always, "cups", System),
    Rule("cups-browsed", Always, "cups", System),
    Rule("avahi-daemon", Always, "avahi", System),
    Rule("dnsmasq", Always, "dnsmasq", System),
    Rule("chronyd", Always, "chrony", System),
    Rule("ntpd", Always, "ntpd", System),
    Rule("rpcbind", Always, "rpcbind", System),
    Rule("rpc.*", Always, "rpc", System),
    Rule("containerd*", Always, "containerd", System),
    Rule("dockerd", Always, "docker", System),
    Rule("podman", Always, "podman", System),
    Rule("networkmanager", Always, "NetworkManager", System),
    Rule("nm-dispatcher", Always, "NetworkManager", System),
    Rule("wpa_supplicant", Always, "wpa_supplicant", System),
    Rule("dhclient", Always, "dhclient", System),
    Rule("dhcpcd", Always, "dhcpcd", System),
    Rule("pipewire*", Always, "pipewire", System),
    Rule("wireplumber", Always, "pipewire", System),
    Rule("pulseaudio", Always, "pulseaudio", System),
    Rule("xorg", Always, "Xorg", System),
    Rule("xwayland", Always, "Xwayland", System),
    Rule("smbd", Always, "samba", System),
    Rule("nmbd", Always, "samba", System),
    Rule("exim4", Always, "exim", System),
    Rule("sendmail", Always, "sendmail", System),
    Rule("rsyslogd", Always, "rsyslog", System),
    Rule("unbound", Always, "unbound", System),
    Rule("named", Always, "bind", System),
    Rule("kubelet", Always, "kubelet", System),
    Rule("tailscaled", Always, "tailscale", System),
    Rule("zerotier-one", Always, "zerotier", System),
    Rule("snapd", Always, "snapd", System),
    Rule("colord", Always, "colord", System),
    Rule("kdeconnectd", Always, "kdeconnect", System),
    Rule("gsd-*", Always, "gnome-settings", System),
    Rule("gvfsd*", Always, "gvfs", System),
    Rule("mdnsresponder", Always, "mDNSResponder", System),
    Rule("launchd", Always, "launchd", System),
    Rule("rapportd", Always, "rapportd", System),
    Rule("controlcenter", Always, "ControlCenter", System),
];

/// Runtimes whose own name says nothing: the script or module they run is the tool.
fn is_runtime(name: &str) -> bool {
    matches!(
        name,
        "node" | "nodejs" | "bun" | "deno" | "ruby" | "php" | "perl" | "pypy" | "pypy3"
    ) || is_python(name)
}

fn is_python(name: &str) -> bool {
    name == "python"
        || name
            .strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// How many words of `words` are a runner that runs the word after it as the tool
/// (`npx vite`, `bundle exec rails s`, `uv run flask run`, `pnpm exec astro dev`).
fn runner_skip(words: &[String]) -> usize {
    let lower = |i: usize| words.get(i).map(|w| w.to_ascii_lowercase());
    let Some(first) = lower(0) else {
        return 0;
    };
    match (program(&first), lower(1).as_deref()) {
        ("npx" | "bunx" | "pnpx", _) => 1,
        ("bundle" | "uv" | "poetry" | "pipenv", Some("exec" | "run")) => 2,
        ("pnpm" | "yarn", Some("exec" | "dlx")) => 2,
        _ => 0,
    }
}

/// The last path segment of `path` (the whole text when there is no `/`).
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The basename of a path-like word without a script extension (`.js`, `.cjs`, `.mjs`,
/// `.py`): `/usr/lib/node_modules/npm/bin/npm-cli.js` is `npm-cli`.
pub(crate) fn script_name(word: &str) -> &str {
    let name = basename(word);
    [".js", ".cjs", ".mjs", ".py"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
        .unwrap_or(name)
}

/// The program a command's first word names: its basename, and for a process that rewrote
/// its command line into one string (`sshd: u@pts/0`, `nginx: master process …`,
/// `next-server (v15.0.3)`, `redis-server *:6379`) the word before the colon or the space. An
/// absolute path is taken whole first, since a folder in it may have a space.
pub(crate) fn program(argv0: &str) -> &str {
    let head = argv0.split(": ").next().unwrap_or(argv0);
    if head.starts_with('/') {
        basename(head).split(' ').next().unwrap_or_default()
    } else {
        basename(head.split(' ').next().unwrap_or_default())
    }
}

/// Container port forwarders: they hold a port a container publishes; stopping one breaks the
/// container's port instead of stopping the container.
const FORWARDERS: &[&str] = &[
    "docker-proxy",
    "rootlessport",
    "rootlessport-child",
    "gvproxy",
    "slirp4netns",
    "pasta",
    "pasta.avx2",
    "vpnkit",
    "vpnkit-bridge",
    "limactl",
    "wslrelay",
    "com.docker.backend",
    "com.docker.vpnkit",
];

/// Whether `p` forwards a container's published port.
pub(crate) fn is_container_forwarder(p: &Proc) -> bool {
    let name = shown_name(p).to_ascii_lowercase();
    let argv0 = p.argv.first().map(|a| program(a).to_ascii_lowercase());
    FORWARDERS
        .iter()
        .any(|f| name == *f || argv0.as_deref() == Some(*f))
}

/// The process's name as a person knows it: the kernel's name (`comm`) is cut to 15 bytes, so
/// when it is exactly 15 bytes long and the command's basename starts with it, the basename
/// (`gnome-terminal-` → `gnome-terminal-server`).
pub(crate) fn shown_name(p: &Proc) -> String {
    if p.name.len() == 15
        && let Some(argv0) = p.argv.first()
    {
        let base = program(argv0);
        if base.len() > 15 && base.starts_with(p.name.as_str()) {
            return base.to_owned();
        }
    }
    p.name.clone()
}

/// The tool a runtime runs, lowercased, and the index in `argv` of the argument after it:
/// `python -m http.server` → `http.server`; `node /p/node_modules/.bin/vite` → `vite`;
/// `node /p/node_modules/react-scripts/scripts/start.js` → `react-scripts`;
/// `python manage.py runserver` → `manage`; `node server.js` → `server`. `None` when the
/// process is not a runtime, or runs inline code (`-c`, `-e`).
pub(crate) fn entry(p: &Proc) -> Option<(String, usize)> {
    let runtime = runtime_name(p)?;
    let mut i = 1;
    while let Some(arg) = p.argv.get(i) {
        let lower = arg.to_ascii_lowercase();
        if is_python(&runtime) && lower == "-m" {
            let module = p.argv.get(i + 1)?.to_ascii_lowercase();
            return Some((module, i + 2));
        }
        if matches!(lower.as_str(), "-c" | "-e" | "--eval" | "-p" | "--print") {
            return None;
        }
        if (runtime == "deno" || runtime == "bun") && matches!(lower.as_str(), "run" | "task") {
            i += 1;
            continue;
        }
        if lower.starts_with('-') {
            // Options that take the next word as their value.
            let takes_value = matches!(
                lower.as_str(),
                "-r" | "--require"
                    | "--loader"
                    | "--import"
                    | "--experimental-loader"
                    | "-w"
                    | "-x"
                    | "--env-file"
            );
            i += if takes_value { 2 } else { 1 };
            continue;
        }
        return Some((script_tool(&lower), i + 1));
    }
    None
}

/// The runtime the process is (its name or its command's basename), lowercased.
fn runtime_name(p: &Proc) -> Option<String> {
    let name = shown_name(p).to_ascii_lowercase();
    if is_runtime(&name) {
        return Some(name);
    }
    let argv0 = program(p.argv.first()?).to_ascii_lowercase();
    is_runtime(&argv0).then_some(argv0)
}

/// The tool a script path stands for: a package's bin under `node_modules` is named by its
/// file, unless the file has a generic name, then by its package; otherwise the file's name
/// without its extension.
fn script_tool(path: &str) -> String {
    let file = strip_ext(basename(path));
    const GENERIC: &[&str] = &[
        "cli", "index", "main", "bin", "start", "run", "serve", "dev",
    ];
    if !path.contains("/.bin/")
        && GENERIC.contains(&file)
        && let Some((_, after)) = path.rsplit_once("/node_modules/")
    {
        let mut parts = after.split('/');
        let first = parts.next().unwrap_or_default();
        let package = if first.starts_with('@') {
            parts.next().unwrap_or(first)
        } else {
            first
        };
        if !package.is_empty() {
            return package.to_owned();
        }
    }
    file.to_owned()
}

fn strip_ext(file: &str) -> &str {
    for ext in [
        ".js", ".mjs", ".cjs", ".ts", ".mts", ".py", ".rb", ".php", ".pl",
    ] {
        if let Some(stem) = file.strip_suffix(ext) {
            return stem;
        }
    }
    file
}

fn tool_matches(pattern: &str, tool: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => tool == pattern,
    }
}

fn rule_for(tool: &str, rest: &[String]) -> Option<Framework> {
    RULES
        .iter()
        .find_map(|Rule(pattern, when, name, category)| {
            let applies = tool_matches(pattern, tool)
                && match when {
                    Always => true,
                    AnyArg(words) => rest
                        .iter()
                        .any(|a| words.contains(&a.to_ascii_lowercase().as_str())),
                };
            applies.then_some(Framework {
                name,
                category: *category,
            })
        })
}

/// The framework or server `p` is, by the first rule that matches its runtime entry, its
/// command's basename (after a runner such as `npx`), or its name.
pub(crate) fn framework_of(p: &Proc) -> Option<Framework> {
    if let Some((tool, next)) = entry(p) {
        let rest = p.argv.get(next..).unwrap_or_default();
        if let Some(found) = rule_for(&tool, rest) {
            return Some(found);
        }
    }
    let skip = runner_skip(&p.argv);
    if let Some(argv0) = p.argv.get(skip) {
        let tool = strip_ext(program(argv0)).to_ascii_lowercase();
        let rest = p.argv.get(skip + 1..).unwrap_or_default();
        if let Some(found) = rule_for(&tool, rest) {
            return Some(found);
        }
    }
    rule_for(&shown_name(p).to_ascii_lowercase(), &p.argv)
}

#[cfg(test)]
mod tests;
