use super::*;
use crate::holdmap::model::fixture::{add, listen, machine, process};
use crate::holdmap::stop::fake::add_vite;
use crate::os::procs::Proc;

fn proc_with(pid: i32, exe: Option<&str>, argv: &[&str], name: &str) -> Proc {
    let mut p = process(pid, 800, 1000, name, argv, "/home/u/shop");
    p.exe = exe.map(Into::into);
    p
}

fn program(exe: Option<&str>, argv: &[&str]) -> Option<&'static str> {
    detect::product_of(&proc_with(2000, exe, argv, "x")).map(|p| p.id)
}

#[test]
fn agents_are_known_by_executable_install_path_or_entry_script() {
    assert_eq!(
        program(Some("/usr/local/bin/codex"), &["codex"]),
        Some("codex")
    );
    assert_eq!(
        program(
            Some("/home/u/.local/share/claude/versions/2.0.1"),
            &["claude"]
        ),
        Some("claude-code")
    );
    assert_eq!(
        program(
            Some("/usr/bin/node"),
            &[
                "node",
                "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"
            ]
        ),
        Some("claude-code")
    );
    assert_eq!(
        program(
            Some("/usr/bin/node"),
            &["node", "--no-warnings", "/usr/local/bin/gemini"]
        ),
        Some("gemini")
    );
    assert_eq!(
        program(
            Some("/usr/bin/python3.12"),
            &["python3", "-u", "-m", "aider", "--yes"]
        ),
        Some("aider")
    );
    assert_eq!(
        program(
            Some("/usr/bin/node"),
            &["node", "/x/@github/copilot/index.js"]
        ),
        Some("copilot-cli")
    );
}

#[test]
fn inline_code_flag_values_and_later_arguments_are_not_entry_scripts() {
    assert_eq!(
        program(Some("/usr/bin/node"), &["node", "-e", "claude"]),
        None
    );
    assert_eq!(
        program(
            Some("/usr/bin/node"),
            &["node", "app.js", "/usr/local/bin/claude"]
        ),
        None
    );
    assert_eq!(
        program(Some("/usr/bin/node"), &["node", "--frobnicate", "claude"]),
        None,
        "an unknown flag could take the next word as its value"
    );
    assert_eq!(
        program(Some("/usr/bin/python3"), &["python3", "-c", "import aider"]),
        None
    );
    assert_eq!(
        program(Some("/usr/bin/cp"), &["cp", "/tmp/claude", "x"]),
        None
    );
}

#[test]
fn a_name_a_process_chose_for_itself_does_not_count_against_its_executable() {
    // argv[0] and comm say "claude"; the executable says sleep.
    let p = proc_with(2000, Some("/usr/bin/sleep"), &["claude", "100"], "claude");
    assert!(detect::product_of(&p).is_none());
    // Only when the executable cannot be read does argv[0] stand in.
    assert_eq!(program(None, &["/usr/local/bin/codex"]), Some("codex"));
}

fn with_agent() -> Snapshot {
    let mut snap = machine();
    add(
        &mut snap,
        proc_with(1100, Some("/usr/local/bin/codex"), &["codex"], "codex"),
    );
    listen(&mut snap, "127.0.0.1:1455", 1100);
    add_vite(&mut snap, 1100, 1200, 5173);
    // Nested codex below the first: a helper, not a second agent.
    let mut nested = proc_with(
        1500,
        Some("/usr/local/bin/codex"),
        &["codex", "exec"],
        "codex",
    );
    nested.ppid = 1100;
    add(&mut snap, nested);
    snap
}

#[test]
fn matching_is_by_program_case_insensitive_or_by_pid() {
    let snap = with_agent();
    let by_name = matching(&snap, "  CODEX ");
    assert_eq!(by_name.len(), 1);
    assert_eq!(by_name[0].pid, 1100);
    assert_eq!(matching(&snap, "pid:1100").len(), 1);
    assert!(
        matching(&snap, "pid:1500").is_empty(),
        "a nested helper is not an agent"
    );
    assert!(matching(&snap, "pid:x").is_empty());
    assert!(matching(&snap, "claude").is_empty());
}

#[test]
fn an_agents_ports_are_its_descendants_listeners_not_its_own() {
    let agents = matching(&with_agent(), "codex");
    assert_eq!(agents[0].ports, vec![(5173, Protocol::Tcp)]);
}

#[test]
fn a_protected_descendants_listener_is_not_an_agent_port() {
    let mut snap = with_agent();
    // holdmap itself, run by the agent, listening: never a port to stop.
    snap.procs.get_mut(&900).unwrap().ppid = 1100;
    listen(&mut snap, "127.0.0.1:7000", 900);
    let agents = matching(&snap, "codex");
    assert_eq!(agents[0].ports, vec![(5173, Protocol::Tcp)]);
}

fn child(snap: &mut Snapshot, pid: i32, ppid: i32, exe: &str, argv: &[&str]) {
    let mut p = proc_with(
        pid,
        Some(exe),
        argv,
        crate::holdmap::framework::basename(exe),
    );
    p.ppid = ppid;
    add(snap, p);
}

#[test]
fn each_product_is_known_by_its_executable_or_its_runtime_entry() {
    let cases: &[(&str, &[&str], &str)] = &[
        ("/usr/share/cursor/cursor", &["cursor"], "cursor"),
        (
            "/home/u/.cursor-server/bin/abc/node",
            &["node", "/home/u/.cursor-server/bin/abc/out/server-main.js"],
            "cursor",
        ),
        (
            "/home/u/.local/bin/cursor-agent",
            &["cursor-agent"],
            "cursor-agent",
        ),
        (
            "/usr/bin/node",
            &[
                "node",
                "/home/u/.vscode/extensions/github.copilot-1.300.0/dist/language-server.js",
                "--stdio",
            ],
            "copilot",
        ),
        (
            "/usr/lib/node_modules/@github/copilot-language-server/bin/copilot-language-server",
            &["copilot-language-server", "--stdio"],
            "copilot",
        ),
        ("/usr/share/windsurf/windsurf", &["windsurf"], "windsurf"),
        ("/usr/local/bin/goosed", &["goosed", "agent"], "goose"),
        ("/home/u/.opencode/bin/opencode", &["opencode"], "opencode"),
        (
            "/usr/bin/node",
            &[
                "node",
                "/usr/lib/node_modules/@google/gemini-cli/dist/index.js",
            ],
            "gemini",
        ),
        (
            "/usr/bin/bun",
            &[
                "bun",
                "run",
                "/usr/lib/node_modules/@openai/codex/bin/codex.js",
            ],
            "codex",
        ),
        (
            "/home/u/.local/bin/aider",
            &["aider", "--yes-always"],
            "aider",
        ),
    ];
    for (exe, argv, want) in cases {
        assert_eq!(program(Some(exe), argv), Some(*want), "{exe} {argv:?}");
    }
}

#[test]
fn vs_code_itself_is_not_an_agent() {
    assert_eq!(program(Some("/usr/share/code/code"), &["code"]), None);
    assert_eq!(
        program(
            Some("/home/u/.vscode-server/bin/x/node"),
            &["node", "/home/u/.vscode-server/bin/x/out/server-main.js"]
        ),
        None
    );
}

#[test]
fn a_renamed_copy_or_a_process_that_calls_itself_claude_is_not_claude() {
    // `cp /tmp/claude x`: cp is running, with claude only as an argument.
    assert_eq!(
        program(Some("/usr/bin/cp"), &["cp", "/tmp/claude", "x"]),
        None
    );
    // comm and argv[0] both "claude", the executable python.
    let p = proc_with(
        2000,
        Some("/usr/bin/python3.12"),
        &["claude", "serve.py"],
        "claude",
    );
    assert!(detect::product_of(&p).is_none());
    // A runtime with an unknown flag before the script is not guessed at.
    assert_eq!(
        program(
            Some("/usr/bin/node"),
            &["node", "--weird", "/usr/local/bin/claude"]
        ),
        None
    );
    assert_eq!(
        program(
            Some("/usr/bin/node"),
            &["node", "-e", "require('/usr/local/bin/claude')"]
        ),
        None
    );
}

#[test]
fn the_topmost_process_of_a_product_is_the_agent_and_everything_below_is_its() {
    let mut snap = with_agent();
    child(
        &mut snap,
        1600,
        1500,
        "/bin/bash",
        &["bash", "-c", "npm test"],
    );
    let found = detect::agents(&snap);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].pid, 1100);
    assert_eq!(found[0].product, "codex");
    assert_eq!(found[0].parent, None);
    assert!(found[0].members.contains(&1100));
    assert!(
        found[0].members.contains(&1500),
        "the nested codex is a helper"
    );
    assert!(found[0].members.contains(&1600));
    assert!(found[0].members.contains(&1200), "vite belongs to codex");
    assert!(
        !found[0].members.contains(&900),
        "holdmap is not below codex"
    );
}

#[test]
fn an_agent_inside_another_is_its_own_agent_with_the_outer_as_parent() {
    let mut snap = machine();
    child(&mut snap, 1000, 1, "/usr/share/cursor/cursor", &["cursor"]);
    child(
        &mut snap,
        1001,
        1000,
        "/usr/share/cursor/cursor",
        &["cursor", "--type=renderer"],
    );
    child(&mut snap, 1010, 1000, "/bin/bash", &["bash"]);
    child(
        &mut snap,
        1020,
        1010,
        "/home/u/.local/share/claude/versions/2.0.1",
        &["claude"],
    );
    child(&mut snap, 1030, 1020, "/bin/bash", &["bash", "-c", "ls"]);
    let found = detect::agents(&snap);
    assert_eq!(found.len(), 2, "{found:?}");
    let cursor = found.iter().find(|f| f.product == "cursor").unwrap();
    let claude = found.iter().find(|f| f.product == "claude-code").unwrap();
    assert_eq!(cursor.members, vec![1000, 1001, 1010]);
    assert_eq!(claude.members, vec![1020, 1030]);
    assert_eq!(claude.parent, Some(1000));
    assert_eq!(cursor.parent, None);
}

#[test]
fn an_editors_re_parented_roots_of_one_account_fold_into_one_agent_but_not_across_accounts() {
    let mut snap = machine();
    child(&mut snap, 1000, 1, "/usr/share/cursor/cursor", &["cursor"]);
    child(
        &mut snap,
        1005,
        1,
        "/usr/share/cursor/cursor",
        &["cursor", "--type=zygote"],
    );
    let mut other = proc_with(
        1007,
        Some("/usr/share/cursor/cursor"),
        &["cursor"],
        "cursor",
    );
    other.ppid = 1;
    other.uid = Some(1001);
    add(&mut snap, other);
    let found = detect::agents(&snap);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].members, vec![1000, 1005]);
    assert_eq!(found[1].pid, 1007);
    // Two CLI agents side by side never fold.
    let mut snap = machine();
    child(&mut snap, 1100, 1, "/usr/local/bin/codex", &["codex"]);
    child(&mut snap, 1101, 1, "/usr/local/bin/codex", &["codex"]);
    assert_eq!(detect::agents(&snap).len(), 2);
}

#[test]
fn matching_takes_a_product_id_name_or_executable_name() {
    let mut snap = machine();
    child(
        &mut snap,
        1020,
        1,
        "/home/u/.local/share/claude/versions/2.0.1",
        &["claude"],
    );
    for q in ["claude", "Claude Code", "CLAUDE-CODE"] {
        assert_eq!(matching(&snap, q).len(), 1, "{q}");
    }
    assert_eq!(matching(&snap, "claude")[0].program, "claude-code");
    assert!(matching(&snap, "claude code desktop").is_empty());
}

#[test]
fn a_nested_agents_ports_are_not_the_outer_agents() {
    let mut snap = machine();
    child(&mut snap, 1000, 1, "/usr/share/cursor/cursor", &["cursor"]);
    child(&mut snap, 1020, 1000, "/usr/local/bin/claude", &["claude"]);
    add_vite(&mut snap, 1020, 1200, 5173);
    assert!(matching(&snap, "cursor")[0].ports.is_empty());
    assert_eq!(
        matching(&snap, "claude")[0].ports,
        vec![(5173, Protocol::Tcp)]
    );
}

#[test]
fn a_checkout_or_a_folder_named_like_an_agent_is_not_that_agent() {
    // Someone's clone called claude-code, running its dev server.
    assert_eq!(
        program(
            Some("/usr/bin/node"),
            &["node", "/home/u/src/claude-code/node_modules/.bin/vite"]
        ),
        None
    );
    // A program of their own in a folder called cursor-agent.
    assert_eq!(
        program(
            Some("/home/u/src/cursor-agent/target/debug/server"),
            &["server"]
        ),
        None
    );
    assert_eq!(
        program(Some("/home/u/claude-desktop/bin/app"), &["app"]),
        None
    );
    assert_eq!(program(Some("/home/u/exec-daemon/run"), &["run"]), None);
}

#[test]
fn real_install_layouts_are_still_agents() {
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "/home/u/.local/share/cursor-agent/versions/2026.01.28-fd13201/node",
            &[
                "node",
                "/home/u/.local/share/cursor-agent/versions/2026.01.28-fd13201/index.js",
            ],
            "cursor-agent",
        ),
        (
            "/usr/bin/node",
            &[
                "node",
                "/home/u/.claude/local/node_modules/@anthropic-ai/claude-code/cli.js",
            ],
            "claude-code",
        ),
        ("/exec-daemon/exec-daemon", &["exec-daemon"], "agent-host"),
        (
            "/usr/lib/claude-desktop/node_modules/electron/dist/electron",
            &["electron"],
            "claude-desktop",
        ),
    ];
    for (exe, argv, want) in cases {
        assert_eq!(program(Some(exe), argv), Some(*want), "{exe} {argv:?}");
    }
}
