//! Every person-facing rendering of text another program chose goes through
//! `crate::text::visible`: a terminal escape, a bidi override or a zero width in a tool name, a
//! reason or a path is shown as `\u{…}` in `holdcall log`, `doctor` and `agent list`, never
//! as itself.

use crate::common::*;

/// ESC (a terminal escape), U+202E (right-to-left override), U+200B (zero width space).
const HOSTILE: [char; 3] = ['\u{1b}', '\u{202e}', '\u{200b}'];

fn assert_shown_escaped(what: &str, text: &str, escaped: &str) {
    for c in HOSTILE {
        assert!(
            !text.contains(c),
            "{what} printed U+{:04X} as itself:\n{text:?}",
            c as u32
        );
    }
    assert!(text.contains(escaped), "{what}:\n{text}");
}

#[test]
fn a_tool_name_with_a_bidi_override_and_a_zero_width_is_shown_escaped_in_the_log() {
    let env = Env::fast();
    env.ok(&["policy", "deny", "delete_file"]);
    let mut r = env.relay("demo");
    r.handshake();
    // A control character makes the call unreadable (refused before any decision), so the
    // tool name carries the two invisible ones; the ESC is in the agent test's log below.
    r.send(&call("1", r"ev\u202eil\u200bx", "{}"));
    r.recv_json();
    r.finish();
    let log = env.ok(&["log"]);
    assert_shown_escaped("holdcall log", &log, r"ev\u{202e}il\u{200b}x");
}

#[test]
fn an_agent_path_with_an_escape_a_bidi_override_and_a_zero_width_is_shown_escaped_by_agent_add_list_and_doctor()
 {
    let env = Env::fast();
    let name: String = format!("cl{}[2Ji{}e{}nt", HOSTILE[0], HOSTILE[1], HOSTILE[2]);
    let path = env.dir.path().join(&name);
    crate::common::copy_executable("/usr/bin/timeout", &path);
    let escaped = r"cl\u{1b}[2Ji\u{202e}e\u{200b}nt";
    let added = env.ok(&["agent", "add", "client", path.to_str().unwrap()]);
    assert_shown_escaped("holdcall agent add", &added, escaped);
    let list = env.ok(&["agent", "list"]);
    assert_shown_escaped("holdcall agent list", &list, escaped);
    let doctor = env.ok(&["doctor"]);
    assert_shown_escaped("holdcall doctor", &doctor, escaped);
    // The enrolment's journal entry names the path.
    let log = env.ok(&["log"]);
    assert_shown_escaped("holdcall log", &log, escaped);
    // Stale, the reason and the command that enrols it again are escaped too.
    std::fs::write(&path, b"changed").unwrap();
    let list = env.ok(&["agent", "list"]);
    assert!(list.contains("STALE"), "{list}");
    assert_shown_escaped("holdcall agent list (stale)", &list, escaped);
    let doctor = env.ok(&["doctor"]);
    assert!(doctor.contains("STALE"), "{doctor}");
    assert_shown_escaped("holdcall doctor (stale)", &doctor, escaped);
    env.ok(&["daemon", "stop"]);
}

#[test]
fn a_client_file_path_and_server_name_with_an_escape_a_bidi_override_and_a_zero_width_are_shown_escaped_by_doctor_and_inventory()
 {
    let env = Env::new();
    let cfg = env.user_home().join(".cursor/mcp.json");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(
        &cfg,
        r#"{"mcpServers":{"s\u001b[2Je\u202e\u200bx":{"command":"/bin/srv\u202e","args":["a\u200b"]}}}"#,
    )
    .unwrap();
    let doctor = env.in_project(&["doctor"]);
    let doctor = String::from_utf8(doctor.stdout).unwrap();
    assert_shown_escaped("holdcall doctor", &doctor, r"s\u{1b}[2Je\u{202e}\u{200b}x");
    let inv = env.in_project(&["inventory"]);
    let inv = String::from_utf8(inv.stdout).unwrap();
    assert_shown_escaped(
        "holdcall inventory",
        &inv,
        r"'/bin/srv\u{202e}' 'a\u{200b}'",
    );
    let init = env.in_project(&["init"]);
    let init = String::from_utf8(init.stdout).unwrap();
    assert_shown_escaped("holdcall init", &init, r"s\u{1b}[2Je\u{202e}\u{200b}x");
}
