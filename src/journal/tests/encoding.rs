//! Tests of the canonical encoding and the hashes: the known-answer vectors of
//! docs/journal-format.md (these bytes must never change), and what tells fields apart.

use super::*;

const VECTOR_ENCODING_SHA256: &str =
    "721465a3466fda3824b59316f101335a8217dcc8f70357b0dc4029956ce1fa95";
const VECTOR_HASH: &str = "a549d1b7d541e1332abcc6475900325f23d33f6f3dc6608e71864e34d9b2aa04";
const TEST_MACHINE_GENESIS: &str =
    "3a635e667e0159136cb8a14fb4c1188867b3334478c23d0184b97e0785046c32";

#[test]
fn the_canonical_encoding_is_pinned() {
    let e = vector_entry();
    let encoded = encode(&e);
    assert_eq!(encoded.len(), 413);
    assert!(encoded.starts_with(b"holdcall.journal.v1\n"));
    assert_eq!(
        crate::ids::hex(&Sha256::digest(&encoded)),
        VECTOR_ENCODING_SHA256
    );
    assert_eq!(
        entry_hash(&e.prev_hash, &encoded).as_deref(),
        Some(VECTOR_HASH)
    );
}

#[test]
fn the_encoding_ignores_the_stored_hash_and_prev_hash() {
    let a = vector_entry();
    let mut b = vector_entry();
    b.hash = "f".repeat(64);
    b.prev_hash = "0".repeat(64);
    assert_eq!(encode(&a), encode(&b));
}

#[test]
fn the_genesis_depends_on_the_machine_id_and_is_pinned() {
    assert_eq!(genesis("test-machine"), TEST_MACHINE_GENESIS);
    assert_ne!(genesis("test-machine"), genesis("test-machine2"));
    assert_ne!(genesis(""), genesis("test-machine"));
}

#[test]
fn null_empty_string_and_zero_encode_differently() {
    let base = vector_entry();
    let with = |f: Fields| Entry {
        fields: f,
        ..base.clone()
    };
    let null = encode(&with(Fields::default()));
    let empty = encode(&with(Fields {
        session_id: Some(String::new()),
        ..Fields::default()
    }));
    let zero = encode(&with(Fields {
        seq: Some(0),
        ..Fields::default()
    }));
    let zero_in_first = encode(&with(Fields {
        session_id: Some("0".to_owned()),
        ..Fields::default()
    }));
    let falsy = encode(&with(Fields {
        ok: Some(false),
        ..Fields::default()
    }));
    let all = [&null, &empty, &zero, &zero_in_first, &falsy];
    for (i, a) in all.iter().enumerate() {
        for b in all.iter().skip(i + 1) {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn field_boundaries_are_unambiguous() {
    let base = vector_entry();
    let pair = |tool: &str, client: &str| {
        encode(&Entry {
            fields: Fields {
                tool: Some(tool.to_owned()),
                client: Some(client.to_owned()),
                ..Fields::default()
            },
            ..base.clone()
        })
    };
    assert_ne!(pair("ab", "c"), pair("a", "bc"));
    // Moving a value to the neighbouring field changes the bytes too.
    let moved = encode(&Entry {
        fields: Fields {
            client: Some("ab".to_owned()),
            ..Fields::default()
        },
        ..base.clone()
    });
    let stayed = encode(&Entry {
        fields: Fields {
            tool: Some("ab".to_owned()),
            ..Fields::default()
        },
        ..base.clone()
    });
    assert_ne!(moved, stayed);
}

#[test]
fn entry_hash_refuses_a_prev_hash_that_is_not_64_lowercase_hex() {
    assert!(entry_hash(&"a".repeat(64), b"x").is_some());
    assert!(entry_hash(&"a".repeat(63), b"x").is_none());
    assert!(entry_hash(&"A".repeat(64), b"x").is_none());
    assert!(entry_hash(&format!("+{}", "a".repeat(63)), b"x").is_none());
    assert!(entry_hash(&"é".repeat(32), b"x").is_none());
}

#[test]
fn every_kind_round_trips_through_its_string() {
    for k in Kind::ALL {
        assert_eq!(Kind::parse(k.as_str()), Some(k));
    }
    assert_eq!(Kind::parse("rule.add"), None);
}
