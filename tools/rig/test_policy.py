"""Policy through the real client and real servers.

A denied tool comes back to the client as a tool error (`isError: true`) in Holdcall's words,
and the server never receives the call; an allowed one returns what it returns directly; an
error of the server's own (a read outside its root) is relayed as the server wrote it. Around
the refused call, every other line still crosses the relay byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from rig import (
    EVERYTHING,
    Holdcall,
    assert_refused_by_holdcall,
    assert_same_lines,
    direct,
    filesystem_server,
    lines,
    refusal_text,
    run_session,
    through_relay,
    to_plain,
    tool_calls,
)
from scenarios import UNICODE

MODES = ["legacy", "auto"]


@pytest.fixture(scope="module")
def holdcall():
    """This module's own Holdcall, with rules: get-sum is denied on `everything`, write_file on
    `filesystem`, and echo on `filesystem` only (which must not touch `everything`'s echo)."""
    instance = Holdcall()
    try:
        instance.cli("policy", "deny", "get-sum", "--connector", "everything")
        instance.cli("policy", "deny", "write_file", "--connector", "filesystem")
        instance.cli("policy", "deny", "echo", "--connector", "filesystem")
        yield instance
    finally:
        instance.close()


def split_refused(logdir: Path, refused_tools: set[str]) -> None:
    """Every line but the refused calls and their refusals crossed the relay unchanged: the
    client's lines minus the refused calls are exactly the server's, and the server's lines are
    exactly the client's minus the refusals (answers with a refused call's id)."""
    client_sent = lines(logdir / "client.in")
    refused_ids, kept = [], []
    for line in client_sent:
        message = json.loads(line)
        if message.get("method") == "tools/call" and message["params"]["name"] in refused_tools:
            refused_ids.append(message["id"])
        else:
            kept.append(line)
    assert refused_ids, "no refused call was sent"
    assert_same_lines(kept, lines(logdir / "server.in"), "client -> server, refused calls aside")

    client_got, refusals = [], []
    for line in lines(logdir / "client.out"):
        message = json.loads(line)
        is_answer = "method" not in message and message.get("id") in refused_ids
        (refusals if is_answer else client_got).append(line)
    assert len(refusals) == len(refused_ids), (refused_ids, refusals)
    assert_same_lines(lines(logdir / "server.out"), client_got, "server -> client, refusals aside")


# --- server-everything ------------------------------------------------------------------------


async def everything_calls(client: Client) -> dict[str, Any]:
    return {
        "denied": to_plain(await client.call_tool("get-sum", {"a": 1, "b": 2})),
        "allowed": to_plain(await client.call_tool("echo", {"message": UNICODE})),
        "denied_again": to_plain(await client.call_tool("get-sum", {"a": 3, "b": 4})),
        "allowed_image": to_plain(await client.call_tool("get-tiny-image", {})),
    }


@pytest.mark.parametrize("mode", MODES)
def test_everything_deny(mode, holdcall, tmp_path: Path):
    before = len(holdcall.decisions("everything"))
    relayed_dir, direct_dir = tmp_path / "relay", tmp_path / "direct"
    relayed = run_session(
        through_relay(holdcall, "everything", relayed_dir, EVERYTHING),
        everything_calls,
        mode=mode,
        env=holdcall.env,
    )["scenario"]
    straight = run_session(direct(direct_dir, EVERYTHING), everything_calls, mode=mode)["scenario"]

    # The client got our refusal, twice; directly, the same call works.
    assert_refused_by_holdcall(relayed["denied"])
    assert_refused_by_holdcall(relayed["denied_again"])
    assert straight["denied"].get("isError") is False, straight["denied"]
    assert "3" in refusal_text(straight["denied"])
    # Allowed calls: the same as direct.
    assert relayed["allowed"] == straight["allowed"]
    assert relayed["allowed_image"] == straight["allowed_image"]

    # The server never saw get-sum; the client did send it.
    assert tool_calls(relayed_dir / "client.in") == ["get-sum", "echo", "get-sum", "get-tiny-image"]
    assert tool_calls(relayed_dir / "server.in") == ["echo", "get-tiny-image"]
    split_refused(relayed_dir, {"get-sum"})

    # And the journal says so, in order.
    assert holdcall.decisions("everything")[before:] == [
        ("get-sum", "deny"),
        ("echo", "allow"),
        ("get-sum", "deny"),
        ("get-tiny-image", "allow"),
    ]


async def concurrent_calls(client: Client) -> dict[str, Any]:
    """Calls in flight together: a long call sending progress, allowed echoes and denied calls,
    so refusals are written while the server's lines stream through."""
    results: dict[str, Any] = {}
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def call(key: str, name: str, arguments: dict[str, Any], **kwargs: Any) -> None:
        results[key] = to_plain(await client.call_tool(name, arguments, **kwargs))

    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: call("long", "trigger-long-running-operation", {"duration": 1, "steps": 10}, progress_callback=on_progress)
        )
        for i in range(8):
            group.start_soon(call, f"echo{i}", "echo", {"message": f"{i} {UNICODE}"})
            group.start_soon(call, f"sum{i}", "get-sum", {"a": i, "b": 1})
    results["progress"] = progress
    return results


@pytest.mark.parametrize("mode", MODES)
def test_everything_concurrent_calls(mode, holdcall, tmp_path: Path):
    relayed_dir, direct_dir = tmp_path / "relay", tmp_path / "direct"
    relayed = run_session(
        through_relay(holdcall, "everything", relayed_dir, EVERYTHING), concurrent_calls, mode=mode, env=holdcall.env
    )["scenario"]
    straight = run_session(direct(direct_dir, EVERYTHING), concurrent_calls, mode=mode)["scenario"]
    for i in range(8):
        assert_refused_by_holdcall(relayed[f"sum{i}"])
        assert straight[f"sum{i}"]["isError"] is False
        assert relayed[f"echo{i}"] == straight[f"echo{i}"]
    assert relayed["long"] == straight["long"]
    assert relayed["progress"] == straight["progress"] == [float(i) for i in range(1, 11)]
    assert "get-sum" not in tool_calls(relayed_dir / "server.in")
    split_refused(relayed_dir, {"get-sum"})


# --- server-filesystem ------------------------------------------------------------------------


@pytest.fixture
def fs_dirs(tmp_path: Path) -> dict[str, str]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "notes.txt").write_text("allowed: ünïcödé ✓\n", encoding="utf-8")
    (outside / "secret.txt").write_text("never relayed\n", encoding="utf-8")
    return {
        "root": str(root.resolve()),
        "notes": str((root / "notes.txt").resolve()),
        "new": str((root / "new.txt").resolve()),
        "secret": str((outside / "secret.txt").resolve()),
    }


def filesystem_calls(dirs: dict[str, str]):
    async def calls(client: Client) -> dict[str, Any]:
        return {
            "write": to_plain(await client.call_tool("write_file", {"path": dirs["new"], "content": "pwned"})),
            "read": to_plain(await client.call_tool("read_text_file", {"path": dirs["notes"]})),
            "outside": to_plain(await client.call_tool("read_text_file", {"path": dirs["secret"]})),
        }

    return calls


@pytest.mark.parametrize("mode", MODES)
def test_filesystem_deny_write_allow_read(mode, holdcall, fs_dirs, tmp_path: Path):
    server = filesystem_server(fs_dirs["root"])
    relayed_dir, direct_dir = tmp_path / "relay", tmp_path / "direct"
    relayed = run_session(
        through_relay(holdcall, "filesystem", relayed_dir, server),
        filesystem_calls(fs_dirs),
        mode=mode,
        env=holdcall.env,
    )["scenario"]

    # The write was refused by Holdcall and never happened.
    assert_refused_by_holdcall(relayed["write"])
    assert not Path(fs_dirs["new"]).exists(), "a denied write_file reached the disk"
    assert tool_calls(relayed_dir / "server.in") == ["read_text_file", "read_text_file"]
    split_refused(relayed_dir, {"write_file"})

    # The allowed read returns the file.
    assert relayed["read"]["isError"] is False
    assert refusal_text(relayed["read"]) == "allowed: ünïcödé ✓\n"
    # A read outside the root is allowed by policy and refused by the server itself: its own
    # error, relayed (split_refused above checked those bytes are the server's).
    assert relayed["outside"]["isError"] is True
    outside_text = refusal_text(relayed["outside"])
    assert "Holdcall" not in outside_text and "outside allowed directories" in outside_text, outside_text

    # Directly, the same calls: the write happens (it is the relay that stopped it), and the
    # allowed read and the server's own error are the same as through the relay.
    straight = run_session(direct(direct_dir, server), filesystem_calls(fs_dirs), mode=mode)["scenario"]
    assert straight["write"]["isError"] is False, straight["write"]
    assert Path(fs_dirs["new"]).read_text() == "pwned"
    assert relayed["read"] == straight["read"]
    assert relayed["outside"] == straight["outside"]

    assert [d for d in holdcall.decisions("filesystem") if d[0] == "write_file"][-1] == ("write_file", "deny")
