"""The scenarios the rig runs, each once direct and once through `holdcall serve`.

A scenario is an async function of a connected `mcp.Client` that returns what the client saw,
as plain data, normalised only where the server itself is not deterministic (clock times in
dynamic resources, a randomly chosen log level). Tool names are those of
@modelcontextprotocol/server-everything 2026.8.31 (see docs/rig.md); they change between
versions, which is why the package is pinned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

from rig import Callbacks, outcome, to_plain

UNICODE = 'café ñandú 日本語 " \\ {} [] 🚀'
BIG_BYTES = 512 * 1024

_CLOCK = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?\b")


def _unclock(value: Any) -> Any:
    """Mask wall-clock times, which the server writes into dynamic resources."""
    if isinstance(value, str):
        return _CLOCK.sub("<time>", value)
    if isinstance(value, dict):
        return {k: _unclock(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unclock(v) for v in value]
    return value


@dataclass
class Scenario:
    name: str
    run: Any  # async (client, state) -> dict
    callbacks: Any = None  # () -> (Callbacks, state)
    # Methods that must appear in what the server received (proof the scenario did its work).
    expect_server_got: list[str] = field(default_factory=list)
    # Methods the client must have received from the server (server-to-client traffic).
    expect_client_got: list[str] = field(default_factory=list)


def no_callbacks() -> tuple[Callbacks, dict[str, Any]]:
    return Callbacks(), {}


# --- initialize -------------------------------------------------------------------------------


async def initialize(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    # The handshake (legacy: initialize; auto: server/discover, refused by this pre-2026 server,
    # then initialize) happened on entry; run_session records its results. Nothing more here.
    return {}


# --- tools/list with input schemas ------------------------------------------------------------


def sampling_and_elicitation() -> tuple[Callbacks, dict[str, Any]]:
    # With these capabilities the server also registers its conditional tools: a longer list.
    return Callbacks(sampling=_sample, elicitation=_elicit_accept), {}


async def tools_list(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    listing = await client.list_tools()
    tools = {tool.name: tool for tool in listing.tools}
    assert "echo" in tools and "get-sum" in tools, sorted(tools)
    assert tools["echo"].input_schema["properties"]["message"]["type"] == "string"
    assert set(tools["get-sum"].input_schema["properties"]) == {"a", "b"}
    return {"tools": to_plain(listing)}


# --- unicode arguments ------------------------------------------------------------------------


async def unicode_arguments(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    echoed = await client.call_tool("echo", {"message": UNICODE})
    assert echoed.content[0].text == f"Echo: {UNICODE}", echoed
    # Unicode in a prompt's arguments, too (they are not tool calls: plain pass-through).
    prompt = await client.get_prompt("args-prompt", {"city": "São Paulo 🚀", "state": "日本"})
    return {"echo": to_plain(echoed), "prompt": to_plain(prompt)}


# --- a 512 KiB payload ------------------------------------------------------------------------


def _big_message() -> str:
    # Mixed-width characters so the line is long in bytes and in escapes alike.
    unit = 'abcdefgh é 日本 🚀 "q" \\ '
    out = (unit * (BIG_BYTES // len(unit.encode()) + 1))
    while len(out.encode()) > BIG_BYTES:
        out = out[:-1]
    return out


async def big_payload(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    message = _big_message()
    assert len(message.encode()) >= BIG_BYTES - 4
    echoed = await client.call_tool("echo", {"message": message})
    text = echoed.content[0].text
    assert text == f"Echo: {message}", "the 512 KiB echo came back changed"
    # Past the size up to which the relay sends the arguments themselves to the daemon
    # (limits::ARGUMENTS_BYTES_MAX, 1 MiB; beyond it, only their digest): 3 MiB.
    huge = "xyz🚀" * (3 * 1024 * 1024 // 7)
    huge_echo = await client.call_tool("echo", {"message": huge})
    assert huge_echo.content[0].text == f"Echo: {huge}", "the 3 MiB echo came back changed"
    # Only digests in the comparison: the full texts are asserted just above.
    return {
        "length": len(text),
        "is_error": echoed.is_error,
        "head": text[:40],
        "huge_length": len(huge_echo.content[0].text),
    }


# --- server errors ----------------------------------------------------------------------------


async def server_errors(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    return {
        "unknown_tool": await outcome(client.call_tool("no-such-tool", {"x": 1})),
        "bad_arguments": await outcome(client.call_tool("get-sum", {"a": "one", "b": 2})),
        "missing_arguments": await outcome(client.call_tool("echo", {})),
        "unknown_prompt": await outcome(client.get_prompt("no-such-prompt")),
        "unknown_resource": await outcome(client.read_resource("demo://resource/no/such")),
        # A tools/call answered with a JSON-RPC error rather than a tool error: the SDK server
        # rethrows UrlElicitationRequiredError (-32042) as such. (The random elicitation id in
        # its data is not compared.)
        "jsonrpc_error_to_a_call": await outcome(
            client.call_tool("trigger-url-elicitation", {"url": "https://example.org/consent", "errorPath": True})
        ),
    }


# --- ping -------------------------------------------------------------------------------------


async def ping(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    first = await client.send_ping()
    second = await client.send_ping()
    return {"pings": [to_plain(first), to_plain(second)]}


# --- progress notifications -------------------------------------------------------------------


async def progress(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    result = await client.call_tool(
        "trigger-long-running-operation",
        {"duration": 0.5, "steps": 5},
        progress_callback=on_progress,
    )
    assert [v for v, _, _ in seen] == [1, 2, 3, 4, 5], seen
    return {"result": to_plain(result), "progress": seen}


# --- cancellation ---------------------------------------------------------------------------


def cancellation_callbacks() -> tuple[Callbacks, dict[str, Any]]:
    state: dict[str, Any] = {"progress": [], "all_in": anyio.Event(), "started": anyio.Event()}

    async def on_message(message: Any) -> None:
        # Every progress notification reaches the message handler, also those for a request the
        # client has given up on (which no longer reach the call's progress callback).
        if isinstance(message, types.ProgressNotification):
            state["progress"].append(message.params.progress)
            if len(state["progress"]) == 3:
                state["all_in"].set()

    return Callbacks(kwargs={"message_handler": on_message}), state


async def cancellation(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        state["started"].set()

    # Cancel once the server is surely working on it (its first progress arrived): the client
    # sends notifications/cancelled. This server's tool ignores the abort and goes on sending
    # progress, but never sends the result.
    with anyio.move_on_after(10) as scope:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool(
                    "trigger-long-running-operation",
                    {"duration": 0.6, "steps": 3},
                    progress_callback=on_progress,
                )

            group.start_soon(call)
            await state["started"].wait()
            group.cancel_scope.cancel()
    assert not scope.cancelled_caught, "no progress within 10 s"
    with anyio.fail_after(10):
        await state["all_in"].wait()
    after = await client.call_tool("echo", {"message": "after the cancel"})
    return {"progress": state["progress"], "after": to_plain(after)}


# --- logging ----------------------------------------------------------------------------------


def logging_callbacks() -> tuple[Callbacks, dict[str, Any]]:
    state: dict[str, Any] = {"logs": [], "got_log": anyio.Event()}

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        state["logs"].append(params)
        state["got_log"].set()

    return Callbacks(logging=on_log), state


async def logging(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    level = await client.set_logging_level("debug")
    # The server logs one message at a random level at once, then every 5 s until toggled off.
    started = await client.call_tool("toggle-simulated-logging", {})
    with anyio.fail_after(10):
        await state["got_log"].wait()
    stopped = await client.call_tool("toggle-simulated-logging", {})
    logs = state["logs"]
    # "Debug-level message", …, "Alert level-message": the server's own words.
    assert logs and all("level" in str(log.data) for log in logs), logs
    return {
        "set_level": to_plain(level),
        "started": to_plain(started),
        "stopped": to_plain(stopped),
        # The level is random; that a message arrived and its shape are not.
        "log_shape": sorted({k for log in logs for k in to_plain(log)}),
    }


# --- resources and prompts --------------------------------------------------------------------


async def resources(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    listed = await client.list_resources()
    templates = await client.list_resource_templates()
    uris = [r.uri for r in listed.resources]
    static = next(u for u in uris if str(u).endswith("features.md"))
    document = await client.read_resource(static)
    assert "Everything Server" in document.contents[0].text
    text = await client.read_resource("demo://resource/dynamic/text/7")
    blob = await client.read_resource("demo://resource/dynamic/blob/7")
    subscribed = await client.subscribe_resource("demo://resource/dynamic/text/7")
    unsubscribed = await client.unsubscribe_resource("demo://resource/dynamic/text/7")
    return _unclock(
        {
            "list": to_plain(listed),
            "templates": to_plain(templates),
            "document": to_plain(document),
            "text": to_plain(text),
            # The blob is base64 of a text with a clock time: compare its shape only.
            "blob": {k: v for k, v in to_plain(blob)["contents"][0].items() if k != "blob"},
            "subscribe": [to_plain(subscribed), to_plain(unsubscribed)],
        }
    )


async def prompts(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    listed = await client.list_prompts()
    names = {p.name for p in listed.prompts}
    assert {"simple-prompt", "args-prompt"} <= names, names
    simple = await client.get_prompt("simple-prompt")
    args = await client.get_prompt("args-prompt", {"city": "Lyon"})
    embedded = await client.get_prompt("resource-prompt", {"resourceType": "Text", "resourceId": "3"})
    completion = await client.complete(
        types.PromptReference(type="ref/prompt", name="resource-prompt"),
        {"name": "resourceType", "value": "T"},
    )
    return _unclock(
        {
            "list": to_plain(listed),
            "simple": to_plain(simple),
            "args": to_plain(args),
            "embedded": to_plain(embedded),
            "completion": to_plain(completion),
        }
    )


# --- server-to-client requests ----------------------------------------------------------------

SAMPLED_TEXT = "sampled: 42 🚀"


async def _sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    prompt = params.messages[0].content.text
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"{SAMPLED_TEXT} ← {prompt}"),
        model="rig-model",
        stop_reason="endTurn",
    )


ELICITED = {"name": "Zoë Ñandú", "check": True, "integer": 7, "email": "zoe@example.org"}


async def _elicit_accept(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    if getattr(params, "mode", None) == "url":
        assert params.url == "https://example.org/consent", params
        return types.ElicitResult(action="accept")
    return types.ElicitResult(action="accept", content=dict(ELICITED))


def sampling_callbacks() -> tuple[Callbacks, dict[str, Any]]:
    return Callbacks(sampling=_sample), {}


async def sampling(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool("trigger-sampling-request", {"prompt": "the answer?", "maxTokens": 5})
    text = result.content[0].text
    assert SAMPLED_TEXT in text and "rig-model" in text, text
    return {"result": to_plain(result)}


def elicitation_callbacks() -> tuple[Callbacks, dict[str, Any]]:
    return Callbacks(elicitation=_elicit_accept), {}


async def elicitation(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool("trigger-elicitation-request", {})
    text = "".join(c.text for c in result.content if getattr(c, "text", None))
    assert "Zoë Ñandú" in text and "accept" in text, text
    # URL mode: the server asks the client to send the user to a page (no content comes back).
    url = await client.call_tool(
        "trigger-url-elicitation", {"url": "https://example.org/consent", "elicitationId": "rig-1"}
    )
    assert "completed the URL elicitation" in url.content[0].text, url
    return {"result": to_plain(result), "url": to_plain(url)}


ROOTS = [
    types.Root(uri="file:///tmp/rig-root-one", name="one"),
    types.Root(uri="file:///tmp/rig-r%C3%B4ot-two", name="deux ✓"),
]


def roots_callbacks() -> tuple[Callbacks, dict[str, Any]]:
    state: dict[str, Any] = {"asked": 0, "logs": [], "synced": anyio.Event()}

    async def list_roots(ctx: Any) -> types.ListRootsResult:
        state["asked"] += 1
        return types.ListRootsResult(roots=list(ROOTS))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        state["logs"].append(params)
        if "Roots updated" in str(params.data):
            state["synced"].set()

    return Callbacks(roots=list_roots, logging=on_log), state


async def roots(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    # 350 ms after `initialized` the server asks for roots/list on its own, then logs
    # "Roots updated". Wait for that so the exchange is complete (and deterministic) before the
    # tool reads the roots it stored.
    with anyio.fail_after(10):
        await state["synced"].wait()
    result = await client.call_tool("get-roots-list", {})
    text = result.content[0].text
    assert "file:///tmp/rig-root-one" in text and "deux ✓" in text, text
    assert state["asked"] == 1, state["asked"]
    return {"result": to_plain(result), "logs": [to_plain(log) for log in state["logs"]]}


EVERYTHING_SCENARIOS = [
    Scenario("initialize", initialize, expect_server_got=["initialize", "notifications/initialized"]),
    Scenario("tools_list", tools_list, sampling_and_elicitation, expect_server_got=["tools/list"]),
    Scenario("unicode_arguments", unicode_arguments, expect_server_got=["tools/call", "prompts/get"]),
    Scenario("payload_512k", big_payload, expect_server_got=["tools/call"]),
    Scenario(
        "server_errors",
        server_errors,
        elicitation_callbacks,
        expect_server_got=["tools/call", "prompts/get", "resources/read"],
    ),
    Scenario("ping", ping, expect_server_got=["ping"]),
    Scenario(
        "progress", progress, expect_server_got=["tools/call"], expect_client_got=["notifications/progress"]
    ),
    Scenario(
        "cancellation",
        cancellation,
        cancellation_callbacks,
        expect_server_got=["tools/call", "notifications/cancelled"],
        expect_client_got=["notifications/progress"],
    ),
    Scenario(
        "logging",
        logging,
        logging_callbacks,
        expect_server_got=["logging/setLevel", "tools/call"],
        expect_client_got=["notifications/message"],
    ),
    Scenario(
        "resources",
        resources,
        expect_server_got=[
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "resources/subscribe",
            "resources/unsubscribe",
        ],
    ),
    Scenario(
        "prompts", prompts, expect_server_got=["prompts/list", "prompts/get", "completion/complete"]
    ),
    Scenario(
        "sampling",
        sampling,
        sampling_callbacks,
        expect_server_got=["tools/call"],
        expect_client_got=["sampling/createMessage"],
    ),
    Scenario(
        "elicitation",
        elicitation,
        elicitation_callbacks,
        expect_server_got=["tools/call"],
        expect_client_got=["elicitation/create"],
    ),
    Scenario(
        "roots",
        roots,
        roots_callbacks,
        expect_server_got=["tools/call"],
        expect_client_got=["roots/list", "notifications/message"],
    ),
]


# --- @modelcontextprotocol/server-filesystem --------------------------------------------------
# These take the directories the test made: state["root"] (the server's allowed directory),
# state["outside"] (a directory it must refuse), state["big"] (a 512 KiB file under the root).


def big_text() -> str:
    """512 KiB of multi-line UTF-8 text, every byte deterministic."""
    row = "línea {:06d}: ÅÄÖ 日本語 🚀 \"quoted\" \\back\\ {{json}} [x]\n"
    out, size, n = [], 0, 0
    while size < BIG_BYTES:
        line = row.format(n)
        out.append(line)
        size += len(line.encode())
        n += 1
    text = "".join(out)
    return text.encode()[:BIG_BYTES].decode("utf-8", errors="ignore")


async def fs_payload(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    allowed = await client.call_tool("list_allowed_directories", {})
    read = await client.call_tool("read_text_file", {"path": state["big"]})
    assert not read.is_error, read
    assert read.content[0].text == state["big_text"], "the 512 KiB file came back changed"
    outside = await client.call_tool("read_text_file", {"path": state["secret"]})
    assert outside.is_error, outside
    return {
        "allowed": to_plain(allowed),
        "read": {"length": len(read.content[0].text), "structured": read.structured_content == {"content": state["big_text"]}},
        "outside": to_plain(outside),
    }


def fs_roots_callbacks(base: dict[str, Any]) -> tuple[Callbacks, dict[str, Any]]:
    state = dict(base, asked=0, answered=anyio.Event())

    async def list_roots(ctx: Any) -> types.ListRootsResult:
        state["asked"] += 1
        state["answered"].set()
        return types.ListRootsResult(roots=[types.Root(uri=f"file://{state['root']}", name="rig root")])

    return Callbacks(roots=list_roots), state


async def fs_roots(client: Client, state: dict[str, Any]) -> dict[str, Any]:
    # The server, started with no directory, asks the client for roots after `initialized`.
    with anyio.fail_after(10):
        await state["answered"].wait()
    # It applies them asynchronously (and says so only on stderr): ask until it has.
    for _ in range(100):
        allowed = await client.call_tool("list_allowed_directories", {})
        if state["root"] in allowed.content[0].text:
            break
        await anyio.sleep(0.05)
    else:
        raise AssertionError(f"the server never took the client's root: {allowed}")
    hello = await client.call_tool("read_text_file", {"path": state["hello"]})
    assert hello.content[0].text == state["hello_text"], hello
    return {"allowed": to_plain(allowed), "hello": to_plain(hello), "asked": state["asked"]}
