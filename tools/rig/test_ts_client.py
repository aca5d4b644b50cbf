"""The official TypeScript MCP SDK client, run with its DEFAULT environment (issue 12, item 1).

`ts_client.mjs` starts the relay the way every SDK-based client (Codex, the Inspector, most
desktop apps) starts a stdio server: `StdioClientTransport` with no `env`, so the relay gets only
HOME, LOGNAME, PATH, SHELL, TERM and USER. The shell meanwhile has XDG_RUNTIME_DIR and
XDG_DATA_HOME set, like a desktop session, and names the home with `--home`, as `holdcall init`
writes it into every routed entry. The fail-open this pins: a relay under the stripped
environment reached a second daemon on the same database, so a deny added from the shell was
ignored and `holdcall approve` could not see what that relay held.

Each test has a home of its own (a fresh daemon), and a byte tap on the server's side of the
relay shows what the server really received.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rig import (
    EVERYTHING,
    SDK_DEFAULT_ENVIRONMENT,
    DesktopHoldcall,
    TsClient,
    assert_refused_by_holdcall,
    direct,
    refusal_text,
    tool_calls,
)

CONNECTOR = "everything"
UNICODE = 'café ñandú 日本語 " \\ {} [] 🚀'


@pytest.fixture
def desktop():
    instance = DesktopHoldcall()
    try:
        yield instance
    finally:
        instance.close()


def relayed_client(holdcall: DesktopHoldcall, logdir: Path) -> TsClient:
    """The TS client, started from the shell's environment, running the routed entry."""
    return TsClient(holdcall.relay(CONNECTOR, logdir, EVERYTHING), env=holdcall.shell_env)


def assert_sdk_default_environment(client: TsClient) -> None:
    """The relay really runs under the SDK's default environment (read from its /proc)."""
    names = set(client.ready["environment"])
    assert names <= SDK_DEFAULT_ENVIRONMENT, f"the relay got more than the SDK's default: {names}"
    assert {"HOME", "PATH"} <= names, names


def assert_no_other_home(holdcall: DesktopHoldcall) -> None:
    """Nothing landed on the home a relay without `--home` would have used."""
    assert not holdcall.stray.exists(), f"a relay used another home: {holdcall.stray}"


def test_the_ts_sdk_client_with_its_default_environment_lists_and_calls_through_the_relay_as_it_does_directly(
    desktop: DesktopHoldcall, tmp_path: Path
):
    arguments = {"message": UNICODE}
    with relayed_client(desktop, tmp_path / "relay") as client:
        assert_sdk_default_environment(client)
        relayed_tools = client.result("list")
        relayed_echo = client.result("call", name="echo", arguments=arguments)
    with TsClient(direct(tmp_path / "direct", EVERYTHING), env=desktop.shell_env) as client:
        direct_tools = client.result("list")
        direct_echo = client.result("call", name="echo", arguments=arguments)

    assert relayed_tools == direct_tools
    assert "echo" in [tool["name"] for tool in relayed_tools["tools"]]
    assert relayed_echo == direct_echo == {"content": [{"type": "text", "text": f"Echo: {UNICODE}"}]}
    assert tool_calls(tmp_path / "relay" / "server.in") == ["echo"]
    assert desktop.decisions(CONNECTOR) == [("echo", "allow")]
    assert_no_other_home(desktop)


def test_a_call_denied_from_the_shell_comes_back_to_the_ts_sdk_client_as_holdcalls_refusal_and_never_reaches_the_server(
    desktop: DesktopHoldcall, tmp_path: Path
):
    desktop.cli("policy", "deny", "get-sum", "--connector", CONNECTOR)
    logdir = tmp_path / "relay"
    with relayed_client(desktop, logdir) as client:
        assert_sdk_default_environment(client)
        denied = client.result("call", name="get-sum", arguments={"a": 1, "b": 2})
        allowed = client.result("call", name="echo", arguments={"message": "still here"})

    assert_refused_by_holdcall(denied)
    assert allowed == {"content": [{"type": "text", "text": "Echo: still here"}]}
    assert tool_calls(logdir / "server.in") == ["echo"]
    assert desktop.decisions(CONNECTOR) == [("get-sum", "deny"), ("echo", "allow")]
    assert_no_other_home(desktop)


def test_a_deny_added_from_the_shell_while_the_ts_sdk_client_is_connected_refuses_its_next_call(
    desktop: DesktopHoldcall, tmp_path: Path
):
    """The issue's fail-open repro: the same tool, allowed, then denied from the shell, then
    called again on the same connection."""
    logdir = tmp_path / "relay"
    with relayed_client(desktop, logdir) as client:
        assert_sdk_default_environment(client)
        first = client.result("call", name="get-sum", arguments={"a": 1, "b": 2})
        assert first.get("isError") is not True, first
        assert "3" in refusal_text(first)

        desktop.cli("policy", "deny", "get-sum", "--connector", CONNECTOR)
        second = client.result("call", name="get-sum", arguments={"a": 3, "b": 4})

    assert_refused_by_holdcall(second)
    # The server got the first call only.
    assert [
        json.loads(line)["params"]["arguments"]
        for line in (logdir / "server.in").read_bytes().splitlines()
        if json.loads(line).get("method") == "tools/call"
    ] == [{"a": 1, "b": 2}]
    assert desktop.decisions(CONNECTOR) == [("get-sum", "allow"), ("get-sum", "deny")]
    assert_no_other_home(desktop)


def test_an_ask_added_from_the_shell_holds_the_ts_sdk_clients_next_call_and_holdcall_approve_in_the_shell_lists_and_releases_it(
    desktop: DesktopHoldcall, tmp_path: Path
):
    logdir = tmp_path / "relay"
    with relayed_client(desktop, logdir) as client:
        assert_sdk_default_environment(client)
        assert client.result("call", name="echo", arguments={"message": "before"})["content"][0]["text"] == "Echo: before"

        desktop.cli("policy", "ask", "echo", "--connector", CONNECTOR)
        pending = client.send("call", name="echo", arguments={"message": UNICODE})

        held = desktop.wait_for_held("the held call")
        assert [(call["connector"], call["tool"]) for call in held] == [(CONNECTOR, "echo")]
        assert json.loads(held[0]["arguments"]) == {"message": UNICODE}
        # Held: neither answered nor forwarded.
        assert not client.answered(pending)
        assert tool_calls(logdir / "server.in") == ["echo"]

        desktop.cli("approve", held[0]["id"])
        released = client.answer(pending)

    assert released["result"] == {"content": [{"type": "text", "text": f"Echo: {UNICODE}"}]}
    assert tool_calls(logdir / "server.in") == ["echo", "echo"]
    assert desktop.held_calls() == []
    assert_no_other_home(desktop)
