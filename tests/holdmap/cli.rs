//! holdmap's command line: `--help` says what holdmap is (not Holdcall's description, which
//! the package carries), and `mcp --help` gives both client configs.

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(crate::holdmap::client::holdmap_binary())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn holdmap_help_describes_holdmap_and_names_its_one_command() {
    let text = help(&["--help"]);
    assert!(text.contains("what owns each port"), "{text}");
    assert!(!text.contains("firewall"), "Holdcall's description: {text}");
    assert!(text.contains("mcp"), "{text}");
}

#[test]
fn holdmap_mcp_help_gives_both_client_configs() {
    let text = help(&["mcp", "--help"]);
    assert!(
        text.contains(r#"{"command":"holdmap","args":["mcp"]}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"type":"stdio","command":"holdmap","args":["mcp"]}"#),
        "{text}"
    );
}
