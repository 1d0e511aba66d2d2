"""A private mosquitto broker for tests, demos and scenarios: our own process on a free port.

The Debian package may also start a system-wide mosquitto service; we never use it.  Each
:class:`MosquittoBroker` writes its own config, persistence database and log into a temp dir it
owns, listens on 127.0.0.1 only, is stopped by its PID (SIGTERM, then SIGKILL) and removes the
dir.  Persistence is on, so the QoS 1 messages queued for persistent sessions survive
:meth:`MosquittoBroker.restart` (mosquitto writes its database when it exits on SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import socket
import tempfile
import time
from pathlib import Path
from types import TracebackType

from apps.procs import Child

NOT_INSTALLED = (
    "mosquitto is not installed: run scripts/bootstrap.sh as root, or apt-get install mosquitto"
)
# where Debian puts the binary: /usr/sbin is often not on a non-root user's PATH
_SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin")


def find_mosquitto() -> str | None:
    """The path of the mosquitto binary: on PATH, else in /usr/sbin or /usr/local/sbin."""
    found = shutil.which("mosquitto")
    if found:
        return found
    for directory in _SBIN_DIRS:
        path = os.path.join(directory, "mosquitto")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (a race remains; start() retries on a clash)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class MosquittoBroker:
    """``async with MosquittoBroker() as broker:`` ... ``broker.url``; or ``await start()`` and
    ``await stop()``.  ``port=None`` picks a free port.  ``max_queued_messages`` bounds the QoS 1
    messages the broker holds per client beyond those in flight (mosquitto's default of 1000 drops
    the rest for a slow or absent persistent subscriber)."""

    host = "127.0.0.1"

    def __init__(
        self,
        port: int | None = None,
        *,
        start_timeout: float = 10.0,
        stop_grace: float = 5.0,
        max_queued_messages: int = 1_000_000,
    ) -> None:
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"MosquittoBroker port={port}: give a TCP port in 1..65535, or None")
        self._wanted_port = port
        self.port = port or 0
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.max_queued_messages = max_queued_messages
        self.workdir: Path | None = None
        self._child: Child | None = None

    @property
    def pid(self) -> int:
        if self._child is None:
            raise RuntimeError("the broker is not running: await start() first")
        return self._child.pid

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        if self.workdir is None:
            raise RuntimeError("the broker has no directory: await start() first")
        return self.workdir / "mosquitto.log"

    def log(self) -> str:
        """The broker's log file and its stderr (empty before start)."""
        if self.workdir is None:
            return ""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        if self._child is not None:
            text += self._child.errors()
        return text

    async def start(self) -> None:
        binary = find_mosquitto()
        if binary is None:
            raise FileNotFoundError(NOT_INSTALLED)
        if self._child is not None:
            raise RuntimeError(f"the broker already runs at {self.url} (pid {self.pid})")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="icn-mosquitto-"))
        attempts = 1 if self._wanted_port else 3
        try:
            for attempt in range(attempts):
                if not self._wanted_port and (attempt or not self.port):
                    self.port = free_port(self.host)
                if await self._launch(binary, last=attempt == attempts - 1):
                    return
        except BaseException:
            await self.stop()
            raise

    async def _launch(self, binary: str, last: bool) -> bool:
        """Start one process and wait until the port accepts; False if another process took the
        port first (and we may try another one)."""
        assert self.workdir is not None
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(self._config())
        with contextlib.suppress(FileNotFoundError):
            (self.workdir / "mosquitto.err").unlink()
        child = Child("mosquitto", [binary, "-c", str(conf)], self.workdir)
        self._child = child
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if child.proc.poll() is not None:
                self._child = None
                log = self.log()
                if not last and "Address already in use" in log:
                    return False
                raise RuntimeError(
                    f"mosquitto exited with {child.proc.returncode} before listening on "
                    f"{self.host}:{self.port}:\n{log[-3000:]}"
                )
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection(self.host, self.port)
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
                return True
            await asyncio.sleep(0.05)
        raise TimeoutError(
            f"mosquitto (pid {child.pid}) did not listen on {self.host}:{self.port} within "
            f"{self.start_timeout} s:\n{self.log()[-3000:]}"
        )

    def _config(self) -> str:
        assert self.workdir is not None
        # mosquitto started as root switches to the user named here (default: "mosquitto", who
        # could not write our temp dir); naming ourselves keeps the process as we started it
        user = pwd.getpwuid(os.getuid()).pw_name
        return "\n".join(
            [
                f"user {user}",
                f"listener {self.port} {self.host}",
                "allow_anonymous true",
                "persistence true",
                f"persistence_location {self.workdir}/",
                "persistence_file mosquitto.db",
                f"max_queued_messages {self.max_queued_messages}",
                f"log_dest file {self.log_path}",
                "log_type error",
                "log_type warning",
                "log_type notice",
                "log_type information",
                "",
            ]
        )

    async def restart(self) -> None:
        """Stop the process (mosquitto saves its database on SIGTERM) and start it again on the
        same port with the same directory: persistent sessions and their queued messages stay."""
        await self._stop_process()
        if self._wanted_port is None:
            self._wanted_port = self.port
            try:
                await self.start()
            finally:
                self._wanted_port = None
        else:
            await self.start()

    async def _stop_process(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            await asyncio.to_thread(child.stop, self.stop_grace)

    async def stop(self) -> None:
        """Stop the process by its PID and remove the temp dir (idempotent)."""
        try:
            await self._stop_process()
        finally:
            if self.workdir is not None:
                shutil.rmtree(self.workdir, ignore_errors=True)
                self.workdir = None

    async def __aenter__(self) -> MosquittoBroker:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
