//! Text shown to a person exactly as it is: which characters must never be drawn as themselves
//! (invisible ones, right-to-left letters), and the escaped form the CLI, the console and the
//! journal's readers all show. Pure functions; no I/O, nothing Holdcall-specific.

use std::fmt::Write as _;

/// Characters that draw nothing, or change how their neighbours are drawn, as inclusive ranges
/// of code points: every character of General Category Cf and every Default_Ignorable_Code_Point,
/// from the Unicode Character Database 16.0 (`extracted/DerivedGeneralCategory.txt`, `Cf`, and
/// `DerivedCoreProperties.txt`, `Default_Ignorable_Code_Point`), merged. Unassigned code points
/// inside a range are included on purpose: a later Unicode may assign them.
const INVISIBLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),   // soft hyphen (Cf, DI)
    (0x034F, 0x034F),   // combining grapheme joiner (DI)
    (0x0600, 0x0605),   // Arabic number signs (Cf)
    (0x061C, 0x061C),   // Arabic letter mark (Cf, DI)
    (0x06DD, 0x06DD),   // Arabic end of ayah (Cf)
    (0x070F, 0x070F),   // Syriac abbreviation mark (Cf)
    (0x0890, 0x0891),   // Arabic pound and piastre marks above (Cf)
    (0x08E2, 0x08E2),   // Arabic disputed end of ayah (Cf)
    (0x115F, 0x1160),   // Hangul choseong and jungseong fillers (DI)
    (0x17B4, 0x17B5),   // Khmer inherent vowels (DI)
    (0x180B, 0x180F),   // Mongolian free variation selectors, vowel separator (Cf, DI)
    (0x200B, 0x200F),   // zero width space, ZWNJ, ZWJ, LRM, RLM (Cf, DI)
    (0x202A, 0x202E),   // bidi embeddings and overrides (Cf, DI)
    (0x2060, 0x206F),   // word joiner, invisible operators, bidi isolates, deprecated (Cf, DI)
    (0x3164, 0x3164),   // Hangul filler (DI)
    (0xFE00, 0xFE0F),   // variation selectors (DI)
    (0xFEFF, 0xFEFF),   // zero width no-break space, byte order mark (Cf, DI)
    (0xFFA0, 0xFFA0),   // halfwidth Hangul filler (DI)
    (0xFFF0, 0xFFF8),   // unassigned, reserved default ignorable (DI)
    (0xFFF9, 0xFFFB),   // interlinear annotation (Cf)
    (0x110BD, 0x110BD), // Kaithi number sign (Cf)
    (0x110CD, 0x110CD), // Kaithi number sign above (Cf)
    (0x13430, 0x1343F), // Egyptian hieroglyph format controls (Cf)
    (0x1BCA0, 0x1BCA3), // shorthand format controls (Cf, DI)
    (0x1D173, 0x1D17A), // musical symbol formatting (Cf, DI)
    (0xE0000, 0xE0FFF), // tags, variation selectors supplement, reserved (Cf, DI)
];

/// Letters and marks of right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, NKo, Samaritan,
/// Mandaic; their presentation forms; the RTL blocks of the supplementary planes). A terminal's
/// bidi algorithm may draw them, and the neutral characters beside them, in another order than
/// the bytes, so they are shown as escapes rather than trusted to the terminal.
const RIGHT_TO_LEFT: &[(u32, u32)] = &[
    (0x0590, 0x08FF),
    (0xFB1D, 0xFDFF),
    (0xFE70, 0xFEFF),
    (0x10800, 0x10FFF),
    (0x1E800, 0x1EFFF),
];

fn in_table(table: &[(u32, u32)], c: char) -> bool {
    let n = c as u32;
    table.iter().any(|&(lo, hi)| lo <= n && n <= hi)
}

/// True for a character that draws nothing or changes how others are drawn: controls (C0,
/// DEL, C1), every space but U+0020 and the line and paragraph separators, the [`INVISIBLE`]
/// table (format characters and default ignorables), private use and noncharacters.
pub fn invisible(c: char) -> bool {
    // ASCII, most of any text, at the cost of one comparison: only its controls (C0 and DEL,
    // which include its spaces but U+0020) are invisible; no table entry or range below is
    // ASCII (checked by `every_ascii_character_is_judged_as_the_full_rule_judges_it`).
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    invisible_beyond_ascii(c)
}

fn invisible_beyond_ascii(c: char) -> bool {
    c.is_control() // C0, DEL, C1
        || (c.is_whitespace() && c != ' ') // other spaces, U+2028, U+2029
        || in_table(INVISIBLE, c)
        || matches!(c,
            '\u{e000}'..='\u{f8ff}'         // private use
            | '\u{f0000}'..='\u{10ffff}'    // supplementary private use
            | '\u{fdd0}'..='\u{fdef}'       // noncharacters
        )
        || (c as u32 & 0xfffe) == 0xfffe // noncharacters U+xFFFE, U+xFFFF
}

/// True for a character that must never be shown as itself: an [`invisible`] one, or a
/// right-to-left letter (see [`RIGHT_TO_LEFT`]). Such a character could make a person read
/// arguments other than the ones they approve.
pub fn hidden(c: char) -> bool {
    invisible(c) || in_table(RIGHT_TO_LEFT, c)
}

/// `text` with every byte shown as itself: printable ASCII and visible non-ASCII characters as
/// they are, every [`hidden`] character as `\u{…}` (hex code point). Valid JSON never contains
/// the text `\u{` (JSON's own escape is `\uXXXX`, and a backslash in a string is `\\`), so an
/// escape shown here can never be mistaken for argument text. Nothing is dropped, summarised
/// or shortened.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// The note beside [`visible`] text that flags every non-ASCII character shown as itself, so a
/// lookalike (Cyrillic `а` for Latin `a`) cannot pass unseen: each distinct one as `U+XXXX`,
/// in order of first appearance. None when every shown character is ASCII.
pub(crate) fn non_ascii_note(text: &str) -> Option<String> {
    let mut seen: Vec<char> = Vec::new();
    for c in text.chars() {
        if !c.is_ascii() && !hidden(c) && !seen.contains(&c) {
            seen.push(c);
        }
    }
    if seen.is_empty() {
        return None;
    }
    let list: Vec<String> = seen
        .iter()
        .map(|c| format!("U+{:04X} {c}", *c as u32))
        .collect();
    Some(format!(
        "non-ASCII characters shown as themselves: {}",
        list.join(", ")
    ))
}

/// `text` with every JSON `\uXXXX` escape of a non-ASCII code point (a surrogate pair counts as
/// one) replaced by the character, and every other byte kept: what a server that decodes the
/// JSON will read, for a lookalike such as `"p\u0430ypal"` that is pure ASCII as text. Escapes of
/// ASCII characters (`\u0022`, `\u005c`) and lone surrogates stay as written, so the result
/// never changes where a string ends. None when the text holds no such escape.
pub(crate) fn decode_non_ascii_escapes(text: &str) -> Option<String> {
    fn hex4(s: &str) -> Option<u32> {
        crate::ids::hex4(s.as_bytes(), 0).map(u32::from)
    }
    let mut out = String::with_capacity(text.len());
    let mut decoded_any = false;
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(rest.get(..at).unwrap_or(""));
        let tail = rest.get(at..).unwrap_or("");
        let after = tail.get(1..).unwrap_or("");
        if let Some(hex) = after.strip_prefix('u') {
            let unit = hex4(hex);
            let (ch, used) = match unit {
                Some(u @ 0xd800..=0xdbff) => {
                    let low = hex
                        .get(4..)
                        .and_then(|r| r.strip_prefix("\\u"))
                        .and_then(hex4)
                        .filter(|l| (0xdc00..=0xdfff).contains(l));
                    match low {
                        Some(l) => (
                            char::from_u32(0x10000 + ((u - 0xd800) << 10) + (l - 0xdc00)),
                            12,
                        ),
                        None => (None, 0),
                    }
                }
                Some(u) if u >= 0x80 => (char::from_u32(u), 6),
                _ => (None, 0),
            };
            if let Some(ch) = ch {
                out.push(ch);
                decoded_any = true;
                rest = tail.get(used..).unwrap_or("");
                continue;
            }
        }
        // Any other escape (or a backslash escaping a backslash) is kept as two characters.
        let keep: String = tail.chars().take(2).collect();
        out.push_str(&keep);
        rest = tail.get(keep.len()..).unwrap_or("");
    }
    out.push_str(rest);
    decoded_any.then_some(out)
}

/// Scripts that join their letters, where U+200C (zero width non-joiner) is ordinary spelling
/// (Persian, Urdu, Kurdish; the Brahmic scripts): Arabic and its supplements and presentation
/// forms, Syriac, and Devanagari through Malayalam.
const JOINING: &[(u32, u32)] = &[
    (0x0600, 0x06FF),
    (0x0700, 0x074F),
    (0x0750, 0x077F),
    (0x08A0, 0x08FF),
    (0x0900, 0x0D7F),
    (0xFB50, 0xFDFF),
    (0xFE70, 0xFEFF),
];

/// A pictograph or symbol a zero width joiner or a variation selector ordinarily follows in an
/// emoji sequence (the symbol blocks from U+2000, the supplementary pictographs).
fn emoji_like(c: char) -> bool {
    matches!(c as u32, 0x2000..=0x2BFF | 0x1F000..=0x1FAFF)
        || (0x1F3FB..=0x1F3FF).contains(&(c as u32))
}

/// What is suspicious in a text another program wrote for a model to read (a tool's
/// description): every character that draws nothing or reorders its neighbours, each named once
/// as `U+XXXX (what it is)`, in order of first appearance. Context matters, so ordinary writing
/// is not flagged: line breaks and tabs; a zero width joiner between two pictographs and a
/// variation selector after one (emoji sequences); a flag's tag sequence (U+1F3F4, tags,
/// U+E007F); a zero width non-joiner between two letters of a joining script (Persian
/// `می‌خواهم`). An escape character that starts an ANSI sequence is named as one.
pub(crate) fn lint(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<String> = Vec::new();
    let mut note = |c: char, what: &str| {
        let line = format!("U+{:04X} ({what})", c as u32);
        if !out.contains(&line) {
            out.push(line);
        }
    };
    let mut in_flag = false;
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
        let next = chars.get(i + 1).copied();
        let n = c as u32;
        if c == '\u{1F3F4}' {
            in_flag = true;
            continue;
        }
        let tag = (0xE0020..=0xE007F).contains(&n);
        if in_flag && tag {
            if n == 0xE007F {
                in_flag = false;
            }
            continue;
        }
        in_flag = false;
        if matches!(c, '\n' | '\r' | '\t') || !invisible(c) {
            continue;
        }
        match n {
            0x1B if matches!(next, Some('[' | ']')) => note(c, "ANSI escape sequence"),
            0x200D
                if prev.is_some_and(|p| emoji_like(p) || p == '\u{FE0F}')
                    && next.is_some_and(emoji_like) => {}
            0x200C | 0x200D
                if prev.is_some_and(|p| in_table(JOINING, p))
                    && next.is_some_and(|x| in_table(JOINING, x)) => {}
            0xFE0E | 0xFE0F if prev.is_some_and(|p| !p.is_ascii()) => {}
            0x202A..=0x202E | 0x2066..=0x2069 | 0x200E | 0x200F | 0x061C => {
                note(c, "bidirectional control")
            }
            0xE0000..=0xE007F => note(c, "tag character: invisible text"),
            _ if c.is_control() => note(c, "control character"),
            _ => note(c, "invisible character"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_ascii_is_shown_as_itself() {
        let t = r#"{"path":"/etc/passwd","n":[1,2.5,true,null]}"#;
        assert_eq!(visible(t), t);
        assert_eq!(non_ascii_note(t), None);
    }

    #[test]
    fn controls_whitespace_other_than_space_and_del_are_escapes() {
        assert_eq!(visible("a\tb\nc\rd"), "a\\u{9}b\\u{a}c\\u{d}d");
        assert_eq!(
            visible("\u{0}\u{1b}[2J\u{7f}\u{85}"),
            "\\u{0}\\u{1b}[2J\\u{7f}\\u{85}"
        );
        assert_eq!(visible("a\u{a0}b\u{3000}c"), "a\\u{a0}b\\u{3000}c");
    }

    #[test]
    fn bidi_overrides_isolates_zero_widths_and_tags_are_escapes() {
        for c in [
            '\u{202a}',
            '\u{202e}',
            '\u{2066}',
            '\u{2069}',
            '\u{200b}',
            '\u{200f}',
            '\u{feff}',
            '\u{2028}',
            '\u{2029}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{ad}',
            '\u{2060}',
        ] {
            let shown = visible(&format!("x{c}y"));
            assert_eq!(shown, format!("x\\u{{{:x}}}y", c as u32));
        }
    }

    #[test]
    fn every_format_and_default_ignorable_character_named_in_the_review_is_an_escape() {
        let singles = [
            0xad, 0x34f, 0x61c, 0x6dd, 0x70f, 0x8e2, 0x115f, 0x1160, 0x17b4, 0x17b5, 0x3164,
            0xfeff, 0xffa0, 0x110bd, 0x110cd, 0x2028, 0x2029, 0x85, 0x7f, 0x1b,
        ];
        let ranges = [
            (0x600, 0x605),
            (0x180b, 0x180f),
            (0x200b, 0x200f),
            (0x202a, 0x202e),
            (0x2060, 0x206f),
            (0xfe00, 0xfe0f),
            (0xfff0, 0xfff8),
            (0x13430, 0x1343f),
            (0x1bca0, 0x1bca3),
            (0x1d173, 0x1d17a),
            (0xe0000, 0xe0fff),
            (0xe000, 0xf8ff),
            (0xfdd0, 0xfdef),
        ];
        let all = singles
            .iter()
            .map(|&n| (n, n))
            .chain(ranges)
            .flat_map(|(lo, hi)| lo..=hi)
            .filter_map(char::from_u32);
        for c in all {
            let shown = visible(&format!("x{c}y"));
            assert_eq!(
                shown,
                format!("x\\u{{{:x}}}y", c as u32),
                "U+{:04X}",
                c as u32
            );
            assert!(invisible(c), "U+{:04X}", c as u32);
        }
        for n in [0xfffe, 0xffff, 0x1fffe, 0x10ffff] {
            assert!(hidden(char::from_u32(n).unwrap()), "U+{n:04X}");
        }
    }

    #[test]
    fn every_ascii_character_is_judged_as_the_full_rule_judges_it() {
        for c in (0u8..=0x7f).map(char::from) {
            assert_eq!(
                invisible(c),
                invisible_beyond_ascii(c),
                "U+{:04X}",
                c as u32
            );
        }
    }

    #[test]
    fn json_escapes_of_non_ascii_characters_are_decoded_and_nothing_else() {
        assert_eq!(
            decode_non_ascii_escapes(r#"{"to":"p\u0430ypal"}"#).unwrap(),
            "{\"to\":\"p\u{430}ypal\"}"
        );
        assert_eq!(
            decode_non_ascii_escapes(r#"{"a":"p\u0061\"\\u0430"}"#),
            None
        );
        assert_eq!(
            decode_non_ascii_escapes(r#""\ud83d\ude00 \ud800 \u202E""#).unwrap(),
            "\"\u{1f600} \\ud800 \u{202e}\""
        );
        assert_eq!(decode_non_ascii_escapes(r#""\u00""#), None);
    }

    #[test]
    fn non_ascii_letters_are_shown_as_themselves_and_flagged() {
        let t = "café раy é";
        assert_eq!(visible(t), t);
        assert_eq!(
            non_ascii_note(t).unwrap(),
            "non-ASCII characters shown as themselves: U+00E9 é, U+0440 р, U+0430 а"
        );
    }

    #[test]
    fn nothing_is_truncated_however_long() {
        let t = "a".repeat(100_000) + "\u{202e}";
        assert_eq!(visible(&t).len(), 100_000 + "\\u{202e}".len());
    }

    #[test]
    fn lint_flags_bidi_controls_zero_widths_tags_and_ansi_escapes_once_each() {
        let flags =
            lint("Reads a file.\u{202e}txt.exe\u{200b}\u{200b} \u{1b}[2J \u{e0041}\u{e0042}");
        assert_eq!(
            flags,
            vec![
                "U+202E (bidirectional control)",
                "U+200B (invisible character)",
                "U+001B (ANSI escape sequence)",
                "U+E0041 (tag character: invisible text)",
                "U+E0042 (tag character: invisible text)",
            ]
        );
        assert_eq!(lint("bell\u{7}"), vec!["U+0007 (control character)"]);
    }

    #[test]
    fn lint_leaves_line_breaks_emoji_sequences_flags_and_persian_zwnj_alone() {
        for ordinary in [
            "Lists files.\nSecond line,\tindented.\r\n",
            "family \u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}",
            "couple \u{1f469}\u{200d}\u{2764}\u{fe0f}\u{200d}\u{1f468}",
            "England \u{1f3f4}\u{e0067}\u{e0062}\u{e0065}\u{e006e}\u{e0067}\u{e007f}",
            "\u{645}\u{6cc}\u{200c}\u{62e}\u{648}\u{627}\u{647}\u{645}",
            "caf\u{e9} \u{2705}\u{fe0f} done",
        ] {
            assert_eq!(lint(ordinary), Vec::<String>::new(), "{ordinary:?}");
        }
        // The same characters out of their context are flagged.
        assert_eq!(lint("a\u{200c}b"), vec!["U+200C (invisible character)"]);
        assert_eq!(lint("a\u{200d}b"), vec!["U+200D (invisible character)"]);
        assert_eq!(
            lint("plain \u{e0067}\u{e007f}"),
            vec![
                "U+E0067 (tag character: invisible text)",
                "U+E007F (tag character: invisible text)"
            ]
        );
    }
}
