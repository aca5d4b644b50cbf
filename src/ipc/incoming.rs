//! A line the daemon reads, decoded once and sorted by protocol: the one run-time point where
//! the hello, the relay-session protocol and the management protocol meet. The daemon's
//! connection loop takes what this gives and lets a connection keep to the protocol its first
//! request chose.

use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use crate::ipc::{HelloRequest, ManageRequest, SessionRequest};

/// One request line as the daemon reads it.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// `daemon.hello`, on a connection of either protocol (it gives the connection no role).
    Hello(HelloRequest),
    Session(SessionRequest),
    Manage(ManageRequest),
}

/// The `kind` of the hello.
const HELLO: &str = "daemon.hello";

/// Every `kind` the daemon reads, in the order one enum of all of them had (session requests,
/// then management requests, then the hello), so an unknown kind is refused in the same words:
/// the two protocols' own lists, joined when the crate is compiled.
const ALL_KINDS: &[&str] = &joined::<
    { SessionRequest::KINDS.len() + ManageRequest::KINDS.len() + 1 },
>(SessionRequest::KINDS, ManageRequest::KINDS, HELLO);

/// `a`, then `b`, then `last`, as one array of exactly `N` (the compiler rejects any other `N`:
/// a slot left empty or a name with no slot fails the build). Called only to make a `const`, so
/// it runs in the compiler, where an index out of range is a build error, never a panic.
#[allow(clippy::indexing_slicing)]
const fn joined<const N: usize>(
    a: &[&'static str],
    b: &[&'static str],
    last: &'static str,
) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        let name = if i < a.len() {
            a[i]
        } else if i - a.len() < b.len() {
            b[i - a.len()]
        } else {
            last
        };
        out[i] = name;
        i += 1;
    }
    assert!(
        a.len() + b.len() + 1 == N,
        "every kind has exactly one slot"
    );
    out
}

/// Which protocol a `kind` belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Hello,
    Session,
    Manage,
}

/// Only the `kind` of a line, every other field read as `S` and dropped: read first, with the
/// errors and the forms (an object, or an array whose first element is the kind) of the
/// internally tagged enum the socket had. With `S` = `IgnoredAny` the other fields are skipped
/// (the fast read of every good line); with `S` = `Value` they are read whole, as that enum read
/// them (escapes, UTF-8, number range, depth), so a line that is no request is refused for its
/// first fault, in the same words.
struct Tag<S> {
    kind: Protocol,
    other: PhantomData<S>,
}

impl<'de, S: de::DeserializeOwned> Deserialize<'de> for Tag<S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tag<S>, D::Error> {
        struct Fields<S>(PhantomData<S>);
        impl<'de, S: de::DeserializeOwned> Visitor<'de> for Fields<S> {
            type Value = Tag<S>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("internally tagged enum Request")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Tag<S>, A::Error> {
                let mut kind = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "kind" {
                        if kind.is_some() {
                            return Err(de::Error::duplicate_field("kind"));
                        }
                        kind = Some(map.next_value::<Protocol>()?);
                    } else {
                        map.next_value::<S>()?;
                    }
                }
                kind.map(|kind| Tag {
                    kind,
                    other: PhantomData,
                })
                .ok_or_else(|| de::Error::missing_field("kind"))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Tag<S>, A::Error> {
                let kind = seq
                    .next_element::<Protocol>()?
                    .ok_or_else(|| de::Error::missing_field("kind"))?;
                while seq.next_element::<S>()?.is_some() {}
                Ok(Tag {
                    kind,
                    other: PhantomData,
                })
            }
        }
        d.deserialize_any(Fields(PhantomData))
    }
}

impl<'de> Deserialize<'de> for Protocol {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Protocol, D::Error> {
        struct Kind;
        impl Visitor<'_> for Kind {
            type Value = Protocol;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("variant identifier")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Protocol, E> {
                if SessionRequest::KINDS.contains(&v) {
                    Ok(Protocol::Session)
                } else if ManageRequest::KINDS.contains(&v) {
                    Ok(Protocol::Manage)
                } else if v == HELLO {
                    Ok(Protocol::Hello)
                } else {
                    Err(E::unknown_variant(v, ALL_KINDS))
                }
            }
        }
        d.deserialize_identifier(Kind)
    }
}

impl Incoming {
    /// Decodes one request line: its `kind` first, then the whole line as a request of that
    /// kind's protocol. A line whose `kind` cannot be read is read again with every value whole,
    /// for the words of its refusal; a good line's other values are checked by the second read.
    pub(crate) fn read(line: &[u8]) -> Result<Incoming, serde_json::Error> {
        let tag = match serde_json::from_slice::<Tag<de::IgnoredAny>>(line) {
            Ok(tag) => tag.kind,
            // Read whole, the line fails at its first fault, as the one enum's reading did (or,
            // should it not fail so, with what the fast read found).
            Err(skipped) => {
                return Err(serde_json::from_slice::<Tag<serde_json::Value>>(line)
                    .err()
                    .unwrap_or(skipped));
            }
        };
        Ok(match tag {
            Protocol::Hello => Incoming::Hello(serde_json::from_slice(line)?),
            Protocol::Session => Incoming::Session(serde_json::from_slice(line)?),
            Protocol::Manage => Incoming::Manage(serde_json::from_slice(line)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_one_protocols_and_the_list_of_all_is_their_sum() {
        let sum: Vec<&str> = SessionRequest::KINDS
            .iter()
            .chain(ManageRequest::KINDS)
            .chain(&[HELLO])
            .copied()
            .collect();
        assert_eq!(sum, ALL_KINDS);
        for kind in ALL_KINDS {
            // An empty request of each kind is refused for a missing field, never as unknown.
            let line = format!(r#"{{"kind":"{kind}"}}"#);
            if let Err(e) = Incoming::read(line.as_bytes()) {
                assert!(!e.to_string().contains("unknown variant"), "{kind}: {e}");
            }
        }
    }
}
