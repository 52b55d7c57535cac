"""A paused and resumed ``podstatus node`` keeps running: SIGSTOP/SIGCONT is not a stop signal.

CPython's ``signal.sigtimedwait`` can answer a siginfo of garbage after the process was
stopped and continued (the interrupted wait's); the stop guard read that as a stop signal,
stopped the node's loops and crashed its thread (test_cp_node_failures saw the node stay
NotReady after SIGCONT).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

PROGRAM = textwrap.dedent(
    """
    import signal, sys, time
    from podstatus.node.command import STOP_SIGNALS, StopGuard
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    guard = StopGuard(30.0, sigwait=True)
    print("ready", flush=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not guard.stopping.is_set():
        line = sys.stdin.readline()
        if line.strip() == "state":
            print("stopping" if guard.stopping.is_set() else "running", flush=True)
    """
)


@pytest.mark.skipif(not hasattr(signal, "sigtimedwait"), reason="sigtimedwait is POSIX-only")
def test_sigstop_and_sigcont_do_not_stop_the_guard_but_sigterm_does() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        for _ in range(3):
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(0.5)
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.5)
        proc.stdin.write("state\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "running"
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        proc.stdin.write("state\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "stopping"
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(BrokenPipeError):  # a buffered write to a dead child
                    pipe.close()
