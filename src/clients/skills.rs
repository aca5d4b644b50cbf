//! Clients' skills: folders holding a `SKILL.md` (Claude Code's `~/.claude/skills/<name>/` and
//! `<project>/.claude/skills/<name>/`, Codex's `$CODEX_HOME/skills/<name>/`). A skill's identity
//! is its folder's name; its declared `name` and `description` come only from a bounded YAML
//! front-matter header. Shared by every binary; holdmap's `include_capabilities` reports them.
//!
//! Owns: [`dirs`] (where each client keeps skills), [`list`] (the skills of one directory) and
//! [`header`] (the bounded front-matter reader). Must never: read a `SKILL.md` past
//! `limits::CLIENT_SKILL_HEADER_BYTES_MAX` bytes or `CLIENT_SKILL_HEADER_LINES_MAX` lines, return
//! or keep any of its body, return a header value that has not been through
//! `settings::clean`, follow more than `CLIENT_SKILLS_PER_DIR_MAX` folders or stat an entry
//! past them, or open a `SKILL.md` in a way that can block (a FIFO). Imports nothing
//! Holdcall-specific.

use std::path::{Path, PathBuf};

use super::settings::clean;
use super::{ClientId, Places};
use crate::limits;

/// A skills directory a client reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SkillDir {
    pub(crate) client: ClientId,
    /// `user` or `project`.
    pub(crate) scope: &'static str,
    pub(crate) path: PathBuf,
}

/// One skill found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// The folder's name (cleaned): the skill's identity.
    pub(crate) folder: String,
    /// Its `SKILL.md`.
    pub(crate) path: PathBuf,
    /// Cleaned `name` and `description` from the header, when present and within bounds.
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    /// Why the header was not read (too long, not a regular file, …), never its text.
    pub(crate) refused: Option<String>,
}

/// What one skills directory holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Listing {
    pub(crate) skills: Vec<Found>,
    /// Entries past `CLIENT_SKILLS_PER_DIR_MAX` skill folders (or that could not be listed),
    /// counted by name only: never statted or read.
    pub(crate) omitted: usize,
    /// Why the directory could not be listed (None: listed, or absent).
    pub(crate) refused: Option<String>,
}

/// The skills directories `client` reads under `places`.
pub(crate) fn dirs(places: &Places, client: ClientId) -> Vec<SkillDir> {
    let d = |scope, path| SkillDir {
        client,
        scope,
        path,
    };
    match client {
        ClientId::ClaudeCode => vec![
            d("user", places.home.join(".claude/skills")),
            d("project", places.project.join(".claude/skills")),
        ],
        ClientId::Codex => vec![d("user", places.codex_home.join("skills"))],
        _ => Vec::new(),
    }
}

/// The skills in `dir`: each sub-folder (in name order) with a `SKILL.md`. An absent
/// directory holds none.
pub(crate) fn list(dir: &Path) -> Listing {
    let mut out = Listing::default();
    let listed = super::bounded_entries(dir, limits::CLIENT_SKILLS_PER_DIR_MAX, |p| {
        p.join("SKILL.md").exists()
    });
    out.omitted = listed.omitted;
    out.refused = listed.refused;
    let folders = listed.kept;
    for folder in folders {
        let name = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = folder.join("SKILL.md");
        let (name_decl, description, refused) = match header(&file) {
            Ok(h) => (h.name, h.description, None),
            Err(why) => (None, None, Some(why)),
        };
        out.skills.push(Found {
            folder: clean(&name, limits::CLIENT_SKILL_TEXT_CHARS_MAX),
            path: file,
            name: name_decl,
            description,
            refused,
        });
    }
    out
}

/// What a skill's header declares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
}

/// The `name` and `description` of a `SKILL.md`'s YAML front matter: the file must start with a
/// `---` line and the header must close with another within the byte and line bounds. Only
/// plain `key: value` lines are read (a quoted value is unquoted; block scalars, lists and
/// nested keys are skipped). No header: no declared name. Nothing after the closing `---` is
/// read.
pub(crate) fn header(file: &Path) -> Result<Header, String> {
    let bytes = match super::read_head(file, limits::CLIENT_SKILL_HEADER_BYTES_MAX as u64) {
        Ok(Some(b)) => b,
        Ok(None) => return Err("cannot read it: it does not exist".into()),
        Err(r) => return Err(r.to_string()),
    };
    // A multi-byte character cut at the bound is dropped, not guessed.
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(bytes.get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or(""),
    };
    let mut lines = text.split('\n');
    if lines.next().map(|l| l.trim_end_matches('\r').trim_end()) != Some("---") {
        return Ok(Header::default());
    }
    let mut out = Header::default();
    let mut closed = false;
    for line in lines.take(limits::CLIENT_SKILL_HEADER_LINES_MAX) {
        let line = line.trim_end_matches('\r');
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = unquote(value.trim());
        if value.is_empty() || matches!(value, "|" | ">" | "|-" | ">-") {
            continue;
        }
        let value = Some(clean(value, limits::CLIENT_SKILL_TEXT_CHARS_MAX));
        match key.trim() {
            "name" if out.name.is_none() => out.name = value,
            "description" if out.description.is_none() => out.description = value,
            _ => {}
        }
    }
    if !closed {
        return Err(format!(
            "its header does not close within {} lines or {} bytes",
            limits::CLIENT_SKILL_HEADER_LINES_MAX,
            limits::CLIENT_SKILL_HEADER_BYTES_MAX
        ));
    }
    Ok(out)
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(dir: &Path, folder: &str, text: &str) -> PathBuf {
        let p = dir.join(folder);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("SKILL.md"), text).unwrap();
        p.join("SKILL.md")
    }

    #[test]
    fn a_skill_is_named_by_its_folder_and_its_header_and_never_by_its_body() {
        let t = tempfile::tempdir().unwrap();
        skill(
            t.path(),
            "pdf",
            "---\nname: PDF tools\ndescription: \"Fill forms\"\n---\nBODY-CANARY do this\n",
        );
        let l = list(t.path());
        assert_eq!(l.skills.len(), 1);
        let s = &l.skills[0];
        assert_eq!(s.folder, "pdf");
        assert_eq!(s.name.as_deref(), Some("PDF tools"));
        assert_eq!(s.description.as_deref(), Some("Fill forms"));
        assert!(!format!("{l:?}").contains("BODY-CANARY"));
    }

    #[test]
    fn a_header_that_never_closes_is_refused_and_nothing_of_it_is_kept() {
        let t = tempfile::tempdir().unwrap();
        let long = format!(
            "---\nname: x\n{}",
            "description: BODY-CANARY\n".repeat(1000)
        );
        let f = skill(t.path(), "big", &long);
        let err = header(&f).unwrap_err();
        assert!(err.contains("does not close"), "{err}");
        assert!(!err.contains("BODY-CANARY"));
        let l = list(t.path());
        assert_eq!(l.skills[0].name, None);
        assert!(l.skills[0].refused.is_some());
    }

    #[test]
    fn a_file_without_front_matter_declares_nothing() {
        let t = tempfile::tempdir().unwrap();
        let f = skill(t.path(), "plain", "name: not a header\n");
        assert_eq!(header(&f).unwrap(), Header::default());
    }

    #[test]
    fn header_values_lose_control_characters_credentials_and_length() {
        let t = tempfile::tempdir().unwrap();
        let secret = "ghp_0123456789abcdefABCDEF0123456789";
        let text = format!(
            "---\nname: evil\u{1b}[31m\u{202e}name\ndescription: use token {secret} {}\n---\n",
            "x".repeat(1000)
        );
        let f = skill(t.path(), "evil", &text);
        let h = header(&f).unwrap();
        let name = h.name.unwrap();
        assert!(
            !name.contains('\u{1b}') && !name.contains('\u{202e}'),
            "{name}"
        );
        let d = h.description.unwrap();
        assert!(!d.contains(secret), "{d}");
        assert!(d.chars().count() <= limits::CLIENT_SKILL_TEXT_CHARS_MAX);
    }

    #[test]
    fn a_skill_md_that_is_not_a_regular_file_is_refused() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("odd/SKILL.md")).unwrap();
        let l = list(t.path());
        assert_eq!(l.skills.len(), 1);
        assert_eq!(
            l.skills[0].refused.as_deref(),
            Some("it is not a regular file")
        );
    }

    #[test]
    fn folders_past_the_bound_are_counted_not_read() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..limits::CLIENT_SKILLS_PER_DIR_MAX + 3 {
            skill(t.path(), &format!("s{i:04}"), "---\n---\n");
        }
        let l = list(t.path());
        assert_eq!(l.skills.len(), limits::CLIENT_SKILLS_PER_DIR_MAX);
        assert_eq!(l.omitted, 3);
    }

    #[test]
    fn a_fifo_named_skill_md_is_refused_at_once_not_waited_on() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("piped");
        std::fs::create_dir(&dir).unwrap();
        nix::unistd::mkfifo(&dir.join("SKILL.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let l = list(t.path());
        assert_eq!(
            l.skills[0].refused.as_deref(),
            Some("it is not a regular file")
        );
    }

    #[test]
    fn an_absent_skills_directory_holds_no_skill_and_is_no_refusal() {
        let l = list(Path::new("/nonexistent/skills"));
        assert_eq!(l, Listing::default());
    }
}
