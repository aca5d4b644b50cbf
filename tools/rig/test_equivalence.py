"""A real client cannot tell `holdcall serve` from a direct connection.

For every scenario and both of the Python SDK's connect modes, the real client talks to
@modelcontextprotocol/server-everything (or server-filesystem) twice: once directly, once
through `holdcall serve` with no rules (every call allowed). Taps on both sides
of the relay record the exact bytes. Asserted:

1. through the relay, every line the client sent is, byte for byte and in order, a line the
   server received, and every line the server sent is one the client received;
2. the scenario actually crossed the wire (the methods it is about appear in the logs);
3. what the client saw is the same direct and through the relay;
4. the client sent the same bytes in both runs (it could not tell the difference either).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rig import (
    EVERYTHING,
    Callbacks,
    assert_relayed_unchanged,
    assert_same_lines,
    direct,
    filesystem_server,
    lines,
    methods,
    run_session,
    through_relay,
)
from scenarios import EVERYTHING_SCENARIOS, big_text, fs_payload, fs_roots, fs_roots_callbacks, no_callbacks

MODES = ["legacy", "auto"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", EVERYTHING_SCENARIOS, ids=lambda s: s.name)
def test_everything(scenario, mode, holdcall, tmp_path: Path):
    make_callbacks = scenario.callbacks or no_callbacks

    def run(argv, env=None):
        callbacks, state = make_callbacks()
        return run_session(
            argv,
            lambda client: scenario.run(client, state),
            mode=mode,
            env=env,
            callbacks=callbacks,
        )

    relayed_dir, direct_dir = tmp_path / "relay", tmp_path / "direct"
    journaled = len(holdcall.journal())
    relayed = run(through_relay(holdcall, "everything", relayed_dir, EVERYTHING), holdcall.env)
    straight = run(direct(direct_dir, EVERYTHING))

    # 1. The relay changed nothing, in either direction.
    assert_relayed_unchanged(relayed_dir)

    # 2. The scenario crossed the wire.
    got = methods(relayed_dir / "server.in")
    for method in scenario.expect_server_got:
        assert method in got, f"the server never received {method}: {got}"
    sent_to_client = methods(relayed_dir / "client.out")
    for method in scenario.expect_client_got:
        assert method in sent_to_client, f"the client never received {method}: {sent_to_client}"
    if mode == "auto":
        assert got[0] == "server/discover", got[:2]

    # Every call that crossed was decided (allowed, no rule) and journaled, with its outcome.
    holdcall.check_allowed(journaled, relayed_dir)

    # 3. The client saw the same things.
    assert relayed == straight

    # 4. The client behaved identically, byte for byte, with and without the relay.
    assert_same_lines(
        lines(direct_dir / "server.in"), lines(relayed_dir / "client.in"), "client bytes, direct vs relay"
    )


@pytest.fixture
def fs_dirs(tmp_path: Path) -> dict:
    """An allowed root with a 512 KiB file and a small one, and a directory outside it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    text = big_text()
    (root / "big.txt").write_bytes(text.encode())
    (root / "hello.txt").write_bytes("hello, wörld 🚀\n".encode())
    (outside / "secret.txt").write_bytes(b"not for you\n")
    return {
        "root": str(root.resolve()),
        "outside": str(outside.resolve()),
        "big": str((root / "big.txt").resolve()),
        "big_text": text,
        "hello": str((root / "hello.txt").resolve()),
        "hello_text": "hello, wörld 🚀\n",
        "secret": str((outside / "secret.txt").resolve()),
    }


FS_SCENARIOS = {
    # name: (scenario, callbacks factory, server gets the root on its command line,
    #        the client's own bytes are the same in both runs)
    "fs_payload_512k": (fs_payload, lambda base: (Callbacks(), dict(base)), True, True),
    # Roots answered by the client decide what the server may read. The client polls until the
    # server has applied them, so how often it asks can differ between runs: no check 4.
    "fs_roots": (fs_roots, fs_roots_callbacks, False, False),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(FS_SCENARIOS))
def test_filesystem(name, mode, fs_dirs, holdcall, tmp_path: Path):
    scenario, make_callbacks, root_on_command_line, same_client_bytes = FS_SCENARIOS[name]
    server = filesystem_server(fs_dirs["root"]) if root_on_command_line else filesystem_server()

    def run(argv, env=None):
        callbacks, state = make_callbacks(fs_dirs)
        return run_session(argv, lambda client: scenario(client, state), mode=mode, env=env, callbacks=callbacks)

    relayed_dir, direct_dir = tmp_path / "relay", tmp_path / "direct"
    journaled = len(holdcall.journal())
    relayed = run(through_relay(holdcall, "filesystem", relayed_dir, server), holdcall.env)
    straight = run(direct(direct_dir, server))

    assert_relayed_unchanged(relayed_dir)
    assert "tools/call" in methods(relayed_dir / "server.in")
    if name == "fs_roots":
        assert "roots/list" in methods(relayed_dir / "client.out")
    else:
        big = max(len(line) for line in lines(relayed_dir / "client.out"))
        assert big > 2 * 512 * 1024, f"the longest line the client got is only {big} bytes"
    holdcall.check_allowed(journaled, relayed_dir)
    assert relayed == straight
    if same_client_bytes:
        assert_same_lines(
            lines(direct_dir / "server.in"), lines(relayed_dir / "client.in"), "client bytes, direct vs relay"
        )
