"""``reference/counters-metrics.md``: the forwarder's counters, found in its code, and the
Prometheus families each collector exports, read from the collectors themselves.

Counters: every key the forwarder's code adds to its one counter bag (``counters["pit.insert"]
+= 1``, in ``forwarder/`` and the wire layer's reassembly), found by reading the code; keys made
at run time (``f"{table}.refused_{why}"``) are listed as the pattern the code writes, and keys
handed to a helper that counts them (``self._fail("mgmt.auth_stale", ...)``) as themselves.

Families: each layer's collector is asked to collect once, with nothing to report (a forwarder
made but not started, a server, a flow and a job with no calls, instances or members), so every
family it exports is listed with its type, labels and help, as a scrape shows them.
"""

from __future__ import annotations

import ast
import re
import types
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from docs_hooks.markdown import ROOT, cell, code, table

# where the daemon's counter keys are written: the forwarder, and the reassembly of NDNLPv2
# fragments its faces run (icn/wire/fragment.py)
COUNTER_SOURCES = ("forwarder", "icn/wire")

# what each section of the counter keys is about
SECTIONS = {
    "face": "faces and their transports: created, destroyed, packets dropped on the link",
    "reassembly": "NDNLPv2 fragments being put back together on a face",
    "shaper": "link emulation (loss, delay, rate) on a face's send path",
    "fw": "the forwarding pipelines (Interest, Data, Nack, timeout) and strategies",
    "pit": "the Pending Interest Table",
    "cs": "the content store",
    "fib": "the Forwarding Information Base",
    "rib": "the Routing Information Base (routes registered through management)",
    "dnl": "the Dead Nonce List (loop detection)",
    "rft": "the reflexive forwarding table (Trigger Interests' reverse paths)",
    "strategy_choice": "the strategy choice table (which strategy serves which prefix)",
    "daemon": "the daemon itself (its periodic timer)",
    "mgmt": "the management protocol (`/localhost/nfd/...` commands and datasets)",
    "capture": "packet capture (pcapng) of the faces",
}


@dataclass(frozen=True)
class CounterKey:
    key: str  # the key, or the pattern a run-time key follows (<...> for the part made then)
    where: str  # file:line of the first place that counts it


def _pattern(node: ast.expr) -> str | None:
    """The counter key an expression writes: a constant, or a pattern for an f-string or a
    constant prefix plus a value; None when nothing of it is known here."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                parts.append(f"<{ast.unparse(v.value).split('.')[-1]}>")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _pattern(node.left), _pattern(node.right)
        if left is not None:
            tail = ast.unparse(node.right).split(".")[-1]
            return left + (right if right is not None else f"<{tail}>")
    return None


def _is_counter_bag(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return text.endswith("counters") or text == "c"


def _counted(tree: ast.AST) -> Iterator[tuple[ast.expr, int]]:
    """Every ``<bag>[key] += n`` and ``<bag>[key] = v`` on a counter bag: (key, line)."""
    for node in ast.walk(tree):
        targets: list[ast.expr]
        if isinstance(node, ast.AugAssign):
            targets = [node.target]
        elif isinstance(node, ast.Assign):
            targets = list(node.targets)
        else:
            continue
        for t in targets:
            if isinstance(t, ast.Subscript) and _is_counter_bag(t.value):
                yield t.slice, node.lineno


def _helper_params(tree: ast.AST) -> dict[str, int]:
    """Functions that count a key they are handed (``def _fail(self, counter, ...)`` with
    ``self.counters[counter] += 1``): name -> position of that parameter in a call."""
    helpers: dict[str, int] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        params = [a.arg for a in fn.args.args]
        for key, _line in _counted(fn):
            if isinstance(key, ast.Name) and key.id in params:
                skip = 1 if params and params[0] in ("self", "cls") else 0
                helpers[fn.name] = params.index(key.id) - skip
    return helpers


QUOTED_KEY = re.compile(r'"([a-z_]+\.[a-z][a-z0-9_]*)"')


def _quoted_keys(tree: ast.AST) -> Iterator[tuple[re.Match[str], int]]:
    """``"section.event"`` quoted inside the module's strings (docstrings included)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for m in QUOTED_KEY.finditer(node.value):
                yield m, node.lineno + node.value[: m.start()].count("\n")


def forwarder_counters() -> list[CounterKey]:
    """Every counter key the forwarder's code writes, with the first place that writes it."""
    found: dict[str, str] = {}
    named: list[tuple[str, str]] = []
    files = sorted(p for d in COUNTER_SOURCES for p in (ROOT / d).rglob("*.py"))
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(ROOT).as_posix()
        keys: list[tuple[str, int]] = []
        for node, line in _counted(tree):
            key = _pattern(node)
            if key is not None:
                keys.append((key, line))
        helpers = _helper_params(tree)
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            name = ast.unparse(call.func).split(".")[-1]
            pos = helpers.get(name)
            if pos is not None and len(call.args) > pos:
                key = _pattern(call.args[pos])
                if key is not None:
                    keys.append((key, call.lineno))
        for key, line in keys:
            if "." in key.split("<")[0] or key.startswith("<"):
                found.setdefault(key, f"{rel}:{line}")
        named += [(m.group(1), f"{rel}:{line}") for m, line in _quoted_keys(tree)]
    # keys a docstring or comment names in quotes ("pit.refused_full"): some are made by a
    # pattern the code above cannot expand (FaceShares' f"{table}.refused_{why}")
    sections = {k.split(".", 1)[0] for k in found if not k.startswith("<")}
    for key, where in named:
        if key.split(".", 1)[0] in sections:
            found.setdefault(key, where)
    # a key made by a pattern elsewhere (f"{table}.refused_{why}") whose section is unknown
    return [CounterKey(k, w) for k, w in sorted(found.items()) if not k.startswith("<")] + [
        CounterKey(k, w) for k, w in sorted(found.items()) if k.startswith("<")
    ]


# ---------------------------------------------------------------- Prometheus families


@dataclass(frozen=True)
class Family:
    name: str  # as a scrape shows it (a counter's _total included)
    kind: str
    labels: tuple[str, ...]
    help: str


def _families(metrics: Iterable[Any]) -> list[Family]:
    found = []
    for m in metrics:
        name = m.name + ("_total" if m.type == "counter" else "")
        labels = tuple(getattr(m, "_labelnames", ()))
        if not labels and m.samples:
            labels = tuple(k for k in m.samples[0].labels if k != "le")
        found.append(Family(name, m.type, labels, m.documentation))
    return found


def forwarder_families() -> list[Family]:
    from forwarder.config import ForwarderConfig
    from forwarder.daemon import ForwarderDaemon
    from forwarder.observe.metrics import forwarder_registry

    return _families(forwarder_registry(ForwarderDaemon(ForwarderConfig())).collect())


def rmi_families() -> list[Family]:
    from compute.rmi.metrics import RmiCollector

    idle = types.SimpleNamespace(
        stats=types.SimpleNamespace(functions={}),
        jobs=types.SimpleNamespace(running=()),
        counters=Counter(),
    )
    return _families(RmiCollector(idle).collect())  # type: ignore[arg-type]


def stream_families() -> list[Family]:
    from compute.stream.metrics import StreamCollector

    idle = types.SimpleNamespace(instances=(), graph=types.SimpleNamespace(flow="/flow"))
    return _families(StreamCollector(idle).collect())  # type: ignore[arg-type]


def collective_families() -> list[Family]:
    from compute.collective.metrics import CollectiveCollector

    return _families(CollectiveCollector().collect())


def _family_table(families: list[Family]) -> str:
    return table(
        ["Family", "Type", "Labels", "Help"],
        [
            [code(f.name), f.kind, ", ".join(code(lab) for lab in f.labels) or "—", cell(f.help)]
            for f in families
        ],
    )


def counters_metrics_page() -> str:
    counters = forwarder_counters()
    by_section: dict[str, list[CounterKey]] = {}
    for c in counters:
        section = c.key.split(".", 1)[0] if not c.key.startswith("<") else "<run-time>"
        by_section.setdefault(section, []).append(c)
    out = [
        "# Counters and metrics\n",
        "Generated when the site is built: the forwarder's counters from the code that counts "
        "them, the Prometheus families from the collectors that export them. The "
        "[observability guide](../guides/observability.md) shows how to scrape, chart and "
        "alert on them.\n",
        "## Forwarder counters\n",
        "A forwarder keeps one bag of counters (`forwarder/face_api.py`: keys are "
        "`<component>.<event>`), shared by every table, pipeline and face, and counts every "
        "drop and every table action in it; nothing is logged per packet. Every key is in the "
        "JSON line a forwarder logs on SIGUSR1 and on `/metrics` as "
        '`icn_forwarder_events_total{event="<key>"}` (including one added after this page '
        "was built); `icn status` shows the packet counts of NFD's status dataset. Drops and "
        "refusals are also "
        "summed by reason in `icn_drops_total` and `icn_refusals_total`. A key that has not "
        "happened yet is absent rather than zero. Keys made at run time are shown as the "
        "pattern the code writes, with `<...>` for the part known only then.\n",
    ]
    for section, keys in sorted(by_section.items(), key=lambda kv: (kv[0] not in SECTIONS, kv[0])):
        about = SECTIONS.get(section, "")
        out.append(f"### `{section}`\n")
        if about:
            out.append(about[0].upper() + about[1:] + ".\n")
        out.append(table(["Counter", "Counted in"], [[code(k.key), code(k.where)] for k in keys]))
    out += [
        "## Prometheus metric families\n",
        "Served on `/metrics` when asked for: `icn fwd --metrics HOST:PORT` (or `metrics.listen` "
        "in the [forwarder configuration](forwarder-config.md)), `icn serve --metrics`, "
        "`icn flow run --metrics`, and every process of a scenario with a "
        "[`metrics:` section](scenario-schema.md#metrics). Names follow Prometheus' "
        "conventions: prefix `icn_`, base units, counters end in `_total`; labels are a face's "
        "id, a function's, operator's or job member's name, never a packet's name. Each "
        "collector reads the counters its layer already keeps, at scrape time: nothing is "
        "added to the packet path.\n",
        "### Forwarder (`forwarder/observe/metrics.py`)\n",
        "The `icn_process_*` families are the process' own CPU, memory and file descriptors "
        "(prometheus-client's process collector); every process that serves `/metrics` has "
        "them.\n",
        _family_table(forwarder_families()),
        "### Named functions (`compute/rmi/metrics.py`)\n",
        "An RMI server's calls by function and outcome, their durations, and every counter "
        "the server keeps (refusals, sessions, memo hits, thunks) as `icn_rmi_events_total`.\n",
        _family_table(rmi_families()),
        "### Streams (`compute/stream/metrics.py`)\n",
        "A flow's operator instances, labelled by operator and partition (both fixed by the "
        "graph file).\n",
        _family_table(stream_families()),
        "### Collectives (`compute/collective/metrics.py`)\n",
        "Workers and aggregators of a collective job, labelled by job, member and role.\n",
        _family_table(collective_families()),
    ]
    return "\n".join(out)
