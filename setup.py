"""The compiled hot paths; everything else about the package is in pyproject.toml.

Two kinds, both built by ``pip install -e .`` (scripts/bootstrap.sh) into the source tree:
- forwarder/observe/_tap.c, the capture's per-packet tap, written in C;
- the modules listed under ``[tool.icn] compiled`` in pyproject.toml, compiled from their
  (strictly typed) Python by mypyc: the wire codec and the signed-Interest path that every
  packet of every process crosses (docs/design.md section 10).  The Python source stays the
  one definition: without a build the same modules run interpreted.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from mypyc.build import mypycify
from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
COMPILED = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["icn"]["compiled"]

setup(
    ext_modules=[
        Extension(
            "forwarder.observe._tap",
            sources=["forwarder/observe/_tap.c"],
            extra_compile_args=["-O2"],
        ),
        # mypy's own configuration (pyproject.toml) names a plugin of a runtime dependency the
        # isolated build does not install, nor python-ndn, which name.py reads URIs with:
        # mypyc needs only our annotations
        *mypycify(
            ["--config-file", "", "--ignore-missing-imports", *COMPILED],
            opt_level="3",
            group_name="icn_compiled",
        ),
    ],
)
