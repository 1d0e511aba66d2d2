"""Bulk transfer through one forwarder over Unix sockets, against a raw relay in the same run.

One object (``--size``, 256 MiB by default) goes from a producer process to a consumer process:
  (a) ours: consumer -> ``icn fwd`` -> producer, the segmented-object fetch into one buffer
      (icn.dataplane.segments.fetch_segments_buffer: each segment's content copied once, into
      its place, as it arrives) with DigestSha256 per segment (the default), then with an
      Ed25519 signature per segment (each verified), then signed once by a manifest (one
      Ed25519 signature, each segment checked against its listed digest);
  (b) raw: consumer -> a bare asyncio Unix-socket relay process -> the same producer process,
      the same bytes with no framing or tables (the ceiling);
  (c) python-ndn's segment fetcher (one Interest at a time, DigestSha256 checked) through ours.
Every fetch is a new object name (nothing comes from the content store) and is checked byte for
byte.  Each case runs ``--repeat`` times, interleaved; medians are printed: MB/s, and CPU
seconds per GiB summed over the three processes that moved it (producer, middle, consumer;
each process's CPU from /proc over the fetch).  The last line is ``bulk/raw ratio: X``, case
(a) with the default signing over case (b).

Run: .venv/bin/python bench/bulk.py [--size MiB] [--segment BYTES] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(HERE.parent))

from apps.procs import Child, ProcessGroup, icn_argv  # noqa: E402
from bench import loops  # noqa: E402
from bench.cpu import cpu_seconds  # noqa: E402

GIB = 1 << 30


@dataclass
class Case:
    label: str
    mode: str
    variant: str = ""
    mbps: list[float] = field(default_factory=list)
    cpu: list[tuple[float, float, float]] = field(default_factory=list)  # prod, middle, cons
    loops: set[str] = field(default_factory=set)  # the consumer's event loop, each run

    def line(self, size: int) -> str:
        med = statistics.median(self.mbps)
        per_gib = [sum(c) * GIB / size for c in self.cpu]
        split = [statistics.median(c[i] * GIB / size for c in self.cpu) for i in range(3)]
        return (
            f"{self.label:<38} {med:>8,.0f} MB/s (median of {len(self.mbps)}: "
            + ", ".join(f"{x:,.0f}" for x in self.mbps)
            + f")  CPU {statistics.median(per_gib):5.2f} s/GiB"
            + f" (producer {split[0]:.2f}, middle {split[1]:.2f}, consumer {split[2]:.2f})"
        )


def run_consumer(
    args: argparse.Namespace, workdir: Path, case: Case, name: str, middle: Child, prod: Child
) -> None:
    argv = [
        sys.executable,
        str(HERE / "bulk_peer.py"),
        "consume",
        "--mode",
        case.mode,
        "--fwd",
        str(workdir / "fwd.sock"),
        "--relay",
        str(workdir / "relay.sock"),
        "--name",
        name,
        "--size",
        str(args.size_bytes),
        "--window",
        str(args.window),
        "--key-file",
        str(workdir / "producer.key"),
    ]
    before = cpu_seconds(prod.pid), cpu_seconds(middle.pid)
    child = Child(f"consumer-{case.mode}", argv, workdir)
    try:
        code = child.wait(args.timeout)
    finally:
        child.stop()
    after = cpu_seconds(prod.pid), cpu_seconds(middle.pid)
    if code != 0:
        raise RuntimeError(f"{case.label}: consumer exited {code}:\n{child.errors()[-3000:]}")
    result = json.loads(child.output().strip().splitlines()[-1])
    case.mbps.append(args.size_bytes / result["seconds"] / 1e6)
    case.cpu.append((after[0] - before[0], after[1] - before[1], result["cpu"]))
    case.loops.add(result.get("loop", loops.UNKNOWN))


def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="icn-bulk-"))
    group = ProcessGroup(workdir)
    try:
        fwd = group.start(
            "fwd", icn_argv("fwd", "--unix", str(workdir / "fwd.sock"), "--log-level", "info")
        )
        relay = group.start(
            "relay",
            [sys.executable, str(HERE / "bulk_relay.py"), "--listen", str(workdir / "relay.sock")],
        )
        fwd.wait_for("forwarder ready", stream="stderr")
        relay.wait_for("relay ready", stream="stdout")
        prod = group.start(
            "producer",
            [
                sys.executable,
                str(HERE / "bulk_peer.py"),
                "produce",
                "--fwd",
                str(workdir / "fwd.sock"),
                "--relay",
                str(workdir / "relay.sock"),
                "--size",
                str(args.size_bytes),
                "--segment",
                str(args.segment),
                "--key-file",
                str(workdir / "producer.key"),
            ],
        )
        prod.wait_for("producer ready", timeout=120, stream="stdout")
        ran = {  # each process's event loop, as seen in it (the forwarder's: what it loaded)
            "forwarder": loops.of_pid(fwd.pid),
            "relay": loops.from_ready(relay.output(), "relay ready"),
            "producer": loops.from_ready(prod.output(), "producer ready"),
        }
        cases = [
            Case("(a) ours, DigestSha256 per segment", "ours", "digest"),
            Case("(a) ours, Ed25519 per segment", "ours", "ed25519"),
            Case("(a) ours, one signed manifest", "ours", "manifest"),
            Case("(b) raw asyncio Unix relay", "raw"),
        ]
        if not args.no_pyndn:
            cases.append(Case("(c) python-ndn segment_fetcher", "pyndn", "digest"))
        for rnd in range(-1, args.repeat):  # round -1 warms every path and is not counted
            for i, case in enumerate(cases):
                middle = relay if case.mode == "raw" else fwd
                name = f"/bulk/{case.variant}/c{i}r{rnd + 1}"  # never a content-store hit
                run_consumer(args, workdir, case, name, middle, prod)
                if rnd < 0:
                    case.mbps.clear()
                    case.cpu.clear()
    finally:
        group.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    for case in cases:
        ran.setdefault(f"consumer ({case.mode})", "/".join(sorted(case.loops)))
    print(
        f"{args.size_bytes / (1 << 20):g} MiB object over Unix sockets, {args.segment} B segments, "
        f"window {args.window}, one forwarder process (or relay) between two processes; "
        f"event loops: {loops.summary(ran)}"
    )
    for case in cases:
        print(case.line(args.size_bytes), flush=True)
    ours = statistics.median(cases[0].mbps)
    raw = statistics.median(cases[3].mbps)
    print(f"manifest/raw ratio: {statistics.median(cases[2].mbps) / raw:.2f}")
    print(f"bulk/raw ratio: {ours / raw:.2f}")


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # runs main's cleanup: children stopped, temp dir removed


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=float, default=256, help="object size in MiB")
    ap.add_argument("--segment", type=int, default=1 << 20, help="content bytes per segment")
    ap.add_argument("--window", type=int, default=8, help="segments in flight")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per fetch")
    ap.add_argument("--no-pyndn", action="store_true", help="skip python-ndn's fetcher")
    args = ap.parse_args()
    args.size_bytes = int(args.size * (1 << 20))
    signal.signal(signal.SIGTERM, _stop)
    main(args)
