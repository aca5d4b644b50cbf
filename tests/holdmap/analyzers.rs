//! `holdmap analyze` and the tools `list_analyzers` / `list_insights` through the real binaries:
//! real client config files in a temporary HOME (one unpinned npx server, one routed through the
//! holdcall built beside this holdmap), an MCP client's minimal environment, and a canary secret
//! in env values, headers, URLs and arguments that must appear in no output.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;

use crate::holdmap::client::{Holdmap, holdmap_binary, structured};

const CANARY: &str = "CANARY-9d2c-not-for-output";

/// `holdmap analyze NAME` with an MCP client's minimal environment, run in `project`.
fn analyze(home: &Path, project: &Path, name: &str) -> Output {
    Command::new(holdmap_binary())
        .args(["analyze", name])
        .env_clear()
        .env("HOME", home)
        .env("LOGNAME", "holdmap-test")
        .env("USER", "holdmap-test")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SHELL", "/bin/sh")
        .env("TERM", "dumb")
        .current_dir(project)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A HOME with Claude Code's user file (unpinned npx, routed+pinned, remote) and a project with
/// a `.mcp.json` of its own (unpinned npx): the canary in every place a secret may sit.
fn configured_home() -> (tempfile::TempDir, std::path::PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let holdcall = env!("CARGO_BIN_EXE_holdcall");
    let user = json!({"mcpServers": {
        "loose": {"command": "npx", "args": ["-y", "loose-mcp", "--api-key", CANARY],
            "env": {"LOOSE_TOKEN": CANARY}},
        "held": {"command": holdcall, "args": ["serve", "--", "npx", "-y", "held-mcp@1.2.3", CANARY],
            "env": {"HELD_TOKEN": CANARY}},
        "far": {"type": "http", "url": format!("https://user:{CANARY}@mcp.example.com/p/{CANARY}?k={CANARY}"),
            "headers": {"Authorization": format!("Bearer {CANARY}")}}
    }});
    std::fs::write(home.path().join(".claude.json"), user.to_string()).unwrap();
    let project = home.path().join("work/app");
    std::fs::create_dir_all(&project).unwrap();
    let proj = json!({"mcpServers": {
        "proj": {"command": "uvx", "args": ["proj-mcp", format!("--token={CANARY}")]}
    }});
    std::fs::write(project.join(".mcp.json"), proj.to_string()).unwrap();
    (home, project)
}

#[test]
fn holdmap_analyze_mcp_pins_stores_findings_that_list_analyzers_and_list_insights_show() {
    let (home, project) = configured_home();
    let ran = analyze(home.path(), &project, "mcp-pins");
    let (out, err) = (text(&ran.stdout), text(&ran.stderr));
    assert!(ran.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("checked 4 MCP servers"), "{out}");
    assert!(out.contains("holdcall init"), "{out}");
    assert!(
        !out.contains(CANARY) && !err.contains(CANARY),
        "{out}\n{err}"
    );
    let store = home
        .path()
        .join(".local/share/holdmap/insights/mcp-pins.json");
    assert!(!std::fs::read_to_string(&store).unwrap().contains(CANARY));

    let mut hm = Holdmap::start_with(&[("HOME", home.path().to_str().unwrap())]);
    hm.initialize("2025-06-18");
    let analyzers = hm.call(1, "list_analyzers", json!({}));
    let insights = hm.call(2, "list_insights", json!({}));
    let medium = hm.call(
        3,
        "list_insights",
        json!({"agent": "claude-code", "severity": "medium"}),
    );
    for answer in [&analyzers, &insights, &medium] {
        assert!(
            !answer.to_string().contains(CANARY),
            "the canary leaked: {answer}"
        );
    }

    let a = structured(&analyzers);
    assert_eq!(a["analyzers"][0]["name"], json!("mcp-pins"));
    assert_eq!(a["analyzers"][0]["state"], json!("approved"));
    assert_eq!(a["analyzers"][0]["network"], json!([]));
    let run = &a["analyzers"][0]["last_run"];
    assert_eq!(run["servers_checked"], json!(4), "{a}");
    assert_eq!(a["catalog"]["exists"], json!(false));
    assert!(
        a["catalog"]["path"]
            .as_str()
            .unwrap()
            .ends_with(".local/share/holdmap/analyzers.json")
    );

    let i = structured(&insights);
    let found: Vec<(String, String)> = i["insights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["alias"].as_str().unwrap_or("").to_string(),
                f["rule"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let has = |alias: &str, rule: &str| found.contains(&(alias.to_string(), rule.to_string()));
    assert!(
        has("loose", "unpinned") && has("loose", "not-routed"),
        "{found:?}"
    );
    assert!(
        has("proj", "unpinned") && has("proj", "not-routed"),
        "{found:?}"
    );
    assert!(has("far", "pin-unknown"), "{found:?}");
    assert!(
        !found.iter().any(|(alias, _)| alias == "held"),
        "the routed, pinned server has findings: {found:?}"
    );
    assert_eq!(i["runs"][0]["analyzer"], json!("mcp-pins"));
    assert!(i["note"].as_str().unwrap().contains("never run"));

    let m = structured(&medium);
    assert!(
        m["insights"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] == "medium" && f["agent"] == "claude-code")
    );
    // loose and proj (the project's .mcp.json is Claude Code's too): unpinned and not routed each.
    assert_eq!(m["matched"], json!(4), "{m}");
}

#[test]
fn holdmap_analyze_refuses_unknown_pending_and_catalog_analyzers_with_a_non_zero_exit() {
    let (home, project) = configured_home();
    let data = home.path().join(".local/share/holdmap");
    std::fs::create_dir_all(&data).unwrap();
    let entry = |name: &str, state: &str| {
        json!({"name": name, "title": "t", "purpose": "p", "source": "github.com/example/scan v2",
            "sandbox": "none said", "network": ["api.osv.dev"], "state": state})
    };
    let catalog = json!({"format": 1, "catalog_version": "7",
        "analyzers": [entry("osv", "approved"), entry("later", "pending")]});
    std::fs::write(data.join("analyzers.json"), catalog.to_string()).unwrap();
    for (name, says) in [
        (
            "nothing-like-it",
            "mcp-pins (built in), osv (approved), later (pending)",
        ),
        ("later", "has not been approved"),
        ("osv", "runs only its built-in analyzer"),
    ] {
        let ran = analyze(home.path(), &project, name);
        assert_eq!(ran.status.code(), Some(2), "{name}");
        assert!(ran.stdout.is_empty(), "{name}: {}", text(&ran.stdout));
        assert!(
            text(&ran.stderr).contains(says),
            "{name}: {}",
            text(&ran.stderr)
        );
    }
    assert!(
        !data.join("insights").exists(),
        "a refused run stored something"
    );

    // A catalog that is not JSON: the built-in analyzer still runs, and says so.
    std::fs::write(
        data.join("analyzers.json"),
        "{\"format\": 1,\n  \"analyzers\": [oops]}",
    )
    .unwrap();
    let ran = analyze(home.path(), &project, "mcp-pins");
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    assert!(
        text(&ran.stderr).contains("line 2"),
        "{}",
        text(&ran.stderr)
    );
    let mut hm = Holdmap::start_with(&[("HOME", home.path().to_str().unwrap())]);
    hm.initialize("2025-06-18");
    let a = hm.call(1, "list_analyzers", json!({}));
    let error = structured(&a)["catalog"]["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        error.contains("analyzers.json") && error.contains("line 2"),
        "{error}"
    );
}

#[test]
fn the_data_dir_is_holdmap_home_else_xdg_data_home_never_a_relative_path() {
    let (home, project) = configured_home();
    let run_with = |vars: &[(&str, &Path)]| {
        let mut cmd = Command::new(holdmap_binary());
        cmd.args(["analyze", "mcp-pins"])
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(&project);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    let explicit = home.path().join("explicit");
    let xdg = home.path().join("xdg");
    run_with(&[("HOLDMAP_HOME", &explicit), ("XDG_DATA_HOME", &xdg)]);
    assert!(explicit.join("insights/mcp-pins.json").is_file());
    assert!(!xdg.exists());
    // A relative HOLDMAP_HOME is ignored: the next place is used, never the current directory.
    run_with(&[
        ("HOLDMAP_HOME", Path::new("relative")),
        ("XDG_DATA_HOME", &xdg),
    ]);
    assert!(xdg.join("holdmap/insights/mcp-pins.json").is_file());
    assert!(!project.join("relative").exists());
}

#[test]
fn named_pipes_as_the_catalog_or_a_findings_file_are_refused_by_the_binary_which_never_hangs() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join(".local/share/holdmap");
    std::fs::create_dir_all(data.join("insights")).unwrap();
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o600);
    nix::unistd::mkfifo(&data.join("analyzers.json"), mode).unwrap();
    nix::unistd::mkfifo(&data.join("insights/x.json"), mode).unwrap();

    // `holdmap analyze osv`: watched rather than waited on, so a hang fails the test.
    let mut child = Command::new(holdmap_binary())
        .args(["analyze", "osv"])
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(home.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut status = None;
    let finished = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::common::eventually("holdmap analyze finishes", || {
            status = child.try_wait().unwrap();
            status.is_some()
        })
    }));
    if finished.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("holdmap analyze blocked on a named pipe");
    }
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(!status.unwrap().success());
    assert!(
        err.contains("analyzers.json") && err.contains("named pipe"),
        "{err}"
    );

    // The MCP tools: the client fails (never hangs) when no answer comes within its patience.
    let mut hm = Holdmap::start_with(&[("HOME", home.path().to_str().unwrap())]);
    hm.initialize("2025-06-18");
    let insights = hm.call(1, "list_insights", json!({}));
    let analyzers = hm.call(2, "list_analyzers", json!({}));
    let errors = structured(&insights)["errors"].to_string();
    assert!(
        errors.contains("x.json") && errors.contains("named pipe"),
        "{insights}"
    );
    let a = structured(&analyzers);
    assert!(
        a["catalog"]["error"].to_string().contains("named pipe"),
        "{a}"
    );
    assert!(a["store_errors"].to_string().contains("x.json"), "{a}");
}
