"""`holdmap mcp`'s agent tools (issue 15) driven by the real Python MCP client over stdio.

Every session runs the real binary with the SDK's default environment plus HOME (a temp HOME
holding a config file of every supported client, given through the client's `env`), behind a
byte tap, against processes the test started itself: agents that are real processes (a copy of
`sh` named `claude`, `codex`, `gemini`, `cursor`, `windsurf`, `copilot-language-server`, with
the flags the real CLIs take) whose children are a real MCP server under npx's command line, a
dev server and a client connection; a dev server whose launcher exited; holdmap's own activity
collector. Agents are selected as `pid:N` only, so a real agent on the machine never matches.
Nothing here is ever stopped through holdmap: the one stop preview is a dry run, and every
process is stopped by the test, by its pid.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import pytest
from mcp import Client

from holdmap_rig import (
    AGENT_PRODUCTS,
    CANARY,
    CLAUDE_ALLOWED,
    CLAUDE_DENIED,
    CLIENT_FILES,
    FS_PACKAGE,
    LOOSE_PACKAGE,
    REMOTE_HOST,
    ROUTED_PACKAGE,
    SKILL_FOLDER,
    SKILL_NAME,
    SKILL_PURPOSE,
    TOOLS,
    ActivityCollector,
    AgentProcess,
    DevServer,
    LeftBehindDevServer,
    alias,
    assert_canary_nowhere,
    holdmap_binary,
    holdmap_cli,
    http_status,
    json_block,
    run_holdmap,
    structured,
    write_client_configs,
)
from rig import direct, lines, wait_until
from test_holdmap import call, check_wire, handle_of, holdmap_session

# One revision with structured content and titles (part 1's tests cover every revision's shape).
REVISION = "2025-11-25"
NEW_TOOLS = {"list_agents", "get_agent_flow", "list_needs", "list_analyzers", "list_insights"}
EVIDENCE = {"observed", "inferred", "unknown"}
# The one fake agent whose dev server listens on every interface (the others: loopback only).
BIND = {"cursor": "0.0.0.0"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A temp HOME for holdmap (and the person's shell), with every client's config file."""
    folder = tmp_path / "home"
    folder.mkdir()
    write_client_configs(folder, shared_root(tmp_path))
    return folder


def shared_root(tmp_path: Path) -> Path:
    """The folder the configured filesystem server (and every fake agent's) is given."""
    root = tmp_path / "shared"
    root.mkdir(exist_ok=True)
    return root


@pytest.fixture
def agents(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, AgentProcess]]:
    """The fake agents the test names (`@pytest.mark.parametrize("agents", [[...]], indirect=True)`),
    each with its product's flags; all stopped by pid at the end."""
    running: dict[str, AgentProcess] = {}
    try:
        for program in request.param:
            running[program] = AgentProcess(
                program, AGENT_PRODUCTS[program]["flags"], shared_root(tmp_path), bind=BIND.get(program, "127.0.0.1")
            )
        yield running
    finally:
        for agent in running.values():
            agent.close()


def session(tmp_path: Path, home: Path, scenario, **env: str) -> dict[str, Any]:
    """One session of the real client against `holdmap mcp` with HOME `home` (and `env`), behind
    a byte tap in tmp_path/log; what the scenario returned."""
    return holdmap_session(tmp_path / "log", scenario, REVISION, env={"HOME": str(home), **env})["scenario"]


def server_bytes(tmp_path: Path) -> bytes:
    """Everything holdmap wrote to the client, as the tap saw it."""
    return b"".join(lines(tmp_path / "log" / "server.out"))


def walk(value: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair in nested JSON."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def the_agent(result: dict[str, Any], agent: AgentProcess) -> dict[str, Any]:
    """The one report a `pid:N` query returns: the agent the test started."""
    listed = structured(result, REVISION)
    reports = listed["agents"]
    assert [r["pid"] for r in reports] == [agent.pid], reports
    return reports[0]


# --- discovery --------------------------------------------------------------------------------


def test_tools_list_shows_the_fourteen_tools_and_the_five_new_ones_are_read_only_with_closed_schemas(tmp_path, home):
    async def scenario(client: Client) -> dict[str, Any]:
        return {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools]}

    tools = {t["name"]: t for t in session(tmp_path, home, scenario)["tools"]}
    assert set(tools) == TOOLS and len(TOOLS) == 14, sorted(tools)
    for name in NEW_TOOLS:
        tool = tools[name]
        assert tool["inputSchema"]["additionalProperties"] is False, (name, tool["inputSchema"])
        assert tool["outputSchema"]["type"] == "object", name
        assert tool["annotations"]["readOnlyHint"] is True, (name, tool["annotations"])
        assert tool.get("description") and "(skeleton)" not in tool["description"], (name, tool.get("description"))
    include = tools["list_agents"]["inputSchema"]["properties"]["include_capabilities"]
    assert include.get("type") == "boolean" and include.get("default") is False, include


# --- list_agents ------------------------------------------------------------------------------


@pytest.mark.parametrize("agents", [["claude", "codex", "gemini", "cursor"]], indirect=True)
def test_list_agents_reports_each_fake_agent_with_its_product_child_tools_inferred_mcp_server_port_and_access_facts(
    tmp_path, home, agents
):
    async def scenario(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, a in agents.items():
            out[name] = await call(client, "list_agents", {"agent": a.query()})
            # The other filters, each narrowed to the test's own agent: an owned pid (its MCP
            # server's), its project folder, a child tool's package.
            out[f"{name} by pid"] = await call(client, "list_agents", {"pid": a.mcp})
            out[f"{name} by folder"] = await call(client, "list_agents", {"folder": str(a.project)})
            out[f"{name} by tool"] = await call(client, "list_agents", {"agent": a.query(), "tool": FS_PACKAGE})
            out[f"{name} other tool"] = await call(client, "list_agents", {"agent": a.query(), "tool": "no-such-tool"})
        return out

    s = session(tmp_path, home, scenario)
    for name, agent in agents.items():
        report = the_agent(s[name], agent)
        for how in ("by pid", "by folder", "by tool"):
            assert the_agent(s[f"{name} {how}"], agent)["id"] == report["id"], (name, how)
        assert structured(s[f"{name} other tool"], REVISION)["agents"] == [], (name, s[f"{name} other tool"])
        want = AGENT_PRODUCTS[name]
        assert report["id"] == f"agent:{agent.pid}", report["id"]
        assert report["product"] == want["product"], (name, report["product"])
        assert {agent.pid, agent.mcp, agent.server_pid} <= set(report["process_ids"]), report["process_ids"]
        # Evidence on every fact, and only the three words.
        assert {v for k, v in walk(report) if k == "evidence"} <= EVIDENCE, report

        tools = {t["pid"]: t for t in report["tools"]}
        mcp = tools[agent.mcp]
        assert (mcp["kind"], mcp["evidence"], mcp["package"]) == ("mcp_server", "inferred", FS_PACKAGE), mcp
        assert mcp["ppid"] == agent.pid and mcp["via_holdcall"] is False, mcp
        assert f"{FS_PACKAGE}@" in mcp["command"], mcp
        dev = tools[agent.server_pid]
        assert (dev["kind"], dev["evidence"]) == ("dev_server", "observed"), dev

        ports = [p for p in report["ports"] if p["port"] == agent.port]
        exposed = agent.bind != "127.0.0.1"
        assert [(p["pid"], p["role"], p["exposed"], p["address"]) for p in ports] == [
            (agent.server_pid, "dev_server", exposed, agent.bind)
        ], report["ports"]
        folders = {f["path"]: f for f in report["folders"]}
        assert folders[str(agent.project)]["project"] == str(agent.project), report["folders"]
        assert isinstance(report["cpu_seconds"], (int, float)) and report["memory_bytes"] > 0, report

        access = {f["kind"]: f for f in report["access"]}
        assert set(access) >= {"user", "sandbox", "approvals", "network"}, report["access"]
        root = os.geteuid() == 0
        assert (access["user"]["level"], access["user"]["evidence"]) == ("elevated" if root else "normal", "observed"), access
        network = access["network"]
        if exposed:  # its dev server listens beyond loopback
            assert (network["level"], network["evidence"]) == ("elevated", "observed"), network
            assert str(agent.port) in network["detail"], network
        else:
            assert network["level"] == "normal", network
        approvals = access["approvals"]
        if want["flags"]:
            assert (approvals["level"], approvals["evidence"]) == ("elevated", "observed"), (name, approvals)
            assert want["flags"][0] in approvals["detail"], (name, approvals)
        else:  # no flag seen: not "normal", unknown (settings are not read without include_capabilities)
            assert (approvals["level"], approvals["evidence"]) == ("unknown", "unknown"), (name, approvals)
        assert report.get("capabilities") is None, "capabilities without include_capabilities"


# --- include_capabilities ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "agents", [["claude", "cursor", "copilot-language-server", "codex", "gemini", "windsurf"]], indirect=True
)
def test_include_capabilities_reads_every_clients_config_reports_routed_and_unpinned_servers_and_never_returns_a_secret(
    tmp_path, home, agents
):
    async def scenario(client: Client) -> dict[str, Any]:
        return {
            name: await call(client, "list_agents", {"agent": a.query(), "include_capabilities": True})
            for name, a in agents.items()
        }

    s = session(tmp_path, home, scenario)
    # Not one byte of the canary (env values, header values, URL userinfo, path, query and
    # fragment, and ~/.claude.json's account data) in anything holdmap wrote.
    wire = server_bytes(tmp_path)
    assert b'"include_capabilities":true' in b"".join(lines(tmp_path / "log" / "server.in")).replace(b" ", b"")
    assert_canary_nowhere(wire, what="list_agents with include_capabilities")

    for name, agent in agents.items():
        client = AGENT_PRODUCTS[name]["client"]
        caps = the_agent(s[name], agent)["capabilities"]
        assert isinstance(caps, dict), (name, caps)
        read = [src for src in caps["sources"] if src["state"] == "read"]
        assert str(home / CLIENT_FILES[client]) in {src["path"] for src in read}, (name, caps["sources"])
        servers = {srv["alias"]: srv for srv in caps["servers"] if srv["client"] == client}
        assert set(servers) >= {alias(client, r) for r in ("files", "routed", "loose", "remote")}, (name, sorted(servers))

        files = servers[alias(client, "files")]
        assert (files["transport"], files["runner"], files["package"]) == ("stdio", "npx", FS_PACKAGE), files
        assert (files["pin"], files["routing"]) == ("pinned", "not routed"), files
        assert sorted(files["env_names"]) == ["FS_API_TOKEN", "PLAIN_SETTING"], files
        # The agent's own npx child runs exactly this definition now.
        assert agent.mcp in files["running_pids"], (name, files, agent.mcp)

        routed = servers[alias(client, "routed")]
        assert routed["routing"] == "routed", (name, routed)
        assert (routed["pin"], routed["package"]) == ("pinned", ROUTED_PACKAGE), routed
        assert routed["env_names"] == ["ROUTED_SECRET"], routed

        loose = servers[alias(client, "loose")]
        assert (loose["pin"], loose["routing"], loose["package"]) == ("unpinned", "not routed", LOOSE_PACKAGE), loose
        assert loose["running_pids"] == [], loose

        remote = servers[alias(client, "remote")]
        assert remote["routing"] == "remote" and remote["transport"] in ("http", "sse"), remote
        assert remote["remote_host"] == REMOTE_HOST, remote
        assert sorted(remote["header_names"]) == ["Authorization", "X-Rig-Key"], remote
        # Definitions are not use: every result says so.
        assert any("not prove" in line or "not proof" in line for line in caps["limits"]), (name, caps["limits"])

    # Claude Code's permission rules, documented safety setting, instruction file (its name, not
    # its body) and skill (its folder, and the name and purpose from its header only).
    claude = the_agent(s["claude"], agents["claude"])["capabilities"]
    rules = {(r["effect"], r["rule"]) for r in claude["permissions"]}
    assert {("allow", CLAUDE_ALLOWED), ("deny", CLAUDE_DENIED)} <= rules, claude["permissions"]
    settings = {x["name"]: x for x in claude["settings"]}
    mode = settings["permissions.defaultMode"]
    assert (mode["value"], mode["risky"]) == ("bypassPermissions", True), mode
    assert "CLAUDE.md" in {i["name"] for i in claude["instructions"]}, claude["instructions"]
    [skill] = [k for k in claude["skills"] if k["folder"] == SKILL_FOLDER]
    assert (skill["name"], skill["purpose"]) == (SKILL_NAME, SKILL_PURPOSE), skill
    codex = {x["name"]: x for x in the_agent(s["codex"], agents["codex"])["capabilities"]["settings"]}
    assert (codex["approval_policy"]["value"], codex["approval_policy"]["risky"]) == ("never", True), codex
    assert (codex["sandbox_mode"]["value"], codex["sandbox_mode"]["risky"]) == ("danger-full-access", True), codex


# --- list_needs -------------------------------------------------------------------------------


@pytest.mark.parametrize("agents", [["claude"]], indirect=True)
def test_list_needs_lists_the_unrouted_server_with_the_holdcall_init_line_and_a_dev_server_left_behind_with_a_stop_preview_that_issues_a_handle(
    tmp_path, home, agents
):
    agent = agents["claude"]
    left = LeftBehindDevServer()
    try:
        assert left.parent() not in (os.getpid(), agent.pid), "the dev server is not left behind"

        async def scenario(client: Client) -> dict[str, Any]:
            out: dict[str, Any] = {"needs": await call(client, "list_needs", {})}
            needs = (json_block(out["needs"]) or {}).get("needs", [])
            ours = [n for n in needs if (n.get("subject") or {}).get("port") == left.port]
            preview = (ours[0].get("preview") if ours else None) or {}
            if preview.get("name") == "stop_port":
                out["preview"] = await call(client, "stop_port", preview["arguments"])
            out["alive"] = left.alive()
            return out

        s = session(tmp_path, home, scenario)
        assert s["alive"], "listing the needs or previewing the stop stopped the dev server"
        listed = structured(s["needs"], REVISION)
        needs = listed["needs"]
        assert {v for k, v in walk(needs) if k == "evidence"} <= EVIDENCE, needs
        assert len({n["id"] for n in needs}) == len(needs), "need ids are not unique"

        # The configured server that is not routed through Holdcall, with the `holdcall init` line.
        client = "claude-code"
        unrouted = [n for n in needs if n["kind"] == "server_not_routed" and n["subject"]["alias"] == alias(client, "files")]
        assert len(unrouted) == 1, [n["subject"] for n in needs if n["kind"] == "server_not_routed"]
        init = unrouted[0]["holdcall_init"]
        assert init["preview"].endswith("holdcall init") and init["write"].endswith("holdcall init --write"), init
        assert unrouted[0]["subject"]["source"] == str(home / CLIENT_FILES[client]), unrouted[0]
        assert f"agent:{agent.pid}" in unrouted[0]["agents"], unrouted[0]
        routed = [n for n in needs if n["kind"] == "server_not_routed" and n["subject"]["alias"] == alias(client, "routed")]
        assert routed == [], routed
        unpinned = [n for n in needs if n["kind"] == "server_unpinned" and n["subject"]["alias"] == alias(client, "loose")]
        assert len(unpinned) == 1, [n["subject"] for n in needs if n["kind"] == "server_unpinned"]
        # Approval prompts off twice: the agent's own flag, and its settings file's default mode.
        approvals = {
            n["subject"]["type"]: n
            for n in needs
            if n["kind"] == "approvals_disabled" and f"agent:{agent.pid}" in n["agents"]
        }
        assert set(approvals) == {"agent", "setting"}, [n for n in needs if n["kind"] == "approvals_disabled"]
        assert approvals["agent"]["evidence"] == "observed" and approvals["agent"]["subject"]["pid"] == agent.pid, approvals
        assert approvals["setting"]["subject"]["source"] == str(home / ".claude" / "settings.json"), approvals

        # The dev server left behind, with a dry-run stop preview that the test calls (and only
        # previews: it gets a handle, and the server still runs).
        [behind] = [n for n in needs if n["subject"].get("port") == left.port]
        assert behind["kind"] == "dev_server_left_behind" and behind["subject"]["pid"] == left.pid, behind
        assert behind["preview"] == {"name": "stop_port", "arguments": {"port": left.port, "dry_run": True}}, behind
        handle_of(s["preview"], REVISION)
        # The fake agent's own dev server has an agent above it: not left behind.
        assert not [n for n in needs if n["subject"].get("port") == agent.port], needs
        assert_canary_nowhere(server_bytes(tmp_path), what="list_needs")
    finally:
        left.close()


# --- get_agent_flow ---------------------------------------------------------------------------


def test_get_agent_flow_shows_the_fake_agents_spawned_children_and_its_tcp_connection_to_a_listener_the_test_started(
    tmp_path, home
):
    with DevServer() as listener:
        agent = AgentProcess("claude", AGENT_PRODUCTS["claude"]["flags"], shared_root(tmp_path), connect_to=listener.port)
        try:
            connector = agent.connector
            assert connector is not None

            async def scenario(client: Client) -> dict[str, Any]:
                return {"flow": await call(client, "get_agent_flow", {"agent": agent.query()})}

            flow = structured(session(tmp_path, home, scenario)["flow"], REVISION)
        finally:
            agent.close()
    assert flow["agents"] == [f"agent:{agent.pid}"], flow["agents"]
    nodes = {n["id"]: n for n in flow["nodes"]}
    assert {v for k, v in walk(flow) if k == "evidence"} <= EVIDENCE, flow
    [me] = [n for n in nodes.values() if n["type"] == "agent"]
    assert (me["pid"], me["product"]) == (agent.pid, "claude-code"), me
    processes = {n["pid"]: n for n in nodes.values() if n["type"] == "process"}
    for child in (agent.mcp, agent.server_pid, connector):
        assert processes[child]["ppid"] == agent.pid and processes[child]["agent"] == me["id"], processes.get(child)

    rels = flow["relationships"]
    spawned = {(r["from"], r["to"]) for r in rels if r["type"] == "spawned"}
    parent = processes[agent.pid]["id"] if agent.pid in processes else me["id"]
    for child in (agent.mcp, agent.server_pid, connector):
        assert (parent, processes[child]["id"]) in spawned, (child, sorted(spawned))
    # The agent's dev server listens; the connector's TCP connection reaches the test's listener,
    # held by the test's own http.server (not a process of the agent).
    listens = [r for r in rels if r["type"] == "listens" and r["from"] == processes[agent.server_pid]["id"]]
    assert [nodes[r["to"]]["port"] for r in listens] == [agent.port], listens
    connects = [r for r in rels if r["type"] == "connects" and r["from"] == processes[connector]["id"]]
    assert len(connects) == 1, rels
    target = nodes[connects[0]["to"]]
    assert (target["type"], target["port"], target["pid"]) == ("local_service", listener.port, listener.pid), target
    assert connects[0]["evidence"] == "observed" and connects[0]["facts"]["remote"].endswith(f":{listener.port}"), connects
    assert any("not observed" in note for note in flow["limits"]["notes"]), flow["limits"]


# --- analyzers --------------------------------------------------------------------------------


def test_holdmap_analyze_mcp_pins_run_by_a_person_is_shown_by_list_analyzers_with_its_last_run_and_its_findings_by_list_insights(
    tmp_path, home
):
    # A person types it in a folder with no project config of its own: only the user files count.
    ran = holdmap_cli(home, "analyze", "mcp-pins", cwd=shared_root(tmp_path))
    assert ran.returncode == 0, (ran.returncode, ran.stdout, ran.stderr)
    assert_canary_nowhere(ran.stdout, ran.stderr, what="holdmap analyze mcp-pins")
    data = home / ".local" / "share" / "holdmap"
    stored = [p for p in data.rglob("*") if p.is_file()]
    assert stored, f"holdmap analyze stored nothing under {data}"
    assert_canary_nowhere(*(p.read_bytes() for p in stored), what="holdmap's data directory")

    async def scenario(client: Client) -> dict[str, Any]:
        return {
            "analyzers": await call(client, "list_analyzers", {}),
            "insights": await call(client, "list_insights", {"limit": 500}),
            "by analyzer": await call(client, "list_insights", {"analyzer": "mcp-pins", "limit": 500}),
            "by agent": await call(client, "list_insights", {"agent": "claude-code"}),
            "other analyzer": await call(client, "list_insights", {"analyzer": "no-such-analyzer"}),
        }

    s = session(tmp_path, home, scenario)
    assert_canary_nowhere(server_bytes(tmp_path), what="list_analyzers and list_insights")
    analyzers = {a["name"]: a for a in structured(s["analyzers"], REVISION)["analyzers"]}
    pins = analyzers["mcp-pins"]
    assert (pins["built_in"], pins["state"], pins["network"]) == (True, "approved", []), pins
    run = pins["last_run"]
    assert run is not None and run["analyzer"] == "mcp-pins", pins
    assert run["finished_at_ms"] >= run["started_at_ms"] > 0 and run["files_read"] >= len(CLIENT_FILES), run
    assert run["servers_checked"] >= 4 * len(CLIENT_FILES), run

    listed = structured(s["insights"], REVISION)
    insights = listed["insights"]
    assert (listed["more"], listed["matched"]) == (0, len(insights)), listed
    assert {i["analyzer"] for i in insights} == {"mcp-pins"}, insights
    found = {(i["agent"], i["alias"], i["rule"]) for i in insights}
    for client in CLIENT_FILES:
        assert (client, alias(client, "loose"), "unpinned") in found, (client, sorted(found))
        assert (client, alias(client, "loose"), "not-routed") in found, (client, sorted(found))
        assert (client, alias(client, "files"), "not-routed") in found, (client, sorted(found))
        # Pinned and routed through this Holdcall: nothing to say about it.
        assert not [f for f in found if f[1] == alias(client, "routed")], (client, sorted(found))
    for i in insights:
        assert i["source"] == str(home / CLIENT_FILES[i["agent"]]), i
        assert i["found_at_ms"] > 0 and i["state"] == "open", i
    unpinned = [i for i in insights if i["rule"] == "unpinned"]
    assert {(i["pin"], i["package"]) for i in unpinned} == {("unpinned", LOOSE_PACKAGE)}, unpinned
    assert structured(s["by analyzer"], REVISION)["insights"] == insights
    assert {i["agent"] for i in structured(s["by agent"], REVISION)["insights"]} == {"claude-code"}
    assert structured(s["other analyzer"], REVISION)["insights"] == [], s["other analyzer"]


# --- activity recording -----------------------------------------------------------------------


# What a record may hold (issue 15: the tool's name, status, timing and byte counts), plus the
# collector's own sequence number and the recorder's count of records it could not deliver.
PERMITTED_RECORD_FIELDS = {
    "tool", "status", "started_at_ms", "duration_ms", "request_bytes", "result_bytes", "dropped_before", "seq",
}
STATUSES = {"ok", "tool_error", "cancelled", "protocol_error"}


def recording_session(tmp_path: Path, home: Path, scenario, env: dict[str, str]) -> dict[str, Any]:
    """`holdmap mcp --record-activity` under the real client: the SDK's default environment plus
    HOME and `env` (the collector's endpoint and token, given through the client's `env`)."""
    logdir = tmp_path / "recorded"
    argv = [str(holdmap_binary()), "mcp", "--record-activity"]
    seen = run_holdmap(direct(logdir, argv), scenario, REVISION, env={"HOME": str(home), **env})
    check_wire(logdir, REVISION)
    return seen["scenario"]


def test_recording_reports_only_the_permitted_fields_never_the_canary_argument_and_the_collector_refuses_a_missing_or_wrong_token(
    tmp_path, home
):
    with ActivityCollector(home, "60s") as collector:
        endpoint = collector.endpoint or ""
        assert endpoint.startswith("http://127.0.0.1:"), collector.printed

        # Ordinary `holdmap mcp`, even with the collector's variables, records nothing.
        async def plain(client: Client) -> dict[str, Any]:
            return {"free": await call(client, "find_free_port", {})}

        structured(session(tmp_path, home, plain, **collector.env)["free"], REVISION)

        async def scenario(client: Client) -> dict[str, Any]:
            return {
                "ports": await call(client, "list_ports", {"query": f"vite-{CANARY}"}),
                "refused": await call(client, "stop_agent_ports", {"agent": CANARY}),
                "agents": await call(client, "list_agents", {"agent": f"pid:{os.getpid()}-{CANARY}"}),
            }

        s = recording_session(tmp_path, home, scenario, collector.env)
        assert CANARY.encode() in b"".join(lines(tmp_path / "recorded" / "server.in")), "the canary was never sent"
        structured(s["ports"], REVISION)
        records: list[dict[str, Any]] = []

        def delivered() -> bool:
            nonlocal records
            out = collector.snapshot()
            assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
            assert_canary_nowhere(out.stdout, out.stderr, what="holdmap activity snapshot --json")
            body = json.loads(out.stdout)
            records = body["records"]
            return len(records) >= 3

        wait_until(delivered, "the three calls' records at the collector", 15)
        # Only the recording server's calls, in order: the plain server's find_free_port is not there.
        assert [r["tool"] for r in records] == ["list_ports", "stop_agent_ports", "list_agents"], records
        for record in records:
            assert set(record) == PERMITTED_RECORD_FIELDS, sorted(set(record) ^ PERMITTED_RECORD_FIELDS)
            assert record["status"] in STATUSES, record
            assert all(isinstance(record[k], int) and record[k] >= 0 for k in PERMITTED_RECORD_FIELDS - {"tool", "status"}), record
            assert record["request_bytes"] > len(CANARY) and record["result_bytes"] > 0, record
        assert records[0]["status"] == "ok", records
        assert_canary_nowhere(json.dumps(records), what="the collector's records")

        # The collector itself: nothing without the right token.
        for method, body in (("GET", None), ("POST", b"{}")):
            assert http_status(endpoint, method=method, body=body) == 401, (method, endpoint)
            assert http_status(endpoint, method=method, body=body, token=f"wrong-{collector.token}") == 401, method
        # And the right one is accepted (so the refusals above are about the token).
        assert http_status(endpoint, token=collector.token) == 200, endpoint


def test_a_recorder_whose_collector_is_gone_leaves_every_tool_available(tmp_path, home):
    gone = "http://127.0.0.1:9"  # the discard port: nothing listens there

    async def scenario(client: Client) -> dict[str, Any]:
        return {"ports": await call(client, "list_ports", {}), "agents": await call(client, "list_agents", {})}

    s = recording_session(tmp_path, home, scenario, {"HOLDMAP_ACTIVITY_ENDPOINT": gone, "HOLDMAP_ACTIVITY_TOKEN": "x" * 32})
    structured(s["ports"], REVISION)
    structured(s["agents"], REVISION)
