"""The live page in a real headless Chromium: a running scenario's topology appears, a link's rate
is non-zero while traffic crosses it and zero after a cut, a node's panel shows its counters;
and a 200-node run replays from its timeline.json."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.procs import ProcessGroup, icn_argv

CHROMIUM = "/usr/bin/chromium"
CUT_AT = 4.0
SCENARIO = f"""
name: livepage
duration: 7s
nodes: {{a: {{}}, b: {{}}}}
links:
  - {{between: [a, b], delay: 1ms}}
services:
  - name: producer
    node: b
    entry: apps.workloads:producer
    announce: [/live/data]
    args: {{prefix: /live/data, size: 1024}}
workloads:
  - name: consumer
    node: a
    entry: apps.workloads:consumer
    start: 0.5s
    args: {{prefix: /live/data, rate: 100}}
faults:
  - {{at: {CUT_AT}s, cut: [a, b]}}
"""


@pytest.fixture
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is missing: run scripts/bootstrap.sh as root (it installs Debian's)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--headless=new",
                "--disable-background-networking",
                "--no-first-run",
            ],
        )
        try:
            yield b
        finally:
            b.close()


def wait_for_url(child: object, what: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(rf"{what} (http://127\.0\.0\.1:\d+/)", child.output())  # type: ignore[attr-defined]
        if m:
            return m.group(1)
        if child.proc.poll() is not None:  # type: ignore[attr-defined]
            raise AssertionError(f"exited early:\n{child.output()}\n{child.errors()}")  # type: ignore[attr-defined]
        time.sleep(0.05)
    raise AssertionError(f"no {what!r} line within {timeout} s")


def click_node(page: object, index: int) -> None:
    """Click a node's marker where it is drawn, as a user would (plotly finds the point)."""
    points = page.locator("#topology .scatterlayer .trace").last.locator(".point")  # type: ignore[attr-defined]
    box = points.nth(index).bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_live_page_shows_rates_a_cut_and_a_node_panel(tmp_path: Path, browser: object) -> None:
    (tmp_path / "live.yaml").write_text(SCENARIO)
    out = tmp_path / "out"
    env = {"COLUMNS": "200"}
    argv = icn_argv("scenario", "run", str(tmp_path / "live.yaml"), "--out", str(out))
    argv += ["--no-plots", "--ui", "127.0.0.1:0"]
    with ProcessGroup(tmp_path) as group:
        run = group.start("run", argv, env=env)
        url = wait_for_url(run, "live page:")
        page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url))
        page.goto(url)
        page.wait_for_selector('#topology[data-nodes="2"]', timeout=10_000)
        assert page.locator("#topology .scatterlayer .trace").last.locator(".point").count() == 2
        # traffic crosses a-b: Interests a>b, Data b>a
        page.wait_for_function(
            """() => { const r = document.querySelector('#link-a-b');
                return r && Number(r.querySelector('.ab').dataset.bps) > 0
                         && Number(r.querySelector('.ba').dataset.bps) > 0; }""",
            timeout=15_000,
        )
        assert float(page.locator("#clock").get_attribute("data-t") or 0) < CUT_AT
        click_node(page, 1)
        page.wait_for_selector('#node-panel[data-node="b"]:not([hidden])', timeout=5_000)
        page.wait_for_function(
            """() => [...document.querySelectorAll('#node-counters td')]
                .some(td => td.textContent === 'n_in_interests')""",
            timeout=5_000,
        )
        assert page.locator("#node-faces tbody tr").count() >= 2
        # after the cut (and a sample interval past it) nothing crosses the link
        page.wait_for_function(
            f"""() => {{ const t = Number(document.querySelector('#clock').dataset.t);
                const r = document.querySelector('#link-a-b');
                return t >= {CUT_AT + 1.2} && Number(r.querySelector('.ab').dataset.bps) === 0
                    && Number(r.querySelector('.ba').dataset.bps) === 0; }}""",
            timeout=15_000,
        )
        events = page.locator("#events").inner_text()
        assert "cut" in events
        page.close()
        # every asset, plotly.js included, came from the run's own server: the page works offline
        assert any(u.endswith("/vendor/plotly.min.js") for u in fetched)
        assert [u for u in fetched if not u.startswith(url)] == []
        assert run.wait(60) == 0, run.errors()
    timeline = json.loads((out / "timeline.json").read_text())
    assert timeline["topology"]["links"][0]["name"] == "a-b"


def big_timeline(n: int) -> dict[str, object]:
    nodes = [{"name": f"n{i}", "pos": [(i % 20) / 19, (i // 20) / 9]} for i in range(n)]
    links = [
        {"name": f"n{i}-n{i + 1}", "a": f"n{i}", "b": f"n{i + 1}", "shaping": "1ms"}
        for i in range(n - 1)
    ]
    frames = []
    for k in range(3):
        frames.append(
            {
                "t": float(k),
                "links": {
                    ln["name"]: {
                        f"{ln['a']}>{ln['b']}": {"bps": 1e5 * k, "pps": 10.0 * k, "dropped": 0},
                        f"{ln['b']}>{ln['a']}": {"bps": 0.0, "pps": 0.0, "dropped": 0},
                    }
                    for ln in links
                },
                "nodes": {nd["name"]: {"n_in_interests": 10 * k} for nd in nodes},
                "events": [{"t": 0.0, "text": "scenario big running for 3s"}],
                "faults": [],
            }
        )
    topology = {
        "scenario": "big",
        "duration": 3.0,
        "nodes": nodes,
        "links": links,
        "workloads": [],
        "faults": [],
        "expectations": [],
    }
    return {"version": 1, "topology": topology, "frames": frames, "workloads": {}}


@pytest.mark.slow
def test_a_200_node_run_replays(tmp_path: Path, browser: object) -> None:
    (tmp_path / "timeline.json").write_text(json.dumps(big_timeline(200)))
    with ProcessGroup(tmp_path) as group:
        view = group.start(
            "view", icn_argv("scenario", "view", str(tmp_path), "--ui", "127.0.0.1:0")
        )
        url = wait_for_url(view, "on")
        page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
        started = time.monotonic()
        page.goto(url)
        page.wait_for_selector('#topology[data-nodes="200"]', timeout=15_000)
        assert page.locator("#topology .scatterlayer .trace").last.locator(".point").count() == 200
        assert page.locator("#links tbody tr").count() == 199
        assert page.locator("#mode").inner_text() == "replay"
        rendered = time.monotonic() - started
        # the last frame is shown; the slider goes back to the first
        assert page.locator("#link-n0-n1 .ab").get_attribute("data-bps") == "200000"
        page.locator("#slider").fill("0")
        page.wait_for_function(
            "() => document.querySelector('#link-n0-n1 .ab').dataset.bps === '0'", timeout=5_000
        )
        click_node(page, 5)
        page.wait_for_selector('#node-panel[data-node="n5"]:not([hidden])', timeout=5_000)
        page.close()
        view.proc.send_signal(signal.SIGTERM)
        assert view.wait(10) == 0
    assert rendered < 10, f"200 nodes took {rendered:.1f} s to draw"


def test_view_of_a_directory_without_a_timeline_is_a_clear_error(tmp_path: Path) -> None:
    ran = subprocess.run(
        icn_argv("scenario", "view", str(tmp_path)), capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 2
    assert "timeline.json" in ran.stderr and "output directory of a run" in ran.stderr
