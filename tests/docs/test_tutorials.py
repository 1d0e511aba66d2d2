"""Every tutorial under docs/tutorials/ is followed as a reader would follow it, in order.

A tutorial is one test.  Its fenced blocks become one bash script, run with ``set -euo
pipefail`` in a fresh temporary directory:

- ```bash blocks run as they are, in the script's one shell (so a variable exported or a daemon
  started with ``&`` in one block is there for the next);
- a block whose first line is ``# file: NAME`` (a module, a script, a YAML graph or scenario:
  "save this as NAME") is written to NAME for the blocks after it, one of which must use it
  (name it, or its module name): a saved file nothing runs would be checked by nothing;
- the other ```python blocks are written to ``block-<line>.py`` and run with the project's
  Python; the rest (```text output, ```yaml excerpts) are only read.

Every daemon a tutorial starts with ``&`` is a job of that shell: the script's EXIT trap stops
each by its PID (``kill $(jobs -p)``) however the script ends, and a script that outlives its
bound is killed with its process group (its own: the test starts it in a new session).  A
tutorial's forwarder must listen on a socket in the tutorial's directory (``icn fwd --unix
"$PWD/..."``): with no listen flags ``icn fwd`` takes NFD's defaults (``/run/nfd/nfd.sock`` as
root, 127.0.0.1:6363), which tests running in parallel would share.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "docs" / "tutorials"
# the tutorials the documentation site lists (mkdocs.yml's nav), in reading order
EXPECTED = [
    "first-forwarder.md",
    "named-functions.md",
    "allreduce-ddp.md",
    "stream-graphs.md",
    "first-scenario.md",
]
BOUND_S = 60.0  # each tutorial takes a few seconds; this only catches a hang
DONE = "icn-tutorial: every block ran"
_FENCE = re.compile(r"^```(\S*)\s*$")
_FILE = re.compile(r"^#\s*file:\s*(\S+)\s*$")
_FWD = re.compile(r"\bicn fwd\b")


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # of the opening fence, 1-based
    text: str

    @property
    def file_name(self) -> str | None:
        first = self.text.split("\n", 1)[0]
        m = _FILE.match(first)
        return m.group(1) if m else None


def blocks(markdown: str) -> list[Block]:
    """The fenced blocks of a Markdown page, in order (fences at the start of a line)."""
    out: list[Block] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"line {start + 1}: a ``` block is never closed")
        out.append(Block(m.group(1), start + 1, "\n".join(body) + "\n"))
        i += 1
    return out


def _heredoc(path: str, text: str) -> str:
    end = "ICN_TUTORIAL_EOF"
    assert end not in text
    return f"cat > {path} <<'{end}'\n{text}{end}\n"


def script(page: str, markdown: str) -> str:
    """The bash script that follows ``page``: its blocks in order, each announced on stderr."""
    parts = [
        "set -euo pipefail\n",
        # stop every daemon the blocks started, by PID, however the script ends
        "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n",
    ]
    found = blocks(markdown)
    for i, b in enumerate(found):
        where = f"{page}:{b.line}"
        if b.file_name:
            later = "".join(x.text for x in found[i + 1 :] if x.lang in ("bash", "python", "yaml"))
            if b.file_name not in later and Path(b.file_name).stem not in later:
                raise ValueError(
                    f"{where}: {b.file_name} is saved but no later block uses it; run it (or "
                    "import it) in a block after it, or drop the '# file:' line"
                )
            parts.append(f"echo '--- {where} (file {b.file_name})' >&2\n")
            parts.append(_heredoc(b.file_name, b.text))
        elif b.lang == "bash":
            for n, line in enumerate(b.text.split("\n")):
                if _FWD.search(line) and '--unix "$PWD/' not in line:
                    raise ValueError(
                        f'{page}:{b.line + 1 + n}: `icn fwd` without --unix "$PWD/...": it '
                        "would listen on NFD's default socket and port, which parallel tests "
                        "share; give it a socket in the tutorial's directory "
                        '(--unix "$PWD/icn.sock")'
                    )
            parts.append(f"echo '--- {where} (bash)' >&2\n{b.text}")
        elif b.lang == "python":
            name = f"block-{b.line}.py"
            parts.append(f"echo '--- {where} (python {name})' >&2\n")
            parts.append(_heredoc(name, b.text))
            parts.append(f"python {name}\n")
    parts.append(f"echo '{DONE}'\n")
    return "".join(parts)


def run_script(
    text: str, workdir: Path, bound: float = BOUND_S
) -> subprocess.CompletedProcess[str]:
    """Run ``text`` with bash in ``workdir``, the project's virtualenv first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("NDN_CLIENT_TRANSPORT", None)  # the tutorial says which forwarder to use
    env.pop("ICN_IDENTITY", None)
    env["XDG_RUNTIME_DIR"] = str(workdir)  # per-user state of the tools, kept in here
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.Popen(
        ["bash", "-c", text],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, killed as one if it hangs
    )
    try:
        out, err = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
        err += f"\n(killed: still running after {bound:.0f} s)"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def follow(page: str, markdown: str) -> None:
    """Follow a tutorial in a fresh directory; fail naming the block that failed."""
    workdir = Path(tempfile.mkdtemp(prefix="icn-tut-"))
    try:
        result = run_script(script(page, markdown), workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if result.returncode != 0 or DONE not in result.stdout:
        started = [ln for ln in result.stderr.splitlines() if ln.startswith("--- ")]
        last = started[-1][4:] if started else "before the first block"
        raise AssertionError(
            f"{page}: the block at {last} failed (exit {result.returncode}); fix the page or "
            f"the code it shows\n--- stdout (end)\n{result.stdout[-3000:]}\n"
            f"--- stderr (end)\n{result.stderr[-3000:]}"
        )


def test_every_tutorial_of_the_site_is_here() -> None:
    """The pages under docs/tutorials/, the site's Tutorials section and the pages these tests
    follow are the same five, so a tutorial added to one place is not left untested."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    section = next(item["Tutorials"] for item in nav if "Tutorials" in item)
    in_nav = [Path(next(iter(entry.values()))).name for entry in section]
    present = sorted(p.name for p in TUTORIALS.glob("*.md"))
    assert in_nav == EXPECTED, f"mkdocs.yml lists the tutorials {in_nav}; these tests {EXPECTED}"
    assert present == sorted(EXPECTED), f"docs/tutorials/ holds {present}; these tests {EXPECTED}"


@pytest.mark.parametrize("name", EXPECTED)
def test_tutorial_runs_as_written(name: str) -> None:
    page = f"docs/tutorials/{name}"
    follow(page, (ROOT / page).read_text())


def test_a_failing_block_is_named_with_its_line() -> None:
    page = "\n".join(
        [
            "# t",
            "```bash",
            "echo one",
            "```",
            "",
            "```text",
            "shown, never run",
            "```",
            "",
            "```python",
            "raise SystemExit(3)",
            "```",
        ]
    )
    with pytest.raises(AssertionError, match=r"t\.md:10 \(python block-10\.py\) failed \(exit 3\)"):
        follow("t.md", page)


def test_a_saved_file_nothing_uses_is_refused() -> None:
    with pytest.raises(ValueError, match=r"t\.md:1: lonely\.py is saved but no later block"):
        script("t.md", "```python\n# file: lonely.py\nx = 1\n```\n```bash\necho hi\n```\n")


def test_a_forwarder_on_the_shared_defaults_is_refused() -> None:
    with pytest.raises(ValueError, match=r"t\.md:2: `icn fwd` without --unix"):
        script("t.md", "```bash\nicn fwd &\n```\n")


def test_a_daemon_left_running_is_stopped_by_the_trap() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="icn-tut-"))
    try:
        text = script("t.md", "```bash\nsleep 300 &\necho $! > pid\n```\n")
        result = run_script(text, workdir, bound=20)
        assert result.returncode == 0, result.stderr
        pid = int((workdir / "pid").read_text())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    # the trap's kill is sent before bash exits; the child may take a moment to go
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    raise AssertionError(f"the tutorial's background job {pid} outlived its script")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return not f.read().split(") ", 1)[1].startswith("Z")
    except (FileNotFoundError, ProcessLookupError):
        return False
