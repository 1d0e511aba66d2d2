"""Invariant checks that services and workloads report with ``ctx.check(name, held, outcome)``.

Each is one JSON line in the process's results file: ``{"t", "check": name, "held": bool,
"outcome": str, "detail"?: str}``.  The report counts them per process and invariant (checks,
held, violated, each outcome) and keeps the first few violations; a violation fails the run,
and so does an invariant of ``report.invariants`` reported too few times (or not at all).
Pure functions, like :mod:`apps.scenario.report`, which calls them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from apps.scenario.schema import Scenario

EXAMPLES = 5  # violations kept per invariant and process


def is_check(row: Mapping[str, Any]) -> bool:
    return "check" in row and "metric" not in row


def check_stats(
    records: Mapping[str, Sequence[Mapping[str, Any]]], processes: Iterable[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{process: {invariant: {"checks", "held", "violated", "outcomes": {outcome: n},
    "violations": {outcome: n} (those of violated checks), "examples": [text of the first
    violations]}}}`` over the named processes, each in the order its invariants first
    appear."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in processes:
        per: dict[str, dict[str, Any]] = {}
        for row in records.get(name, []):
            if not is_check(row):
                continue
            inv = str(row["check"])
            entry = per.setdefault(
                inv,
                {
                    "checks": 0,
                    "held": 0,
                    "violated": 0,
                    "outcomes": Counter(),
                    "violations": Counter(),
                    "examples": [],
                },
            )
            outcome = str(row.get("outcome") or ("held" if row.get("held") else "violated"))
            entry["checks"] += 1
            entry["outcomes"][outcome] += 1
            if row.get("held") is True:
                entry["held"] += 1
            else:
                entry["violated"] += 1
                entry["violations"][outcome] += 1
                if len(entry["examples"]) < EXAMPLES:
                    detail = row.get("detail")
                    entry["examples"].append(f"{outcome}: {detail}" if detail else outcome)
        if per:
            for entry in per.values():
                entry["outcomes"] = dict(entry["outcomes"].most_common())
                entry["violations"] = dict(entry["violations"].most_common())
            out[name] = per
    return out


def _row(
    check: str, process: str, entry: Mapping[str, Any] | None, min_checks: int | None
) -> dict[str, Any]:
    if entry is None:
        return {
            "check": check,
            "process": process,
            "checks": 0,
            "held": 0,
            "violated": 0,
            "outcomes": {},
            "violations": {},
            "examples": [],
            "min_checks": min_checks,
            "passed": False,
            "text": f"no check of {check} reported by {process}",
        }
    checks, violated = int(entry["checks"]), int(entry["violated"])
    if violated:
        what = ", ".join(f"{o} {n}" for o, n in entry["violations"].items())
        text = f"violated {violated} of {checks} times" + (f" ({what})" if what else "")
        passed = False
    elif min_checks is not None and checks < min_checks:
        text = f"held, but only {checks} checks; at least {min_checks} wanted"
        passed = False
    else:
        text = f"held {checks} of {checks} times"
        passed = True
    return {
        "check": check,
        "process": process,
        **{
            k: entry[k]
            for k in ("checks", "held", "violated", "outcomes", "violations", "examples")
        },
        "min_checks": min_checks,
        "passed": passed,
        "text": text,
    }


def check_invariants(
    scenario: Scenario, stats: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """One row per process and invariant it reported (process order as in the file), then one
    per invariant of ``report.invariants`` that nobody reported.  A row passes when nothing
    was violated and, for a listed invariant, it has at least ``min_checks`` checks."""
    wanted: dict[tuple[str, str | None], int] = {}
    for inv in scenario.report.invariants:
        key = (inv.check, inv.process)
        wanted[key] = max(wanted.get(key, 0), inv.min_checks)
    rows: list[dict[str, Any]] = []
    order = [*(s.name for s in scenario.services), *(w.name for w in scenario.workloads)]
    for process in order:
        for check, entry in (stats.get(process) or {}).items():
            mins = [m for (c, p), m in wanted.items() if c == check and p in (None, process)]
            rows.append(_row(check, process, entry, max(mins) if mins else None))
    for (check, only), min_checks in wanted.items():
        reported = [p for p in order if check in (stats.get(p) or {})]
        if only is None and not reported:
            rows.append(_row(check, "any process", None, min_checks))
        elif only is not None and only not in reported:
            rows.append(_row(check, only, None, min_checks))
    return rows
