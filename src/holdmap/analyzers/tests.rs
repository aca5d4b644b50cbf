//! Unit tests of the catalog, the store, the built-in analyzer and the two tools, against
//! temporary data directories and client homes (never the real ones).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::catalog::{self, CatalogError};
use super::tools::{list_analyzers_at, list_insights_at};
use super::*;
use crate::holdmap::catalog::check_output;
use crate::holdmap::tool::Outcome;

const CANARY: &str = "CANARY-s3cr3t-7f1e";

fn places(home: &Path) -> Places {
    Places {
        home: home.to_path_buf(),
        config_dir: home.join(".config"),
        codex_home: home.join(".codex"),
        project: home.join("project"),
    }
}

/// A judge for which nothing is routed (no holdcall binary there).
fn no_holdcall() -> Judge {
    Judge::binary_at(Path::new("/nonexistent/holdcall"))
}

/// Runs `holdmap analyze name` against `data` and `home`: exit code, stdout, stderr.
fn analyze(name: &str, data: &Path, home: &Path) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = analyze_at(
        name,
        Ok(data.to_path_buf()),
        Ok(places(home)),
        &no_holdcall(),
        &mut out,
        &mut err,
    );
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn write_catalog(data: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(data).unwrap();
    let p = data.join(catalog::FILE_NAME);
    std::fs::write(&p, text).unwrap();
    p
}

fn structured(o: Outcome) -> (String, Value) {
    match o {
        Outcome::Done {
            summary,
            structured,
        } => (summary, structured),
        Outcome::Failed(why) => panic!("failed: {why}"),
    }
}

fn entry(name: &str, state: &str) -> Value {
    json!({"name": name, "title": "T", "purpose": "P", "source": "github.com/x/y v1",
        "sandbox": "bubblewrap, no home", "network": ["api.osv.dev"], "state": state,
        "command": ["/opt/x/bin/scan", "--token", "abc"]})
}

fn catalog_text(entries: &[Value]) -> String {
    serde_json::to_string_pretty(
        &json!({"format": 1, "catalog_version": "2026-12-01", "analyzers": entries}),
    )
    .unwrap()
}

/// A claude-code config with one unpinned npx server holding the canary in env and args, and
/// one remote server with the canary in its URL and headers.
fn claude_config(home: &Path) {
    let text = json!({"mcpServers": {
        "loose": {"command": "npx", "args": ["-y", "some-mcp", "--token", CANARY],
            "env": {"API_KEY": CANARY}},
        "far": {"type": "http", "url": format!("https://{CANARY}@mcp.example.com/p?k={CANARY}"),
            "headers": {"Authorization": format!("Bearer {CANARY}")}}
    }});
    std::fs::write(home.join(".claude.json"), text.to_string()).unwrap();
}

// --- the catalog ---

#[test]
fn the_shipped_empty_catalog_parses_as_an_empty_format_1_catalog() {
    let text = include_str!("../../../schema/holdmap-analyzers.empty.json");
    let c = catalog::parse(text, "empty").unwrap();
    assert!(c.analyzers.is_empty());
    assert!(!c.version.is_empty());
}

#[test]
fn a_missing_catalog_file_is_the_empty_catalog_and_says_it_does_not_exist() {
    let d = tempfile::tempdir().unwrap();
    let (_, s) = structured(list_analyzers_at(Ok(d.path().to_path_buf())));
    check_output("list_analyzers", &s);
    assert_eq!(s["catalog"]["exists"], json!(false));
    assert_eq!(s["catalog"]["error"], Value::Null);
    assert_eq!(s["analyzers"].as_array().unwrap().len(), 1);
    assert_eq!(s["analyzers"][0]["name"], json!("mcp-pins"));
    assert_eq!(s["analyzers"][0]["last_run"], Value::Null);
}

#[test]
fn a_catalog_that_is_not_json_is_refused_with_its_file_and_line() {
    let e = catalog::parse(
        "{\"format\": 1,\n \"analyzers\": [\n  {,]}",
        "/d/analyzers.json",
    )
    .unwrap_err();
    assert!(matches!(e, CatalogError::Syntax { line: 3, .. }), "{e:?}");
    let said = e.to_string();
    assert!(
        said.contains("/d/analyzers.json") && said.contains("line 3"),
        "{said}"
    );
}

#[test]
fn a_catalog_with_a_repeated_key_is_refused() {
    let e = catalog::parse(
        r#"{"format": 1, "catalog_version": "a", "catalog_version": "b", "analyzers": []}"#,
        "f",
    )
    .unwrap_err();
    assert!(matches!(e, CatalogError::Syntax { .. }), "{e:?}");
}

#[test]
fn a_catalog_of_an_unknown_format_version_is_refused_as_such() {
    let e = catalog::parse(r#"{"format": 2, "whatever": true}"#, "f").unwrap_err();
    assert!(
        matches!(&e, CatalogError::Format { found, .. } if found == "2"),
        "{e:?}"
    );
    let e = catalog::parse(r#"{"analyzers": []}"#, "f").unwrap_err();
    assert!(matches!(e, CatalogError::Format { .. }), "{e:?}");
}

#[test]
fn a_catalog_entry_with_an_unknown_field_or_state_is_refused_with_its_line() {
    let mut bad = entry("osv", "approved");
    bad["surprise"] = json!(1);
    let text = catalog_text(&[entry("ok", "pending"), bad]);
    let e = catalog::parse(&text, "f").unwrap_err();
    assert!(
        matches!(e, CatalogError::Invalid { line, .. } if line > 3),
        "{e:?}"
    );
    let text = catalog_text(&[entry("osv", "trusted")]);
    assert!(matches!(
        catalog::parse(&text, "f"),
        Err(CatalogError::Invalid { .. })
    ));
}

#[test]
fn a_catalog_entry_may_not_take_the_built_in_name_a_path_or_a_name_twice() {
    for entries in [
        vec![entry("mcp-pins", "approved")],
        vec![entry("../escape", "approved")],
        vec![entry("osv", "approved"), entry("osv", "pending")],
    ] {
        let e = catalog::parse(&catalog_text(&entries), "f").unwrap_err();
        assert!(matches!(e, CatalogError::Invalid { .. }), "{e:?}");
    }
}

#[test]
fn an_oversize_catalog_is_refused_not_read() {
    let d = tempfile::tempdir().unwrap();
    let big =
        " ".repeat(usize::try_from(crate::limits::HOLDMAP_ANALYZER_CATALOG_BYTES_MAX).unwrap() + 1);
    write_catalog(d.path(), &format!("{big}{}", catalog_text(&[])));
    let at = catalog::read_in(d.path());
    assert!(
        matches!(at.read, Err(CatalogError::TooBig { .. })),
        "{:?}",
        at.read
    );
}

#[test]
fn a_bad_catalog_is_an_error_in_list_analyzers_never_an_empty_catalog() {
    let d = tempfile::tempdir().unwrap();
    let path = write_catalog(d.path(), "{\"format\": 1,\n\"analyzers\": [}");
    let (summary, s) = structured(list_analyzers_at(Ok(d.path().to_path_buf())));
    check_output("list_analyzers", &s);
    let error = s["catalog"]["error"].as_str().unwrap();
    assert!(
        error.contains(&path.display().to_string()) && error.contains("line 2"),
        "{error}"
    );
    assert!(error.contains("fix"), "{error}");
    assert_eq!(s["catalog"]["exists"], json!(true));
    assert!(summary.contains("could not be read"), "{summary}");
}

#[test]
fn list_analyzers_lists_catalog_entries_after_the_built_in_one_without_their_arguments() {
    let d = tempfile::tempdir().unwrap();
    write_catalog(d.path(), &catalog_text(&[entry("osv", "pending")]));
    let (_, s) = structured(list_analyzers_at(Ok(d.path().to_path_buf())));
    check_output("list_analyzers", &s);
    assert_eq!(s["catalog"]["catalog_version"], json!("2026-12-01"));
    let a = &s["analyzers"][1];
    assert_eq!(a["name"], json!("osv"));
    assert_eq!(a["state"], json!("pending"));
    assert_eq!(a["runnable"], json!(false));
    assert_eq!(a["network"], json!(["api.osv.dev"]));
    assert_eq!(a["program"], json!("scan"));
    assert!(!s.to_string().contains("--token"), "{s}");
}

// --- holdmap analyze: refusals ---

#[test]
fn an_unknown_analyzer_is_refused_with_the_names_holdmap_knows() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_catalog(d.path(), &catalog_text(&[entry("osv", "approved")]));
    let (code, out, err) = analyze("nope", d.path(), h.path());
    assert_eq!(code, EXIT_REFUSED);
    assert!(out.is_empty());
    assert!(
        err.contains("no analyzer named `nope`")
            && err.contains("mcp-pins (built in)")
            && err.contains("osv (approved)"),
        "{err}"
    );
    assert!(!store::dir_in(d.path()).exists());
}

#[test]
fn a_pending_or_disabled_analyzer_is_refused() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_catalog(
        d.path(),
        &catalog_text(&[entry("a", "pending"), entry("b", "disabled")]),
    );
    let (code, _, err) = analyze("a", d.path(), h.path());
    assert_eq!(code, EXIT_REFUSED);
    assert!(
        err.contains("pending") && err.contains("never approves"),
        "{err}"
    );
    let (code, _, err) = analyze("b", d.path(), h.path());
    assert_eq!(code, EXIT_REFUSED);
    assert!(err.contains("disabled"), "{err}");
}

#[test]
fn an_approved_catalog_analyzer_is_refused_because_only_the_built_in_one_runs() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_catalog(d.path(), &catalog_text(&[entry("osv", "approved")]));
    let (code, _, err) = analyze("osv", d.path(), h.path());
    assert_eq!(code, EXIT_REFUSED);
    assert!(
        err.contains("runs only its built-in analyzer") && err.contains("holdmap analyze mcp-pins"),
        "{err}"
    );
    assert!(!store::dir_in(d.path()).exists());
}

#[test]
fn a_catalog_analyzer_is_refused_while_the_catalog_is_bad_but_the_built_in_one_runs() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_catalog(d.path(), "{\"format\": 7}");
    let (code, _, err) = analyze("osv", d.path(), h.path());
    assert_eq!(code, EXIT_REFUSED);
    assert!(err.contains("format 7"), "{err}");
    let (code, _, err) = analyze("mcp-pins", d.path(), h.path());
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning") && err.contains("format 7"), "{err}");
}

#[test]
fn an_unwritable_data_dir_is_reported_and_the_run_fails() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A data directory under a regular file: no account, root included, can create it.
    let file = d.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let (code, out, err) = analyze("mcp-pins", &file.join("holdmap"), h.path());
    assert_eq!(code, EXIT_FAILED);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("cannot create its findings folder") && err.contains("HOLDMAP_HOME"),
        "{err}"
    );
}

#[test]
fn no_data_dir_is_reported_by_analyze_and_by_both_tools() {
    let mut err = Vec::new();
    let code = analyze_at(
        "mcp-pins",
        Err("no HOME".into()),
        Err("x".into()),
        &no_holdcall(),
        &mut Vec::new(),
        &mut err,
    );
    assert_eq!(code, EXIT_FAILED);
    assert!(String::from_utf8(err).unwrap().contains("no HOME"));
    assert!(matches!(
        list_analyzers_at(Err("no HOME".into())),
        Outcome::Failed(_)
    ));
    assert!(matches!(
        list_insights_at(Err("no HOME".into()), &Map::new()),
        Outcome::Failed(_)
    ));
}

// --- the built-in analyzer and the store ---

#[test]
fn mcp_pins_finds_an_unpinned_unrouted_server_and_stores_no_secret() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    claude_config(h.path());
    let (code, out, err) = analyze("mcp-pins", d.path(), h.path());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("checked 2 MCP servers") && out.contains("unpinned"),
        "{out}"
    );
    let stored = std::fs::read_to_string(store::dir_in(d.path()).join("mcp-pins.json")).unwrap();
    for text in [&out, &err, &stored] {
        assert!(!text.contains(CANARY), "the canary leaked:\n{text}");
    }
    let read = store::read(d.path());
    assert!(read.errors.is_empty(), "{:?}", read.errors);
    let rules: Vec<(&str, &str)> = read
        .insights
        .iter()
        .map(|i| (i.rule.as_str(), i.alias.as_deref().unwrap_or("")))
        .collect();
    assert!(rules.contains(&("unpinned", "loose")), "{rules:?}");
    assert!(rules.contains(&("not-routed", "loose")), "{rules:?}");
    assert!(rules.contains(&("pin-unknown", "far")), "{rules:?}");
    assert!(!rules.contains(&("not-routed", "far")), "{rules:?}");
    let loose = read.insights.iter().find(|i| i.rule == "unpinned").unwrap();
    assert_eq!(loose.agent, "claude-code");
    assert_eq!(loose.package.as_deref(), Some("some-mcp"));
    assert_eq!(read.runs.len(), 1);
    assert_eq!(read.runs[0].servers_checked, 2);
    assert_eq!(read.runs[0].findings, read.insights.len() as u64);
}

#[test]
fn finding_ids_are_stable_across_runs_and_a_run_replaces_the_previous_one() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    claude_config(h.path());
    assert_eq!(analyze("mcp-pins", d.path(), h.path()).0, 0);
    let first: Vec<String> = store::read(d.path())
        .insights
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(analyze("mcp-pins", d.path(), h.path()).0, 0);
    let mut second: Vec<String> = store::read(d.path())
        .insights
        .into_iter()
        .map(|i| i.id)
        .collect();
    let mut first_sorted = first.clone();
    first_sorted.sort();
    second.sort();
    assert_eq!(first_sorted, second);
    // The config loses its servers: the next run stores none, nothing of the old run stays.
    std::fs::write(h.path().join(".claude.json"), "{\"mcpServers\": {}}").unwrap();
    assert_eq!(analyze("mcp-pins", d.path(), h.path()).0, 0);
    let read = store::read(d.path());
    assert!(read.insights.is_empty(), "{:?}", read.insights);
    assert_eq!(read.runs.len(), 1);
    let leftovers: Vec<_> = std::fs::read_dir(store::dir_in(d.path()))
        .unwrap()
        .collect();
    assert_eq!(leftovers.len(), 1, "temporary files left behind");
}

#[test]
fn an_unreadable_client_config_is_a_finding_not_silence() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(h.path().join(".claude.json"), "{ not json").unwrap();
    assert_eq!(analyze("mcp-pins", d.path(), h.path()).0, 0);
    let read = store::read(d.path());
    assert!(
        read.insights
            .iter()
            .any(|i| i.rule == "config-unreadable" && i.agent == "claude-code"),
        "{:?}",
        read.insights
    );
}

#[test]
fn a_corrupt_store_file_is_reported_by_list_insights_and_stored_insights_callers() {
    let d = tempfile::tempdir().unwrap();
    let dir = store::dir_in(d.path());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mcp-pins.json"), "{\"format\": 1, \"run\": ").unwrap();
    let read = store::read(d.path());
    assert_eq!(read.errors.len(), 1);
    assert!(
        read.errors[0].contains("mcp-pins.json")
            && read.errors[0].contains("holdmap analyze mcp-pins"),
        "{:?}",
        read.errors
    );
    let (summary, s) = structured(list_insights_at(Ok(d.path().to_path_buf()), &Map::new()));
    check_output("list_insights", &s);
    assert_eq!(s["errors"].as_array().unwrap().len(), 1);
    assert!(summary.contains("Not read"), "{summary}");
    let (_, s) = structured(list_analyzers_at(Ok(d.path().to_path_buf())));
    assert_eq!(s["store_errors"].as_array().unwrap().len(), 1);
}

#[test]
fn a_store_file_of_another_analyzer_or_with_a_repeated_key_is_refused() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    claude_config(h.path());
    assert_eq!(analyze("mcp-pins", d.path(), h.path()).0, 0);
    let dir = store::dir_in(d.path());
    std::fs::copy(dir.join("mcp-pins.json"), dir.join("other.json")).unwrap();
    let text = std::fs::read_to_string(dir.join("mcp-pins.json")).unwrap();
    std::fs::write(
        dir.join("mcp-pins.json"),
        text.replacen("{", "{\"format\": 1,", 1),
    )
    .unwrap();
    let read = store::read(d.path());
    assert_eq!(read.errors.len(), 2, "{:?}", read.errors);
    assert!(read.insights.is_empty());
}

#[test]
fn list_insights_filters_caps_and_counts_what_it_leaves_out() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    claude_config(h.path());
    assert_eq!(analyze("mcp-pins", d.path(), h.path()).0, 0);
    let args = |v: Value| v.as_object().unwrap().clone();
    let (_, all) = structured(list_insights_at(Ok(d.path().to_path_buf()), &Map::new()));
    check_output("list_insights", &all);
    let total = all["matched"].as_u64().unwrap();
    assert!(total >= 3, "{all}");
    assert_eq!(all["runs"][0]["analyzer"], json!("mcp-pins"));
    assert!(
        all["note"]
            .as_str()
            .unwrap()
            .contains("holdmap analyze NAME")
    );
    let (_, one) = structured(list_insights_at(
        Ok(d.path().to_path_buf()),
        &args(json!({"limit": 1})),
    ));
    check_output("list_insights", &one);
    assert_eq!(one["insights"].as_array().unwrap().len(), 1);
    assert_eq!(one["more"].as_u64().unwrap(), total - 1);
    let (_, med) = structured(list_insights_at(
        Ok(d.path().to_path_buf()),
        &args(json!({"severity": "medium"})),
    ));
    assert!(
        med["insights"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["severity"] == "medium")
    );
    assert_eq!(med["matched"], json!(2));
    for filter in [
        json!({"agent": "cursor"}),
        json!({"analyzer": "osv"}),
        json!({"state": "resolved"}),
    ] {
        let (_, none) = structured(list_insights_at(Ok(d.path().to_path_buf()), &args(filter)));
        assert_eq!(none["matched"], json!(0));
    }
    assert!(!all.to_string().contains(CANARY));
}

#[test]
fn list_insights_before_any_run_says_no_analyzer_has_run() {
    let d = tempfile::tempdir().unwrap();
    let (summary, s) = structured(list_insights_at(Ok(d.path().to_path_buf()), &Map::new()));
    check_output("list_insights", &s);
    assert_eq!(s["insights"], json!([]));
    assert!(summary.contains("holdmap analyze mcp-pins"), "{summary}");
}

#[test]
fn list_analyzers_shows_the_built_in_analyzers_last_run() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    assert_eq!(analyze("mcp-pins", d.path(), h.path()).0, 0);
    let (_, s) = structured(list_analyzers_at(Ok(d.path().to_path_buf())));
    check_output("list_analyzers", &s);
    let run = &s["analyzers"][0]["last_run"];
    assert_eq!(run["analyzer"], json!("mcp-pins"));
    assert_eq!(run["holdmap_version"], json!(env!("CARGO_PKG_VERSION")));
    assert_eq!(run["catalog_version"], Value::Null);
}

#[test]
fn the_published_catalog_schema_names_exactly_the_fields_the_reader_accepts() {
    let schema: Value = serde_json::from_str(include_str!(
        "../../../schema/holdmap-analyzers.schema.json"
    ))
    .unwrap();
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(&schema["properties"]),
        ["$schema", "analyzers", "catalog_version", "format"]
    );
    let item = &schema["properties"]["analyzers"]["items"];
    assert_eq!(
        keys(&item["properties"]),
        [
            "command", "name", "network", "purpose", "sandbox", "source", "state", "title"
        ]
    );
    assert_eq!(item["additionalProperties"], json!(false));
    // Every field the schema lists is one the reader takes: an entry with all of them parses.
    let full = catalog_text(&[entry("osv", "approved")]);
    assert_eq!(catalog::parse(&full, "f").unwrap().analyzers.len(), 1);
    assert_eq!(
        schema["properties"]["format"]["const"],
        json!(catalog::FORMAT)
    );
}

// --- files that are not files, values outside the format ---

/// Runs `f` on another thread and gives its result, failing (rather than hanging the test run)
/// when it does not come back: the thing under test is that nothing blocks.
fn without_hanging<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .expect("holdmap blocked on a named pipe")
}

fn fifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

#[test]
fn a_named_pipe_in_the_findings_folder_is_refused_by_name_and_does_not_block() {
    let d = tempfile::tempdir().unwrap();
    let pipe = store::dir_in(d.path()).join("x.json");
    fifo(&pipe);
    let data = d.path().to_path_buf();
    let (read, insights, analyzers) = without_hanging(move || {
        (
            store::read(&data).errors,
            structured(list_insights_at(Ok(data.clone()), &Map::new())).1,
            structured(list_analyzers_at(Ok(data))).1,
        )
    });
    assert_eq!(read.len(), 1, "{read:?}");
    assert!(
        read[0].contains(&pipe.display().to_string())
            && read[0].contains("named pipe")
            && read[0].contains("delete it"),
        "{read:?}"
    );
    check_output("list_insights", &insights);
    assert_eq!(insights["errors"].as_array().unwrap().len(), 1);
    assert_eq!(analyzers["store_errors"].as_array().unwrap().len(), 1);
}

#[test]
fn a_named_pipe_or_a_directory_as_the_catalog_is_refused_by_name_and_does_not_block() {
    let d = tempfile::tempdir().unwrap();
    let pipe = d.path().join(catalog::FILE_NAME);
    fifo(&pipe);
    let (data, home) = (d.path().to_path_buf(), tempfile::tempdir().unwrap());
    let h = home.path().to_path_buf();
    let (at, listed, ran) = without_hanging(move || {
        (
            catalog::read_in(&data).read,
            structured(list_analyzers_at(Ok(data.clone()))).1,
            analyze("osv", &data, &h),
        )
    });
    let said = at.unwrap_err().to_string();
    assert!(
        said.contains(&pipe.display().to_string()) && said.contains("named pipe"),
        "{said}"
    );
    assert!(said.contains("remove it"), "{said}");
    check_output("list_analyzers", &listed);
    assert!(
        listed["catalog"]["error"]
            .as_str()
            .unwrap()
            .contains("named pipe"),
        "{listed}"
    );
    let (code, _, err) = ran;
    assert_ne!(code, 0);
    assert!(err.contains("named pipe"), "{err}");

    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join(catalog::FILE_NAME)).unwrap();
    let said = catalog::read_in(d.path()).read.unwrap_err().to_string();
    assert!(said.contains("a directory, not a file"), "{said}");
}

/// Stores one run of mcp-pins, then rewrites its file with `edit`; what reading it gives.
fn stored_then(edit: impl Fn(&mut Value)) -> store::StoreRead {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    claude_config(h.path());
    assert_eq!(analyze("mcp-pins", d.path(), h.path()).0, 0);
    let path = store::dir_in(d.path()).join("mcp-pins.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(!v["findings"].as_array().unwrap().is_empty());
    edit(&mut v["findings"][0]);
    std::fs::write(&path, v.to_string()).unwrap();
    let read = store::read(d.path());
    let (_, s) = structured(list_insights_at(Ok(d.path().to_path_buf()), &Map::new()));
    check_output("list_insights", &s);
    read
}

#[test]
fn a_stored_severity_state_pin_or_routing_outside_the_schema_is_a_corrupt_entry() {
    for (field, value) in [
        ("severity", json!("critical")),
        ("state", json!("snoozed")),
        ("pin", json!("floating")),
        ("routing", json!("sideways")),
    ] {
        let read = stored_then(|f| f[field] = value.clone());
        assert!(read.insights.is_empty(), "{field}: {:?}", read.insights);
        assert_eq!(read.errors.len(), 1, "{field}");
        assert!(
            read.errors[0].contains("corrupt") && read.errors[0].contains(&format!("`{field}`")),
            "{:?}",
            read.errors
        );
    }
    // The words the schema publishes are read back.
    assert!(
        stored_then(|f| f["state"] = json!("acknowledged"))
            .errors
            .is_empty()
    );
}

#[test]
fn a_catalog_error_names_the_field_and_its_type_never_the_files_value() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"title": 7}), "`title`"),
        (json!({"state": CANARY}), "`state`"),
        (json!({"network": [CANARY, 3]}), "`network`"),
        (json!({"command": CANARY}), "`command`"),
        (json!({"name": [CANARY]}), "`name`"),
        (json!({"name": CANARY}), "`name`"),
    ];
    for (patch, field) in cases {
        let mut e = entry("osv", "pending");
        for (k, v) in patch.as_object().unwrap() {
            e[k] = v.clone();
        }
        let said = catalog::parse(&catalog_text(&[e]), "f")
            .unwrap_err()
            .to_string();
        assert!(!said.contains(CANARY), "{said}");
        assert!(
            said.contains(field)
                && (said.contains("must be") || said.contains("not an analyzer name")),
            "{said}"
        );
    }
    let mut e = entry("osv", "pending");
    e[CANARY] = json!(CANARY);
    let said = catalog::parse(&catalog_text(&[e]), "f")
        .unwrap_err()
        .to_string();
    assert!(
        !said.contains(CANARY) && said.contains("does not have"),
        "{said}"
    );
    let text = format!(r#"{{"format": 1, "catalog_version": ["{CANARY}"], "analyzers": []}}"#);
    let said = catalog::parse(&text, "f").unwrap_err().to_string();
    assert!(
        !said.contains(CANARY) && said.contains("`catalog_version`"),
        "{said}"
    );
    let mut e = entry("osv", "pending");
    e.as_object_mut().unwrap().remove("sandbox");
    let said = catalog::parse(&catalog_text(&[e]), "f")
        .unwrap_err()
        .to_string();
    assert!(said.contains("no `sandbox`"), "{said}");
}

#[test]
fn a_credential_in_a_package_url_is_stored_nowhere_and_printed_nowhere() {
    let (d, h) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let text = json!({"mcpServers": {
        "git": {"command": "uvx", "args": [format!("git+https://user:{CANARY}@github.com/o/r")]},
        "tgz": {"command": "npx", "args": ["-y", format!("https://{CANARY}@registry.example/p.tgz")]},
        "from": {"command": "uvx", "args": ["--from", format!("git+https://u:{CANARY}@h.example/r"), "t"]}
    }});
    std::fs::write(h.path().join(".claude.json"), text.to_string()).unwrap();
    let (code, out, err) = analyze("mcp-pins", d.path(), h.path());
    assert_eq!(code, 0, "{err}");
    let stored = std::fs::read_to_string(store::dir_in(d.path()).join("mcp-pins.json")).unwrap();
    for text in [&out, &err, &stored] {
        assert!(!text.contains("CANARY"), "the canary leaked:\n{text}");
    }
    let read = store::read(d.path());
    assert!(read.errors.is_empty(), "{:?}", read.errors);
    assert!(
        read.insights.iter().any(|i| i.rule == "unpinned"),
        "{stored}"
    );
    assert!(
        read.insights.iter().all(|i| i.package.is_none()),
        "{stored}"
    );
}
