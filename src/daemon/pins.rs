//! What the daemon does with the tools a server listed: pins them (through the writer, each
//! change journaled with its row), says which to hide when the connector's hide-denied is on,
//! what the pins say about a called tool (`context.definition`), the drift guard beside the
//! rules, and the management requests `tools.accept` and `setting.set`.
//!
//! Must never: hide a tool the rules might allow or ask about (only an outright deny), hide
//! anything before `tools.hidden` is journaled for the session, or let the drift guard loosen
//! a decision (it only holds or refuses a call the rules would let through).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::daemon::{
    Session, Shared,
    dispatch::{ManageNext, Next, SessionNext, error, one_way, violation},
    writer::Op,
};
use crate::ipc::{ManageResponse, SessionResponse};
use crate::journal::{Fields, Kind, PinRow};
use crate::mcp::tools::ToolDefinition;
use crate::policy::context::{CallContext, DefinitionState};
use crate::policy::{CallRequest, Decision, Effect};

/// The setting that says what the drift guard does with a call to a changed tool.
pub(crate) const DRIFT_KEY: &str = "tools.drift";
/// Prefix of each connector's hide-denied setting (`hide-denied.<connector>`).
pub(crate) const HIDE_PREFIX: &str = "hide-denied.";
/// The policy id a drift guard decision is journaled with.
pub(crate) const DRIFT_GUARD_ID: &str = "drift-guard";

/// The pins in force, by connector then tool (a cache of the `tool_pins` table).
pub(crate) type Pins = HashMap<String, HashMap<String, PinRow>>;

pub(crate) fn pins_by_connector(rows: Vec<PinRow>) -> Pins {
    let mut out: Pins = HashMap::new();
    for p in rows {
        out.entry(p.connector.clone())
            .or_default()
            .insert(p.tool.clone(), p);
    }
    out
}

/// What a session saw of its server's tools.
#[derive(Debug, Default)]
pub(crate) struct Listed {
    /// Tool → the hash of the definition this session's last listing held.
    pub(crate) hashes: HashMap<String, String>,
    /// Tools first pinned in this session.
    pub(crate) new: HashSet<String>,
    /// Whether `tools.hidden` was journaled for this session.
    pub(crate) hidden_journaled: bool,
}

/// The drift guard in force: `ask` unless a person chose otherwise.
pub(crate) fn drift_guard(settings: &BTreeMap<String, String>) -> Effect {
    settings
        .get(DRIFT_KEY)
        .and_then(|v| Effect::parse(v))
        .unwrap_or(Effect::Ask)
}

pub(crate) fn current_drift_guard(state: &Shared) -> Effect {
    match state.settings.read() {
        Ok(s) => drift_guard(&s),
        Err(_) => Effect::Deny,
    }
}

fn hide_denied_on(state: &Shared, connector: &str) -> bool {
    state
        .settings
        .read()
        .map(|s| {
            s.get(&format!("{HIDE_PREFIX}{connector}"))
                .map(String::as_str)
                == Some("on")
        })
        .unwrap_or(false)
}

/// What the pins say about `tool` in session `s`: `changed` when the definition the session was
/// shown (else the last one listed) is not the accepted one, `new` when it was first pinned in
/// this session, `pinned`, or `unknown` when it was never listed.
pub(crate) fn definition_of(state: &Shared, s: &Session, tool: &str) -> DefinitionState {
    let listed = s.listed.hashes.get(tool).cloned();
    let Ok(pins) = state.pins.read() else {
        return DefinitionState::unknown();
    };
    let Some(row) = pins.get(&s.connector).and_then(|m| m.get(tool)) else {
        return DefinitionState {
            state: DefinitionState::UNKNOWN.into(),
            hash: listed.unwrap_or_default(),
        };
    };
    let hash = listed.unwrap_or_else(|| row.seen_hash.clone());
    let word = if hash != row.hash {
        DefinitionState::CHANGED
    } else if s.listed.new.contains(tool) {
        DefinitionState::NEW
    } else {
        DefinitionState::PINNED
    };
    DefinitionState {
        state: word.into(),
        hash,
    }
}

/// The rules' decision with the drift guard beside it: a call to a tool whose definition changed
/// since it was pinned gets at least the guard's effect (held for a person by default). The
/// guard never loosens a decision.
pub(crate) fn guarded(guard: Effect, def: &DefinitionState, tool: &str, d: Decision) -> Decision {
    if !def.is_changed() || guard == Effect::Allow || d.effect >= guard {
        return d;
    }
    let short: String = def.hash.chars().take(12).collect();
    Decision {
        effect: guard,
        policy_id: Some(DRIFT_GUARD_ID.into()),
        reason: format!(
            "the definition of {tool} changed since it was pinned (now {short}…), and the drift \
             guard {} such calls (the rules alone: {}); after a person has looked, `holdcall \
             tools accept` re-pins it",
            match guard {
                Effect::Deny => "refuses",
                _ => "holds for a person",
            },
            d.reason
        ),
    }
}

/// `tools.listed`: pins the listing, then answers which tools to hide.
pub(crate) async fn tools_listed(
    state: &Arc<Shared>,
    owned: &HashSet<String>,
    session_id: String,
    tools: Vec<ToolDefinition>,
    (unreadable, complete, too_large): (usize, bool, bool),
) -> SessionNext {
    if !owned.contains(&session_id) {
        return violation("this connection did not open that session");
    }
    let Some((connector, agent)) = state.sessions.lock().ok().and_then(|s| {
        s.get(&session_id)
            .map(|s| (s.connector.clone(), s.agent.clone()))
    }) else {
        return violation("that session has ended");
    };
    let anomaly = |what: &str| Fields {
        session_id: Some(session_id.clone()),
        anomaly: Some(what.to_string()),
        ..Fields::default()
    };
    if too_large {
        let _ = one_way(state, Kind::Anomaly, anomaly("listing_too_large")).await;
        return Next::Reply(SessionResponse::ToolsSeen { hide: Vec::new() });
    }
    if unreadable > 0 {
        let _ = one_way(state, Kind::Anomaly, anomaly("tool_definition_unreadable")).await;
    }
    if tools.iter().any(|t| {
        crate::policy::validate_tool_name(&t.name).is_err()
            || crate::ids::sha256_hex(t.canonical.as_bytes()) != t.hash
    }) {
        return violation(
            "a listed tool's name cannot be a tool's, or its hash is not its definition's",
        );
    }
    let recorded = state
        .writer
        .ask(|reply| Op::RecordListing {
            connector: connector.clone(),
            session_id: session_id.clone(),
            tools: tools.clone(),
            complete,
            reply,
        })
        .await;
    let recorded = match recorded {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return error(format!("the listing was not pinned: {e}")),
        Err(e) => return error(e.to_string()),
    };
    if let Ok(mut pins) = state.pins.write() {
        pins.insert(
            connector.clone(),
            recorded
                .pins
                .iter()
                .map(|p| (p.tool.clone(), p.clone()))
                .collect(),
        );
    }
    let already_journaled = match state.sessions.lock() {
        Ok(mut s) => match s.get_mut(&session_id) {
            Some(s) => {
                for t in &tools {
                    s.listed.hashes.insert(t.name.clone(), t.hash.clone());
                }
                s.listed.new.extend(recorded.first_seen.iter().cloned());
                s.listed.hidden_journaled
            }
            None => return violation("that session has ended"),
        },
        Err(_) => return error("the session table is unavailable"),
    };
    if !hide_denied_on(state, &connector) {
        return Next::Reply(SessionResponse::ToolsSeen { hide: Vec::new() });
    }
    let hide = denied_outright(state, &session_id, &connector, agent.as_deref(), &tools);
    if hide.is_empty() || already_journaled {
        return Next::Reply(SessionResponse::ToolsSeen { hide });
    }
    // Journaled once per session, before anything is hidden: a rewrite the journal does not
    // know of never happens.
    let fields = Fields {
        session_id: Some(session_id.clone()),
        connector: Some(connector.clone()),
        agent,
        reason: Some(format!(
            "{} of {} listed tools taken out of tools/list: the policy denies them outright \
             (hide-denied is on for {connector}); the relay forwards the listing re-serialised \
             without them for the rest of the session",
            hide.len(),
            tools.len()
        )),
        detail: Some(serde_json::json!({ "hidden": hide }).to_string()),
        ..Fields::default()
    };
    match state.writer.append(Kind::ToolsHidden, fields).await {
        Ok(_) => {
            if let Ok(mut s) = state.sessions.lock()
                && let Some(s) = s.get_mut(&session_id)
            {
                s.listed.hidden_journaled = true;
            }
            Next::Reply(SessionResponse::ToolsSeen { hide })
        }
        Err(e) => {
            tracing::warn!("not hiding denied tools: the journal entry failed: {e}");
            Next::Reply(SessionResponse::ToolsSeen { hide: Vec::new() })
        }
    }
}

/// The listed tools a call to which the rules (and the drift guard) would refuse whatever its
/// arguments.
fn denied_outright(
    state: &Shared,
    session_id: &str,
    connector: &str,
    agent: Option<&str>,
    tools: &[ToolDefinition],
) -> Vec<String> {
    let set = crate::daemon::in_force::current_policy(state);
    let guard = current_drift_guard(state);
    let Ok(sessions) = state.sessions.lock() else {
        return Vec::new();
    };
    let Some(s) = sessions.get(session_id) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter(|t| {
            let def = definition_of(state, s, &t.name);
            let req = CallRequest {
                agent,
                connector,
                tool: &t.name,
            };
            let ctx =
                CallContext::from_call(None, false, state.clock()).with_definition(def.clone());
            (def.is_changed() && guard == Effect::Deny) || set.denies_outright(&req, &ctx)
        })
        .map(|t| t.name.clone())
        .collect()
}

/// `tools.accept`: re-pins, answering what each accepted tool's definition changed.
pub(crate) async fn tools_accept(
    state: &Shared,
    connector: String,
    tool: Option<String>,
) -> ManageNext {
    if let Err(e) = crate::policy::validate_scope_name("connector", &connector) {
        return error(e.to_string());
    }
    if let Some(t) = &tool
        && let Err(e) = crate::policy::validate_tool_name(t)
    {
        return error(e.to_string());
    }
    let asked = state
        .writer
        .ask(|reply| Op::AcceptPins {
            connector: connector.clone(),
            tool,
            reply,
        })
        .await;
    match asked {
        Ok(Ok((accepted, pins))) => {
            if let Ok(mut all) = state.pins.write() {
                all.insert(
                    connector,
                    pins.into_iter().map(|p| (p.tool.clone(), p)).collect(),
                );
            }
            Next::Reply(ManageResponse::ToolsAccepted { accepted })
        }
        Ok(Err(e)) => error(format!("nothing was re-pinned: {e}")),
        Err(e) => error(e.to_string()),
    }
}

/// `setting.set`: the drift guard or a connector's hide-denied, journaled, then in force.
pub(crate) async fn setting_set(state: &Shared, key: String, value: String) -> ManageNext {
    let reason = if key == DRIFT_KEY {
        if Effect::parse(&value).is_none() {
            return error("the drift guard is ask, deny or allow");
        }
        format!(
            "the drift guard now makes a call to a tool whose definition changed since it was pinned {value}"
        )
    } else if let Some(connector) = key.strip_prefix(HIDE_PREFIX) {
        if let Err(e) = crate::policy::validate_scope_name("connector", connector) {
            return error(e.to_string());
        }
        if !matches!(value.as_str(), "on" | "off") {
            return error("hide-denied is on or off");
        }
        format!("hide-denied {value} for connector {connector}")
    } else {
        return error(format!("there is no setting {key:?}"));
    };
    // Changes serialise with policy, budget and agent changes: the guard decides calls too.
    let _rows = state.rows.lock().await;
    let unchanged = state
        .settings
        .read()
        .map(|s| {
            s.get(&key).map(String::as_str) == Some(value.as_str())
                || (!s.contains_key(&key)
                    && ((key == DRIFT_KEY && value == "ask")
                        || (key.starts_with(HIDE_PREFIX) && value == "off")))
        })
        .unwrap_or(false);
    if unchanged {
        return Next::Reply(ManageResponse::SettingChanged {
            message: format!("{key} is already {value}; nothing changed"),
            chain_seq: None,
        });
    }
    let asked = state
        .writer
        .ask(|reply| Op::ChangeSetting {
            key,
            value,
            reason: reason.clone(),
            reply,
        })
        .await;
    match asked {
        Ok(Ok((entry, all, generation))) => {
            if let Ok(mut s) = state.settings.write() {
                *s = all.into_iter().collect();
            }
            state.generation.store(generation, Ordering::Release);
            Next::Reply(ManageResponse::SettingChanged {
                message: format!("{reason} (journal entry {})", entry.chain_seq),
                chain_seq: Some(entry.chain_seq),
            })
        }
        Ok(Err(e)) => error(format!("nothing was changed: {e}")),
        Err(e) => error(e.to_string()),
    }
}
