use super::*;
use crate::holdmap::model::fixture::{add, listen, machine, process};
use crate::holdmap::stop::fake::add_vite;

fn proc_with(pid: i32, exe: Option<&str>, argv: &[&str], name: &str) -> Proc {
    let mut p = process(pid, 800, 1000, name, argv, "/home/u/shop");
    p.exe = exe.map(Into::into);
    p
}

fn program(exe: Option<&str>, argv: &[&str]) -> Option<&'static str> {
    program_of(&proc_with(2000, exe, argv, "x")).map(|p| p.id)
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
        Some("claude")
    );
    assert_eq!(
        program(
            Some("/usr/bin/node"),
            &[
                "node",
                "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"
            ]
        ),
        Some("claude")
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
        Some("copilot")
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
    assert!(program_of(&p).is_none());
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
