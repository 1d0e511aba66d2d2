"""``icn`` run for the CLI tests: the first call of each command in a test as a process of its
own, the later calls of that command in the test's process.

A process per call costs about 0.3 s of CPU (an interpreter, with typer, click and rich
imported each time), and the CLI tests make about 90 calls, most of them the same commands
again with other arguments.  The first call of each command in each test still proves what an
operator meets: the ``icn`` entry point, the exit code of the process, its stdout and stderr.
The later ones run the same typer app as :func:`apps.cli.main` does (the command's module
added, then the app) through click's test runner, which gives the exit code, stdout and stderr
of the call; a log record at WARNING or above, which a process prints on stderr, is put on
stderr, and an exception that escaped the command becomes exit code 1 with its traceback on
stderr, as a process would show it; the test's process keeps its SIGINT and SIGTERM handlers.
Inside a running event loop (an async test) every call is a process: the command runs its own
loop.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import re
import signal
import subprocess
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

from apps.procs import icn_argv

WORD = re.compile(r"[a-z][a-z-]*")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# (test, command) pairs already run as a process in this worker
_run_as_process: set[tuple[str, tuple[str, ...]]] = set()


@dataclass
class Ran:
    """What one ``icn`` call gave, as ``subprocess.run`` reports it."""

    returncode: int
    stdout: bytes
    stderr: bytes


def command_of(args: Sequence[str]) -> tuple[str, ...]:
    """The command an argument list runs: its leading words, at most two (``status``,
    ``route add``, ``face shape``), before the first name, URI, number or option."""
    words: list[str] = []
    for arg in args[:2]:
        if not WORD.fullmatch(arg):
            break
        words.append(arg)
    return tuple(words)


def _current_test() -> str | None:
    """The test running now (pytest sets PYTEST_CURRENT_TEST to "NODEID (PHASE)")."""
    current = os.environ.get("PYTEST_CURRENT_TEST")
    return current.rsplit(" ", 1)[0] if current else None


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_icn(
    args: Sequence[str], env: dict[str, str], stdin: bytes | None = None, timeout: float = 30
) -> Ran:
    """``icn ARGS`` with ``env`` added to this process's environment; see the module's doc for
    when it runs as a process."""
    test = _current_test()
    key = (test or "", command_of(args))
    if test is None or key not in _run_as_process or _loop_running():
        _run_as_process.add(key)
        proc = subprocess.run(
            icn_argv(*args),
            input=stdin,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, **env},
        )
        return Ran(proc.returncode, proc.stdout, proc.stderr)
    return _in_process(args, env, stdin)


def _in_process(args: Sequence[str], env: dict[str, str], stdin: bytes | None) -> Ran:
    from typer.testing import CliRunner

    from apps.cli import add_commands

    add_commands(args)
    from apps.cli.root import app

    logged = io.StringIO()
    handler = logging.StreamHandler(logged)  # what logging's last resort prints in a process
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    # a command that stops on Ctrl-C (ping) sets the handlers of its loop, which leaves them
    # in place when it closes: this process's own come back after the call
    signals = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        result = CliRunner().invoke(app, list(args), input=stdin, env=env)
    finally:
        root.removeHandler(handler)
        for sig, previous in signals.items():
            signal.signal(sig, previous)
    stderr = result.stderr_bytes + logged.getvalue().encode()
    code = result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception)).encode()
        code = 1
    return Ran(code, result.stdout_bytes, stderr)
