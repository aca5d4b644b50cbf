//! Clients' instruction files (CLAUDE.md, AGENTS.md, GEMINI.md, .cursorrules, rule folders,
//! copilot-instructions.md, …): which exist where a client looks for them. Shared by every
//! binary; holdmap's `include_capabilities` reports their paths.
//!
//! Owns: the table of instruction-file places per client ([`places_of`]) and [`existing`].
//! Must never: open, read or keep any instruction file's content (existence and file type
//! only), list more than `limits::CLIENT_INSTRUCTION_FILES_MAX` entries of a rules folder or
//! stat an entry past them, or take a folder it could not list for an empty one.
//! Imports nothing Holdcall-specific.

use std::path::PathBuf;

use super::{ClientId, Places};
use crate::limits;

/// Where an agent looks for instruction files: single files, and folders whose regular files
/// are each one (Cursor's `.cursor/rules/`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Spots {
    pub(crate) files: Vec<PathBuf>,
    pub(crate) folders: Vec<PathBuf>,
}

/// The instruction-file places of `client`, or, for an agent holdmap has no config reader for,
/// of its `product` (`opencode`, `goose`: matched by the product id's words; Aider loads no file by itself).
pub(crate) fn places_of(places: &Places, client: Option<ClientId>, product: &str) -> Spots {
    let h = &places.home;
    let p = &places.project;
    let mut s = Spots::default();
    match client {
        Some(ClientId::ClaudeCode) => {
            s.files = vec![
                h.join(".claude/CLAUDE.md"),
                p.join("CLAUDE.md"),
                p.join(".claude/CLAUDE.md"),
                p.join("CLAUDE.local.md"),
            ];
        }
        Some(ClientId::Codex) => {
            s.files = vec![
                places.codex_home.join("AGENTS.md"),
                places.codex_home.join("AGENTS.override.md"),
                p.join("AGENTS.md"),
                p.join("AGENTS.override.md"),
            ];
        }
        Some(ClientId::GeminiCli) => {
            s.files = vec![h.join(".gemini/GEMINI.md"), p.join("GEMINI.md")];
        }
        Some(ClientId::Cursor) => {
            s.files = vec![p.join(".cursorrules"), p.join("AGENTS.md")];
            s.folders = vec![p.join(".cursor/rules")];
        }
        Some(ClientId::VsCode) => {
            s.files = vec![
                p.join(".github/copilot-instructions.md"),
                p.join("AGENTS.md"),
            ];
            s.folders = vec![p.join(".github/instructions")];
        }
        Some(ClientId::Windsurf) => {
            s.files = vec![
                p.join(".windsurfrules"),
                h.join(".codeium/windsurf/memories/global_rules.md"),
            ];
            s.folders = vec![p.join(".windsurf/rules")];
        }
        Some(ClientId::ClaudeDesktop) => {}
        None => {
            let has = |w: &str| product.split(['-', '_', ' ']).any(|x| x == w);
            if has("opencode") {
                s.files = vec![
                    places.config_dir.join("opencode/AGENTS.md"),
                    p.join("AGENTS.md"),
                ];
            } else if has("goose") {
                s.files = vec![
                    places.config_dir.join("goose/.goosehints"),
                    p.join(".goosehints"),
                    p.join("AGENTS.md"),
                ];
            }
        }
    }
    s
}

/// What [`existing`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Existing {
    /// The instruction files that exist as regular files (never opened).
    pub(crate) files: Vec<PathBuf>,
    /// Entries of rules folders past `CLIENT_INSTRUCTION_FILES_MAX` files, counted by name
    /// only (never statted).
    pub(crate) omitted: usize,
    /// Rules folders that exist but could not be listed, each with why: not the same as empty.
    pub(crate) unread: Vec<(PathBuf, String)>,
}

/// The instruction files that exist at `spots`, as regular files (never opened), how many more
/// entries a folder held past the bound, and which folders could not be listed.
pub(crate) fn existing(spots: &Spots) -> Existing {
    let is_file = |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.is_file());
    let mut out = Existing {
        files: spots.files.iter().filter(|p| is_file(p)).cloned().collect(),
        ..Existing::default()
    };
    for folder in &spots.folders {
        let listed =
            super::bounded_entries(folder, limits::CLIENT_INSTRUCTION_FILES_MAX, |p| is_file(p));
        out.omitted += listed.omitted;
        if let Some(why) = listed.refused {
            out.unread.push((folder.clone(), why));
        }
        out.files.extend(listed.kept);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(home: &std::path::Path, project: &std::path::Path) -> Places {
        Places {
            home: home.to_path_buf(),
            config_dir: home.join(".config"),
            codex_home: home.join(".codex"),
            project: project.to_path_buf(),
        }
    }

    #[test]
    fn only_instruction_files_that_exist_are_listed_and_none_is_opened() {
        let t = tempfile::tempdir().unwrap();
        let (h, p) = (t.path().join("h"), t.path().join("p"));
        std::fs::create_dir_all(h.join(".claude")).unwrap();
        std::fs::create_dir_all(p.join(".cursor/rules")).unwrap();
        std::fs::write(h.join(".claude/CLAUDE.md"), "BODY").unwrap();
        std::fs::write(p.join(".cursor/rules/a.mdc"), "BODY").unwrap();
        // A folder named like an instruction file is not one.
        std::fs::create_dir_all(p.join("CLAUDE.md")).unwrap();
        let pl = places(&h, &p);
        let claude = existing(&places_of(&pl, Some(ClientId::ClaudeCode), "claude-code")).files;
        assert_eq!(claude, vec![h.join(".claude/CLAUDE.md")]);
        let cursor = existing(&places_of(&pl, Some(ClientId::Cursor), "cursor")).files;
        assert_eq!(cursor, vec![p.join(".cursor/rules/a.mdc")]);
    }

    #[test]
    fn a_product_without_a_config_reader_still_gets_its_documented_instruction_files() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("AGENTS.md"), "x").unwrap();
        let pl = places(t.path(), t.path());
        let found = existing(&places_of(&pl, None, "opencode")).files;
        assert_eq!(found, vec![t.path().join("AGENTS.md")]);
        assert_eq!(places_of(&pl, None, "unknown-thing"), Spots::default());
    }

    #[test]
    fn a_rules_folder_that_cannot_be_listed_is_named_with_why_not_taken_as_empty() {
        // A file where the folder should be cannot be listed for anyone, root included.
        let t = tempfile::tempdir().unwrap();
        let rules = t.path().join(".cursor/rules");
        std::fs::create_dir_all(rules.parent().unwrap()).unwrap();
        std::fs::write(&rules, "BODY").unwrap();
        let found = existing(&places_of(
            &places(t.path(), t.path()),
            Some(ClientId::Cursor),
            "cursor",
        ));
        assert_eq!(found.unread.len(), 1, "{found:?}");
        assert_eq!(found.unread[0].0, rules);
        assert!(found.unread[0].1.starts_with("cannot list it"), "{found:?}");
        assert!(!found.unread[0].1.contains("BODY"));
    }

    #[test]
    fn a_rules_folder_past_the_bound_lists_the_bound_and_counts_the_rest() {
        let t = tempfile::tempdir().unwrap();
        let rules = t.path().join(".cursor/rules");
        std::fs::create_dir_all(&rules).unwrap();
        for i in 0..limits::CLIENT_INSTRUCTION_FILES_MAX + 4 {
            std::fs::write(rules.join(format!("r{i:03}.mdc")), "x").unwrap();
        }
        let found = existing(&places_of(
            &places(t.path(), t.path()),
            Some(ClientId::Cursor),
            "cursor",
        ));
        let in_rules = found.files.iter().filter(|f| f.starts_with(&rules)).count();
        assert_eq!(in_rules, limits::CLIENT_INSTRUCTION_FILES_MAX);
        assert_eq!(found.omitted, 4);
    }
}
