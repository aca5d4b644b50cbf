//! Which processes holdmap never stops: PID 1 and the operating system, holdmap itself and its
//! ancestors and descendants, shells, terminals, IDEs and AI-assistant hosts, and every process
//! such a session runs under.
//!
//! Owns: the protection rules and their reasons, in plain words. Must never: signal anything,
//! read `/proc` (only the snapshot), or protect a process merely because a shell or an agent
//! started it — a dev server an agent started must stay stoppable, so the agent can clean up
//! after itself. A pid the snapshot does not show is protected at `Hard` ("not visible"): every
//! caller refuses to act on it.

use std::collections::{HashMap, HashSet};

use crate::holdmap::framework::{self, Category};
use crate::holdmap::model::Snapshot;
use crate::os::procs::Proc;
use crate::text;

/// How firmly a process is protected. Over MCP both are always refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// Never signalled by any surface (PID 1, holdmap and its ancestors, the kernel's own).
    Hard,
    /// A session process (shell, terminal, editor, assistant host, system daemon).
    Soft,
}

impl Level {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Level::Hard => "hard",
            Level::Soft => "soft",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Protection {
    pub(crate) level: Level,
    /// Why, in words ("PID 1", "holdmap's own ancestor (bash, pid 812)", "a terminal (kitty)").
    pub(crate) reason: String,
}

fn hard(reason: String) -> Option<Protection> {
    Some(Protection {
        level: Level::Hard,
        reason,
    })
}

fn soft(reason: String) -> Option<Protection> {
    Some(Protection {
        level: Level::Soft,
        reason,
    })
}

/// The protection of a process holdmap cannot see (another account's, or gone): callers refuse.
pub(crate) fn not_visible() -> Protection {
    Protection {
        level: Level::Hard,
        reason: "not visible: holdmap cannot see the process (another account's, or it has \
                 exited), so it will not act on it"
            .to_owned(),
    }
}

/// Whether `pid` is protected in `snap`, and why. For many pids of one snapshot, make one
/// `Guard` instead.
pub(crate) fn protection(snap: &Snapshot, pid: i32) -> Option<Protection> {
    Guard::new(snap).protection(pid)
}

/// A snapshot's protection rules, with what they need worked out once: each process's
/// children, and which processes holdmap started. Session processes are recognised only where
/// a rule needs them (the pid asked about, then its descendants), so judging a port costs in
/// proportion to its owner's process tree, not to the whole table.
pub(crate) struct Guard<'a> {
    snap: &'a Snapshot,
    /// Parent → children, in pid order.
    children: HashMap<i32, Vec<i32>>,
    /// holdmap's own descendants.
    mine: HashSet<i32>,
}

impl<'a> Guard<'a> {
    pub(crate) fn new(snap: &'a Snapshot) -> Guard<'a> {
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for p in snap.procs.values().filter(|p| p.ppid != p.pid) {
            children.entry(p.ppid).or_default().push(p.pid);
        }
        let mut guard = Guard {
            snap,
            children,
            mine: HashSet::new(),
        };
        // A snapshot that does not know holdmap's own pid (0) must not read every process as
        // holdmap's child.
        if snap.me.pid > 1 {
            guard.mine = guard.below(snap.me.pid).into_iter().collect();
        }
        guard
    }

    /// Every process below `pid`, nearest first (breadth first), each once, bounded by the
    /// table's size so a cycle in a torn read cannot loop.
    fn below(&self, pid: i32) -> Vec<i32> {
        let mut out: Vec<i32> = Vec::new();
        let mut seen: HashSet<i32> = HashSet::from([pid]);
        let mut at = 0;
        let mut frontier = vec![pid];
        while at < frontier.len() && out.len() < self.snap.procs.len() {
            let parent = frontier.get(at).copied().unwrap_or(pid);
            at += 1;
            for &child in self
                .children
                .get(&parent)
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                if seen.insert(child) {
                    out.push(child);
                    frontier.push(child);
                }
            }
        }
        out
    }

    /// The nearest session process below `pid`, and what it is.
    fn hosted_session(&self, pid: i32) -> Option<(i32, &'static str)> {
        self.below(pid).into_iter().find_map(|d| {
            self.snap
                .proc(d)
                .and_then(session_kind)
                .map(|kind| (d, kind))
        })
    }

    /// Whether `pid` is protected, and why.
    pub(crate) fn protection(&self, pid: i32) -> Option<Protection> {
        let snap = self.snap;
        let named = |pid: i32| {
            snap.proc(pid).map_or_else(
                || format!("pid {pid}"),
                |p| format!("{}, pid {pid}", text::visible(&framework::shown_name(p))),
            )
        };
        if pid <= 1 {
            return hard(match snap.proc(pid) {
                Some(p) if pid == 1 => format!(
                    "PID 1 ({}), the system's first process",
                    text::visible(&framework::shown_name(p))
                ),
                _ if pid == 1 => "PID 1, the system's first process".to_owned(),
                _ => format!("pid {pid} is not an ordinary process"),
            });
        }
        if pid == snap.me.pid {
            return hard(format!("holdmap itself (pid {pid})"));
        }
        if snap.me.ancestors.contains(&pid) {
            return hard(format!("holdmap's own ancestor ({})", named(pid)));
        }
        let Some(p) = snap.proc(pid) else {
            return Some(not_visible());
        };
        if pid == 2 || p.ppid == 2 {
            return hard(format!("a kernel thread ({})", named(pid)));
        }
        if self.mine.contains(&pid) {
            return hard(format!("started by holdmap itself ({})", named(pid)));
        }
        let name = framework::shown_name(p).to_ascii_lowercase();
        if matches!(
            name.as_str(),
            "init" | "systemd" | "launchd" | "kernel_task"
        ) {
            return hard(format!("the system's service manager ({})", named(pid)));
        }
        if let Some(kind) = session_kind(p) {
            return soft(format!("{kind} ({})", named(pid)));
        }
        if framework::is_container_forwarder(p) {
            return soft(format!(
                "a container's port forwarder ({}): stop the container itself instead",
                named(pid)
            ));
        }
        if is_system_daemon(p, &name) {
            return soft(format!("a system service ({})", named(pid)));
        }
        if let Some((session, kind)) = self.hosted_session(pid) {
            return soft(format!(
                "runs a session: {kind} ({}) is under it",
                named(session)
            ));
        }
        None
    }
}

const TERMINALS: &[&str] = &[
    "gnome-terminal-server",
    "gnome-terminal",
    "kgx",
    "ptyxis",
    "ptyxis-agent",
    "konsole",
    "yakuake",
    "xterm",
    "uxterm",
    "urxvt",
    "rxvt",
    "st",
    "kitty",
    "alacritty",
    "wezterm",
    "wezterm-gui",
    "wezterm-mux-server",
    "ghostty",
    "foot",
    "footclient",
    "tilix",
    "terminator",
    "xfce4-terminal",
    "mate-terminal",
    "lxterminal",
    "qterminal",
    "terminology",
    "sakura",
    "guake",
    "tabby",
    "hyper",
    "warp",
    "warp-terminal",
    "iterm2",
    "terminal",
    "contour",
    "rio",
    "tmux",
    "tmux: server",
    "tmux: client",
    "screen",
    "zellij",
    "abduco",
    "dtach",
    "mosh-server",
];

const EDITORS: &[&str] = &[
    "code",
    "code-insiders",
    "code-oss",
    "codium",
    "vscodium",
    "cursor",
    "windsurf",
    "zed",
    "zed-editor",
    "idea",
    "pycharm",
    "webstorm",
    "goland",
    "clion",
    "rider",
    "rubymine",
    "phpstorm",
    "datagrip",
    "rustrover",
    "dataspell",
    "aqua",
    "fleet",
    "android-studio",
    "studio",
    "sublime_text",
    "sublime_merge",
    "kate",
    "emacs",
    "vim",
    "nvim",
    "gvim",
    "hx",
    "helix",
    "kak",
    "nano",
    "micro",
];

/// Host markers in the first arguments: remote IDE servers and assistant hosts.
const IDE_MARKERS: &[&str] = &[
    ".vscode-server",
    ".vscode-server-insiders",
    ".cursor-server",
    ".windsurf-server",
    "code-server",
    "openvscode-server",
    "remote-dev-server",
    "exec-daemon",
];

const ASSISTANTS: &[&str] = &[
    "claude",
    "codex",
    "cursor-agent",
    "gemini",
    "aider",
    "goose",
    "opencode",
    "copilot",
    "amp",
    "qwen",
    "crush",
];

/// Entry scripts of assistants that run under node or python.
const ASSISTANT_MARKERS: &[&str] = &[
    "/@anthropic-ai/claude-code/",
    "/@openai/codex/",
    "/@google/gemini-cli/",
    "/@github/copilot",
    "/@sourcegraph/amp/",
    "/opencode-ai/",
    "/@qwen-code/",
    "/site-packages/aider/",
];

const SHELLS: &[&str] = &[
    "bash", "zsh", "fish", "sh", "dash", "ksh", "mksh", "tcsh", "csh", "ash", "nu", "elvish",
    "xonsh", "pwsh", "yash",
];

const SYSTEM_DAEMONS: &[&str] = &[
    "sshd",
    "dbus-daemon",
    "dbus-broker",
    "networkmanager",
    "modemmanager",
    "xorg",
    "xwayland",
    "gnome-shell",
    "mutter",
    "kwin_wayland",
    "kwin_x11",
    "plasmashell",
    "sway",
    "hyprland",
    "weston",
    "wayfire",
    "river",
    "labwc",
    "niri",
    "pipewire",
    "pipewire-pulse",
    "wireplumber",
    "pulseaudio",
    "cupsd",
    "avahi-daemon",
    "gdm",
    "gdm3",
    "sddm",
    "lightdm",
    "agetty",
    "getty",
    "login",
    "containerd",
    "dockerd",
    "docker",
    "podman",
    "conmon",
    "colima",
    "limactl",
    "orbstack",
    "polkitd",
    "udisksd",
    "upowerd",
    "bluetoothd",
    "cron",
    "crond",
    "rsyslogd",
];

fn in_list(list: &[&str], name: &str) -> bool {
    list.contains(&name)
}

fn is_system_daemon(p: &Proc, name: &str) -> bool {
    in_list(SYSTEM_DAEMONS, name)
        || name.starts_with("systemd-")
        || name.starts_with("containerd-shim")
        || name.starts_with("gdm-")
        || name.starts_with("com.docker.")
        || framework::framework_of(p).is_some_and(|f| f.category == Category::System)
}

/// The names a process goes by: its shown name and its command's program, lowercased.
fn names(p: &Proc) -> [String; 2] {
    [
        framework::shown_name(p).to_ascii_lowercase(),
        p.argv
            .first()
            .map(|a| framework::program(a).to_ascii_lowercase())
            .unwrap_or_default(),
    ]
}

/// What kind of session process `p` is, if it is one: a terminal, an editor or IDE, an
/// AI-assistant host, or an interactive shell.
pub(crate) fn session_kind(p: &Proc) -> Option<&'static str> {
    let names = names(p);
    let is = |list: &[&str]| names.iter().any(|n| in_list(list, n));
    let first_args = || p.argv.iter().take(3);
    if is(ASSISTANTS)
        || first_args().any(|a| ASSISTANT_MARKERS.iter().any(|m| a.contains(m)))
        || framework::entry(p).is_some_and(|(tool, _)| in_list(ASSISTANTS, &tool))
    {
        return Some("an AI-assistant host");
    }
    if is(TERMINALS) {
        return Some("a terminal");
    }
    let headless = p.argv.iter().any(|a| a == "--headless");
    if (is(EDITORS) && !headless)
        || first_args().any(|a| IDE_MARKERS.iter().any(|m| a.contains(m)))
        // A JetBrains IDE runs as `java … com.intellij.idea.Main`.
        || p.argv.iter().any(|a| a == "com.intellij.idea.Main")
    {
        return Some("an editor or IDE");
    }
    if interactive_shell(p) {
        return Some("an interactive shell");
    }
    None
}

/// A shell a person types into: a login shell (`-bash`), one given `-i` or `-l`, or one with
/// no script to run. Not `sh -c …` (also `bash -lc …`), nor `bash script.sh`.
fn interactive_shell(p: &Proc) -> bool {
    let login = p.argv.first().is_some_and(|a| a.starts_with('-')) || p.name.starts_with('-');
    let name = p
        .argv
        .first()
        .map(|a| {
            framework::program(a)
                .trim_start_matches('-')
                .to_ascii_lowercase()
        })
        .unwrap_or_else(|| p.name.trim_start_matches('-').to_ascii_lowercase());
    if !in_list(SHELLS, &name) && !in_list(SHELLS, &p.name.to_ascii_lowercase()) {
        return false;
    }
    let mut asked = login;
    let mut args = p.argv.iter().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-c" | "--command" => return false,
            a if a.starts_with("--command=") => return false,
            "-i" | "-l" | "--login" | "--interactive" => asked = true,
            "--rcfile" | "--init-file" | "-o" | "-O" | "-C" | "--init-command" => {
                args.next();
            }
            // Commands from stdin: a session only if asked to be interactive.
            "-s" | "--" => return asked,
            a if a.starts_with("--") => {}
            a if a.starts_with('-') && a.len() > 1 => {
                if a.contains('c') {
                    return false;
                }
                if a.contains('i') || a.contains('l') {
                    asked = true;
                }
            }
            // A script to run: not a session.
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests;
