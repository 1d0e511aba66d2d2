"""Screenshots of the built documentation site: its home page and one tutorial page.

    .venv/bin/python scripts/site_screenshots.py [--out docs/img] [--tutorial first-forwarder]

Builds the site (``mkdocs build --strict``) into a temporary directory, serves it on a free
127.0.0.1 port from this process, and photographs the pages in Debian's headless Chromium
through Playwright (the browser the live scenario page's tests use; Playwright's own download
needs the internet).  Writes ``site-home.png`` and ``site-tutorial.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
BUILD_TIMEOUT = 120  # seconds
PAGE_TIMEOUT_MS = 15_000
VIEWPORT = {"width": 1280, "height": 860}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # (the base class names it so)
        pass


def build(site_dir: Path) -> None:
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    if proc.returncode != 0:
        sys.exit(f"site_screenshots: the site does not build:\n{proc.stderr[-4000:]}")


def shoot(site_dir: Path, out: Path, tutorial: str) -> list[Path]:
    from playwright.sync_api import sync_playwright

    if not (site_dir / "tutorials" / tutorial / "index.html").is_file():
        sys.exit(f"site_screenshots: no tutorial page tutorials/{tutorial}/ in the built site")
    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    shots = [
        (f"{base}/", out / "site-home.png"),
        (f"{base}/tutorials/{tutorial}/", out / "site-tutorial.png"),
    ]
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            try:
                page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
                for url, path in shots:
                    page.goto(url, wait_until="load", timeout=PAGE_TIMEOUT_MS)
                    page.screenshot(path=str(path), full_page=False)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    return [path for _url, path in shots]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--tutorial", default="first-forwarder", help="tutorial page to shoot")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"site_screenshots: {CHROMIUM} is missing (apt-get install chromium)")
    args.out.mkdir(parents=True, exist_ok=True)
    site_dir = Path(tempfile.mkdtemp(prefix="icn-site-"))
    try:
        build(site_dir)
        for path in shoot(site_dir, args.out, args.tutorial):
            print(path)
    finally:
        shutil.rmtree(site_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
