//! A JSON (and JSONC) reader for client config files that keeps the byte span of every value,
//! so `init` can replace only the values it rewrites and leave every other byte as it was.
//!
//! Owns: parsing a whole file into a tree of spans with decoded strings. Must never: accept a
//! repeated key (which copy a client uses is unknowable), nest past `limits::JSON_DEPTH_MAX`, or
//! put any of the file's text in an error (the file may hold account data; errors say where,
//! never what).

use std::ops::Range;

use crate::limits;
use crate::mcp::json::escape::{EscapeError, LoneSurrogates, decode_string_body};

/// One JSON value and where it sits in the file.
#[derive(Debug, Clone)]
pub struct Node {
    pub(crate) span: Range<usize>,
    pub(crate) kind: Kind,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Object(Vec<Member>),
    Array(Vec<Node>),
    String(String),
    Number,
    Bool(bool),
    Null,
}

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) key: String,
    pub(crate) key_span: Range<usize>,
    pub(crate) value: Node,
}

/// Why a file could not be read, and where. Never quotes the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub(crate) line: usize,
    pub(crate) col: usize,
    pub(crate) what: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.col, self.what)
    }
}

/// What the file's client accepts beyond RFC 8259 (the JSON flavour of its config file; not to
/// be confused with an MCP protocol revision).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flavour {
    /// `//` and `/* */` comments.
    pub comments: bool,
    /// A comma before `]` or `}`.
    pub trailing_commas: bool,
}

impl Flavour {
    pub(crate) const STRICT: Flavour = Flavour {
        comments: false,
        trailing_commas: false,
    };
}

impl Node {
    /// The member `key` of an object.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Object(members) => members.iter().find(|m| m.key == key).map(|m| &m.value),
            _ => None,
        }
    }
    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::String(s) => Some(s),
            _ => None,
        }
    }
    pub(crate) fn as_bool(&self) -> Option<bool> {
        match &self.kind {
            Kind::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub(crate) fn members(&self) -> Option<&[Member]> {
        match &self.kind {
            Kind::Object(m) => Some(m),
            _ => None,
        }
    }
    pub(crate) fn elements(&self) -> Option<&[Node]> {
        match &self.kind {
            Kind::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The value as serde_json sees it (numbers read from their own bytes), for checking an edit.
    pub fn to_value(&self, text: &str) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            Kind::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|m| (m.key.clone(), m.value.to_value(text)))
                    .collect(),
            ),
            Kind::Array(items) => Value::Array(items.iter().map(|n| n.to_value(text)).collect()),
            Kind::String(s) => Value::String(s.clone()),
            Kind::Number => text
                .get(self.span.clone())
                .and_then(|raw| serde_json::from_str(raw).ok())
                .unwrap_or(Value::Null),
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Null => Value::Null,
        }
    }
}

/// Parses a whole file: one value, surrounded only by whitespace (and comments, in JSONC).
pub fn parse(text: &str, flavour: Flavour) -> Result<Node, ParseError> {
    let mut p = Parser {
        bytes: text.as_bytes(),
        pos: 0,
        flavour,
    };
    if p.bytes.starts_with(b"\xEF\xBB\xBF") {
        p.pos = 3;
    }
    p.skip_ws()?;
    let node = p.value(0)?;
    p.skip_ws()?;
    if p.pos != p.bytes.len() {
        return Err(p.error("more text after the end of the JSON value"));
    }
    Ok(node)
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
    flavour: Flavour,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> ParseError {
        self.error_at(self.pos, what)
    }

    fn error_at(&self, at: usize, what: &str) -> ParseError {
        let before = self.bytes.get(..at).unwrap_or(self.bytes);
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map(|i| i + 1)
            .unwrap_or(0);
        let col = before
            .get(line_start..)
            .map(|s| String::from_utf8_lossy(s).chars().count())
            .unwrap_or(0)
            + 1;
        ParseError {
            line,
            col,
            what: what.to_string(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) -> Result<(), ParseError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.flavour.comments => match self.bytes.get(self.pos + 1) {
                    Some(b'/') => {
                        while let Some(b) = self.peek() {
                            if b == b'\n' {
                                break;
                            }
                            self.pos += 1;
                        }
                    }
                    Some(b'*') => {
                        let start = self.pos;
                        self.pos += 2;
                        loop {
                            match self.peek() {
                                None => {
                                    return Err(self.error_at(start, "a comment never ends"));
                                }
                                Some(b'*') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                                    self.pos += 2;
                                    break;
                                }
                                Some(_) => self.pos += 1,
                            }
                        }
                    }
                    _ => return Err(self.error("unexpected '/'")),
                },
                Some(b'/') => {
                    return Err(self.error("a comment, which this client's JSON does not allow"));
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, ParseError> {
        if depth >= limits::JSON_DEPTH_MAX {
            return Err(self.error("nested too deeply"));
        }
        let start = self.pos;
        let kind = match self.peek() {
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => Kind::String(self.string()?),
            Some(b't') => self.literal(b"true", Kind::Bool(true))?,
            Some(b'f') => self.literal(b"false", Kind::Bool(false))?,
            Some(b'n') => self.literal(b"null", Kind::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(_) => return Err(self.error("expected a JSON value")),
            None => return Err(self.error("the file ends where a value should be")),
        };
        Ok(Node {
            span: start..self.pos,
            kind,
        })
    }

    fn literal(&mut self, word: &[u8], kind: Kind) -> Result<Kind, ParseError> {
        if self.bytes.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(kind)
        } else {
            Err(self.error("expected a JSON value"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Kind, ParseError> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("a number without digits")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error("a number without digits after '.'"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("a number without an exponent"));
            }
        }
        Ok(Kind::Number)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        let start = self.pos;
        // Past the opening quote; the one decoder refuses lone surrogates, as `String` must.
        let decoded = decode_string_body(self.bytes, start + 1, LoneSurrogates::Refuse);
        let (out, end) = decoded.map_err(|e| match e {
            EscapeError::Unterminated | EscapeError::UnterminatedEscape => {
                self.error_at(start, "a string never ends")
            }
            EscapeError::BadHex { at } => self.error_at(at, "a \\u escape without four hex digits"),
            EscapeError::LoneSurrogate { at } => {
                self.error_at(at, "a lone surrogate in a \\u escape")
            }
            EscapeError::UnknownEscape { at } => self.error_at(at, "an unknown escape in a string"),
            EscapeError::ControlCharacter { at } => {
                self.error_at(at, "a control character inside a string")
            }
        })?;
        self.pos = end;
        String::from_utf8(out).map_err(|_| self.error_at(start, "a string that is not UTF-8"))
    }

    fn object(&mut self, depth: usize) -> Result<Kind, ParseError> {
        self.pos += 1;
        let mut members: Vec<Member> = Vec::new();
        self.skip_ws()?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Kind::Object(members));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a key in double quotes"));
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = key_start..self.pos;
            if members.iter().any(|m| m.key == key) {
                return Err(self.error_at(
                    key_start,
                    "a key repeated in the same object (which copy a client reads is unknowable)",
                ));
            }
            self.skip_ws()?;
            if self.peek() != Some(b':') {
                return Err(self.error("expected ':' after a key"));
            }
            self.pos += 1;
            self.skip_ws()?;
            let value = self.value(depth + 1)?;
            members.push(Member {
                key,
                key_span,
                value,
            });
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws()?;
                    if self.peek() == Some(b'}') {
                        if !self.flavour.trailing_commas {
                            return Err(self.error("a comma before '}'"));
                        }
                        self.pos += 1;
                        return Ok(Kind::Object(members));
                    }
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Kind::Object(members));
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Kind, ParseError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws()?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Kind::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws()?;
                    if self.peek() == Some(b']') {
                        if !self.flavour.trailing_commas {
                            return Err(self.error("a comma before ']'"));
                        }
                        self.pos += 1;
                        return Ok(Kind::Array(items));
                    }
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Kind::Array(items));
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }
}
