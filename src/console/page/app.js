// Holdcall console: reads the console's JSON API with the launch token and renders five views.
// It never writes anything anywhere: every request is a GET, and no view offers a decision.
// Every text from the journal goes into the page as text (textContent), never as HTML.
"use strict";

// The token comes from the address's fragment, lives in this variable only (never a cookie,
// query or storage), and is sent in one place: api().
let token = "";
{
  const m = /^#token=([0-9a-f]{64})$/.exec(location.hash);
  if (m) {
    token = m[1];
    history.replaceState(null, "", "#overview");
  }
}

async function api(path) {
  const res = await fetch(path, {
    headers: { Authorization: "Bearer " + token },
    cache: "no-store",
  });
  if (!res.ok) {
    throw new Error(res.status + ": " + (await res.text()).trim());
  }
  return res.json();
}

// el("tag", {attr: value, class: "x", onclick: f}, child, "text", …)
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const state = {
  events: [],       // every entry read so far, oldest first (bounded)
  cursor: 0,
  snapshot: null,
  held: null,
  filters: { kind: "", decision: "", tool: "", agent: "", connector: "", text: "" },
};
const EVENTS_KEPT = 20000;

function when(t) {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d) ? t : d.toLocaleString();
}
function count(n, one, many) { return n + " " + (n === 1 ? one : many); }
function short(s, n = 8) { return s ? String(s).slice(0, n) : ""; }
function stateLabel(s) { return s ? el("span", { class: "state state-" + s }, s) : ""; }

function notice(text) {
  const n = document.getElementById("notice");
  n.hidden = !text;
  n.textContent = text || "";
}

// ----- theme --------------------------------------------------------------------------------
function currentTheme() {
  const set = document.documentElement.dataset.theme;
  if (set) return set;
  return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}
function showThemeButton() {
  const b = document.getElementById("theme");
  const dark = currentTheme() === "dark";
  b.textContent = dark ? "Light" : "Dark";
  b.setAttribute("aria-pressed", String(dark));
}
{
  const saved = localStorage.getItem("holdcall-theme");
  if (saved === "dark" || saved === "light") document.documentElement.dataset.theme = saved;
}

// ----- data -----------------------------------------------------------------------------------
async function poll() {
  if (!token) return;
  try {
    let fresh = false;
    for (;;) {
      const page = await api("/api/events?after=" + state.cursor + "&limit=1000");
      if (page.events.length) {
        state.events.push(...page.events);
        if (state.events.length > EVENTS_KEPT) state.events.splice(0, state.events.length - EVENTS_KEPT);
        fresh = true;
      }
      state.cursor = page.cursor;
      if (page.events.length < 1000) break;
    }
    if (fresh || !state.snapshot) state.snapshot = await api("/api/snapshot");
    const held = await api("/api/held");
    const heldChanged = JSON.stringify(held) !== JSON.stringify(state.held);
    state.held = held;
    showStrip();
    notice("");
    if (fresh || heldChanged) render(false);
  } catch (e) {
    notice("The console did not answer: " + e.message);
  }
}

function showStrip() {
  const strip = document.getElementById("strip");
  const a = strip.querySelector("a");
  const held = state.held;
  if (!held || !held.available) {
    strip.className = "strip";
    a.textContent = "Held calls unknown: " + (held ? held.reason : "not read yet");
    return;
  }
  const n = held.held.length;
  strip.className = n ? "strip waiting" : "strip";
  a.textContent = n === 0 ? "Nothing is waiting for you."
    : n === 1 ? "1 call is waiting for a person." : n + " calls are waiting for a person.";
}

// Session facts for entries that do not carry them (agent, connector come from session.start).
function sessionsById() {
  const m = new Map();
  for (const e of state.events) {
    if (e.kind === "session.start" && e.session_id) m.set(e.session_id, e);
  }
  return m;
}

// ----- routing ----------------------------------------------------------------------------------
function route() {
  const h = location.hash.replace(/^#/, "") || "overview";
  const [view, ...rest] = h.split("/");
  return { view, arg: rest.join("/") };
}

function render(focus) {
  const { view, arg } = route();
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.view === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const main = document.getElementById("view");
  if (!token) {
    main.replaceChildren(el("h2", {}, "This page needs the console's token"),
      el("p", {}, "Open the address `holdcall console` printed (it ends with #token=…). " +
        "The token lives only in this tab and dies with the console process."));
    return;
  }
  const views = { overview, held: heldView, journal, sessions, policy };
  const fn = views[view] || overview;
  const keep = main.querySelector("form.explain") && view === "policy" && !focus;
  if (keep) return; // do not wipe a form a person is filling in
  Promise.resolve(fn(arg)).then((nodes) => {
    // Keep the journal filters' focus while typing.
    const active = document.activeElement && document.activeElement.id;
    main.replaceChildren(...[nodes].flat());
    const again = active && !focus && document.getElementById(active);
    if (again) {
      again.focus();
      if (again.tagName === "INPUT" && again.type === "search") again.setSelectionRange(again.value.length, again.value.length);
    }
    if (focus) main.focus();
    if (view === "journal" && arg && document.getElementById("drawer").hidden) openEntry(Number(arg));
  }).catch((e) => notice(e.message));
}

// ----- Overview -----------------------------------------------------------------------------------
function overview() {
  const s = state.snapshot;
  if (!s) return el("p", {}, "Reading the journal…");
  const j = s.journal;
  const chainClass = j.chain === "broken" ? "bad" : "good";
  const counts = s.counts || {};
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const g = s.gaps;
  const anomalies = Object.entries(g.anomalies);
  return [
    el("h2", {}, "Overview"),
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("div", { class: "muted" }, "Chain check"),
        el("div", { class: "big " + chainClass }, j.chain),
        el("div", { class: "muted" }, count(j.entries, "entry", "entries")),
        j.head ? el("div", { class: "mono", title: j.head }, "head " + short(j.head, 16) + "…") : null,
        j.verified_at ? el("div", { class: "muted", title: "checked again at most every " + j.verify_every_s + " s" },
          "verified at " + when(j.verified_at)) : null,
        j.problems.map((p) => el("div", { class: "bad" }, "entry " + p.chain_seq + ": " + p.message))),
      el("div", { class: "card" }, el("div", { class: "muted" }, "Calls"),
        el("div", { class: "big" }, String(total)),
        Object.entries(counts).map(([k, v]) => el("div", {}, stateLabel(k), " " + v))),
      el("div", { class: "card" }, el("div", { class: "muted" }, "Policy in force"),
        el("div", { class: "big" }, count(s.policy.rules, "rule", "rules")),
        el("div", {}, count(s.policy.budgets, "budget", "budgets")), el("a", { href: "#policy" }, "See the policy")),
      el("div", { class: "card" }, el("div", { class: "muted" }, "Detectable gaps"),
        el("div", {}, count(g.unfinished_sessions.length, "session", "sessions") + " without an end"),
        el("div", {}, count(g.calls_without_outcome.length, "forwarded call", "forwarded calls") + " without an outcome"),
        el("div", {}, count(g.entries_without_call.length + g.entries_without_session.length, "entry", "entries") +
          " whose call or session start is missing"),
        el("div", {}, anomalies.length ? "anomalies: " + anomalies.map(([k, v]) => k + " ×" + v).join(", ") : "no anomalies"))),
    el("h3", {}, "Decisions by hour"),
    bars(s.per_hour),
    hourSpan(s.per_hour),
    el("h3", {}, "Newest calls"),
    callsTable(s.newest_calls),
  ];
}

function bars(perHour) {
  const hours = Object.entries(perHour).slice(-48);
  if (!hours.length) return el("p", { class: "muted" }, "No calls yet.");
  const max = Math.max(...hours.map(([, c]) => Object.values(c).reduce((a, b) => a + b, 0)));
  return el("div", { class: "bars", role: "img", "aria-label": "calls per hour: forwarded, refused, held" },
    hours.map(([h, c]) => {
      const ok = (c.allowed || 0) + (c.approved || 0);
      const wait = c.held || 0;
      const no = Object.values(c).reduce((a, b) => a + b, 0) - ok - wait;
      const px = (n) => Math.round((n / max) * 80) + "px";
      const bar = el("div", { class: "bar", title: h + ":00 UTC — " + ok + " forwarded, " + no + " refused, " + wait + " held" });
      for (const [cls, n] of [["ok", ok], ["no", no], ["wait", wait]]) {
        if (n) { const sp = el("span", { class: cls }); sp.style.height = px(n); bar.append(sp); }
      }
      return bar;
    }));
}

function hourSpan(perHour) {
  const hours = Object.keys(perHour).slice(-48);
  if (!hours.length) return null;
  const first = hours[0].replace("T", " ") + ":00", last = hours[hours.length - 1].replace("T", " ") + ":00";
  return el("p", { class: "muted" }, (first === last ? first : first + " to " + last) +
    " UTC, one bar an hour with calls: green forwarded, red refused, amber held");
}

function callsTable(calls) {
  if (!calls.length) return el("p", { class: "muted" }, "No calls yet.");
  return el("table", {},
    el("thead", {}, el("tr", {}, ["#", "When", "Connector", "Tool", "Agent", "State", "Why"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, calls.map((c) => el("tr", {},
      el("td", {}, el("a", { href: "#journal/" + c.chain_seq }, String(c.chain_seq))),
      el("td", {}, when(c.occurred_at)), el("td", {}, c.connector), el("td", {}, c.tool),
      el("td", {}, c.agent || "(unenrolled)"), el("td", {}, stateLabel(c.state)),
      el("td", { class: "why" }, c.reason + " — " + c.state_why)))));
}

// ----- Held -----------------------------------------------------------------------------------------
function copyLine(text) {
  return el("div", { class: "copy" }, el("code", {}, text),
    el("button", { type: "button", onclick: () => navigator.clipboard && navigator.clipboard.writeText(text) }, "Copy"));
}

function heldView() {
  const h = state.held;
  const out = [el("h2", {}, "Held calls"),
    el("p", { class: "muted" }, "These calls wait for a person. Deciding happens on the command line, on purpose: this page cannot approve.")];
  if (!h) return out.concat(el("p", {}, "Asking the daemon…"));
  if (!h.available) return out.concat(el("p", { class: "warn" }, h.reason));
  if (!h.held.length) return out.concat(el("p", {}, "Nothing is waiting for you."));
  for (const c of h.held) {
    out.push(el("section", { class: "held", "aria-label": "held call " + c.id },
      el("h3", {}, c.connector + " / " + c.tool, " ", el("span", { class: "muted" }, "(hold " + c.id + ")")),
      el("div", {}, "agent " + (c.agent || "(unenrolled)") + ", session " + short(c.session_id) + " seq " + c.seq +
        ", waiting " + Math.round(c.age_ms / 1000) + " s, " + Math.round(c.left_ms / 1000) + " s left"),
      el("div", { class: "muted" }, "why: " + c.reason),
      el("div", {}, "arguments (control and invisible characters shown as \\u{…}):"),
      el("pre", { class: "args" }, c.arguments === null ? "(none)" : c.arguments),
      c.non_ascii ? el("div", { class: "warn" }, c.non_ascii) : null,
      copyLine(c.approve), copyLine(c.reject)));
  }
  return out;
}

// ----- Journal ----------------------------------------------------------------------------------------
function filterInput(name, label) {
  return el("label", {}, label, el("input", {
    id: "f-" + name, type: "search", value: state.filters[name],
    oninput: (ev) => { state.filters[name] = ev.target.value; render(false); },
  }));
}
function filterSelect(name, label, options) {
  const sel = el("select", { id: "f-" + name, onchange: (ev) => { state.filters[name] = ev.target.value; render(false); } },
    el("option", { value: "" }, "any"), options.map((o) => el("option", { value: o }, o)));
  sel.value = state.filters[name];
  return el("label", {}, label, sel);
}

function journal() {
  const f = state.filters;
  const sessions = sessionsById();
  const kinds = [...new Set(state.events.map((e) => e.kind))].sort();
  const decisions = [...new Set(state.events.map((e) => e.decision).filter(Boolean))].sort();
  const has = (v, needle) => !needle || (v || "").toLowerCase().includes(needle.toLowerCase());
  const rows = [];
  for (let i = state.events.length - 1; i >= 0 && rows.length < 500; i--) {
    const e = state.events[i];
    const s = e.session_id ? sessions.get(e.session_id) : null;
    const agent = e.agent || (s && s.agent) || "";
    const connector = e.connector || (s && s.connector) || "";
    if (f.kind && e.kind !== f.kind) continue;
    if (f.decision && e.decision !== f.decision) continue;
    if (!has(e.tool, f.tool) || !has(agent, f.agent) || !has(connector, f.connector)) continue;
    if (f.text && !has([e.kind, e.tool, e.why, e.session_id, connector, agent, e.reason].join(" "), f.text)) continue;
    rows.push(el("tr", {},
      el("td", {}, el("button", { type: "button", class: "linkish", "data-seq": e.chain_seq,
        "aria-label": "open entry " + e.chain_seq, onclick: () => { location.hash = "#journal/" + e.chain_seq; } }, String(e.chain_seq))),
      el("td", {}, when(e.occurred_at)), el("td", {}, e.kind), el("td", { class: "mono" }, short(e.session_id)),
      el("td", {}, connector), el("td", {}, e.tool || ""), el("td", {}, agent),
      el("td", {}, e.decision || ""), el("td", {}, stateLabel(e.state)), el("td", { class: "why" }, e.why)));
  }
  return [
    el("h2", {}, "Journal"),
    el("div", { class: "filters", role: "search" },
      filterSelect("kind", "Kind", kinds), filterSelect("decision", "Decision", decisions),
      filterInput("tool", "Tool"), filterInput("agent", "Agent"), filterInput("connector", "Connector"),
      filterInput("text", "Text")),
    el("p", { class: "muted" }, rows.length + " shown of " + state.events.length + " entries read (newest first, at most 500 shown)"),
    el("table", {},
      el("thead", {}, el("tr", {}, ["#", "When", "Kind", "Session", "Connector", "Tool", "Agent", "Decision", "State", "Why"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows)),
  ];
}

function diffBlock(text) {
  return el("pre", { class: "diff" }, (text || "").split("\n").map((line) =>
    el("span", { class: line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "" }, line + "\n")));
}

let drawerOpener = null;
function openEntry(seq) {
  const e = state.events.find((x) => x.chain_seq === seq);
  if (!e) return;
  const drawer = document.getElementById("drawer");
  drawerOpener = document.activeElement;
  document.getElementById("drawer-title").textContent = "Entry " + seq + " — " + e.kind;
  const fields = ["occurred_at", "session_id", "seq", "connector", "tool", "client", "agent", "args_digest",
    "decision", "policy_id", "reason", "ok", "duration_ms", "anomaly", "protocol_version"];
  const dl = el("dl", {});
  dl.append(el("dt", {}, "state"), el("dd", {}, e.state ? stateLabel(e.state) : "—"));
  dl.append(el("dt", {}, "in words"), el("dd", {}, e.why));
  for (const k of fields) {
    if (e[k] === null || e[k] === undefined) continue;
    dl.append(el("dt", {}, k), el("dd", {}, String(e[k])));
  }
  const body = [dl,
    el("h3", {}, "Place in the chain"),
    el("dl", { class: "chain" }, el("dt", {}, "prev hash"), el("dd", { class: "mono" }, e.prev_hash),
      el("dt", {}, "hash"), el("dd", { class: "mono" }, e.hash)),
    el("p", { class: "muted" }, "hash = SHA-256(prev hash ‖ this entry's canonical bytes); `holdcall verify` checks every link.")];
  if (e.kind === "policy.change") body.push(el("h3", {}, "Text diff"), diffBlock(e.detail));
  else if (e.detail) body.push(el("h3", {}, "Detail"), el("pre", {}, e.detail));
  if (e.session_id) body.push(el("p", {}, el("a", { href: "#sessions/" + e.session_id }, "This entry's session")));
  document.getElementById("drawer-body").replaceChildren(...body);
  drawer.hidden = false;
  document.getElementById("drawer-close").focus();
}
function closeDrawer() {
  const drawer = document.getElementById("drawer");
  if (drawer.hidden) return;
  drawer.hidden = true;
  const { view, arg } = route();
  if (view === "journal" && arg) history.replaceState(null, "", "#journal");
  if (drawerOpener && document.contains(drawerOpener)) drawerOpener.focus();
}

// ----- Sessions ------------------------------------------------------------------------------------------
async function sessions(id) {
  const s = state.snapshot;
  if (id) {
    const data = await api("/api/session?id=" + encodeURIComponent(id));
    const ss = data.session;
    return [
      el("h2", {}, "Session " + ss.id),
      el("p", {}, el("a", { href: "#sessions" }, "All sessions")),
      el("p", {}, "connector " + (ss.connector || "?") + ", client " + (ss.client || "-") + ", agent " + (ss.agent || "(unenrolled)") +
        ", " + ss.state + (ss.protocol_version ? ", protocol " + ss.protocol_version : "")),
      data.earlier_not_shown ? el("p", { class: "muted" }, "… " + data.earlier_not_shown + " earlier entries not shown (`holdcall log --session` lists them all)") : null,
      el("ol", { class: "timeline" }, data.events.map((e) => el("li", {},
        el("a", { href: "#journal/" + e.chain_seq }, "#" + e.chain_seq), " ", when(e.occurred_at), " ",
        el("strong", {}, e.kind), " ", e.tool ? e.tool + " " : "", stateLabel(e.state), " ", e.why))),
      ss.state === "unfinished" ? el("p", { class: "warn" }, "No session.end: the relay is still running, or it was cut off.") : null,
    ];
  }
  if (!s) return el("p", {}, "Reading the journal…");
  if (!s.sessions.length) return [el("h2", {}, "Sessions"), el("p", {}, "No sessions yet.")];
  return [
    el("h2", {}, "Sessions"),
    el("table", {},
      el("thead", {}, el("tr", {}, ["Session", "Started", "Connector", "Client", "Agent", "Calls", "Refused", "Anomalies", "State"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, s.sessions.map((x) => el("tr", {},
        el("td", { class: "mono" }, el("a", { href: "#sessions/" + x.id }, short(x.id))),
        el("td", {}, when(x.started_at)), el("td", {}, x.connector || "?"), el("td", {}, x.client || "-"),
        el("td", {}, x.agent || "(unenrolled)"), el("td", {}, String(x.calls)), el("td", {}, String(x.refused)),
        el("td", {}, String(x.anomalies)), el("td", { class: x.state === "ended" ? "" : "warn" }, x.state))))),
  ];
}

// ----- Policy ------------------------------------------------------------------------------------------------
async function policy() {
  const p = await api("/api/policy");
  const out = [el("h2", {}, "Policy in force")];
  out.push(el("h3", {}, "Rules"));
  if (!p.rules.length) out.push(el("p", {}, "No rules: every call is allowed."));
  for (const r of p.rules) {
    out.push(el("div", { class: "rule" }, el("strong", {}, r.id), " ",
      el("span", { class: "muted" }, r.effect + ", " + r.source + ", since " + when(r.created_at)),
      el("pre", {}, r.text)));
  }
  out.push(el("h3", {}, "Budgets"));
  out.push(p.budgets.length ? el("ul", {}, p.budgets.map((b) => el("li", {}, b.id + ": at most " + b.calls + " calls " + JSON.stringify(b.scope || {}))))
    : el("p", {}, "No budgets."));
  out.push(el("h3", {}, "Agents"));
  if (p.agents_note) out.push(el("p", { class: "warn" }, "Whether each enrolment is current is unknown: " + p.agents_note));
  out.push(p.agents.length ? el("ul", {}, p.agents.map((a) => el("li", {}, el("strong", {}, a.name), " " + a.path + " — ",
    el("span", { class: a.state === "current" ? "good" : a.state === "stale" ? "bad" : "muted" }, a.state === "stale" ? "STALE" : a.state),
    a.stale_because ? " (" + a.stale_because + ")" : "")))
    : el("p", {}, "No agents enrolled."));
  out.push(el("h3", {}, "Connectors"));
  out.push(p.connectors.length ? el("ul", {}, p.connectors.map((c) => el("li", {}, el("strong", {}, c.name),
    c.env_key ? " secret given as " + c.env_key + " (the secret itself is in the OS credential store, never here)" : "",
    c.command ? el("div", { class: "mono" }, "command " + c.command) : null,
    c.pass_env ? el("div", { class: "mono" }, "passes " + c.pass_env) : null)))
    : el("p", {}, "No connectors."));
  out.push(el("h3", {}, "Explain a call"), explainForm(), el("div", { id: "explain-out", "aria-live": "polite" }));
  out.push(el("h3", {}, "History of policy changes"));
  if (!p.history.length) out.push(el("p", {}, "No changes yet."));
  for (const h of p.history) {
    out.push(el("details", {}, el("summary", {}, "entry " + h.chain_seq + ", " + when(h.occurred_at) + ": " + (h.reason || "")),
      diffBlock(h.diff)));
  }
  if (p.history_not_shown) out.push(el("p", { class: "muted" }, "… " + p.history_not_shown + " more not shown (`holdcall policy history` lists them all)"));
  return out;
}

function explainForm() {
  const field = (name, label, extra) => el("label", {}, label, el("input", Object.assign({ id: "x-" + name, name }, extra || {})));
  return el("form", { class: "explain", onsubmit: explain },
    field("tool", "Tool (required)", { required: true }), field("agent", "Agent"), field("connector", "Connector"),
    el("label", { class: "wide" }, "Arguments (a JSON object)", el("textarea", { id: "x-arguments", name: "arguments", placeholder: "{\"path\": \"/etc/passwd\"}" })),
    el("div", {}, el("button", { type: "submit" }, "Explain")));
}

async function explain(ev) {
  ev.preventDefault();
  const params = new URLSearchParams();
  for (const k of ["tool", "agent", "connector", "arguments"]) {
    const v = document.getElementById("x-" + k).value;
    if (v) params.set(k, v);
  }
  const out = document.getElementById("explain-out");
  try {
    const r = await api("/api/explain?" + params.toString());
    if (!r.available) { out.replaceChildren(el("p", { class: "warn" }, r.reason)); return; }
    const x = r.explanation;
    const d = x.decision;
    const c = x.cedar;
    out.replaceChildren(
      el("p", { class: "verdict" }, "Decision: ", el("strong", { class: d.effect === "allow" ? "good" : d.effect === "ask" ? "warn" : "bad" }, d.effect),
        d.policy_id ? " by " + d.policy_id : "", " — " + d.reason),
      el("p", {}, "tie break: " + x.tie_break),
      x.matching.length ? el("div", {}, "matching policies, most specific first:", el("ul", {}, x.matching.map((m) => el("li", {}, m.id + " (" + m.effect + ", specificity " + m.specificity + ")")))) : el("p", {}, "No policy matches."),
      el("table", {}, el("thead", {}, el("tr", {}, ["Considered", "Effect", "Outcome", "Detail"].map((h) => el("th", {}, h)))),
        el("tbody", {}, (x.considered || []).map((k) => el("tr", {}, el("td", {}, k.id), el("td", {}, k.effect), el("td", {}, k.outcome), el("td", {}, k.detail || ""))))),
      el("h4", {}, "Cedar's diagnostics"),
      el("pre", { class: "cedar" }, "permits: " + c.permit_decision + " " + JSON.stringify(c.permit_reasons) + "\n" +
        "forbids: " + c.forbid_decision + " " + JSON.stringify(c.forbid_reasons) + "\n" +
        "errors: " + (c.errors.length ? c.errors.join("\n  ") : "none")),
      r.budgets.length ? el("p", {}, "budgets that apply: " + r.budgets.map((b) => b.id).join(", ")) : el("p", {}, "No budget applies."));
  } catch (e) {
    out.replaceChildren(el("p", { class: "bad" }, e.message));
  }
}

// ----- wiring ---------------------------------------------------------------------------------------------
document.addEventListener("DOMContentLoaded", () => {
  showThemeButton();
  document.getElementById("theme").addEventListener("click", () => {
    const next = currentTheme() === "dark" ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    localStorage.setItem("holdcall-theme", next);
    showThemeButton();
  });
  document.getElementById("drawer-close").addEventListener("click", closeDrawer);
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") closeDrawer(); });
  addEventListener("hashchange", () => {
    const { view, arg } = route();
    if (view === "journal" && arg) { render(false); return; }
    closeDrawer();
    render(true);
  });
  render(true);
  poll();
  setInterval(poll, 1500);
});
