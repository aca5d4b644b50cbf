//! The agent products holdmap knows, as data: each product's id, name, vendor and kind, the
//! client whose MCP config files holdmap reads for it, and the signals that recognise its
//! processes (executable names, install-path fragments, app bundles, runtime entry scripts and
//! modules). `detect` applies them.
//!
//! VS Code itself is not an agent: its `code` processes are an editor. VS Code with Copilot is
//! recognised by Copilot's own processes (`copilot-language-server`, a runtime running a script
//! under `/github.copilot…/`), which belong to the `copilot` product with VS Code's config files
//! (`ClientId::VsCode`); the `code` process above them is not reported.
//!
//! Install-path fragments are anchored to a real install layout (a package folder under
//! `node_modules/`, a vendor's versions folder, a folder at the root), never a bare folder name:
//! `~/src/claude-code/node_modules/.bin/vite` is someone's checkout, not Claude Code.
//!
//! Must never: list a signal that a process could take on by choosing its own name (`comm`,
//! `argv[0]`) — names here are matched against the executable's path; list a path fragment that
//! any folder a user names could contain.

use crate::clients::ClientId;

/// What kind of program a product is. ide, desktop, host and tool products fold extra roots of
/// the same account into one agent (an editor's helpers that were re-parented).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Cli,
    Ide,
    Desktop,
    Extension,
    Host,
}

impl Kind {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Cli => "cli",
            Kind::Ide => "ide",
            Kind::Desktop => "desktop",
            Kind::Extension => "extension",
            Kind::Host => "host",
        }
    }

    /// Whether several top processes of the same account are one agent.
    pub(crate) fn folds(self) -> bool {
        matches!(self, Kind::Ide | Kind::Desktop | Kind::Host)
    }
}

/// One agent product.
#[derive(Debug)]
pub(crate) struct Product {
    /// Stable id (`claude-code`).
    pub(crate) id: &'static str,
    pub(crate) name: &'static str,
    pub(crate) vendor: &'static str,
    pub(crate) kind: Kind,
    /// The client whose MCP config files holdmap reads for it.
    pub(crate) client: Option<ClientId>,
    /// Executable basenames (lowercase).
    pub(crate) names: &'static [&'static str],
    /// Fragments of an install path, in the executable's path or a runtime's entry script. A
    /// fragment starting with `^` must start the path (a folder at the root).
    pub(crate) paths: &'static [&'static str],
    /// Runtime entry script basenames (without `.js`/`.py`) and python modules.
    pub(crate) entries: &'static [&'static str],
}

const fn cli(
    id: &'static str,
    name: &'static str,
    vendor: &'static str,
    names: &'static [&'static str],
    paths: &'static [&'static str],
) -> Product {
    Product {
        id,
        name,
        vendor,
        kind: Kind::Cli,
        client: None,
        names,
        paths,
        entries: names,
    }
}

/// Every product, in the order their signals are tried (more specific paths first).
pub(crate) const PRODUCTS: &[Product] = &[
    Product {
        id: "claude-desktop",
        name: "Claude Desktop",
        vendor: "Anthropic",
        kind: Kind::Desktop,
        client: Some(ClientId::ClaudeDesktop),
        names: &["claude-desktop"],
        // `/usr/lib/claude-desktop/` is the Debian repackaging's install folder.
        paths: &[
            "/Claude.app/",
            "/AnthropicClaude/",
            "^/usr/lib/claude-desktop/",
        ],
        entries: &[],
    },
    Product {
        id: "codex-desktop",
        name: "Codex Desktop",
        vendor: "OpenAI",
        kind: Kind::Desktop,
        client: Some(ClientId::Codex),
        names: &[],
        paths: &["/Codex.app/"],
        entries: &[],
    },
    Product {
        id: "cursor",
        name: "Cursor",
        vendor: "Anysphere",
        kind: Kind::Ide,
        client: Some(ClientId::Cursor),
        names: &["cursor"],
        paths: &["/Cursor.app/", "/.cursor-server/", "/usr/share/cursor/"],
        entries: &[],
    },
    Product {
        id: "windsurf",
        name: "Windsurf",
        vendor: "Codeium",
        kind: Kind::Ide,
        client: Some(ClientId::Windsurf),
        names: &["windsurf"],
        paths: &[
            "/Windsurf.app/",
            "/.windsurf-server/",
            "/usr/share/windsurf/",
        ],
        entries: &[],
    },
    Product {
        id: "kiro",
        name: "Kiro",
        vendor: "Amazon",
        kind: Kind::Ide,
        client: None,
        names: &["kiro"],
        paths: &["/Kiro.app/"],
        entries: &[],
    },
    Product {
        id: "copilot",
        name: "GitHub Copilot (VS Code)",
        vendor: "GitHub",
        kind: Kind::Extension,
        client: Some(ClientId::VsCode),
        names: &["copilot-language-server"],
        paths: &[
            "/extensions/github.copilot",
            "/node_modules/@github/copilot-language-server/",
        ],
        entries: &["copilot-language-server"],
    },
    Product {
        id: "agent-host",
        name: "Remote agent host",
        vendor: "unknown",
        kind: Kind::Host,
        client: None,
        names: &[],
        // A cloud agent's VM keeps its daemon in a folder at the root.
        paths: &["^/exec-daemon/"],
        entries: &[],
    },
    Product {
        client: Some(ClientId::ClaudeCode),
        ..cli(
            "claude-code",
            "Claude Code",
            "Anthropic",
            &["claude"],
            // npm (global, bun, pnpm, the old `~/.claude/local/` install), and the native
            // installer's `~/.local/share/claude/versions/<version>` executables.
            &[
                "/node_modules/@anthropic-ai/claude-code/",
                "/.local/share/claude/versions/",
            ],
        )
    },
    Product {
        client: Some(ClientId::Codex),
        ..cli(
            "codex",
            "Codex CLI",
            "OpenAI",
            &["codex"],
            &["/@openai/codex/"],
        )
    },
    // Cursor's CLI reads the same ~/.cursor/mcp.json (and .cursor/mcp.json) as the editor.
    Product {
        client: Some(ClientId::Cursor),
        ..cli(
            "cursor-agent",
            "Cursor Agent CLI",
            "Anysphere",
            &["cursor-agent"],
            // The installer's `~/.local/share/cursor-agent/versions/<version>/` (its own node
            // and index.js); packagers put it in `/opt/cursor-agent/`.
            &[
                "/.local/share/cursor-agent/versions/",
                "^/opt/cursor-agent/",
            ],
        )
    },
    Product {
        client: Some(ClientId::GeminiCli),
        ..cli(
            "gemini",
            "Gemini CLI",
            "Google",
            &["gemini"],
            &["/@google/gemini-cli/"],
        )
    },
    cli(
        "copilot-cli",
        "GitHub Copilot CLI",
        "GitHub",
        &["copilot"],
        &["/@github/copilot/"],
    ),
    cli("aider", "Aider", "Aider", &["aider"], &[]),
    cli("cline", "Cline CLI", "Cline", &["cline"], &[]),
    Product {
        paths: &["/Goose.app/"],
        ..cli("goose", "Goose", "Block", &["goose", "goosed"], &[])
    },
    cli(
        "opencode",
        "opencode",
        "SST",
        &["opencode"],
        &["/node_modules/opencode-ai/"],
    ),
    cli(
        "amp",
        "Amp",
        "Sourcegraph",
        &["amp"],
        &["/@sourcegraph/amp/"],
    ),
    cli("crush", "Crush", "Charm", &["crush"], &[]),
    cli("qwen", "Qwen Code", "Alibaba", &["qwen"], &["/@qwen-code/"]),
];

/// The product with this id.
pub(crate) fn by_id(id: &str) -> Option<&'static Product> {
    PRODUCTS.iter().find(|p| p.id == id)
}

/// The product an install path mentions (`/usr/lib/node_modules/@openai/codex/bin/codex.js`).
pub(crate) fn by_path(path: &str) -> Option<&'static Product> {
    PRODUCTS
        .iter()
        .find(|p| p.paths.iter().any(|frag| mentions(path, frag)))
}

/// Whether `path` holds the install-path fragment `frag` (`^` anchors it at the start).
fn mentions(path: &str, frag: &str) -> bool {
    match frag.strip_prefix('^') {
        Some(prefix) => path.starts_with(prefix),
        None => path.contains(frag),
    }
}

/// The product whose executable is called `basename` (compared lowercase).
pub(crate) fn by_name(basename: &str) -> Option<&'static Product> {
    let b = basename.to_ascii_lowercase();
    PRODUCTS.iter().find(|p| p.names.contains(&b.as_str()))
}

/// The product a runtime entry script or module (its basename, or a module's top package)
/// names.
pub(crate) fn by_entry(entry: &str) -> Option<&'static Product> {
    let e = entry.to_ascii_lowercase();
    PRODUCTS.iter().find(|p| p.entries.contains(&e.as_str()))
}

/// Whether a query names `p`: its id, its name, or one of its executable names, all
/// case-insensitive (`claude`, `Claude Code`, `claude-code`).
pub(crate) fn named(p: &Product, query: &str) -> bool {
    let q = query.trim().to_lowercase();
    p.id == q || p.name.to_lowercase() == q || p.names.contains(&q.as_str())
}
