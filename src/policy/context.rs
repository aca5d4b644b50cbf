//! The Cedar `context` of one call, built by the daemon from the call's JSON arguments and its
//! own clock.
//!
//! Owns: reading the raw `params.arguments` text with a small strict JSON reader of its own
//! (so a number keeps its exact text, which `serde_json` without `arbitrary_precision` would
//! round), mapping each value to a `RestrictedExpression`, and the time attributes.
//! Must never: hand argument text to `Context::from_json_value` (it honours `__entity` and
//! `__extn` escapes, so an agent could forge entity references), guess at a value it cannot map,
//! or evaluate part of an argument tree: past a cap the whole tree is refused.
//! It does no I/O.

use cedar_policy::{Context, RestrictedExpression};
use chrono::{DateTime, Datelike, FixedOffset, Timelike, Utc};

use crate::limits::{ARGUMENTS_DEPTH_MAX, ARGUMENTS_VALUES_MAX};
use crate::mcp::json::escape::{EscapeError, LoneSurrogates, decode_string_body};
use crate::policy::budget::SessionCounts;

/// Fractional digits Cedar's `decimal` holds.
const DECIMAL_DIGITS: usize = 4;

/// Why a call's arguments could not be turned into Cedar values. A rule that reads
/// `context.arguments` is then never evaluated half-blind: see `PolicySet::decide_with`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArgumentsProblem {
    /// The relay did not send them (larger than `limits::ARGUMENTS_BYTES_MAX`).
    Omitted,
    /// Nested deeper than `limits::ARGUMENTS_DEPTH_MAX`.
    TooDeep,
    /// More than `limits::ARGUMENTS_VALUES_MAX` values.
    TooMany,
    /// Not a JSON object, or not JSON this reader accepts (with the reason).
    Unreadable(String),
}

impl std::fmt::Display for ArgumentsProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgumentsProblem::Omitted => f.write_str(
                "the arguments were too large to send to the daemon, so they were not read",
            ),
            ArgumentsProblem::TooDeep => write!(
                f,
                "the arguments nest deeper than {ARGUMENTS_DEPTH_MAX} levels, so they were not read"
            ),
            ArgumentsProblem::TooMany => write!(
                f,
                "the arguments hold more than {ARGUMENTS_VALUES_MAX} values, so they were not read"
            ),
            ArgumentsProblem::Unreadable(why) => write!(f, "the arguments are unreadable: {why}"),
        }
    }
}

/// One argument value, mapped. `Null` only exists while reading: it is dropped from records and
/// sets, so `context has arguments.x` is false for `"x": null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArgValue {
    Null,
    Bool(bool),
    Long(i64),
    String(String),
    /// Cedar `decimal` literal text, e.g. `1.5`.
    Decimal(String),
    Set(Vec<ArgValue>),
    Record(Vec<(String, ArgValue)>),
}

impl ArgValue {
    fn into_expr(self) -> Option<RestrictedExpression> {
        Some(match self {
            ArgValue::Null => return None,
            ArgValue::Bool(b) => RestrictedExpression::new_bool(b),
            ArgValue::Long(i) => RestrictedExpression::new_long(i),
            ArgValue::String(s) => RestrictedExpression::new_string(s),
            ArgValue::Decimal(d) => RestrictedExpression::new_decimal(d),
            ArgValue::Set(items) => {
                RestrictedExpression::new_set(items.into_iter().filter_map(ArgValue::into_expr))
            }
            ArgValue::Record(members) => record(members)?,
        })
    }
}

/// A record from members; keys are plain strings (a key `__entity` is just a key). `None` only
/// if Cedar refuses the record, which it does for duplicate keys (the reader refuses those first).
fn record(members: Vec<(String, ArgValue)>) -> Option<RestrictedExpression> {
    RestrictedExpression::new_record(
        members
            .into_iter()
            .filter_map(|(k, v)| v.into_expr().map(|e| (k, e))),
    )
    .ok()
}

/// Reads the raw arguments text (`None` = the call had no arguments: an empty record).
pub(crate) fn read_arguments(raw: Option<&str>) -> Result<ArgValue, ArgumentsProblem> {
    let Some(raw) = raw else {
        return Ok(ArgValue::Record(Vec::new()));
    };
    let mut r = Reader {
        bytes: raw.as_bytes(),
        pos: 0,
        values: 0,
    };
    r.ws();
    let value = r.value(1)?;
    r.ws();
    if r.pos != r.bytes.len() {
        return Err(unreadable("text after the value"));
    }
    match value {
        ArgValue::Record(_) => Ok(value),
        ArgValue::Null => Ok(ArgValue::Record(Vec::new())),
        _ => Err(unreadable("the arguments are not a JSON object")),
    }
}

fn unreadable(why: &str) -> ArgumentsProblem {
    ArgumentsProblem::Unreadable(why.to_string())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    values: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Result<(), ArgumentsProblem> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(unreadable("malformed JSON"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<ArgValue, ArgumentsProblem> {
        self.values += 1;
        if self.values > ARGUMENTS_VALUES_MAX {
            return Err(ArgumentsProblem::TooMany);
        }
        match self.peek() {
            Some(b'{') | Some(b'[') if depth > ARGUMENTS_DEPTH_MAX => {
                Err(ArgumentsProblem::TooDeep)
            }
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(ArgValue::String),
            Some(b't') => self.literal(b"true", ArgValue::Bool(true)),
            Some(b'f') => self.literal(b"false", ArgValue::Bool(false)),
            Some(b'n') => self.literal(b"null", ArgValue::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(unreadable("malformed JSON")),
        }
    }

    fn literal(&mut self, word: &[u8], v: ArgValue) -> Result<ArgValue, ArgumentsProblem> {
        if self.bytes.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(unreadable("malformed JSON"))
        }
    }

    fn object(&mut self, depth: usize) -> Result<ArgValue, ArgumentsProblem> {
        self.eat(b'{')?;
        let mut members: Vec<(String, ArgValue)> = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(ArgValue::Record(members));
        }
        loop {
            self.ws();
            let key = self.string()?;
            if members.iter().any(|(k, _)| *k == key) {
                return Err(unreadable("a key is repeated"));
            }
            self.ws();
            self.eat(b':')?;
            self.ws();
            let v = self.value(depth + 1)?;
            members.push((key, v));
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(ArgValue::Record(members));
                }
                _ => return Err(unreadable("malformed JSON")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<ArgValue, ArgumentsProblem> {
        self.eat(b'[')?;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(ArgValue::Set(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(ArgValue::Set(items));
                }
                _ => return Err(unreadable("malformed JSON")),
            }
        }
    }

    fn string(&mut self) -> Result<String, ArgumentsProblem> {
        self.eat(b'"')?;
        // The one decoder, refusing lone surrogates as the relay's own name reading does.
        let decoded = decode_string_body(self.bytes, self.pos, LoneSurrogates::Refuse);
        let (out, end) = decoded.map_err(|e| match e {
            EscapeError::Unterminated => unreadable("an unterminated string"),
            EscapeError::UnterminatedEscape | EscapeError::UnknownEscape { .. } => {
                unreadable("a bad escape")
            }
            EscapeError::BadHex { .. } => unreadable("a bad \\u escape"),
            EscapeError::LoneSurrogate { .. } => unreadable("a lone surrogate"),
            EscapeError::ControlCharacter { .. } => unreadable("a control character in a string"),
        })?;
        self.pos = end;
        String::from_utf8(out).map_err(|_| unreadable("a string that is not UTF-8"))
    }

    fn number(&mut self) -> Result<ArgValue, ArgumentsProblem> {
        let start = self.pos;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.pos += 1;
        }
        let text = self
            .bytes
            .get(start..self.pos)
            .and_then(|t| std::str::from_utf8(t).ok())
            .unwrap_or("");
        map_number(text).ok_or_else(|| unreadable("a malformed number"))
    }
}

/// Maps the exact JSON text of a number (`None` if it is not RFC 8259 number syntax):
/// an integer in i64 is a `Long`; any other integer is its text; a number with a fraction or an
/// exponent is a `decimal` when it has at most four fractional digits and fits Cedar's range,
/// else its text.
pub(crate) fn map_number(text: &str) -> Option<ArgValue> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (
            unsigned.get(..i)?,
            Some(unsigned.get(i + 1..)?.parse::<i64>().ok()?),
        ),
        None => (unsigned, None),
    };
    let (int_part, frac_part) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let digits_ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits_ok(int_part)
        || (int_part.len() > 1 && int_part.starts_with('0'))
        || frac_part.is_some_and(|f| !digits_ok(f))
    {
        return None;
    }
    if frac_part.is_none() && exponent.is_none() {
        return Some(match text.parse::<i64>() {
            Ok(i) => ArgValue::Long(i),
            Err(_) => ArgValue::String(text.to_string()),
        });
    }
    Some(
        decimal_text(
            negative,
            int_part,
            frac_part.unwrap_or(""),
            exponent.unwrap_or(0),
        )
        .map_or_else(|| ArgValue::String(text.to_string()), ArgValue::Decimal),
    )
}

/// The Cedar decimal literal for `±int.frac × 10^exp`, if it is exact with four fractional
/// digits and within Cedar's range (i64 / 10^4).
fn decimal_text(negative: bool, int_part: &str, frac: &str, exp: i64) -> Option<String> {
    let joined = format!("{int_part}{frac}");
    let mut digits = joined.trim_start_matches('0').to_string();
    // value = digits × 10^(−scale)
    let mut scale = i64::try_from(frac.len()).ok()?.checked_sub(exp)?;
    if digits.is_empty() {
        scale = 0;
    }
    while scale > 0 && digits.ends_with('0') {
        digits.pop();
        scale -= 1;
    }
    if scale > i64::try_from(DECIMAL_DIGITS).ok()? {
        return None;
    }
    if scale < 0 {
        let zeros = usize::try_from(-scale).ok()?;
        if digits.len().saturating_add(zeros) > 20 {
            return None;
        }
        digits.push_str(&"0".repeat(zeros));
        scale = 0;
    }
    if digits.len() > 24 {
        return None;
    }
    let units: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let places = u32::try_from(i64::try_from(DECIMAL_DIGITS).ok()? - scale).ok()?;
    let magnitude = units.checked_mul(10i128.checked_pow(places)?)?;
    let signed = if negative { -magnitude } else { magnitude };
    if signed > i128::from(i64::MAX) || signed < i128::from(i64::MIN) {
        return None;
    }
    let sign = if signed < 0 { "-" } else { "" };
    let abs = signed.unsigned_abs();
    let fraction = format!("{:04}", abs % 10_000);
    let fraction = fraction.trim_end_matches('0');
    let fraction = if fraction.is_empty() { "0" } else { fraction };
    Some(format!("{sign}{}.{fraction}", abs / 10_000))
}

/// What the daemon's clock says, in UTC and in the local offset used for `hour` and `weekday`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Clock {
    pub now: DateTime<FixedOffset>,
}

impl Clock {
    /// The system clock, in the system's local offset.
    pub(crate) fn system() -> Clock {
        Clock {
            now: chrono::Local::now().fixed_offset(),
        }
    }

    /// A fixed instant (tests, `policy test` cases, the daemon's `HOLDCALL_CLOCK`): an RFC 3339
    /// timestamp whose offset is the "local" one.
    pub(crate) fn parse(rfc3339: &str) -> Option<Clock> {
        DateTime::parse_from_rfc3339(rfc3339)
            .ok()
            .map(|now| Clock { now })
    }

    /// Cedar `datetime` text of the instant in UTC, to the millisecond.
    pub(crate) fn cedar_datetime(&self) -> String {
        self.now
            .with_timezone(&Utc)
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string()
    }

    pub(crate) fn hour(&self) -> i64 {
        i64::from(self.now.hour())
    }

    /// "Mon" … "Sun".
    pub(crate) fn weekday(&self) -> &'static str {
        match self.now.weekday() {
            chrono::Weekday::Mon => "Mon",
            chrono::Weekday::Tue => "Tue",
            chrono::Weekday::Wed => "Wed",
            chrono::Weekday::Thu => "Thu",
            chrono::Weekday::Fri => "Fri",
            chrono::Weekday::Sat => "Sat",
            chrono::Weekday::Sun => "Sun",
        }
    }
}

/// What the pins say about the called tool's definition (`context.definition`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct DefinitionState {
    /// `pinned` (as accepted), `changed` (differs from the pinned one), `new` (first pinned in
    /// this session) or `unknown` (never listed through Holdcall).
    pub state: String,
    /// SHA-256 of the canonical definition the model was shown ("" when unknown).
    pub hash: String,
}

impl DefinitionState {
    pub(crate) const PINNED: &'static str = "pinned";
    pub(crate) const CHANGED: &'static str = "changed";
    pub(crate) const NEW: &'static str = "new";
    pub(crate) const UNKNOWN: &'static str = "unknown";

    pub(crate) fn unknown() -> DefinitionState {
        DefinitionState {
            state: Self::UNKNOWN.into(),
            hash: String::new(),
        }
    }

    pub(crate) fn is_changed(&self) -> bool {
        self.state == Self::CHANGED
    }
}

/// The context of one call: its arguments (or why they could not be read) and the clock.
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    pub arguments: Result<ArgValue, ArgumentsProblem>,
    pub clock: Clock,
    /// The session's counts before this call (`context.session`); zeros where there is no
    /// session (`policy explain`, unless a `policy test` case gives them).
    pub session: SessionCounts,
    /// What the pins say about the tool's definition (`unknown` outside a session).
    pub definition: DefinitionState,
}

impl CallContext {
    /// From what the relay sent: the raw arguments text, or that it omitted them.
    pub(crate) fn from_call(arguments: Option<&str>, omitted: bool, clock: Clock) -> CallContext {
        CallContext {
            arguments: if omitted {
                Err(ArgumentsProblem::Omitted)
            } else {
                read_arguments(arguments)
            },
            clock,
            session: SessionCounts::default(),
            definition: DefinitionState::unknown(),
        }
    }

    /// The same context, with what the pins say about the tool.
    pub(crate) fn with_definition(mut self, definition: DefinitionState) -> CallContext {
        self.definition = definition;
        self
    }

    /// The same context, with the session's counts before this call.
    pub(crate) fn with_session(mut self, session: SessionCounts) -> CallContext {
        self.session = session;
        self
    }

    /// No arguments, at the Unix epoch: what `decide` uses when a caller has no context.
    pub(crate) fn empty() -> CallContext {
        CallContext {
            arguments: Ok(ArgValue::Record(Vec::new())),
            clock: Clock {
                now: DateTime::<Utc>::UNIX_EPOCH.fixed_offset(),
            },
            session: SessionCounts::default(),
            definition: DefinitionState::unknown(),
        }
    }

    /// The whole Cedar context (what the fuzzer and the tests build). Unreadable arguments become an empty record here; the policy
    /// wrapper keeps every rule that reads them from deciding (see `PolicySet::decide_with`).
    #[cfg(any(test, feature = "fuzz"))]
    pub(crate) fn to_cedar(&self) -> Result<Context, String> {
        self.to_cedar_for(&ContextReads::whole())
    }

    /// The Cedar context with the attributes `reads` names: what a set's rules can see.
    pub(crate) fn to_cedar_for(&self, reads: &ContextReads) -> Result<Context, String> {
        let mut pairs: Vec<(String, RestrictedExpression)> = Vec::new();
        if reads.reads("arguments") {
            let arguments = match &self.arguments {
                Ok(ArgValue::Record(members)) => record(members.clone()),
                _ => record(Vec::new()),
            }
            .ok_or_else(|| "the arguments could not be made a Cedar record".to_string())?;
            pairs.push(("arguments".to_string(), arguments));
        }
        if reads.reads("now") {
            pairs.push((
                "now".to_string(),
                RestrictedExpression::new_datetime(self.clock.cedar_datetime()),
            ));
        }
        if reads.reads("hour") {
            pairs.push((
                "hour".to_string(),
                RestrictedExpression::new_long(self.clock.hour()),
            ));
        }
        if reads.reads("weekday") {
            pairs.push((
                "weekday".to_string(),
                RestrictedExpression::new_string(self.clock.weekday().to_string()),
            ));
        }
        if reads.reads("session") {
            pairs.push(("session".to_string(), session_record(&self.session)?));
        }
        if reads.reads("definition") {
            pairs.push((
                "definition".to_string(),
                RestrictedExpression::new_record([
                    (
                        "state".to_string(),
                        RestrictedExpression::new_string(self.definition.state.clone()),
                    ),
                    (
                        "hash".to_string(),
                        RestrictedExpression::new_string(self.definition.hash.clone()),
                    ),
                ])
                .map_err(|e| e.to_string())?,
            ));
        }
        if pairs.is_empty() {
            return Ok(Context::empty());
        }
        Context::from_pairs(pairs).map_err(|e| e.to_string())
    }
}

/// Which of the context's attributes a set's rules can read. Cedar shows a policy only what it
/// names, so an attribute no rule names changes no answer when it is left out, and leaving it
/// out saves building it: `now` alone, a datetime Cedar parses with a regular expression, was
/// most of the cost of a call's context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ContextReads {
    /// A rule uses `context` other than by naming an attribute (compares it, passes it whole):
    /// every attribute is given.
    whole: bool,
    /// The top-level attributes named by `context.a…` or `context has a…`.
    names: std::collections::BTreeSet<String>,
}

impl ContextReads {
    /// Every attribute.
    #[cfg(any(test, feature = "fuzz"))]
    pub(crate) fn whole() -> ContextReads {
        ContextReads {
            whole: true,
            names: std::collections::BTreeSet::new(),
        }
    }

    /// Adds what one policy reads: `None` is a policy that uses the context whole.
    pub(crate) fn add(&mut self, reads: Option<std::collections::BTreeSet<String>>) {
        match reads {
            Some(names) => self.names.extend(names),
            None => self.whole = true,
        }
    }

    pub(crate) fn reads(&self, attribute: &str) -> bool {
        self.whole || self.names.contains(attribute)
    }
}

/// `context.session`: the session's counts as Cedar `Long`s.
fn session_record(s: &SessionCounts) -> Result<RestrictedExpression, String> {
    RestrictedExpression::new_record([
        ("calls".to_string(), RestrictedExpression::new_long(s.calls)),
        (
            "allowed".to_string(),
            RestrictedExpression::new_long(s.allowed),
        ),
        (
            "refused".to_string(),
            RestrictedExpression::new_long(s.refused),
        ),
        (
            "tool_calls".to_string(),
            RestrictedExpression::new_long(s.tool_calls),
        ),
    ])
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_map_to_long_decimal_or_their_text() {
        let cases = [
            ("0", ArgValue::Long(0)),
            ("-12", ArgValue::Long(-12)),
            ("9223372036854775807", ArgValue::Long(i64::MAX)),
            (
                "9223372036854775808",
                ArgValue::String("9223372036854775808".into()),
            ),
            ("1.5", ArgValue::Decimal("1.5".into())),
            ("-0.0001", ArgValue::Decimal("-0.0001".into())),
            ("1.00000", ArgValue::Decimal("1.0".into())),
            ("0.00001", ArgValue::String("0.00001".into())),
            ("2e3", ArgValue::Decimal("2000.0".into())),
            ("1.25E-2", ArgValue::Decimal("0.0125".into())),
            ("1e300", ArgValue::String("1e300".into())),
            (
                "922337203685477.5807",
                ArgValue::Decimal("922337203685477.5807".into()),
            ),
            (
                "922337203685477.5808",
                ArgValue::String("922337203685477.5808".into()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(map_number(text), Some(want), "{text}");
        }
        for bad in ["01", "1.", ".5", "1e", "--1", "+1"] {
            assert_eq!(map_number(bad), None, "{bad}");
        }
    }

    #[test]
    fn null_is_absent_and_escapes_are_plain_records() {
        let v = read_arguments(Some(
            r#"{"a":null,"e":{"__entity":{"type":"Agent","id":"admin"}},"x":{"__extn":{"fn":"ip","arg":"1.2.3.4"}},"s":[1,null,"t"]}"#,
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let ArgValue::Record(members) = v else {
            panic!()
        };
        assert_eq!(members.len(), 4);
        assert!(matches!(&members[1].1, ArgValue::Record(m) if m[0].0 == "__entity"));
        let ctx = CallContext {
            arguments: Ok(ArgValue::Record(members)),
            clock: CallContext::empty().clock,
            session: SessionCounts::default(),
            definition: DefinitionState::unknown(),
        };
        assert!(ctx.to_cedar().is_ok());
    }

    #[test]
    fn a_unicode_escape_is_exactly_four_hex_digits_as_the_relay_reads_it() {
        // `u32::from_str_radix` takes "+041"; the relay's scanner does not, and neither may the
        // context (policy test and explain would otherwise read text the relay refuses).
        assert!(matches!(
            read_arguments(Some(r#"{"a":"\u+041"}"#)),
            Err(ArgumentsProblem::Unreadable(_))
        ));
        assert!(read_arguments(Some(r#"{"a":"\u0041"}"#)).is_ok());
    }

    #[test]
    fn caps_refuse_the_whole_tree() {
        let nest = |n: usize| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
        let deep = nest(ARGUMENTS_DEPTH_MAX + 1);
        assert_eq!(read_arguments(Some(&deep)), Err(ArgumentsProblem::TooDeep));
        let ok = nest(ARGUMENTS_DEPTH_MAX);
        assert!(read_arguments(Some(&ok)).is_ok());
        let many = format!("{{\"a\":[{}]}}", vec!["1"; ARGUMENTS_VALUES_MAX].join(","));
        assert_eq!(read_arguments(Some(&many)), Err(ArgumentsProblem::TooMany));
        assert!(matches!(
            read_arguments(Some("[1]")),
            Err(ArgumentsProblem::Unreadable(_))
        ));
        assert!(matches!(
            read_arguments(Some("{\"a\":1,\"a\":2}")),
            Err(ArgumentsProblem::Unreadable(_))
        ));
    }

    #[test]
    fn the_clock_gives_utc_now_and_local_hour_and_weekday() {
        let c = Clock::parse("2026-01-05T19:30:00+01:00").unwrap_or_else(|| panic!());
        assert_eq!(c.cedar_datetime(), "2026-01-05T18:30:00.000Z");
        assert_eq!(c.hour(), 19);
        assert_eq!(c.weekday(), "Mon");
    }
}
