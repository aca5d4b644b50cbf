"""Tool pins and hide-denied through the real Python SDK client and server-everything.

With `holdcall connector hide-denied everything on` and `get-sum` denied, the client's
`tools/list` holds every tool the server listed but `get-sum` (the only place the relay
rewrites a line: the listing, re-serialised without the denied tool, every other byte kept),
the client still works (an allowed `echo` returns what it returns directly), a `get-sum` the
client calls anyway is still refused, and the journal has every listed tool pinned and one
`tools.hidden` entry for the session. Without hide-denied the listing crosses byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from rig import (
    EVERYTHING,
    Holdcall,
    assert_refused_by_holdcall,
    direct,
    lines,
    run_session,
    through_relay,
    to_plain,
)

MODES = ["legacy", "auto"]


@pytest.fixture(scope="module")
def holdcall():
    instance = Holdcall()
    try:
        instance.cli("policy", "deny", "get-sum", "--connector", "everything")
        instance.cli("connector", "hide-denied", "everything", "on")
        yield instance
    finally:
        instance.close()


async def list_and_call(client: Client) -> dict[str, Any]:
    listed = await client.list_tools()
    return {
        "names": [t.name for t in listed.tools],
        "echo": to_plain(await client.call_tool("echo", {"message": "pinned ✓"})),
        "sum": to_plain(await client.call_tool("get-sum", {"a": 1, "b": 2})),
    }


def listings(path: Path) -> list[dict[str, Any]]:
    """Every tools/list result in a byte log, in order."""
    out = []
    for line in lines(path):
        message = json.loads(line)
        tools = message.get("result", {}).get("tools") if isinstance(message.get("result"), dict) else None
        if tools is not None:
            out.append(message)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_hide_denied_removes_exactly_the_denied_tool_and_the_python_sdk_client_still_works(
    mode, holdcall, tmp_path: Path
):
    before = len(holdcall.journal())
    relayed_dir, direct_dir = tmp_path / "relay", tmp_path / "direct"
    relayed = run_session(
        through_relay(holdcall, "everything", relayed_dir, EVERYTHING), list_and_call, mode=mode, env=holdcall.env
    )["scenario"]
    straight = run_session(direct(direct_dir, EVERYTHING), list_and_call, mode=mode)["scenario"]

    assert "get-sum" in straight["names"]
    assert relayed["names"] == [n for n in straight["names"] if n != "get-sum"]
    assert relayed["echo"] == straight["echo"]
    assert_refused_by_holdcall(relayed["sum"])

    # Each listing the client got is the server's, minus get-sum's definition, nothing else.
    server_lists, client_lists = listings(relayed_dir / "server.out"), listings(relayed_dir / "client.out")
    assert len(server_lists) == len(client_lists) >= 1
    for theirs, ours in zip(server_lists, client_lists):
        kept = [t for t in theirs["result"]["tools"] if t["name"] != "get-sum"]
        assert ours["result"]["tools"] == kept
        assert {k: v for k, v in ours["result"].items() if k != "tools"} == {
            k: v for k, v in theirs["result"].items() if k != "tools"
        }

    new = holdcall.journal()[before:]
    hidden = [e for e in new if e["kind"] == "tools.hidden"]
    assert len(hidden) == 1, hidden
    assert json.loads(hidden[0]["detail"]) == {"hidden": ["get-sum"]}
    pinned = {e["tool"] for e in holdcall.journal() if e["kind"] == "tool.pin"}
    assert set(straight["names"]) <= pinned
    assert not [e for e in new if e["kind"] == "tool.drift"], "the same server, the same definitions"


@pytest.mark.parametrize("mode", MODES)
def test_without_hide_denied_the_listing_crosses_byte_for_byte_and_is_pinned(mode, holdcall, tmp_path: Path):
    holdcall.cli("policy", "deny", "get-sum", "--connector", "plain")
    logdir = tmp_path / "relay"
    seen = run_session(through_relay(holdcall, "plain", logdir, EVERYTHING), list_and_call, mode=mode, env=holdcall.env)
    assert "get-sum" in seen["scenario"]["names"]
    assert_refused_by_holdcall(seen["scenario"]["sum"])
    server_lists, client_lists = listings(logdir / "server.out"), listings(logdir / "client.out")
    assert server_lists == client_lists
    assert [l for l in lines(logdir / "server.out") if b'"tools":[' in l] == [
        l for l in lines(logdir / "client.out") if b'"tools":[' in l
    ]
    listed = holdcall.cli("tools", "list", "--connector", "plain", "--json").stdout
    assert {t["tool"] for t in json.loads(listed)} >= set(seen["scenario"]["names"])
