#!/usr/bin/env python3
"""A byte tap: `tap.py LOGDIR NAME -- CMD [ARGS...]`.

Spawns CMD and copies this process's stdin to CMD's stdin and CMD's stdout to this process's
stdout, unchanged: binary, unbuffered, each chunk passed on the moment it is read (so every
line, and a last line without a newline, goes through as soon as its bytes arrive). Every byte
is also appended to LOGDIR/NAME.in (what CMD received) and LOGDIR/NAME.out (what CMD sent),
written and flushed *before* it is passed on, so whatever the far side has received is already
in the log. CMD's stderr is CMD's own (inherited). When stdin ends, CMD's stdin is closed; when
CMD's stdout ends, ours is closed; the tap exits with CMD's exit status. SIGTERM, SIGINT and
SIGHUP are passed on to CMD.
"""

import os
import signal
import subprocess
import sys
import threading

CHUNK = 1 << 16


def pump(src_fd: int, dst_fd: int, log_path: str, on_eof) -> None:
    with open(log_path, "ab", buffering=0) as log:
        while True:
            try:
                data = os.read(src_fd, CHUNK)
            except OSError:
                data = b""
            if not data:
                break
            log.write(data)
            try:
                view = memoryview(data)
                while view:
                    written = os.write(dst_fd, view)
                    view = view[written:]
            except OSError:  # the far side went away; keep logging nothing more
                break
    on_eof()


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        sys.stderr.write("usage: tap.py LOGDIR NAME -- CMD [ARGS...]\n")
        return 2
    logdir, name, cmd = argv[1], argv[2], argv[4:]
    os.makedirs(logdir, exist_ok=True)
    for suffix in (".in", ".out"):
        open(os.path.join(logdir, name + suffix), "wb").close()

    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    child_in, child_out = child.stdin.fileno(), child.stdout.fileno()

    def forward_signal(signum, _frame):
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward_signal)

    def close_child_stdin():
        try:
            child.stdin.close()
        except OSError:
            pass

    def close_our_stdout():
        # Put /dev/null on fd 1: the reader sees end of file, and nothing else can close it twice.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)

    inbound = threading.Thread(
        target=pump,
        args=(0, child_in, os.path.join(logdir, name + ".in"), close_child_stdin),
        daemon=True,
    )
    outbound = threading.Thread(
        target=pump,
        args=(child_out, 1, os.path.join(logdir, name + ".out"), close_our_stdout),
        daemon=True,
    )
    inbound.start()
    outbound.start()
    outbound.join()
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
