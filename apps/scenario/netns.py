"""The netns backend: a network namespace per node, a veth pair per link (root only).

Names, for run id ``R`` (6 lowercase hex digits, chosen by the runner):

* node ``n`` runs in namespace ``icn-R-n``;
* link ``i`` (its index in ``scenario.links``) is the veth pair ``iRl<i>a`` (in the namespace
  of ``between[0]``) and ``iRl<i>b`` (in that of ``between[1]``): 14 characters at most
  (link 16383), within Linux's limit of 15.

Addresses: link ``i`` gets the /30 at offset ``4*i`` inside ``10.X.0.0/16``, where ``X`` (1 to
254) is drawn from a hash of the run id; ``between[0]`` has ``.1`` of that /30 and
``between[1]`` ``.2``.  So link 0 is 10.X.0.1 - 10.X.0.2, link 1 is 10.X.0.5 - 10.X.0.6, link
64 is 10.X.1.1 - 10.X.1.2; up to 16384 links.  Every link has its own subnet, so a node with
several links routes each neighbor's address out of the right veth without any route added, and
two runs at once cannot meet because each lives in its own namespaces.

Forwarders listen on ``0.0.0.0`` (:meth:`NetnsBackend.listen_hosts`): a UDP face toward a
neighbor is made on the listener's socket, and with a wildcard listener the kernel sends from
the veth address of the link toward that neighbor, the address the neighbor knows.  (One
listener per link address would not do: the forwarder makes every UDP face on its first
listener, whose address is wrong for the other links.)

Link shaping (delay, loss, rate) is the forwarders' face layer's job.  When the kernel has
netem, :meth:`NetnsBackend.netem_apply` can shape a veth pair as well; nothing calls it by
default.

Every namespace is written to the run record (:mod:`apps.scenario.runs`) before it is created,
so ``clean`` can remove what a crashed launcher left.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from apps.scenario.backend import Backend
from apps.scenario.runs import (
    RunRecord,
    kill_pid,
    list_namespaces,
    namespace_pids,
    remove_owner,
    run_command,
    write_owner,
)
from apps.scenario.schema import LinkSpec, Scenario
from icn.errors import ConfigError

RUN_ID_RE = re.compile(r"^[0-9a-f]{6}$")
IFNAME_MAX = 15  # IFNAMSIZ - 1
MAX_LINKS = 1 << 14  # /30s in a /16
PREFIX_LEN = 30


class NetnsUnavailable(ConfigError):
    """This machine (or user) cannot run the netns backend: not root, or no ``ip``."""


def namespace_name(run_id: str, node: str) -> str:
    return f"icn-{run_id}-{node}"


def veth_names(run_id: str, index: int) -> tuple[str, str]:
    """The two ends of link ``index``; ConfigError if a name exceeds the 15-character limit."""
    a, b = f"i{run_id}l{index}a", f"i{run_id}l{index}b"
    if len(a) > IFNAME_MAX:
        raise ConfigError(
            f"interface name {a!r} for link {index} is longer than {IFNAME_MAX} characters "
            f"(Linux's limit): use a run id of 6 characters and fewer links"
        )
    return a, b


def run_octet(run_id: str) -> int:
    """The second octet of the run's 10.X.0.0/16, 1 to 254, from a hash of the run id."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return 1 + int.from_bytes(digest[:4], "big") % 254


def link_addresses(run_id: str, index: int) -> tuple[str, str]:
    """The addresses of ``between[0]`` and ``between[1]`` on link ``index`` (a /30 each)."""
    if not 0 <= index < MAX_LINKS:
        raise ConfigError(f"the netns backend places at most {MAX_LINKS} links (link {index})")
    x = run_octet(run_id)
    offset = 4 * index
    base = f"10.{x}.{offset // 256}"
    low = offset % 256
    return f"{base}.{low + 1}", f"{base}.{low + 2}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}ms"


class NetnsBackend(Backend):
    """Each node in namespace ``icn-<run id>-<node>``, each link a veth pair with its own /30.

    ``record``: the run record namespaces are written to.  The runner may set it before
    :meth:`setup` (the usual way: it also records the children's PIDs there); if it is None,
    ``setup`` creates one and the runner can pick it up from this attribute.  ``teardown``
    finishes (deletes) it once everything is gone.
    """

    name = "netns"

    def __init__(
        self,
        scenario: Scenario,
        run_id: str,
        run_dir: Path,
        record: RunRecord | None = None,
    ) -> None:
        super().__init__(scenario, run_id, run_dir)
        if not RUN_ID_RE.match(run_id):
            raise ConfigError(f"netns backend: run id {run_id!r} is not 6 lowercase hex digits")
        if len(scenario.links) > MAX_LINKS:
            raise ConfigError(
                f"the netns backend places at most {MAX_LINKS} links, got {len(scenario.links)}"
            )
        self.record = record
        self.netem = False
        self.namespaces: dict[str, str] = {
            node: namespace_name(run_id, node) for node in scenario.nodes
        }
        self.veths: list[tuple[str, str]] = []
        self.addresses: list[tuple[str, str]] = []
        self._link_index: dict[frozenset[str], int] = {}
        for i, link in enumerate(scenario.links):
            self.veths.append(veth_names(run_id, i))
            self.addresses.append(link_addresses(run_id, i))
            self._link_index[frozenset(link.between)] = i
        # namespaces this object created (or was creating): the only ones teardown deletes
        self._owned: list[str] = []

    # ---- plan ------------------------------------------------------------------------------

    def link_index(self, link: LinkSpec) -> int:
        try:
            return self._link_index[frozenset(link.between)]
        except KeyError:
            raise ValueError(f"link {link.name} is not in scenario {self.scenario.name}") from None

    def address_on(self, link: LinkSpec, node: str) -> str:
        i = self.link_index(link)
        between = self.scenario.links[i].between
        if node not in between:
            raise ValueError(f"node {node} is not an end of link {link.name}")
        return self.addresses[i][between.index(node)]

    def interface_on(self, link: LinkSpec, node: str) -> str:
        """The veth end of ``link`` inside ``node``'s namespace."""
        i = self.link_index(link)
        between = self.scenario.links[i].between
        if node not in between:
            raise ValueError(f"node {node} is not an end of link {link.name}")
        return self.veths[i][between.index(node)]

    def listen_hosts(self, node: str) -> list[str]:
        return ["0.0.0.0"]

    def argv_for(self, node: str, argv: list[str]) -> list[str]:
        # ip netns exec execs the command: the child's PID is the program's
        return ["ip", "netns", "exec", self.namespaces[node], *argv]

    def resources(self) -> list[str]:
        return list(self.namespaces.values())

    # ---- setup -----------------------------------------------------------------------------

    @staticmethod
    def check_available() -> None:
        """Raise :class:`NetnsUnavailable` saying what is missing and how to get it."""
        if os.geteuid() != 0:
            raise NetnsUnavailable(
                "the netns backend creates network namespaces and veth pairs, which needs root: "
                "run the launcher as root (e.g. with sudo), or use backend: local"
            )
        if shutil.which("ip") is None:
            raise NetnsUnavailable(
                "the netns backend needs the 'ip' command from iproute2: "
                "apt-get install iproute2 (or your distribution's iproute2 package)"
            )

    def setup(self) -> None:
        self.check_available()
        self.sock_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        write_owner(self.run_id)  # before any namespace: clean() run elsewhere must see it live
        if self.record is None:
            self.record = RunRecord.create(self.run_id, self.scenario.name, self.name, self.run_dir)
        taken = set(list_namespaces()) & set(self.namespaces.values())
        if taken:
            raise ConfigError(
                f"namespaces {', '.join(sorted(taken))} already exist: another run with id "
                f"{self.run_id} is live, or a crashed run left them (icn scenario clean)"
            )
        for ns in self.namespaces.values():
            # recorded before it exists: a crash between the two leaves nothing unrecorded
            self.record.add_namespace(ns)
            self._owned.append(ns)
            try:
                run_command(["ip", "netns", "add", ns])
            except ConfigError as exc:
                if "File exists" in str(exc):  # someone else's, made since the check above
                    self._owned.remove(ns)
                    self.record.remove_namespace(ns)
                elif "Operation not permitted" in str(exc) and len(self._owned) == 1:
                    raise NetnsUnavailable(
                        f"{exc}: this process may not create network namespaces (in a "
                        "container, run it with CAP_SYS_ADMIN, e.g. docker run --privileged)"
                    ) from None
                raise
            run_command(["ip", "-n", ns, "link", "set", "lo", "up"])
        for i, link in enumerate(self.scenario.links):
            ns_a, ns_b = (self.namespaces[n] for n in link.between)
            (if_a, if_b), (addr_a, addr_b) = self.veths[i], self.addresses[i]
            veth = ["type", "veth", "peer", "name", if_b, "netns", ns_b]
            run_command(["ip", "link", "add", if_a, "netns", ns_a, *veth])
            for ns, ifname, addr in ((ns_a, if_a, addr_a), (ns_b, if_b, addr_b)):
                run_command(["ip", "-n", ns, "addr", "add", f"{addr}/{PREFIX_LEN}", "dev", ifname])
                run_command(["ip", "-n", ns, "link", "set", ifname, "up"])
        self.netem = self._probe_netem()

    def _probe_netem(self) -> bool:
        """Whether ``tc qdisc ... netem`` works here (tried on lo of the first namespace)."""
        if not self._owned or shutil.which("tc") is None:
            return False
        ns = self._owned[0]
        try:
            run_command(
                ["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms"]
            )
        except ConfigError:
            return False
        with contextlib.suppress(ConfigError):
            run_command(["tc", "-n", ns, "qdisc", "del", "dev", "lo", "root"])
        return True

    def netem_apply(
        self, link: LinkSpec, delay: float, jitter: float, loss: float, rate: float | None
    ) -> bool:
        """Shape both veth ends of ``link`` with netem (seconds, probability 0..1, bits/s);
        replaces earlier shaping.  False, and nothing done, where netem is unavailable."""
        if not self.netem:
            return False
        i = self.link_index(link)
        args = ["delay", _ms(delay)]
        if jitter > 0:
            args.append(_ms(jitter))
        if loss > 0:
            args += ["loss", f"{loss * 100:.4f}%"]
        if rate:
            args += ["rate", f"{int(rate)}bit"]
        for node, ifname in zip(self.scenario.links[i].between, self.veths[i], strict=True):
            ns = self.namespaces[node]
            run_command(["tc", "-n", ns, "qdisc", "replace", "dev", ifname, "root", "netem", *args])
        return True

    # ---- teardown --------------------------------------------------------------------------

    def teardown(self) -> None:
        """Kill what still runs in the run's namespaces (by PID), delete the namespaces (their
        veths go with them), remove the sockets and finish the record.  Works after a partial
        setup; a second call does nothing."""
        failures: list[str] = []
        existing = set(self._owned)  # unlisted (ip failed): each one is tried
        if self._owned and shutil.which("ip") is not None:
            try:
                existing = set(list_namespaces())
            except ConfigError as exc:
                failures.append(str(exc))
        for ns in reversed(self._owned):
            if ns not in existing:
                continue
            try:
                for pid in namespace_pids(ns):
                    kill_pid(pid)
                run_command(["ip", "netns", "del", ns])
            except (ConfigError, subprocess.SubprocessError, OSError) as exc:
                failures.append(str(exc))
        if not failures:
            self._owned.clear()
            # kept while a namespace remains: once this launcher has exited, clean sees it dead
            remove_owner(self.run_id)
        self.remove_sockets()
        if failures:
            # the record stays, so `clean` can finish the job later
            raise ConfigError("netns teardown left things behind:\n  " + "\n  ".join(failures))
        if self.record is not None:
            self.record.finish()
