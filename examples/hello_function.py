"""Serve a named function and call it, from one script.

    python examples/hello_function.py

It starts a forwarder (``icn fwd``, a process of its own, on a Unix socket in a temporary
directory), serves ``greet`` under ``/hello`` with :func:`compute.rmi.serve` (on a thread of
this process, while the script goes on), calls it with :func:`compute.rmi.call_sync`, prints
the answer, and stops the server and the forwarder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compute.rmi import call_sync, function, serve_in_background

READY_WAIT = 10.0  # seconds the forwarder gets to open its socket


@function
def greet(name: str) -> str:
    return f"hello, {name}"


def start_forwarder(sock: Path) -> subprocess.Popen[bytes]:
    """``icn fwd --unix SOCK`` run with this interpreter; returns once the socket is there."""
    icn = [sys.executable, "-c", "from apps.cli import main; main()"]
    proc = subprocess.Popen([*icn, "fwd", "--unix", str(sock)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + READY_WAIT
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise SystemExit(f"the forwarder did not start (exit code {proc.returncode})")
        time.sleep(0.02)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 5 s."""
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="icn-hello-"))
    forwarder = start_forwarder(tmp / "fwd.sock")
    try:
        uri = f"unix://{tmp / 'fwd.sock'}"
        os.environ["NDN_CLIENT_TRANSPORT"] = uri  # where callers find the forwarder
        with serve_in_background([greet], prefix="/hello", transport=uri) as server:
            assert server.serving is not None
            print(server.serving.describe())
            answer = call_sync("/hello/greet", "world")
            print(f"/hello/greet('world') -> {answer!r}")
    finally:
        stop(forwarder)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
