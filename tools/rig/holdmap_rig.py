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
    "list_agents",
    "get_agent_flow",
    "list_needs",
    "list_analyzers",
    "list_insights",
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


# =============================================================================================
# --- added by rig (issue 15: agents, their MCP servers, needs, analyzers, activity) ---
# Plumbing for test_holdmap_agents.py: agents that are real processes (a copy of `sh` named like
# the product, whose children are a real MCP server launched the way npx launches one, a dev
# server and, when asked, a client connection), a temp HOME with every supported client's config
# file, a dev server left behind by a launcher that exited, and holdmap's activity collector.
# As above, every process started here is stopped here by its own pid.

import secrets  # noqa: E402
import shlex  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

# A secret that must never leave holdmap: a config file's env value, header value and URL parts
# hold it. Fresh per run, so it cannot be in any file it did not come from.
CANARY = f"hmcanary{secrets.token_hex(8)}"

# The real MCP server every fake agent runs (from the rig's node_modules), under npx's command
# line: `node …/npx -y @modelcontextprotocol/server-filesystem@VERSION DIR`.
FS_PACKAGE = "@modelcontextprotocol/server-filesystem"
FS_VERSION: str = json.loads((REPO / "tools/rig/node_modules" / FS_PACKAGE / "package.json").read_text())["version"]

# `npx` as the agent's PATH finds it: a node script, so the process is `node …/bin/npx -y PKG@V
# ARGS`, the shape of the real npx (itself a node script); instead of fetching PKG it runs the
# copy installed in the rig's node_modules in this same process, so the child really is that MCP
# server, reading its requests from stdin. Nothing is downloaded.
NPX_SCRIPT = f"""#!/usr/bin/env node
const path = require("path");
const words = process.argv.slice(2).filter((a) => a !== "-y" && a !== "--yes");
const spec = words.shift();
const name = spec.replace(/(.)@[^@/]*$/, "$1");
const entry = path.join({json.dumps(str(REPO / "tools/rig/node_modules"))}, name, "dist", "index.js");
process.argv = [process.argv[0], entry, ...words];
import(entry);
"""

# A client connection an agent's process holds: connect to 127.0.0.1:PORT, say so in FILE,
# then wait on stdin (closed when the agent is stopped).
CONNECTOR = (
    "import socket, sys\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "open(sys.argv[2], 'w').close()\n"
    "sys.stdin.read()\n"
)


def holdcall_beside_holdmap() -> Path:
    """The holdcall binary installed beside holdmap: the one holdmap counts as "this Holdcall"
    when it judges a config entry routed (tools/rig/run points HOLDCALL_BINARY at the same
    target/debug)."""
    path = holdmap_binary().resolve().parent / "holdcall"
    if not path.is_file():
        raise RuntimeError(f"no holdcall binary beside holdmap at {path}: run `cargo build`")
    return path


def children_of(pid: int) -> list[int]:
    """The pids whose parent is `pid` (every thread's children list)."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return out


def descendants_of(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children_of(todo.pop()):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def start_ticks(pid: int) -> int | None:
    """The process's start time (/proc/PID/stat field 22): with the pid, its identity."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def argv_of(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def kill_if_same(pid: int, ticks: int | None) -> None:
    """SIGTERM to `pid`, only while it is still the process the test started (same start time)."""
    if ticks is not None and start_ticks(pid) == ticks:
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass


class AgentProcess(FakeAgent):
    """A running agent as the real product makes one: an executable named `program` (a copy of
    `sh`: `claude`, `codex`, `gemini`, `cursor` …) started with `flags` on its command line, in a
    project folder, whose children are the MCP server its config names (`npx -y
    @modelcontextprotocol/server-filesystem@VERSION ROOT`, a real one: see NPX_SCRIPT), a dev
    server (`python3 -m http.server` in the project, bound to `bind`) and, with `connect_to`, a
    process holding a TCP connection to that port. As FakeAgent (whose stop and liveness checks it keeps): the
    agent's stdin is a pipe; its MCP server and connector read it and exit when it closes; the
    dev server is stopped by its pid."""

    def __init__(
        self, program: str, flags: list[str], root: Path, connect_to: int | None = None, bind: str = "127.0.0.1"
    ) -> None:
        self.program = program
        self.bind = bind
        self.started: dict[int, int | None] = {}
        self.home = Path(tempfile.mkdtemp(prefix=f"hm-{program}-"))  # bin/ and reports
        self.project = project_folder(f"hm-{program}-project-")
        self.root = root
        bin_dir = self.home / "bin"
        bin_dir.mkdir()
        exe = bin_dir / program
        shutil.copy2(os.path.realpath("/bin/sh"), exe)
        npx = bin_dir / "npx"
        npx.write_text(NPX_SCRIPT)
        npx.chmod(0o755)
        report = self.home / "dev"
        q = shlex.quote
        # Background jobs of a non-interactive sh read /dev/null: the agent's stdin goes to its
        # MCP server and connector through fd 3.
        line = [
            "exec 3<&0",
            f"npx -y {FS_PACKAGE}@{FS_VERSION} {q(str(root))} <&3 3<&- &",
            f"{q(PYTHON)} -u -m http.server 0 --bind {q(bind)} >{q(str(report))}.out 2>/dev/null </dev/null 3<&- &",
            f"echo $! >{q(str(report))}.pid.tmp && mv {q(str(report))}.pid.tmp {q(str(report))}.pid",
        ]
        self.connected = self.home / "connected"
        if connect_to is not None:
            line.append(
                f"{q(PYTHON)} -c {q(CONNECTOR)} {connect_to} {q(str(self.connected))} <&3 3<&- &"
            )
        line.append("wait")
        self.proc = subprocess.Popen(
            [str(exe), "-c", "\n".join(line), *flags],
            cwd=self.project,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"},
        )
        self.pid = self.proc.pid
        self.exe = exe
        self.server_pid = 0
        try:
            self._wait_ready(report, connect_to)
        except BaseException:
            self.started = {pid: start_ticks(pid) for pid in [self.pid, *descendants_of(self.pid)]}
            self.close()
            raise
        # Every process below the agent now, with its start time: what close() may stop.
        self.started = {pid: start_ticks(pid) for pid in [self.pid, *descendants_of(self.pid)]}

    def _wait_ready(self, report: Path, connect_to: int | None) -> None:
        program = self.program
        wait_until(lambda: Path(f"{report}.pid").exists(), f"the {program} agent's dev server")
        self.server_pid = int(Path(f"{report}.pid").read_text())

        def port_printed() -> bool:
            text = Path(f"{report}.out").read_text() if Path(f"{report}.out").exists() else ""
            return " port " in text

        wait_until(port_printed, f"the {program} agent's dev server port", START_DEADLINE_S)
        self.port = int(Path(f"{report}.out").read_text().split(" port ", 1)[1].split()[0])
        wait_until(lambda: accepts(self.port), f"the {program} agent's http.server on {self.port}")
        if connect_to is not None:
            wait_until(self.connected.exists, f"the {program} agent's connection to {connect_to}")
        wait_until(lambda: self.mcp_pid is not None, f"the {program} agent's MCP server")
        self.mcp: int = self.mcp_pid or 0
        self.connector: int | None = self.connector_pid

    def server_alive(self) -> bool:
        return self.server_pid > 0 and super().server_alive()

    @property
    def mcp_pid(self) -> int | None:
        """The agent's npx child (the MCP server), once it runs."""
        for pid in children_of(self.pid):
            argv = argv_of(pid)
            if len(argv) > 1 and argv[1].endswith("/bin/npx"):
                return pid
        return None

    @property
    def connector_pid(self) -> int | None:
        for pid in children_of(self.pid):
            if str(self.connected) in argv_of(pid):
                return pid
        return None

    def query(self) -> str:
        """`pid:N`: the only way these tests select an agent (a product name could match a real
        agent on the machine)."""
        return f"pid:{self.pid}"

    def close(self) -> None:
        # The dev server first (nothing stops it on EOF), so the agent's `wait` returns; then
        # FakeAgent's stop (stdin closed, the agent waited for); then anything the agent started
        # that is somehow still there, by pid and start time.
        if self.server_pid > 0:
            kill_if_same(self.server_pid, self.started.get(self.server_pid))
        super().close()
        for pid, ticks in self.started.items():
            kill_if_same(pid, ticks)


# The products these tests run, by executable name: the product id list_agents reports, the
# client whose config files it reads (ClientId::id) and a flag its real CLI takes that widens
# what it may do without asking (None: no such flag is checked).
AGENT_PRODUCTS: dict[str, dict[str, Any]] = {
    "claude": {"product": "claude-code", "client": "claude-code", "flags": ["--dangerously-skip-permissions"]},
    "codex": {"product": "codex", "client": "codex", "flags": ["--dangerously-bypass-approvals-and-sandbox"]},
    "gemini": {"product": "gemini", "client": "gemini-cli", "flags": ["--yolo"]},
    "cursor": {"product": "cursor", "client": "cursor", "flags": []},
    "windsurf": {"product": "windsurf", "client": "windsurf", "flags": []},
    "copilot-language-server": {"product": "copilot", "client": "vscode", "flags": ["--stdio"]},
}


def alias(client: str, role: str) -> str:
    """The name of one configured server: `<client>-<role>` (roles: files, routed, loose,
    remote), so each finding says which file it came from."""
    return f"{client}-{role}"


# Each client's user-scope MCP config file under HOME, and how its entries are written.
CLIENT_FILES = {
    "claude-code": ".claude.json",
    "cursor": ".cursor/mcp.json",
    "vscode": ".config/Code/User/mcp.json",
    "codex": ".codex/config.toml",
    "gemini-cli": ".gemini/settings.json",
    "windsurf": ".codeium/windsurf/mcp_config.json",
}

ROUTED_PACKAGE = "@rig/routed-server"
LOOSE_PACKAGE = "@rig/loose-server"
REMOTE_HOST = "mcp.rig.invalid:8443"


def client_servers(client: str, root: Path) -> dict[str, dict[str, Any]]:
    """The four servers every client's file defines, as plain data:
    - `files`: the MCP server the fake agents run (pinned, not routed), a canary env value;
    - `routed`: through the holdcall beside holdmap (`serve -- npx -y pkg@1.2.3`): routed, pinned;
    - `loose`: `npx -y pkg`: unpinned, not routed;
    - `remote`: a URL with the canary as userinfo, path, query and fragment, and in a header."""
    holdcall = str(holdcall_beside_holdmap())
    return {
        alias(client, "files"): {
            "command": "npx",
            "args": ["-y", f"{FS_PACKAGE}@{FS_VERSION}", str(root)],
            "env": {"FS_API_TOKEN": CANARY, "PLAIN_SETTING": f"x-{CANARY}"},
        },
        alias(client, "routed"): {
            "command": holdcall,
            "args": ["serve", "--", "npx", "-y", f"{ROUTED_PACKAGE}@1.2.3"],
            "env": {"ROUTED_SECRET": CANARY},
        },
        alias(client, "loose"): {"command": "npx", "args": ["-y", LOOSE_PACKAGE]},
        alias(client, "remote"): {
            "url": f"https://rig:{CANARY}@{REMOTE_HOST}/{CANARY}/mcp?api_key={CANARY}#{CANARY}",
            "headers": {"Authorization": f"Bearer {CANARY}", "X-Rig-Key": CANARY},
        },
    }


def toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string for these characters


def write_client_configs(home: Path, root: Path) -> dict[str, Path]:
    """Every supported client's user-scope config file under `home` (see client_servers), in
    that client's own format; returns each client's file."""
    written: dict[str, Path] = {}
    for client, rel in CLIENT_FILES.items():
        servers = client_servers(client, root)
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if client == "codex":
            # Documented safety settings before the tables: approvals off, no sandbox.
            out = ['approval_policy = "never"', 'sandbox_mode = "danger-full-access"', ""]
            for name, s in servers.items():
                out.append(f"[mcp_servers.{toml_string(name)}]")
                if "url" in s:
                    out.append(f"url = {toml_string(s['url'])}")
                    headers = ", ".join(f"{toml_string(k)} = {toml_string(v)}" for k, v in s["headers"].items())
                    out.append(f"http_headers = {{ {headers} }}")
                else:
                    out.append(f"command = {toml_string(s['command'])}")
                    out.append("args = [" + ", ".join(toml_string(a) for a in s["args"]) + "]")
                    if s.get("env"):
                        env = ", ".join(f"{toml_string(k)} = {toml_string(v)}" for k, v in s["env"].items())
                        out.append(f"env = {{ {env} }}")
                out.append("")
            path.write_text("\n".join(out))
        elif client == "vscode":
            typed = {
                name: ({"type": "http", **s} if "url" in s else {"type": "stdio", **s})
                for name, s in servers.items()
            }
            path.write_text(json.dumps({"servers": typed}, indent=2))
        elif client == "claude-code":
            typed = {
                name: ({"type": "http", **s} if "url" in s else {"type": "stdio", **s})
                for name, s in servers.items()
            }
            # ~/.claude.json holds account data too: holdmap must read only its MCP keys.
            path.write_text(json.dumps({"oauthAccount": {"accessToken": CANARY}, "mcpServers": typed}, indent=2))
        elif client == "gemini-cli":
            # Gemini reads `httpUrl` as streamable HTTP (a bare `url` is SSE).
            shaped = {
                name: ({"httpUrl": s["url"], "headers": s["headers"]} if "url" in s else s)
                for name, s in servers.items()
            }
            path.write_text(json.dumps({"mcpServers": shaped}, indent=2))
        elif client == "windsurf":
            shaped = {
                name: ({"serverUrl": s["url"], "headers": s["headers"]} if "url" in s else s)
                for name, s in servers.items()
            }
            path.write_text(json.dumps({"mcpServers": shaped}, indent=2))
        else:
            path.write_text(json.dumps({"mcpServers": servers}, indent=2))
        written[client] = path
    write_claude_extras(home)
    return written


# Claude Code's settings, instruction file and skill under HOME: what include_capabilities reads
# besides MCP servers. Each holds the canary where only a value or a body would carry it.
CLAUDE_ALLOWED = "Bash(npm test:*)"
CLAUDE_DENIED = "Read(./.env)"
SKILL_FOLDER = "release-notes"
SKILL_NAME = "release-notes"
SKILL_PURPOSE = "Drafts release notes from merged changes"


def write_claude_extras(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({
        "permissions": {"allow": [CLAUDE_ALLOWED], "deny": [CLAUDE_DENIED], "defaultMode": "bypassPermissions"},
        "env": {"ANTHROPIC_API_KEY": CANARY},
        "apiKeyHelper": f"echo {CANARY}",
    }, indent=2))
    (home / ".claude" / "CLAUDE.md").write_text(f"# House rules\nThe deploy key is {CANARY}.\n")
    skill = home / ".claude" / "skills" / SKILL_FOLDER / "SKILL.md"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text(f"---\nname: {SKILL_NAME}\ndescription: {SKILL_PURPOSE}\n---\nUse the token {CANARY} to publish.\n")


def shell_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a person's shell running a holdmap command with HOME `home`: this
    process's, without anything that would move holdmap's data or config directories away from
    HOME (the MCP server, started with the SDK's default environment, has only HOME)."""
    moved = ("HOLDMAP_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "CODEX_HOME")
    base = {k: v for k, v in os.environ.items() if k not in moved and not k.startswith("HOLDMAP_ACTIVITY_")}
    return {**base, "HOME": str(home), **extra}


def holdmap_cli(
    home: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`holdmap ARGS…` as a person types it, with HOME `home` (in `cwd`, default HOME)."""
    return subprocess.run(
        [str(holdmap_binary()), *args],
        env=shell_env(home, **(env or {})),
        cwd=cwd or home,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class LeftBehindDevServer(DevServer):
    """A dev server whose launcher has exited (`npm run dev` in a terminal since closed): `sh -c
    'python3 -m http.server … &'` returns at once, so the server's parent is PID 1 or the
    nearest subreaper, not the test. Started by the test; stopped by its pid (and start time)."""

    def __init__(self) -> None:
        self.folder = project_folder("hm-left-")
        out = self.folder / ".rig-server.out"
        pid_file = self.folder / ".rig-server.pid"
        q = shlex.quote
        subprocess.run(
            [
                "/bin/sh", "-c",
                f"{q(PYTHON)} -u -m http.server 0 --bind 127.0.0.1 >{q(str(out))} 2>/dev/null </dev/null & "
                f"echo $! >{q(str(pid_file))}.tmp && mv {q(str(pid_file))}.tmp {q(str(pid_file))}",
            ],
            cwd=self.folder,
            check=True,
            timeout=START_DEADLINE_S,
        )
        self.pid = int(pid_file.read_text())
        self.ticks = start_ticks(self.pid)
        try:
            # The server's own shell child opens `out`, maybe after the launcher has exited.
            wait_until(
                lambda: out.exists() and " port " in out.read_text(), "the left-behind http.server's port", START_DEADLINE_S
            )
            self.port = int(out.read_text().split(" port ", 1)[1].split()[0])
            wait_until(lambda: accepts(self.port), f"the left-behind http.server on {self.port}")
        except BaseException:
            self.close()
            raise

    def parent(self) -> int:
        return int(Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])

    def alive(self) -> bool:
        return self.ticks is not None and start_ticks(self.pid) == self.ticks

    def wait_exit(self) -> int:
        wait_until(lambda: not self.alive(), "the left-behind dev server to exit", EXIT_DEADLINE_S)
        return 0

    def close(self) -> None:
        kill_if_same(self.pid, self.ticks)
        if self.alive():
            wait_until(lambda: not self.alive(), "the left-behind dev server to exit", EXIT_DEADLINE_S)
        shutil.rmtree(self.folder, ignore_errors=True)


class ActivityCollector:
    """`holdmap activity serve --duration 60s`, started by the test with HOME `home`: the
    endpoint and token it prints, and its pid (stopped by it at the end)."""

    def __init__(self, home: Path, duration: str = "60s") -> None:
        self.home = home
        self.proc = subprocess.Popen(
            [str(holdmap_binary()), "activity", "serve", "--duration", duration],
            env=shell_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.printed: list[str] = []
        self.endpoint: str | None = None
        self.token: str | None = None
        # It prints `HOLDMAP_ACTIVITY_ENDPOINT=…` and `HOLDMAP_ACTIVITY_TOKEN=…` lines (the form a
        # shell or a client config takes), then serves: read until both are known.
        while self.endpoint is None or self.token is None:
            line = read_first_line(self.proc.stdout, "holdmap activity serve").strip()
            self.printed.append(line)
            name, _, value = line.partition("=")
            if name == "HOLDMAP_ACTIVITY_ENDPOINT":
                self.endpoint = value
            elif name == "HOLDMAP_ACTIVITY_TOKEN":
                self.token = value
        self.pid = self.proc.pid

    @property
    def env(self) -> dict[str, str]:
        """What `holdmap mcp --record-activity` and `activity snapshot` need in their environment."""
        assert self.endpoint and self.token, self.printed
        return {"HOLDMAP_ACTIVITY_ENDPOINT": self.endpoint, "HOLDMAP_ACTIVITY_TOKEN": self.token}

    def snapshot(self) -> subprocess.CompletedProcess[str]:
        return holdmap_cli(self.home, "activity", "snapshot", "--json", env=self.env)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=EXIT_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "ActivityCollector":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def http_status(url: str, *, method: str = "GET", token: str | None = None, body: bytes | None = None) -> int:
    """The HTTP status a raw request gets (no client library of holdmap's: urllib), with the
    token as a bearer credential when given."""
    request = urllib.request.Request(url, data=body, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code


def assert_canary_nowhere(*blobs: bytes | str, what: str) -> None:
    """CANARY appears in none of `blobs` (raw bytes as written)."""
    for blob in blobs:
        data = blob.encode() if isinstance(blob, str) else blob
        at = data.find(CANARY.encode())
        if at >= 0:
            raise AssertionError(f"{what}: the canary secret is in the output: …{data[max(0, at - 200):at + 60]!r}…")


# --- end of the block added by rig ---
