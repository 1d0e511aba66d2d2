"""The forwarder daemon: wires the sans-IO core to faces, timers and signals.

One asyncio loop (uvloop when the CLI finds it).  PIT expiry runs on one periodic timer, not one
timer per entry.  SIGTERM/SIGINT stop the daemon cleanly (listeners closed, Unix socket file
removed); SIGUSR1 logs every counter as one JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import json
import logging
import os
import signal
import socket
import stat
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from forwarder.config import (
    NFD_SOCKET,
    ForwarderConfig,
    default_unix_socket,
)
from forwarder.face.face import Face
from forwarder.face.face_table import FaceTable
from forwarder.fw.forwarder import Forwarder
from forwarder.mgmt.manager import install_management
from forwarder.mgmt.mgmt_face import ManagementFace
from forwarder.mgmt.rib import ORIGIN_STATIC, ROUTE_CHILD_INHERIT, Rib, Route
from forwarder.table.limits import TableLimits
from icn.addr import parse_host_port
from icn.errors import ConfigError, FaceError
from icn.log import setup_logging
from icn.wire.name import from_uri

if TYPE_CHECKING:
    from forwarder.observe.capture import PacketCapture
    from icn.observe.endpoint import MetricsEndpoint

log = logging.getLogger("forwarder")

COUNTERS_TAG = "counters: "  # the SIGUSR1 line; apps/procs.py parses it
# a snapshot key per face: FACE_TIMED_OUT_PREFIX + face id -> its timed-out Interests
FACE_TIMED_OUT_PREFIX = "face_timed_out."


def table_limits(config: ForwarderConfig) -> TableLimits:
    t = config.tables
    return TableLimits(
        fib_max_entries=t.fib_max_entries,
        pit_max_entries=t.pit_max_entries,
        cs_max_entries=t.cs_max_entries,
        cs_max_bytes=t.cs_max_bytes,
        dnl_lifetime=t.dnl_lifetime_ms / 1000.0,
        dnl_max_entries=t.dnl_max_entries,
        strategy_choice_max_entries=t.strategy_choice_max_entries,
        reflexive_max_entries=t.reflexive_max_entries,
        face_share=t.face_share,
        local_reserve=t.local_reserve,
        interest_lifetime_max_ms=t.interest_lifetime_max_ms,
    )


def _ip_uri(scheme: str, hostport: str) -> str:
    host, port = parse_host_port(hostport)
    if ":" in host:
        return f"{scheme}6://[{host}]:{port}"
    return f"{scheme}4://{host}:{port}"


def _prepare_unix_path(path: str, create_dir: bool = False) -> None:
    """Remove a stale socket file left by a crashed daemon; refuse if one is still serving.
    ``create_dir``: make the parent directory (the default socket's, e.g. /run/nfd)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        parent = os.path.dirname(path) or "."
        if create_dir:
            os.makedirs(parent, mode=0o755, exist_ok=True)
        if not os.path.isdir(parent):
            raise ConfigError(
                f"listen.unix: directory {parent} does not exist; create it or choose another path"
            ) from None
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ConfigError(f"listen.unix: {path} exists and is not a socket; choose another path")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(path)
        except OSError:
            os.unlink(path)  # nobody listens: stale
            return
    raise ConfigError(
        f"listen.unix: a forwarder is already serving {path}; stop it or choose another path"
    )


class ForwarderDaemon:
    """A forwarder with its faces, listeners and timers, started and stopped as a unit."""

    def __init__(self, config: ForwarderConfig) -> None:
        self.config = config
        self.counters: Counter[str] = Counter()
        self.fw = Forwarder(
            table_limits(config), self.counters, default_strategy=config.default_strategy
        )
        self.rib = Rib(
            self.fw.fib,
            max_routes=config.tables.rib_max_routes,
            clock=self.fw.clock,
            counters=self.counters,
        )
        self.faces = FaceTable(
            self.counters,
            sink=self.fw,
            on_face_closed=self._face_closed,
            on_face_added=self.fw.add_face,
            local_networks=tuple(ipaddress.ip_network(n) for n in config.local_networks),
            tcp_max_packet=config.tcp_max_packet,
            udp_max_packet=config.udp_max_packet,
        )
        self.mgmt: ManagementFace | None = None
        self.started_at = time.time()
        self._tick_handle: asyncio.TimerHandle | None = None
        self._stopped: asyncio.Event | None = None
        self._signals = False
        self.listen_uris: list[str] = []
        self.capture: PacketCapture | None = None
        self.metrics: MetricsEndpoint | None = None

    def _face_closed(self, face_id: int) -> None:
        # The forwarder drops the face's PIT records and FIB hops; the RIB its routes (an app
        # that disconnects leaves no route behind).
        self.fw.remove_face(face_id)
        self.rib.remove_face(face_id)

    async def start(self, *, signals: bool = True) -> None:
        """Open listeners and static faces, install routes and strategies, start timers.
        ``signals``: take SIGTERM, SIGINT and SIGUSR1 for this daemon; False where several
        daemons share a process (apps.scenario.packed), whose host takes them instead."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        try:
            if cfg.capture.file:
                self._open_capture()  # first: every face, the first packet included
            for prefix_cfg in cfg.strategies:
                self.fw.set_strategy(from_uri(prefix_cfg.prefix), prefix_cfg.strategy)
            self.mgmt = install_management(self, localhop=cfg.localhop_security)
            listen = cfg.effective_listen
            for hp in listen.udp:
                self.listen_uris.append((await self.faces.listen(_ip_uri("udp", hp))).local_uri)
            for hp in listen.tcp:
                self.listen_uris.append((await self.faces.listen(_ip_uri("tcp", hp))).local_uri)
            if listen.unix:
                path = os.path.abspath(listen.unix)
                _prepare_unix_path(path, create_dir=listen.unix == default_unix_socket())
                self.listen_uris.append((await self.faces.listen(f"unix://{path}")).local_uri)
                # Any local user's apps may connect, as with NFD's socket.
                os.chmod(path, 0o666)
            static: dict[str, Face] = {}
            for face_cfg in cfg.faces:
                face = await self.faces.connect(face_cfg.uri)
                shaper = face_cfg.shaper.face_shaper()
                if shaper is not None:
                    face.set_shaper(shaper)
                static[face_cfg.uri] = face
            for route in cfg.routes:
                face = static[route.face]
                entry = Route(face.face_id, ORIGIN_STATIC, route.cost, ROUTE_CHILD_INHERIT)
                if not self.rib.register(from_uri(route.prefix), entry):
                    raise ConfigError(
                        f"routes: FIB is full ({cfg.tables.fib_max_entries} entries); "
                        "raise tables.fib_max_entries"
                    )
            if cfg.metrics.listen:
                # imported here: prometheus-client stays out of a daemon that serves no metrics
                from forwarder.observe.metrics import serve_forwarder_metrics

                self.metrics = await serve_forwarder_metrics(self, cfg.metrics.listen)
                log.info("metrics on %s", self.metrics.url)
        except FaceError as exc:
            self._close_io()
            raise ConfigError(str(exc)) from None
        except BaseException:
            self._close_io()
            raise
        if signals:
            self._signals = True
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.request_stop)
            loop.add_signal_handler(signal.SIGUSR1, self.log_counters)
        self._schedule_tick()
        # Long-lived tables hold millions of objects: keep the cyclic GC from rescanning them.
        gc.collect()
        gc.freeze()
        gc.set_threshold(100_000, 50, 100)
        log.info(
            "forwarder ready: listening on %s; %d static faces, %d routes",
            ", ".join(self.listen_uris) or "nothing",
            len(cfg.faces),
            len(cfg.routes),
        )
        unix = cfg.effective_listen.unix
        if unix and os.path.abspath(unix) != NFD_SOCKET:
            path = os.path.abspath(unix)
            log.info("point NDN apps here with NDN_CLIENT_TRANSPORT=unix://%s", path)

    def _open_capture(self) -> None:
        from forwarder.observe.capture import open_capture

        path = self.config.capture.file
        try:
            self.capture = open_capture(self.config.capture, self.counters)
        except OSError as exc:
            raise ConfigError(
                f"capture.file: cannot write {path}: {exc.strerror}; choose a writable path"
            ) from None
        self.capture.attach(self.faces)
        log.info("capturing every face's packets to %s", path)

    def _close_io(self) -> None:
        self.faces.close()
        if self.capture is not None:
            self.capture.close()

    def _schedule_tick(self) -> None:
        loop = asyncio.get_running_loop()
        self._tick_handle = loop.call_later(self.config.tick_ms / 1000.0, self._tick)

    def _tick(self) -> None:
        try:
            self.fw.tick()
            nxt = self.rib.next_expiry()
            if nxt is not None and nxt <= self.fw.clock():
                self.rib.expire()
        except Exception:  # a bug, not bad input: keep forwarding, say so once per tick
            self.counters["daemon.tick_error"] += 1
            log.exception("error in the expiry timer")
        self._schedule_tick()

    def snapshot(self) -> dict[str, Any]:
        """Counters plus table sizes, for the SIGUSR1 line and tests."""
        out: dict[str, Any] = dict(sorted(self.counters.items()))
        out.update(
            {
                "pit.size": len(self.fw.pit),
                "fib.size": len(self.fw.fib),
                "rib.size": len(self.rib),
                "cs.size": len(self.fw.cs),
                "cs.bytes": self.fw.cs.bytes_used,
                "dnl.size": len(self.fw.dnl),
                "rft.size": len(self.fw.rft),
                "faces.size": len(self.faces),
                # who was refused table room (and Nacked Congestion) most: a flood's sources
                "fw.refused_by_face": dict(self.fw.refused_by_face.most_common(10)),
                "uptime_s": round(time.time() - self.started_at, 3),
            }
        )
        # per face up (so bounded), the report's per-face TimedOutInterests: faces/list is
        # NFD's FaceStatus, which has no field for it
        for face in self.faces:
            n = face.link.stats.n_timed_out_interests
            if n:
                out[f"{FACE_TIMED_OUT_PREFIX}{face.face_id}"] = n
        return out

    def log_counters(self) -> None:
        log.warning("%s%s", COUNTERS_TAG, json.dumps(self.snapshot(), separators=(",", ":")))

    def request_stop(self) -> None:
        if self._stopped is not None:
            self._stopped.set()

    async def wait_stopped(self) -> None:
        assert self._stopped is not None
        await self._stopped.wait()

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1) if self._signals else ():
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(sig)
        if self.metrics is not None:
            await self.metrics.close()
        self.faces.close()
        if self.mgmt is not None:
            self.mgmt.dispatcher.close()
        await asyncio.sleep(0)  # let transports finish closing
        if self.capture is not None:
            self.capture.close()  # after the faces: their last packets are in the file
        self.log_counters()
        log.info("forwarder stopped")


async def run_daemon(config: ForwarderConfig) -> None:
    """Run until SIGTERM or SIGINT."""
    setup_logging(config.log_level)
    daemon = ForwarderDaemon(config)
    await daemon.start()
    try:
        await daemon.wait_stopped()
    finally:
        await daemon.stop()
