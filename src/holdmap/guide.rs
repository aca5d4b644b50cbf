//! The `holdmap://guide` resource: `guide.md`, bundled into the binary, so reading it takes no
//! scan and no file access; only that exact URI names it.
//!
//! Must never: read a file, follow a URI to anything but the bundled text, or match a URI
//! loosely (case, a trailing slash, a query, a path under it: all unknown, -32002).

use serde_json::{Value, json};

/// The guide's URI.
pub(crate) const GUIDE_URI: &str = "holdmap://guide";

const MIME_TYPE: &str = "text/markdown";

/// The guide itself: which tool to choose, how to read evidence, the workflows, the handle and
/// guard-rail rules, and what results do not prove.
const GUIDE: &str = include_str!("guide.md");

/// `resources/list`'s `resources` array.
pub(crate) fn list() -> Value {
    json!([{
        "uri": GUIDE_URI,
        "name": "guide",
        "title": "holdmap guide",
        "description": "Which holdmap tool to choose, how to read its evidence and partial \
                        scans, how to diagnose a port conflict without disrupting a service, \
                        how to prepare a dev server, and how stops, handles and guard rails \
                        work.",
        "mimeType": MIME_TYPE,
        "annotations": { "audience": ["assistant", "user"], "priority": 0.8 }
    }])
}

/// `resources/read`'s `contents` array for `uri`, or `None` when no resource has exactly that
/// URI (-32002).
pub(crate) fn read(uri: &str) -> Option<Value> {
    // Byte equality, on purpose: no normalising of case, slashes, queries or fragments.
    (uri.as_bytes() == GUIDE_URI.as_bytes())
        .then(|| json!([{ "uri": GUIDE_URI, "mimeType": MIME_TYPE, "text": GUIDE }]))
}

#[cfg(test)]
mod tests {
    use super::{GUIDE, GUIDE_URI, list, read};
    use crate::holdmap::catalog::{ISSUE_TOOLS, check_names_only_known_tools};
    use crate::limits;

    #[test]
    fn the_guide_is_listed_once_with_its_annotations() {
        let listed = list();
        let items = listed.as_array().unwrap();
        assert_eq!(items.len(), 1);
        let guide = &items[0];
        assert_eq!(guide["uri"], GUIDE_URI);
        assert_eq!(guide["name"], "guide");
        assert_eq!(guide["mimeType"], "text/markdown");
        assert!(guide["title"].is_string() && guide["description"].is_string());
        assert_eq!(
            guide["annotations"],
            serde_json::json!({ "audience": ["assistant", "user"], "priority": 0.8 })
        );
    }

    #[test]
    fn reading_the_exact_uri_gives_the_bundled_markdown() {
        let contents = read("holdmap://guide").unwrap();
        assert_eq!(
            contents,
            serde_json::json!([{ "uri": GUIDE_URI, "mimeType": "text/markdown", "text": GUIDE }])
        );
        assert!(GUIDE.starts_with("# holdmap"));
    }

    #[test]
    fn any_other_uri_names_nothing() {
        let others = [
            "",
            "holdmap://guide/",
            "holdmap://guide?x",
            "holdmap://guide#top",
            "holdmap://guide/../guide",
            "holdmap://Guide",
            "HOLDMAP://guide",
            "holdmap:/guide",
            " holdmap://guide",
            "holdmap://guide ",
            "holdmap://guide\n",
            "holdmap://guide\u{0}",
            "holdmap://%67uide",
            "file:///etc/passwd",
            "file://guide.md",
            "guide",
            "holdmap://",
        ];
        for uri in others {
            assert_eq!(read(uri), None, "{uri:?}");
        }
    }

    #[test]
    fn the_guide_names_only_tools_the_server_has() {
        check_names_only_known_tools(GUIDE, "guide.md");
        for tool in ISSUE_TOOLS {
            assert!(
                GUIDE.contains(&format!("`{tool}`")),
                "{tool} is not in the guide"
            );
        }
    }

    #[test]
    fn the_guide_states_every_handle_rule_with_the_enforced_numbers() {
        let mib = |bytes: usize| format!("**{} MiB**", bytes / (1024 * 1024));
        let expected = [
            format!("**{} s**", limits::HOLDMAP_HANDLE_TTL.as_secs()),
            format!("**{}** previews", limits::HOLDMAP_HANDLES_MAX),
            format!("**{}** ports", limits::HOLDMAP_PREVIEW_TARGETS_MAX),
            mib(limits::HOLDMAP_PREVIEW_BYTES_MAX),
            "**once**".to_owned(),
            "**this session only**".to_owned(),
            "re-initialising".to_owned(),
            "leaves the handle usable".to_owned(),
            "stops nothing".to_owned(),
            "Protected processes are always refused".to_owned(),
            "Only the current account".to_owned(),
            "stops only dev servers".to_owned(),
            "Redaction is heuristic".to_owned(),
            "`hidden_sockets`".to_owned(),
            "candidate, not a reservation".to_owned(),
            "not proof of health".to_owned(),
            "authorization".to_owned(),
        ];
        // Compared with the line breaks of the markdown folded into spaces.
        let flat = GUIDE.split_whitespace().collect::<Vec<_>>().join(" ");
        for words in &expected {
            assert!(flat.contains(words.as_str()), "the guide lacks {words:?}");
        }
    }
}
