"""Latency against throughput of the stream graph for several settings, as a table and a plot.

The pipeline of bench/stream.py (source -> map -> key by -> 1 s tumbling mean -> sink, the
vectorized map), run as one process per operator and as one process for each setting of
``buffer`` (batches an output may run ahead of its slowest reader), ``window`` (Interests in
flight per input) and ``lead`` (seconds an output may run ahead), and bytewax once as the
reference point.  Every run's results are checked against the reference, as in
bench/stream.py.  The plot (p50 latency against records/s, log scale) goes to --out.

Run: .venv/bin/python bench/stream_curve.py [--records 1000000]
     [--points "2,4,0.05 4,4,0.01 ..."] [--out docs/img/stream-latency.png]
"""

from __future__ import annotations

import argparse
import importlib
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

POINTS = "2,2,0.05 2,4,0.05 4,4,0.01 4,4,0.05 8,8,0.05 16,16,0.05 64,32,0.05"
MODES = {"ours-procs-vec": "process per operator", "ours-vec": "one process"}


def parse_points(text: str) -> list[tuple[int, int, float]]:
    points = []
    for item in text.split():
        try:
            buffer, window, lead = item.split(",")
            point = (int(buffer), int(window), float(lead))
        except ValueError:
            raise SystemExit(
                f"--points: {item!r} is not buffer,window,lead (e.g. 2,4,0.05)"
            ) from None
        if point[0] < 2 or point[1] < 1 or point[2] <= 0:
            raise SystemExit(f"--points: {item!r}: buffer >= 2, window >= 1, lead > 0")
        points.append(point)
    return points


def plot(rows: list[dict[str, Any]], peer: Any, out: Path, records: int) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter

    fig = Figure(figsize=(7.5, 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for mode, label in MODES.items():
        mine = [r for r in rows if r["mode"] == mode]
        ax.plot(
            [r["rate"] / 1000 for r in mine],
            [r["p50"] for r in mine],
            "o-",
            label=f"ours, {label}",
        )
        for r in mine:
            ax.annotate(
                f"{r['buffer']}/{r['window']}/{r['lead'] * 1000:g}ms",
                (r["rate"] / 1000, r["p50"]),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
            )
    if peer is not None:
        ax.plot([peer.rate / 1000], [peer.p50], "*", markersize=12, label="bytewax")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.set_xlabel("records/s (thousands)")
    ax.set_ylabel("p50 latency of a window result (ms)")
    ax.set_title(
        f"{records:,} records, source -> map -> key by -> 1 s window -> sink;"
        " labels: buffer/window/lead",
        fontsize=9,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--points", default=POINTS, help="buffer,window,lead triples")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "stream-latency.png")
    args = ap.parse_args(argv)
    if args.records < 1:
        ap.error("--records must be positive")
    points = parse_points(args.points)
    logging.getLogger("forwarder").setLevel(logging.ERROR)  # its counter line at stop
    bench = importlib.import_module("bench.stream")  # the name the graph's functions use
    spec = bench.Spec(args.records, 100, 100_000.0)
    ref = bench.reference(spec)
    workdir = Path(tempfile.mkdtemp(prefix="icn-bench-curve-"))
    rows: list[dict[str, Any]] = []
    peer = None
    try:
        if bench.bytewax_version() is not None:
            (workdir / "bytewax").mkdir()
            peer = bench.bytewax(spec, ref, workdir / "bytewax")
        for i, (buffer, window, lead) in enumerate(points):
            bench.SETTINGS.update(buffer=buffer, window=window, lead=lead)
            for mode in MODES:
                run_dir = workdir / f"{mode}-{i}"
                run_dir.mkdir()
                m = bench.RUNNERS[mode](spec, ref, run_dir)
                row = {"mode": mode, "buffer": buffer, "window": window, "lead": lead}
                row.update(rate=m.rate, p50=m.p50, p99=m.p99, cpu=m.cpu)
                rows.append(row)
                print(
                    f"  {mode} buffer {buffer} window {window} lead {lead:g}s: "
                    f"{m.rate:,.0f} records/s, p50 {m.p50:.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
    except bench.BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"{'mode':<22}{'buffer':>7}{'window':>7}{'lead ms':>8}{'records/s':>11}{'p50 ms':>8}"
        f"{'p99 ms':>8}{'CPU s':>7}"
    )
    if peer is not None:
        print(f"{'bytewax':<44}{peer.rate:>11,.0f}{peer.p50:>8.1f}{peer.p99:>8.1f}{peer.cpu:>7.2f}")
    for r in rows:
        print(
            f"{MODES[r['mode']]:<22}{r['buffer']:>7}{r['window']:>7}{r['lead'] * 1000:>8g}"
            f"{r['rate']:>11,.0f}{r['p50']:>8.1f}{r['p99']:>8.1f}{r['cpu']:>7.2f}"
        )
    plot(rows, peer, args.out, args.records)
    print(f"stream curve: {len(rows)} runs, plot written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
