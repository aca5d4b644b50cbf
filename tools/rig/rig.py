"""The rig's plumbing: where things are, a Holdcall home per test module, one client session
(direct or through `holdcall serve`, with byte taps on both sides), and the byte comparisons.

Nothing here knows a scenario; test_equivalence.py and test_policy.py do.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

RIG = Path(__file__).resolve().parent
REPO = RIG.parent.parent
TAP = RIG / "tap.py"
NODE_MODULES = RIG / "node_modules" / "@modelcontextprotocol"
EVERYTHING = ["node", str(NODE_MODULES / "server-everything" / "dist" / "index.js")]


# The rig's own Node.js 22, from the npm package node-linux-<arch> (package-lock.json pins it
# with its integrity hash): the MCP Inspector needs Node 22.19 or newer, the machine's may be
# older, and the rig never runs a global node or npx for its clients.
def pinned_node() -> Path:
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        os.uname().machine, os.uname().machine
    )
    path = RIG / "node_modules" / f"node-linux-{arch}" / "bin" / "node"
    if not path.is_file():
        raise RuntimeError(f"no pinned Node.js at {path}: run tools/rig/setup")
    return path


def package_bin(package: str, name: str) -> Path:
    """The file an installed npm package's `bin` entry `name` names (what npx would run)."""
    folder = RIG / "node_modules" / package
    manifest = json.loads((folder / "package.json").read_text())
    bins = manifest["bin"]
    entry = bins if isinstance(bins, str) else bins[name]
    return (folder / entry).resolve()


TS_CLIENT = RIG / "ts_client.mjs"


def filesystem_server(*roots: str) -> list[str]:
    return ["node", str(NODE_MODULES / "server-filesystem" / "dist" / "index.js"), *roots]


def holdcall_binary() -> Path:
    raw = os.environ.get("HOLDCALL_BINARY", "target/debug/holdcall")
    path = Path(raw)
    return path if path.is_absolute() else REPO / path


@functools.lru_cache(maxsize=None)
def pinned_binary() -> Path:
    """A private copy of the binary, made once per run.

    The relay talks only to a daemon that is the same executable image (same device and inode).
    A `cargo build` that replaces target/debug/holdcall during the run would otherwise leave a
    daemon of the old image that new relays refuse, and every call would be refused."""
    source = holdcall_binary()
    if not source.is_file():
        raise RuntimeError(f"no holdcall binary at {source}: run `cargo build` or set HOLDCALL_BINARY")
    folder = tempfile.mkdtemp(prefix="hc-rig-bin-")
    atexit.register(shutil.rmtree, folder, True)
    copy = Path(folder) / "holdcall"
    shutil.copy2(source, copy)
    copy.chmod(0o755)
    return copy


# Every session, however it goes, ends within this many seconds or the test fails.
SESSION_DEADLINE_S = 60
# The client's own per-request timeout.
READ_TIMEOUT_S = 20


class Holdcall:
    """One isolated Holdcall: its own HOLDCALL_HOME and XDG_RUNTIME_DIR (so its own daemon)."""

    def __init__(self) -> None:
        self.binary = pinned_binary()
        self.home = tempfile.mkdtemp(prefix="hc-rig-home-")
        # Short: the daemon's socket path must fit in sun_path.
        self.runtime = tempfile.mkdtemp(prefix="hcr", dir="/tmp")
        os.chmod(self.runtime, 0o700)

    @property
    def env(self) -> dict[str, str]:
        return {"HOLDCALL_HOME": self.home, "XDG_RUNTIME_DIR": self.runtime}

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.env}
        proc = subprocess.run(
            [str(self.binary), *args], env=env, capture_output=True, text=True, timeout=30
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"holdcall {' '.join(args)} exited {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def journal(self) -> list[dict[str, Any]]:
        """Every journal entry, oldest first (none before the daemon first ran)."""
        out = self.cli("log", "--json", "--limit", "100000000", check=False)
        if out.returncode != 0 and "no journal yet" in out.stderr:
            return []
        if out.returncode != 0:
            raise AssertionError(f"holdcall log --json exited {out.returncode}: {out.stderr}")
        return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]

    def decisions(self, connector: str | None = None) -> list[tuple[str, str]]:
        """Each journaled call's (tool, decision), oldest first; only `connector`'s when given."""
        return [
            (entry["tool"], entry["decision"])
            for entry in self.journal()
            if entry["kind"] == "call.request" and connector in (None, entry["connector"])
        ]

    def held_calls(self) -> list[dict[str, Any]]:
        """What `holdcall approve --json` lists: the calls held for a person now."""
        out = self.cli("approve", "--json")
        return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]

    def wait_for_held(self, what: str, deadline_s: float = 20) -> list[dict[str, Any]]:
        """The held calls, once `approve` lists at least one (failing after `deadline_s`)."""
        held: list[dict[str, Any]] = []

        def listed() -> bool:
            nonlocal held
            held = self.held_calls()
            return bool(held)

        wait_until(listed, f"holdcall approve to list {what}", deadline_s)
        return held

    def check_allowed(self, since: int, logdir: Path) -> None:
        """The journal entries after the first `since` allowed exactly the calls the server got
        (in `logdir`'s taps), in order, and each call the server answered got its outcome
        recorded (the relay reports it a moment after the answer passes: wait a little)."""
        calls = answered_calls(logdir)
        deadline = time.monotonic() + 5
        while True:
            entries = self.journal()[since:]
            requests = [e for e in entries if e["kind"] == "call.request"]
            assert [(e["tool"], e["decision"]) for e in requests] == [(t, "allow") for t, _ in calls], requests
            outcomes = {(e["session_id"], e["seq"]) for e in entries if e["kind"] == "call.outcome"}
            missing = [
                e["tool"]
                for e, (_, answered) in zip(requests, calls)
                if answered and (e["session_id"], e["seq"]) not in outcomes
            ]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no call.outcome journaled for {missing}")
            time.sleep(0.05)

    def close(self) -> None:
        self.cli("daemon", "stop", check=False)
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.runtime, ignore_errors=True)


# The environment variables the MCP SDKs' stdio transports pass a server they start when the
# client gives no `env` (TypeScript: getDefaultEnvironment(); Python: the same list).
SDK_DEFAULT_ENVIRONMENT = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}


def wait_until(check: Callable[[], bool], what: str, deadline_s: float = 10) -> None:
    """Polls `check` until it holds, failing after `deadline_s`: for another process's state,
    which gives the test nothing to wait on."""
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class DesktopHoldcall(Holdcall):
    """A Holdcall as a desktop user has it: the shell has XDG_RUNTIME_DIR and XDG_DATA_HOME set
    (a HOME of its own, so nothing touches the real one), the home is
    `$XDG_DATA_HOME/holdcall` (where the shell's `holdcall` finds it), and every command here
    names it with `--home`, as `holdcall init` writes it into a routed entry. A relay started
    with an SDK client's stripped environment (no XDG_*) must land on this same home and its
    one daemon; without `--home` it would land on `$HOME/.local/share/holdcall` (`stray`)."""

    def __init__(self) -> None:
        self.binary = pinned_binary()
        # Short: the daemon's socket, <home>/daemon.sock, must fit in sun_path.
        self.root = Path(tempfile.mkdtemp(prefix="hcd", dir="/tmp"))
        self.user_home = self.root / "u"
        self.data = self.root / "d"
        self.runtime_dir = self.root / "r"
        for folder in (self.user_home, self.data, self.runtime_dir):
            folder.mkdir(mode=0o700)
        self.home = str(self.data / "holdcall")
        self.runtime = str(self.runtime_dir)
        self.stray = self.user_home / ".local" / "share" / "holdcall"

    @property
    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.user_home),
            "XDG_DATA_HOME": str(self.data),
            "XDG_RUNTIME_DIR": self.runtime,
        }

    @property
    def shell_env(self) -> dict[str, str]:
        """The shell's environment: this process's, without HOLDCALL_HOME, plus `env`."""
        base = {k: v for k, v in os.environ.items() if k != "HOLDCALL_HOME"}
        return {**base, **self.env}

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`holdcall --home HOME ARGS…` from the shell."""
        proc = subprocess.run(
            [str(self.binary), "--home", self.home, *args],
            env=self.shell_env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"holdcall {' '.join(args)} exited {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def relay(self, connector: str, logdir: Path, server: list[str]) -> list[str]:
        """The routed entry a client runs: `holdcall --home HOME serve --connector C --
        tap(server) SERVER`."""
        return [
            str(self.binary), "--home", self.home, "serve", "--connector", connector, "--",
            *tapped(logdir, "server", server),
        ]

    def close(self) -> None:
        self.cli("daemon", "stop", check=False)
        if self.stray.exists():  # a failed test's relay landed there: stop its daemon too
            subprocess.run(
                [str(self.binary), "--home", str(self.stray), "daemon", "stop"],
                env=self.shell_env, capture_output=True, timeout=30, check=False,
            )
        shutil.rmtree(self.root, ignore_errors=True)


def tapped(logdir: Path, name: str, cmd: list[str]) -> list[str]:
    return [sys.executable, str(TAP), str(logdir), name, "--", *cmd]


def through_relay(holdcall: Holdcall, connector: str, logdir: Path, server: list[str]) -> list[str]:
    """client -> tap(client) -> holdcall serve -> tap(server) -> server"""
    relay = [str(holdcall.binary), "serve", "--connector", connector, "--client", "rig", "--"]
    return tapped(logdir, "client", relay + tapped(logdir, "server", server))


def direct(logdir: Path, server: list[str]) -> list[str]:
    """client -> tap(server) -> server: the same server, no relay."""
    return tapped(logdir, "server", server)


def to_plain(value: Any) -> Any:
    """What the client saw, as plain JSON-able data (pydantic models dumped by alias)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value


async def outcome(awaitable: Awaitable[Any]) -> Any:
    """The result as plain data, or the JSON-RPC error the client raised for it."""
    try:
        return to_plain(await awaitable)
    except MCPError as err:
        return {"mcp_error": {"code": err.code, "message": err.error.message}}


ScenarioFn = Callable[[Client], Awaitable[dict[str, Any]]]


@dataclass
class Callbacks:
    """Client callbacks a scenario needs (each also changes the capabilities the client sends)."""

    sampling: Any = None
    elicitation: Any = None
    roots: Any = None
    logging: Any = None
    kwargs: dict[str, Any] = field(default_factory=dict)


def run_session(
    argv: list[str],
    scenario: ScenarioFn,
    *,
    mode: str,
    env: dict[str, str] | None = None,
    callbacks: Callbacks | None = None,
) -> dict[str, Any]:
    """Start `argv` as the server with the real Python client, run `scenario`, close cleanly.

    Returns what the client saw: the negotiated version, the server's identity, and whatever
    the scenario returned.
    """
    cb = callbacks or Callbacks()
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env or {})

    async def main() -> dict[str, Any]:
        with anyio.fail_after(SESSION_DEADLINE_S):
            client = Client(
                params,
                mode=mode,
                read_timeout_seconds=READ_TIMEOUT_S,
                sampling_callback=cb.sampling,
                elicitation_callback=cb.elicitation,
                list_roots_callback=cb.roots,
                logging_callback=cb.logging,
                **cb.kwargs,
            )
            async with client:
                seen = {
                    "protocol_version": client.protocol_version,
                    "server_info": to_plain(client.server_info),
                    "server_capabilities": to_plain(client.server_capabilities),
                    "instructions": client.instructions,
                }
                seen["scenario"] = await scenario(client)
            return seen

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations of 2025-era features we use on purpose
        return anyio.run(main)


# ---------------------------------------------------------------------------------------------
# Byte logs


def lines(path: Path) -> list[bytes]:
    """The exact bytes of a tap log, split after each newline (a last line without one kept)."""
    data = path.read_bytes()
    return data.splitlines(keepends=True) if data else []


def show(line: bytes, limit: int = 300) -> str:
    text = repr(line)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(line)} bytes)"


def assert_same_lines(sent: list[bytes], received: list[bytes], what: str) -> None:
    """Every line, byte for byte, in the same order: a readable message at the first difference."""
    for index, (a, b) in enumerate(zip(sent, received)):
        if a != b:
            raise AssertionError(
                f"{what}: line {index} differs\n  sent:     {show(a)}\n  received: {show(b)}"
            )
    if len(sent) != len(received):
        longer, name = (sent, "sent") if len(sent) > len(received) else (received, "received")
        extra = "\n".join(show(line) for line in longer[min(len(sent), len(received)) :][:5])
        raise AssertionError(
            f"{what}: {len(sent)} lines sent, {len(received)} received; extra on the {name} side:\n"
            f"{extra}"
        )


def assert_relayed_unchanged(logdir: Path) -> None:
    """What the client sent is what the server got, and what the server sent is what the client
    got: the relay is invisible."""
    client_sent, server_got = lines(logdir / "client.in"), lines(logdir / "server.in")
    server_sent, client_got = lines(logdir / "server.out"), lines(logdir / "client.out")
    assert client_sent, "the client sent nothing: the scenario did not run"
    assert server_sent, "the server sent nothing: the scenario did not run"
    assert_same_lines(client_sent, server_got, "client -> server")
    assert_same_lines(server_sent, client_got, "server -> client")


def messages(path: Path) -> list[dict[str, Any]]:
    """A tap log's lines parsed as JSON (each line must be JSON)."""
    return [json.loads(line) for line in lines(path)]


def methods(path: Path) -> list[str]:
    return [m.get("method", "") for m in messages(path)]


def tool_calls(path: Path) -> list[str]:
    """The tool names of every tools/call in a tap log."""
    return [
        m["params"]["name"]
        for m in messages(path)
        if m.get("method") == "tools/call" and isinstance(m.get("params"), dict)
    ]


def answered_calls(logdir: Path) -> list[tuple[str, bool]]:
    """Each tools/call the server received, in order, and whether the server answered it (a
    call the client cancelled may never be)."""
    answered = {
        json.dumps(m["id"]) for m in messages(logdir / "server.out") if "id" in m and "method" not in m
    }
    return [
        (m["params"]["name"], json.dumps(m.get("id")) in answered)
        for m in messages(logdir / "server.in")
        if m.get("method") == "tools/call" and isinstance(m.get("params"), dict)
    ]


def refusal_text(result: dict[str, Any]) -> str:
    """The text blocks of a tool result, joined: a refusal's words, or what the tool returned."""
    return "".join(block.get("text", "") for block in result.get("content", []))


def assert_refused_by_holdcall(result: dict[str, Any]) -> None:
    """A tool error in Holdcall's words for a refused call, telling the agent not to retry."""
    assert result.get("isError") is True, result
    text = refusal_text(result)
    assert text.startswith("Holdcall refused this call"), text
    assert "Do not retry automatically" in text, text


# ---------------------------------------------------------------------------------------------
# The TypeScript SDK client (ts_client.mjs), remote-controlled


class TsClient:
    """One session of the official TypeScript SDK client (`ts_client.mjs`, run with the rig's
    pinned Node.js) against `argv`, started from the shell's environment `env`: the SDK itself
    strips what the server gets down to its default variables. Requests go out as JSON lines;
    answers come back in the order they complete, so a held call does not block the next."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        import threading

        self.proc = subprocess.Popen(
            [str(pinned_node()), str(TS_CLIENT), "--", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        self._answers: dict[int, dict[str, Any]] = {}
        self._ready: dict[str, Any] | None = None
        self._next = 0
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.ready = self._wait(lambda: self._ready, "the client to connect")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            with self._changed:
                if "ready" in message:
                    self._ready = message["ready"]
                else:
                    self._answers[message["id"]] = message
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _wait(self, got: Callable[[], Any], what: str, timeout: float = SESSION_DEADLINE_S) -> Any:
        deadline = time.monotonic() + timeout
        with self._changed:
            while (value := got()) is None:
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise AssertionError(f"ts_client exited {self.proc.returncode} waiting for {what}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}")
                self._changed.wait(min(left, 0.5))
            return value

    def send(self, op: str, **fields: Any) -> int:
        """Sends a request; returns its id (for `answer`)."""
        assert self.proc.stdin is not None
        self._next += 1
        self.proc.stdin.write(json.dumps({"id": self._next, "op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        return self._next

    def answer(self, request_id: int, timeout: float = SESSION_DEADLINE_S) -> dict[str, Any]:
        """The answer to request `request_id`: {"result": …} or {"error": {…}}."""
        return self._wait(lambda: self._answers.get(request_id), f"answer {request_id}", timeout)

    def answered(self, request_id: int) -> bool:
        with self._changed:
            return request_id in self._answers

    def result(self, op: str, **fields: Any) -> Any:
        """Sends a request and returns its result (an error answer fails the test)."""
        reply = self.answer(self.send(op, **fields))
        assert "result" in reply, reply
        return reply["result"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.result("close")
            finally:
                try:
                    self.proc.wait(timeout=SESSION_DEADLINE_S)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()

    def __enter__(self) -> "TsClient":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.close()
        elif self.proc.poll() is None:  # a failed test: do not wait on calls still held
            self.proc.kill()
            self.proc.wait()
