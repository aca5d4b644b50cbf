//! The precedence table's case parser (`tests/policy/precedence.txt`), shared with tests.

use crate::policy::scope::{Effect, Scope};

/// One line of the precedence table: rules in insertion order (rule 1 is the oldest), the
/// expected effect, and the 1-based index of the winning rule (0 = no rule applies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrecedenceCase {
    pub rules: Vec<(Effect, Scope)>,
    pub expected: Effect,
    pub winner: usize,
}

#[cfg(test)]
impl PrecedenceCase {
    /// The request every case is decided for: agent `A`, connector `C`, tool `T`.
    pub(crate) const REQUEST: crate::policy::decide::CallRequest<'static> =
        crate::policy::decide::CallRequest {
            agent: Some("A"),
            connector: "C",
            tool: "T",
        };
}

/// Reads a table scope: `[agent:](tool|*)[@connector]`, e.g. `T`, `A:*@C`.
fn parse_table_scope(token: &str) -> Result<Scope, String> {
    let (agent, rest) = match token.split_once(':') {
        Some((a, rest)) => (Some(a), rest),
        None => (None, token),
    };
    let (tool, connector) = match rest.split_once('@') {
        Some((t, c)) => (t, Some(c)),
        None => (rest, None),
    };
    let part = |what: &str, v: &str| {
        if v.is_empty() {
            Err(format!("empty {what} in scope {token:?}"))
        } else {
            Ok(v.to_string())
        }
    };
    Ok(Scope {
        agent: agent.map(|a| part("agent", a)).transpose()?,
        tool: if tool == "*" {
            None
        } else {
            Some(part("tool", tool)?)
        },
        connector: connector.map(|c| part("connector", c)).transpose()?,
    })
}

/// Parses one line of `tests/policy/precedence.txt`:
/// `<effect> <scope> ; <effect> <scope> … => <effect> <winner index>`.
/// `None` for blank lines, `#` comments and the `request A C T` line (the request is fixed,
/// see `PrecedenceCase::REQUEST`; any other request line is an error).
pub fn parse_precedence_case(line: &str) -> Option<Result<PrecedenceCase, String>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    if let Some(request) = line.strip_prefix("request") {
        let words: Vec<&str> = request.split_whitespace().collect();
        if words == ["A", "C", "T"] {
            return None;
        }
        return Some(Err(format!(
            "the request is fixed as `request A C T`, not {line:?}"
        )));
    }
    Some(parse_case_line(line))
}

fn parse_case_line(line: &str) -> Result<PrecedenceCase, String> {
    let (rules_text, expected_text) = line
        .split_once("=>")
        .ok_or_else(|| format!("no `=>` in {line:?}"))?;
    let mut rules = Vec::new();
    for rule in rules_text.split(';') {
        let words: Vec<&str> = rule.split_whitespace().collect();
        let [effect, scope] = words.as_slice() else {
            return Err(format!("rule {rule:?} is not `<effect> <scope>`"));
        };
        let effect = Effect::parse(effect).ok_or_else(|| format!("unknown effect {effect:?}"))?;
        rules.push((effect, parse_table_scope(scope)?));
    }
    let words: Vec<&str> = expected_text.split_whitespace().collect();
    let [effect, winner] = words.as_slice() else {
        return Err(format!(
            "expectation {expected_text:?} is not `<effect> <winner>`"
        ));
    };
    let expected = Effect::parse(effect).ok_or_else(|| format!("unknown effect {effect:?}"))?;
    let winner: usize = winner
        .parse()
        .map_err(|_| format!("winner {winner:?} is not a number"))?;
    if winner > rules.len() {
        return Err(format!(
            "winner {winner} but only {} rules in {line:?}",
            rules.len()
        ));
    }
    Ok(PrecedenceCase {
        rules,
        expected,
        winner,
    })
}
