"""The MCP Inspector's CLI (`@modelcontextprotocol/inspector --cli`) through the relay.

The Inspector is the first client most server authors try, and one of the SDK-based clients of
issue 12: it starts the server with its SDK's default environment (HOME, LOGNAME, PATH, SHELL,
TERM, USER). Each call below is one Inspector run, as a person would type it:
`mcp-inspector --cli --method M [...] -- holdcall --home HOME serve --connector everything --
SERVER`. It runs with the rig's pinned Node.js 22 (the Inspector needs 22.19 or newer) and the
installed package's own bin file, never npx. The shell has XDG_RUNTIME_DIR and XDG_DATA_HOME
set, like a desktop session.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rig import (
    EVERYTHING,
    SESSION_DEADLINE_S,
    DesktopHoldcall,
    direct,
    package_bin,
    pinned_node,
    tool_calls,
)

CONNECTOR = "everything"


@pytest.fixture(scope="module")
def desktop():
    """This module's Holdcall, with get-sum denied on `everything` from the shell."""
    instance = DesktopHoldcall()
    try:
        instance.cli("policy", "deny", "get-sum", "--connector", CONNECTOR)
        yield instance
    finally:
        instance.close()


def inspector(desktop: DesktopHoldcall, target: list[str], *options: str) -> tuple[int, Any]:
    """One `mcp-inspector --cli OPTIONS -- TARGET` run from the shell: its exit status and the
    JSON it printed."""
    launcher = package_bin("@modelcontextprotocol/inspector", "mcp-inspector")
    proc = subprocess.run(
        [str(pinned_node()), str(launcher), "--cli", *options, "--", *target],
        env=desktop.shell_env,
        cwd=desktop.user_home,
        capture_output=True,
        text=True,
        timeout=SESSION_DEADLINE_S,
    )
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError as err:
        raise AssertionError(
            f"the Inspector printed no JSON (exit {proc.returncode})\n"
            f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
        ) from err


def both_ways(desktop: DesktopHoldcall, tmp_path: Path, *options: str) -> tuple[Any, Any, Path]:
    """The same Inspector command through the relay and directly: what each printed (both must
    exit 0), and the relayed run's tap folder."""
    relayed_dir = tmp_path / "relay"
    code, relayed = inspector(desktop, desktop.relay(CONNECTOR, relayed_dir, EVERYTHING), *options)
    assert code == 0, relayed
    code, straight = inspector(desktop, direct(tmp_path / "direct", EVERYTHING), *options)
    assert code == 0, straight
    return relayed, straight, relayed_dir


def requests(desktop: DesktopHoldcall) -> list[dict[str, Any]]:
    return [e for e in desktop.journal() if e["kind"] == "call.request" and e["connector"] == CONNECTOR]


def test_the_inspector_cli_lists_the_same_tools_through_the_relay_as_directly(desktop: DesktopHoldcall, tmp_path: Path):
    relayed, straight, logdir = both_ways(desktop, tmp_path, "--method", "tools/list")
    assert relayed == straight
    assert {"echo", "get-sum"} <= {tool["name"] for tool in relayed["tools"]}
    assert "tools/list" in [json.loads(line).get("method") for line in (logdir / "server.in").read_bytes().splitlines()]
    assert not desktop.stray.exists(), f"a relay used another home: {desktop.stray}"


def test_an_allowed_inspector_cli_call_returns_what_the_server_returns_directly(desktop: DesktopHoldcall, tmp_path: Path):
    before = len(requests(desktop))
    relayed, straight, logdir = both_ways(
        desktop, tmp_path, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=héllo ✓"
    )
    assert relayed == straight == {"content": [{"type": "text", "text": "Echo: héllo ✓"}]}
    assert tool_calls(logdir / "server.in") == ["echo"]
    assert [(e["tool"], e["decision"]) for e in requests(desktop)[before:]] == [("echo", "allow")]


def test_a_denied_inspector_cli_call_comes_back_as_holdcalls_refusal_and_never_reaches_the_server(
    desktop: DesktopHoldcall, tmp_path: Path
):
    before = len(requests(desktop))
    logdir = tmp_path / "relay"
    options = ("--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=1", "b=2")
    code, refused = inspector(desktop, desktop.relay(CONNECTOR, logdir, EVERYTHING), *options)
    code_direct, straight = inspector(desktop, direct(tmp_path / "direct", EVERYTHING), *options)

    # The Inspector shows the tool error as the result (and exits 0, as for any tool error).
    assert refused.get("isError") is True, (code, refused)
    text = "".join(block.get("text", "") for block in refused.get("content", []))
    assert text.startswith("Holdcall refused this call") and "Do not retry automatically" in text, text
    # Directly, the same call runs.
    assert code_direct == 0 and straight.get("isError") is not True, straight
    assert "3" in json.dumps(straight)
    # The server never got it: its tap shows the session but no tools/call.
    server_methods = [json.loads(line).get("method") for line in (logdir / "server.in").read_bytes().splitlines()]
    assert "initialize" in server_methods and "tools/call" not in server_methods, server_methods
    entries = requests(desktop)[before:]
    assert [(e["tool"], e["decision"]) for e in entries] == [("get-sum", "deny")]
