"""The rig's plumbing for `holdmap mcp` (test_holdmap.py): where the binary is, a session of the
real Python client at one protocol revision, the listeners the tests start themselves (a dev
server, a fake agent with a dev server of its own, holdmap under a shell that holds a port), and
readers for what crossed the wire.

Every process started here is stopped here, by its own pid (the Popen handle): nothing is ever
signalled by name, and nothing the tests did not start is ever signalled at all.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable

import mcp.client.session as client_session
import mcp_types as types
from mcp import Client

from rig import REPO, lines, run_session, wait_until

# The four revisions negotiated with `initialize`, oldest first, and the modern one (no
# handshake: `server/discover`, `_meta` on every request).
HANDSHAKE_REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
MODERN_REVISION = "2026-07-28"
REVISIONS = [*HANDSHAKE_REVISIONS, MODERN_REVISION]

TOOLS = {
    "list_ports",
    "explain_port",
    "inspect_port",
    "find_free_port",
    "wait_for_port",
    "get_topology",
    "plan_cluster_stop",
    "stop_port",
    "stop_agent_ports",
}
STOP_TOOLS = {"stop_port", "stop_agent_ports"}
PROMPTS = {"diagnose_port", "prepare_dev_server", "inspect_agents"}
GUIDE_URI = "holdmap://guide"

# A real interpreter, not a shim or the venv's symlink: the process trees holdmap reads should be
# the plain ones a person gets.
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else os.path.realpath(sys.executable)
BASH = shutil.which("bash") or "/bin/bash"

# How long a process the tests started gets to show its port, or to exit once stopped.
START_DEADLINE_S = 10
EXIT_DEADLINE_S = 15


def holdmap_binary() -> Path:
    """HOLDMAP_BINARY (tools/rig/run sets it; default target/debug/holdmap in the repo)."""
    raw = os.environ.get("HOLDMAP_BINARY", "target/debug/holdmap")
    path = Path(raw)
    path = path if path.is_absolute() else REPO / path
    if not path.is_file():
        raise RuntimeError(f"no holdmap binary at {path}: run `cargo build` or set HOLDMAP_BINARY")
    return path


def holdmap_mcp() -> list[str]:
    return [str(holdmap_binary()), "mcp"]


def at_least(revision: str, floor: str) -> bool:
    """Revisions are ISO dates: string order is their order."""
    return revision >= floor


class RawRequest(types.Request[dict[str, Any], str]):
    """A request whose params the SDK would not build itself (arguments `[]`, unknown params): sent
    through the session, so it is stamped for the negotiated revision like any other."""


def run_holdmap(
    argv: list[str],
    scenario: Callable[[Client], Awaitable[dict[str, Any]]],
    revision: str,
    *,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One session of the real client against `argv` at `revision`, with the SDK's default
    environment (plus `env`). For a handshake revision the client's `initialize` proposes it:
    the SDK always proposes its newest, so the module constant it reads is set for the session
    (and put back); 2026-07-28 is the SDK's `auto` mode, which probes `server/discover`."""
    if revision == MODERN_REVISION:
        seen = run_session(argv, scenario, mode="auto", env=env)
    else:
        saved = client_session.LATEST_HANDSHAKE_VERSION
        client_session.LATEST_HANDSHAKE_VERSION = revision
        try:
            seen = run_session(argv, scenario, mode="legacy", env=env)
        finally:
            client_session.LATEST_HANDSHAKE_VERSION = saved
    assert seen["protocol_version"] == revision, seen["protocol_version"]
    return seen


async def reinitialize(client: Client, revision: str) -> types.InitializeResult:
    """A second `initialize` on the same connection (the SDK's own `initialize()` answers from its
    cache the second time)."""
    return await client.session.send_request(
        types.InitializeRequest(
            params=types.InitializeRequestParams(
                protocol_version=revision,
                capabilities=types.ClientCapabilities(),
                client_info=types.Implementation(name="rig", version="1"),
            )
        ),
        types.InitializeResult,
    )


# ---------------------------------------------------------------------------------------------
# What crossed the wire (a tap on the server side: the SDK drops fields a revision does not
# have before the test could see them, so presence and absence are checked on the bytes)


def exchanges(logdir: Path) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each request the server received, with the server's answer (None if unanswered)."""
    answers = {
        json.dumps(m["id"]): m
        for m in map(json.loads, lines(logdir / "server.out"))
        if isinstance(m, dict) and "id" in m and "method" not in m
    }
    return [
        (m, answers.get(json.dumps(m["id"])))
        for m in map(json.loads, lines(logdir / "server.in"))
        if isinstance(m, dict) and "id" in m and "method" in m
    ]


def answers_to(logdir: Path, method: str) -> list[dict[str, Any]]:
    return [a for r, a in exchanges(logdir) if r["method"] == method and a is not None]


# ---------------------------------------------------------------------------------------------
# Results


def texts(result: dict[str, Any]) -> list[str]:
    return [b.get("text", "") for b in result.get("content", []) if b.get("type") == "text"]


def json_block(result: dict[str, Any]) -> dict[str, Any] | None:
    """The text block holding the result as JSON (the fallback for clients without
    structuredContent), or None."""
    for text in reversed(texts(result)):
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def structured(result: dict[str, Any], revision: str) -> dict[str, Any]:
    """A successful result's JSON, checked the way the revision wants it: from 2025-06-18
    `structuredContent` is present and equal to the JSON text block; below, only the text block."""
    assert result.get("isError") is not True, result
    block = json_block(result)
    assert block is not None, f"no JSON text block: {result}"
    if at_least(revision, "2025-06-18"):
        assert result.get("structuredContent") == block, result
    else:
        assert "structuredContent" not in result, result
    return block


def tool_error(result: dict[str, Any]) -> str:
    """A tool error's words (isError, no structured content)."""
    assert result.get("isError") is True, result
    assert "structuredContent" not in result, result
    text = "\n".join(texts(result))
    assert text.strip(), result
    return text


def pids_in(value: Any) -> set[int]:
    """Every process id a result names: ints under keys with "pid" in them, lists of them too
    (a parent's pid, named for information, is not one the result acts on)."""
    found: set[int] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if "pid" in key.lower() and key.lower() not in ("ppid", "parent_pid"):
                if isinstance(item, int) and not isinstance(item, bool):
                    found.add(item)
                elif isinstance(item, list):
                    found.update(i for i in item if isinstance(i, int) and not isinstance(i, bool))
            found |= pids_in(item)
    elif isinstance(value, list):
        for item in value:
            found |= pids_in(item)
    return found


# ---------------------------------------------------------------------------------------------
# Ports


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def read_first_line(stream: Any, what: str) -> str:
    """The first line of a child's pipe, within the start deadline (a reader thread, so a child
    that never writes fails the test instead of hanging it)."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(START_DEADLINE_S)
    if not got or not got[0]:
        raise AssertionError(f"{what} wrote no first line within {START_DEADLINE_S} s")
    return got[0]


def project_folder(prefix: str) -> Path:
    """A temp folder that looks like a JavaScript project (a package.json with a dev script)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / "package.json").write_text(
        json.dumps({"name": folder.name.lower(), "private": True, "scripts": {"dev": "python3 -m http.server"}})
    )
    return folder


class DevServer:
    """`python3 -m http.server 0 --bind 127.0.0.1` in a project folder, started by the test: its
    port is the one it prints (asked of the kernel, so no race for a free port)."""

    def __init__(self) -> None:
        self.folder = project_folder("hm-dev-")
        self.proc = subprocess.Popen(
            [PYTHON, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
            cwd=self.folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        first = read_first_line(self.proc.stdout, "http.server")
        # "Serving HTTP on 127.0.0.1 port 43117 (http://127.0.0.1:43117/) ..."
        self.port = int(first.split(" port ", 1)[1].split()[0])
        self.pid = self.proc.pid
        wait_until(lambda: accepts(self.port), f"http.server on {self.port}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_exit(self) -> int:
        return self.proc.wait(timeout=EXIT_DEADLINE_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=EXIT_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "DevServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# A coding agent as part 1 recognises one: a program named `claude` (its process name and its
# script's name) that starts a dev server in a project folder and waits. It reports the dev
# server's pid and port in a file, and stops it when its stdin closes.
FAKE_AGENT = f"""#!{PYTHON}
import json, os, subprocess, sys
project, report = sys.argv[1], sys.argv[2]
child = subprocess.Popen([{PYTHON!r}, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
                         cwd=project, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
port = int(child.stdout.readline().split(" port ", 1)[1].split()[0])
with open(report + ".tmp", "w") as f:
    json.dump({{"pid": child.pid, "port": port}}, f)
os.rename(report + ".tmp", report)
sys.stdin.read()
if child.poll() is None:
    child.terminate()
    child.wait()
"""


class FakeAgent:
    """A `claude` process (started by the test) with a dev server child of its own."""

    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="hm-agent-"))
        self.project = project_folder("hm-agent-project-")
        script = self.home / "claude"
        script.write_text(FAKE_AGENT)
        script.chmod(0o755)
        report = self.home / "report.json"
        self.proc = subprocess.Popen(
            [str(script), str(self.project), str(report)],
            cwd=self.project,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.pid = self.proc.pid
        wait_until(report.exists, "the fake agent's dev server")
        info = json.loads(report.read_text())
        self.server_pid: int = info["pid"]
        self.port: int = info["port"]
        wait_until(lambda: accepts(self.port), f"the fake agent's http.server on {self.port}")

    def server_alive(self) -> bool:
        try:
            os.kill(self.server_pid, 0)  # signal 0: only asks whether the pid exists
        except ProcessLookupError:
            return False
        # A zombie (exited, not yet reaped by the agent) is not alive.
        try:
            stat = Path(f"/proc/{self.server_pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the agent stops its own dev server, then exits
            try:
                self.proc.wait(timeout=EXIT_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # If the agent died first, its dev server may outlive it: stop it by its pid, if that
        # pid is still the http.server the agent started in this test's project folder.
        if self.server_alive():
            try:
                ours = os.readlink(f"/proc/{self.server_pid}/cwd") == str(self.project)
            except OSError:
                ours = False
            if ours:
                os.kill(self.server_pid, 15)
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.project, ignore_errors=True)

    def __enter__(self) -> "FakeAgent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# holdmap under a shell that holds a listening port: a Python process binds 127.0.0.1:0, writes
# the port and its pid, then becomes bash (exec: same pid, the socket inherited), and bash runs
# holdmap with that descriptor closed. So the port's only owner is holdmap's own parent shell.
SHELL_PARENT = """
import os, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
fd = s.fileno()
os.set_inheritable(fd, True)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{s.getsockname()[1]} {os.getpid()}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
os.execv(sys.argv[2], ["bash", "-c", f'"$0" mcp {fd}>&-; exit $?', sys.argv[3]])
"""


def under_a_shell_holding_a_port(report: Path) -> list[str]:
    """The command line for holdmap under its port-holding parent shell (see SHELL_PARENT)."""
    return [PYTHON, "-c", SHELL_PARENT, str(report), BASH, str(holdmap_binary())]
