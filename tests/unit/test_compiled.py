"""The modules mypyc compiles (pyproject.toml ``[tool.icn] compiled``, built by setup.py): the
installed tree runs them compiled and current, and their Python source still passes their
tests without a build."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

from tests.interpreted import ROOT, compiled_sources, module_name

# the tests of the compiled modules (the codec held equal to python-ndn's among them)
CODEC_TESTS = ("tlv", "name", "packet_vectors", "lp", "encode", "encoded_interest")
CODEC_TESTS += ("signed_interest", "fragment", "codec_properties")


def test_every_listed_module_runs_compiled_and_is_not_older_than_its_source() -> None:
    # a module left out of the build, or a source edited after it (an extension module is
    # imported ahead of the .py beside it, so the edit would not run): rebuild with
    # scripts/bootstrap.sh (pip install -e .)
    sources = compiled_sources()
    assert sources, "pyproject.toml lists no compiled module"
    for source in sources:
        module = importlib.import_module(module_name(source))
        built = Path(module.__file__ or "")
        assert built.suffix == ".so", f"{module.__name__} runs from {built}, not compiled"
        assert built.stat().st_mtime >= source.stat().st_mtime, (
            f"{built.name} is older than {source.name}: run scripts/bootstrap.sh"
        )


def test_the_sources_pass_the_codec_tests_interpreted() -> None:
    # the compiled build must stay an optimisation: the same tests on the .py files, loaded
    # ahead of the build by tests/interpreted.py
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests/unit/test_framer.py"]
    args += [f"tests/unit/icn/test_{name}.py" for name in CODEC_TESTS]
    probe = (
        "import sys, tests.interpreted as t; sys.meta_path.insert(0, t.SourceFirst("
        "t.compiled_sources())); import icn.wire.tlv as m; print(m.__file__)"
    )
    where = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert where.stdout.strip().endswith("tlv.py"), where.stdout + where.stderr
    run = subprocess.run(
        [sys.executable, "-m", "tests.interpreted", "--", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
