"""The launcher's hand on the forwarders: link faces, their shaping, and routes, all set
through each node's management protocol over its Unix socket (as an operator with nfdc would).

``Fabric`` remembers what it installed so a reroute only sends the difference, and which face
carries each link on each node so counters can be mapped back to links.

Commands go out in batches (:func:`batched`): a hundred nodes' links and routes are a few
thousand commands, each a round trip of a millisecond or two through a forwarder's management,
that one after another took longer than starting the forwarders.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from apps.scenario.backend import Backend
from apps.scenario.routing import CAPTURE_FLAGS, RouteTable, nested_prefixes, route_diff
from apps.scenario.schema import LinkSpec, Scenario
from icn.dataplane import mgmt_client
from icn.dataplane.endpoint import Endpoint
from icn.errors import CommandFailed, IcnError

log = logging.getLogger(__name__)

ORIGIN_NLSR = 128  # routes: auto plays the routing protocol's part
ORIGIN_STATIC = 255
CONFLICT = 409
COMMAND_TIMEOUT = 8.0
# A command's Interest lives as long as the launcher waits for it: sent once (a command need not
# be idempotent), with the client's default 4 s a forwarder slowed by a loaded machine missed
# its answer while COMMAND_TIMEOUT still had half its time (faces/create, "no Data after 1
# Interest(s)", in a suite run beside saturated fault tests)
COMMAND_LIFETIME_MS = int(COMMAND_TIMEOUT * 1000)
# commands in flight at once: enough to keep every forwarder busy, few enough that none waits
# on a queue of its own longer than COMMAND_TIMEOUT on a loaded machine
MGMT_BATCH = 32

T = TypeVar("T")


class NoAnswer(IcnError):
    """A node's forwarder did not answer the launcher's management in time."""


@contextlib.asynccontextmanager
async def answered_within(node: str, what: str, seconds: float) -> AsyncIterator[None]:
    """``asyncio.timeout(seconds)`` whose expiry says which node did not answer what: a bare
    TimeoutError has no text (and is an OSError), so the launcher printed ``error: `` and
    nothing else."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise NoAnswer(
            f"{node}'s forwarder did not answer {what} within {seconds:g} s "
            f"(its log: logs/fwd-{node}.err, or the packed host's)"
        ) from None


async def batched(jobs: Iterable[Awaitable[T]], limit: int = MGMT_BATCH) -> list[T]:
    """Await ``jobs`` with at most ``limit`` at a time; their results in order.  Every job
    runs to its end, then the first failure (if any) is raised: none is left running behind
    the caller's back."""
    slots = asyncio.Semaphore(limit)

    async def one(job: Awaitable[T]) -> T:
        async with slots:
            return await job

    results = await asyncio.gather(*(one(j) for j in jobs), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results  # type: ignore[return-value]  # no exception among them


@dataclass
class Shaping:
    """A link's emulation, the same in both directions."""

    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    rate: float | None = None
    seed: int | None = None

    @classmethod
    def of(cls, link: LinkSpec) -> Shaping:
        return cls(link.delay, link.jitter, link.loss, link.rate, link.seed)

    def params(self, cut: bool = False) -> dict[str, Any]:
        return {
            "delay_ms": self.delay * 1000,
            "jitter_ms": self.jitter * 1000,
            "loss": 1.0 if cut else self.loss,
            "rate_mbps": self.rate / 1e6 if self.rate else None,
            "seed": self.seed,
        }


def link_key(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


class Fabric:
    def __init__(self, sc: Scenario, backend: Backend) -> None:
        self.sc = sc
        self.backend = backend
        self.endpoints: dict[str, Endpoint] = {}
        # link name -> node -> face id of that node's face toward the other end
        self.link_faces: dict[str, dict[str, int]] = {ln.name: {} for ln in sc.links}
        self.shaping: dict[str, Shaping] = {ln.name: Shaping.of(ln) for ln in sc.links}
        self.cut: set[str] = set()
        # node -> prefix -> neighbor -> (face id, cost), as installed
        self.installed: dict[str, dict[str, dict[str, tuple[int, int]]]] = {}
        self.origin = ORIGIN_NLSR if sc.routes == "auto" else ORIGIN_STATIC
        self.nested = nested_prefixes(sc)  # their routes capture (routing.nested_prefixes)
        # one reroute at a time: each computes its difference from what the one before it
        # installed (two overlapping ones, e.g. a chaos fault's and a restart's, both removed
        # the same route and the second failed with a KeyError)
        self._routing = asyncio.Lock()

    # ---- nodes -----------------------------------------------------------------------------

    async def attach(self, node: str) -> None:
        """Open the launcher's management connection to ``node``'s forwarder."""
        old = self.endpoints.pop(node, None)
        if old is not None:
            old.close()
        self.endpoints[node] = await Endpoint.connect(
            f"unix://{self.backend.mgmt_socket(node)}", connect_timeout=5.0
        )
        self.installed[node] = {}

    def detach(self, node: str) -> None:
        """``node`` is gone: forget its connection, faces and routes."""
        ep = self.endpoints.pop(node, None)
        if ep is not None:
            ep.close()
        self.installed.pop(node, None)
        for faces in self.link_faces.values():
            faces.pop(node, None)

    def close(self) -> None:
        for node in list(self.endpoints):
            self.detach(node)

    async def command(self, node: str, module: str, verb: str, **params: Any) -> dict[str, Any]:
        async with answered_within(node, f"{module}/{verb}", COMMAND_TIMEOUT):
            return await mgmt_client.command(
                self.endpoints[node], module, verb, lifetime_ms=COMMAND_LIFETIME_MS, **params
            )

    # ---- links -----------------------------------------------------------------------------

    def links_of(self, node: str) -> list[LinkSpec]:
        return [ln for ln in self.sc.links if node in ln.between]

    def neighbor_face(self, node: str, neighbor: str) -> int | None:
        link = self.sc.link_between(node, neighbor)
        return None if link is None else self.link_faces[link.name].get(node)

    async def attach_all(self, nodes: Iterable[str]) -> None:
        await batched(self.attach(n) for n in nodes)

    async def connect_links(self, links: Iterable[LinkSpec]) -> None:
        """:meth:`connect_link` for each of ``links``, in batches."""
        await batched(self.connect_link(ln) for ln in links)

    async def connect_link(self, link: LinkSpec) -> None:
        """Faces on both ends of ``link`` (where both nodes are up), shaped."""
        a, b = link.between
        if a not in self.endpoints or b not in self.endpoints:
            return
        faces = self.link_faces[link.name]
        scheme = "udp4" if link.transport == "udp" else "tcp4"
        uri_of = {
            n: f"{scheme}://{self.backend.address_on(link, n)}:{self.backend.listen_port(n)}"
            for n in (a, b)
        }
        if link.transport == "udp":
            for node, peer in ((a, b), (b, a)):
                faces[node] = await self._create_face(node, uri_of[peer])
        else:
            # one TCP connection: a connects, b's side is the face its listener accepted
            body = await self._create_face_body(a, uri_of[b])
            faces[a] = int(body["face_id"])
            faces[b] = await self._accepted_face(b, str(body.get("local_uri", "")))
        await self.apply_shaping(link)

    async def _create_face_body(self, node: str, uri: str) -> dict[str, Any]:
        try:
            return await self.command(node, "faces", "create", uri=uri, face_persistency=0)
        except CommandFailed as exc:
            if exc.status == CONFLICT and "face_id" in exc.body:
                return exc.body
            raise

    async def _create_face(self, node: str, uri: str) -> int:
        return int((await self._create_face_body(node, uri))["face_id"])

    async def _accepted_face(self, node: str, remote_uri: str, timeout: float = 5.0) -> int:
        async with answered_within(node, f"faces/list with {remote_uri}", timeout):
            while True:
                faces = await mgmt_client.status(self.endpoints[node], "faces/list")
                for f in faces:
                    if f.get("uri") == remote_uri:
                        return int(f["face_id"])
                await asyncio.sleep(0.05)

    async def apply_shaping(self, link: LinkSpec) -> None:
        shaping = self.shaping[link.name]
        for node, face_id in self.link_faces[link.name].items():
            if node not in self.endpoints:
                continue
            params = shaping.params(cut=link.name in self.cut)
            if shaping.seed is not None:  # the two directions draw different losses
                params["seed"] = shaping.seed * 2 + link.between.index(node)
            async with answered_within(node, "link/shape", COMMAND_TIMEOUT):
                await mgmt_client.shape_face(
                    self.endpoints[node], face_id, lifetime_ms=COMMAND_LIFETIME_MS, **params
                )

    # ---- routes ----------------------------------------------------------------------------

    async def install_routes(self, table: RouteTable) -> int:
        """Make the live nodes' routes equal ``table``; returns the number of changes sent.

        Reroutes run one after another.  A node that goes away meanwhile (a kill detaches it)
        is skipped: its routes went with its forwarder."""
        async with self._routing:
            return await self._install_routes(table)

    async def _install_routes(self, table: RouteTable) -> int:
        current: RouteTable = {
            node: {p: {nbr: cost for nbr, (_, cost) in hops.items()} for p, hops in pfx.items()}
            for node, pfx in self.installed.items()
        }
        wanted: RouteTable = {n: t for n, t in table.items() if n in self.endpoints}
        add, remove = route_diff(current, wanted)
        # a neighbor reached through a new face (a restarted peer over TCP) needs a new route
        for node, pfx in wanted.items():
            for prefix, hops in pfx.items():
                for nbr, cost in hops.items():
                    have = self.installed.get(node, {}).get(prefix, {}).get(nbr)
                    face = self.neighbor_face(node, nbr)
                    if have and face is not None and have[0] != face:
                        add.append((node, prefix, nbr, cost))
        # every removal before any addition, as one after another did; each phase in batches
        removed = await batched(self._unregister(*r) for r in remove)
        added = await batched(self._register(*a) for a in add)
        return sum(removed) + sum(added)

    async def _unregister(self, node: str, prefix: str, nbr: str) -> int:
        held = self.installed.get(node, {}).get(prefix)
        entry = held.pop(nbr, None) if held is not None else None
        if entry is None or node not in self.endpoints:  # the node went away meanwhile
            return 0
        face_id, _ = entry
        try:
            await self.command(
                node, "rib", "unregister", name=prefix, face_id=face_id, origin=self.origin
            )
        except (IcnError, TimeoutError) as exc:
            if node not in self.endpoints:
                return 0  # it went away with its command in flight
            log.warning("unregister %s via %s on %s: %s", prefix, nbr, node, exc)
        return 1

    async def _register(self, node: str, prefix: str, nbr: str, cost: int) -> int:
        via = self.neighbor_face(node, nbr)
        if via is None or node not in self.endpoints:
            return 0
        try:
            await self.command(
                node, "rib", "register", name=prefix, face_id=via, cost=cost,
                origin=self.origin, flags=CAPTURE_FLAGS if prefix in self.nested else None,
            )  # fmt: skip
        except (IcnError, TimeoutError):
            if node not in self.endpoints:
                return 0  # it went away with its command in flight (a batch has many)
            raise
        if node not in self.endpoints:
            return 0  # detached meanwhile: its routes went with its forwarder
        self.installed.setdefault(node, {}).setdefault(prefix, {})[nbr] = (via, cost)
        return 1
