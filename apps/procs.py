"""Child processes for the demo, benchmarks and tests: start, wait ready, read counters, stop.

Every wait is bounded, every process is stopped by its PID (SIGTERM, then SIGKILL after a grace
period), and output goes to files in a directory the caller owns.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from forwarder.daemon import COUNTERS_TAG


class ProcessHandle(Protocol):
    """What the launcher asks of a child's process: a ``subprocess.Popen`` answers it, and so
    does a process run on another machine (:mod:`apps.scenario.ray_child`)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | Any:  # as Popen's: None until poll() or wait() saw the end
        ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


class Child:
    """One child process with stdout and stderr captured to files."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        workdir: Path,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        stdin: Path | None = None,
    ):
        self.name = name
        self.argv = argv
        self.stdout_path = workdir / f"{name}.out"
        self.stderr_path = workdir / f"{name}.err"
        full_env = {**os.environ, **(env or {})}
        with (
            open(self.stdout_path, "wb") as out,
            open(self.stderr_path, "wb") as err,
            open(stdin or os.devnull, "rb") as inp,
        ):
            self.proc: ProcessHandle = subprocess.Popen(
                argv, stdin=inp, stdout=out, stderr=err, env=full_env, preexec_fn=preexec_fn
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def errors(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 15.0, stream: str = "both") -> None:
        """Wait until ``text`` appears in the child's output; raise with its log if it died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            blob = ""
            if stream in ("both", "stdout"):
                blob += self.output()
            if stream in ("both", "stderr"):
                blob += self.errors()
            if text in blob:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode} before {text!r}:\n"
                    f"{self.errors()[-3000:]}"
                )
            time.sleep(0.05)
        raise TimeoutError(
            f"{self.name} did not print {text!r} within {timeout} s:\n{self.errors()[-3000:]}"
        )

    def counters(self, timeout: float = 10.0) -> dict[str, int]:
        """Ask a forwarder for its counters (SIGUSR1) and parse the log line it writes."""
        before = self.errors().count(COUNTERS_TAG)
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [ln for ln in self.errors().splitlines() if COUNTERS_TAG in ln]
            if len(lines) > before:
                return json.loads(lines[-1].split(COUNTERS_TAG, 1)[1])  # type: ignore[no-any-return]
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.errors()[-3000:]}")
            time.sleep(0.05)
        raise TimeoutError(f"{self.name} did not log its counters within {timeout} s")

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self, grace: float = 5.0) -> int:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL.  Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(grace)  # at once when it has ended


def icn_argv(*args: str) -> list[str]:
    """Run the ``icn`` CLI with the current interpreter (works without the console script)."""
    return [sys.executable, "-c", "from apps.cli import main; main()", *args]


class ProcessGroup:
    """Children stopped together, last started first (also as a context manager)."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.children: list[Child] = []

    def start(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        stdin: Path | None = None,
    ) -> Child:
        child = Child(name, argv, self.workdir, env, stdin=stdin)
        self.children.append(child)
        return child

    def stop_all(self) -> None:
        for child in reversed(self.children):
            child.stop()

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_all()
