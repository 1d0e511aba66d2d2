"""A function only callers certified under /org/lab may call (tests/integration/rmi/
test_trust_cli.py serves it with ``icn serve --trust-schema --anchor``)."""

from __future__ import annotations

from compute.rmi import function


@function(authorize="namespace:/org/lab")
def greet(name: str) -> str:
    return f"hello {name}"
