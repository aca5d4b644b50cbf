use super::*;

/// The canary the tests hide; 34 bytes, not a multiple of 3, so every alignment has a tail.
const SECRET: &[u8] = b"hc-canary-0123456789abcdef01234567";

fn matcher(secret: &[u8]) -> Matcher {
    Matcher::new(&fingerprint(secret).unwrap()).unwrap()
}

/// A reference base64 encoder (padding optional), independent of the one under test.
fn b64(data: &[u8], url: bool, pad: bool) -> String {
    let alphabet: &[u8] = if url {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..4 {
            if i < chars {
                out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

fn wrap(inner: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{inner}"}}]}}}}"#
    )
    .into_bytes()
}

#[test]
fn the_plain_secret_is_found_anywhere_in_a_line() {
    let m = matcher(SECRET);
    let s = std::str::from_utf8(SECRET).unwrap();
    for line in [s.to_string(), format!("TOKEN={s}"), format!("{s} and more")] {
        let hit = m.find(line.as_bytes()).unwrap();
        assert_eq!(hit.encoding, Encoding::Plain);
        assert_eq!(hit.view, View::AsSent);
    }
    assert_eq!(
        m.find(&wrap(&format!("HC_CANARY={s}"))).unwrap().encoding,
        Encoding::Plain
    );
}

#[test]
fn base64_is_found_at_each_alignment_in_both_alphabets_with_and_without_padding() {
    let m = matcher(SECRET);
    for url in [false, true] {
        for pad in [false, true] {
            for lead in ["", "x", "xy", "xyz", "KEY="] {
                for tail in ["", "\n", "!?"] {
                    let mut data = lead.as_bytes().to_vec();
                    data.extend_from_slice(SECRET);
                    data.extend_from_slice(tail.as_bytes());
                    let encoded = b64(&data, url, pad);
                    let hit = m
                        .find(&wrap(&encoded))
                        .unwrap_or_else(|| panic!("{lead:?}+secret+{tail:?} as {encoded}"));
                    assert!(
                        matches!(
                            hit.encoding,
                            Encoding::Base64At0
                                | Encoding::Base64At1
                                | Encoding::Base64At2
                                | Encoding::Base64UrlAt0
                                | Encoding::Base64UrlAt1
                                | Encoding::Base64UrlAt2
                        ),
                        "{hit:?}"
                    );
                    let url_hit = matches!(
                        hit.encoding,
                        Encoding::Base64UrlAt0 | Encoding::Base64UrlAt1 | Encoding::Base64UrlAt2
                    );
                    let offset = match hit.encoding {
                        Encoding::Base64At0 | Encoding::Base64UrlAt0 => 0,
                        Encoding::Base64At1 | Encoding::Base64UrlAt1 => 1,
                        _ => 2,
                    };
                    // The offset is where the secret starts in its 3-byte group.
                    assert_eq!(offset, lead.len() % 3, "{lead:?} {encoded}");
                    // Where the secret has no `+`/`/` or `-`/`_` in it, both alphabets spell it
                    // alike and the standard one is reported.
                    if url_hit {
                        assert!(url, "{encoded}");
                    }
                }
            }
        }
    }
}

#[test]
fn each_alignment_has_its_own_form_and_each_is_found_alone() {
    // A secret whose base64 holds `+` and `/` (and so `-` and `_`): the two alphabets differ.
    let secret: Vec<u8> = (0u8..40)
        .map(|i| i.wrapping_mul(37).wrapping_add(0xf8))
        .collect();
    let m = matcher(&secret);
    for url in [false, true] {
        for lead in 0..3usize {
            let mut data = vec![b'q'; lead];
            data.extend_from_slice(&secret);
            let encoded = b64(&data, url, true);
            assert!(
                encoded.contains(if url { '-' } else { '+' })
                    || encoded.contains(if url { '_' } else { '/' })
            );
            let hit = m.find(encoded.as_bytes()).unwrap();
            let want = match (url, lead) {
                (false, 0) => Encoding::Base64At0,
                (false, 1) => Encoding::Base64At1,
                (false, _) => Encoding::Base64At2,
                (true, 0) => Encoding::Base64UrlAt0,
                (true, 1) => Encoding::Base64UrlAt1,
                (true, _) => Encoding::Base64UrlAt2,
            };
            assert_eq!(hit.encoding, want, "{encoded}");
        }
    }
}

#[test]
fn hex_is_found_in_lower_and_upper_case() {
    let m = matcher(SECRET);
    let lower: String = SECRET.iter().map(|b| format!("{b:02x}")).collect();
    let upper: String = SECRET.iter().map(|b| format!("{b:02X}")).collect();
    assert_eq!(
        m.find(&wrap(&format!("0x{lower}"))).unwrap().encoding,
        Encoding::HexLower
    );
    assert_eq!(m.find(&wrap(&upper)).unwrap().encoding, Encoding::HexUpper);
}

#[test]
fn percent_encoding_of_any_characters_in_either_case_is_found() {
    let m = matcher(SECRET);
    let all_upper: String = SECRET.iter().map(|b| format!("%{b:02X}")).collect();
    let some_lower: String = SECRET
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if i % 2 == 0 {
                format!("%{b:02x}")
            } else {
                char::from(*b).to_string()
            }
        })
        .collect();
    for enc in [all_upper, some_lower] {
        let hit = m
            .find(&wrap(&format!("https://x.test/?t={enc}&u=1")))
            .unwrap();
        assert_eq!(
            hit,
            Hit {
                encoding: Encoding::Plain,
                view: View::PercentDecoded
            }
        );
    }
    // base64 with its `+`, `/` and `=` percent-encoded, as in a query string.
    let secret: Vec<u8> = (0u8..30)
        .map(|i| i.wrapping_mul(91).wrapping_add(0xfb))
        .collect();
    let m = matcher(&secret);
    let encoded = b64(&secret, false, true)
        .replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D");
    assert!(encoded.contains('%'));
    assert_eq!(
        m.find(encoded.as_bytes()).unwrap().view,
        View::PercentDecoded
    );
}

#[test]
fn json_escapes_of_every_kind_are_seen_through() {
    let secret = b"tok/en\"with\\odd/chars-123";
    let m = matcher(secret);
    // Escaped quote and backslash (as any JSON encoder writes them), escaped slashes.
    let escaped = r#"tok\/en\"with\\odd\/chars-123"#;
    assert_eq!(m.find(&wrap(escaped)).unwrap().view, View::JsonUnescaped);
    // Every character as \uXXXX.
    let m = matcher(SECRET);
    let all_u: String = SECRET.iter().map(|b| format!("\\u{:04x}", b)).collect();
    assert_eq!(
        m.find(&wrap(&all_u)).unwrap(),
        Hit {
            encoding: Encoding::Plain,
            view: View::JsonUnescaped
        }
    );
    let all_u_upper: String = SECRET.iter().map(|b| format!("\\u{:04X}", b)).collect();
    assert!(m.find(&wrap(&all_u_upper)).is_some());
    // A JSON text inside a JSON string (get-env's environment as text): escapes in escapes.
    let twice = SECRET
        .iter()
        .map(|b| format!("\\\\u{:04x}", b))
        .collect::<String>();
    assert_eq!(m.find(&wrap(&twice)).unwrap().view, View::JsonUnescaped);
    // A secret beyond ASCII, as a surrogate pair and as UTF-8.
    let secret = "clé-🔑-0123456789";
    let m = matcher(secret.as_bytes());
    let escaped: String = secret
        .encode_utf16()
        .map(|u| format!("\\u{u:04x}"))
        .collect();
    assert!(m.find(&wrap(&escaped)).is_some());
    assert!(m.find(&wrap(secret)).is_some());
}

#[test]
fn a_secret_split_across_two_json_strings_or_cut_short_is_not_claimed() {
    let m = matcher(SECRET);
    let s = std::str::from_utf8(SECRET).unwrap();
    let (a, b) = s.split_at(17);
    let split = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"a":"{a}","b":"{b}"}}}}"#);
    assert_eq!(m.find(split.as_bytes()), None);
    // Every prefix but the whole secret, and the secret with one byte changed.
    for cut in 1..SECRET.len() {
        assert_eq!(m.find(&SECRET[..cut]), None, "{cut}");
    }
    let mut changed = SECRET.to_vec();
    *changed.last_mut().unwrap() ^= 1;
    assert_eq!(m.find(&changed), None);
}

#[test]
fn random_data_is_never_claimed() {
    let m = matcher(SECRET);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut data = vec![0u8; 4 * 1024 * 1024];
    for b in data.iter_mut() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *b = (state >> 24) as u8;
    }
    assert_eq!(m.find(&data), None);
    // The same bytes as text: hex, base64 and JSON escapes of them.
    let hex: String = data[..512 * 1024]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(m.find(hex.as_bytes()), None);
    let text = b64(&data[..512 * 1024], false, true);
    assert_eq!(m.find(text.as_bytes()), None);
}

#[test]
fn a_secret_under_the_minimum_gets_no_fingerprints() {
    let short = vec![b'k'; limits::LEAK_SECRET_BYTES_MIN - 1];
    assert!(matches!(
        fingerprint(&short),
        Err(LeakError::TooShort(n)) if n == short.len()
    ));
    let enough = vec![b'k'; limits::LEAK_SECRET_BYTES_MIN];
    let m = matcher(&enough);
    assert!(m.find(&enough).is_some());
}

#[test]
fn fingerprints_hold_neither_the_secret_nor_a_form_and_differ_per_session() {
    let a = fingerprint(SECRET).unwrap();
    let b = fingerprint(SECRET).unwrap();
    assert_ne!(a, b, "each session has its own key");
    let text = serde_json::to_string(&a).unwrap();
    let s = std::str::from_utf8(SECRET).unwrap();
    let lower: String = SECRET.iter().map(|x| format!("{x:02x}")).collect();
    for form in [s.to_string(), lower, b64(SECRET, false, false)] {
        assert!(!text.contains(&form[..limits::LEAK_WINDOW_BYTES]), "{text}");
    }
    assert!(!format!("{a:?}").contains(&a.key));
    // What goes over the wire comes back as the same scanner.
    let back: Fingerprints = serde_json::from_str(&text).unwrap();
    assert!(Matcher::new(&back).unwrap().find(SECRET).is_some());
}

#[test]
fn malformed_fingerprints_make_no_scanner() {
    let mut f = fingerprint(SECRET).unwrap();
    f.key.truncate(10);
    assert!(Matcher::new(&f).is_none());
    let mut f = fingerprint(SECRET).unwrap();
    f.prints[0].len = 3;
    assert!(Matcher::new(&f).is_none());
}

#[test]
fn hmac_agrees_with_an_independent_implementation() {
    // Python's hmac.new(b"\x0b" * 32, b"Hi There", hashlib.sha256).hexdigest().
    let key = [0x0bu8; 32];
    let got = crate::ids::hex(&hmac(&key, b"Hi There"));
    assert_eq!(
        got,
        "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
    );
}
