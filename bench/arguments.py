"""The benchmarks' argument types: comma-separated lists of positive integers or of choices."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence


def parse_ints(text: str) -> list[int]:
    """``--sizes 1,16,64``: positive integers separated by commas."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write integers separated by commas") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: write positive integers, e.g. 2,4,8")
    return values


def parse_choices(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    """An argparse type for a comma-separated list of some of ``allowed`` (the benches' --modes,
    --shapes...)."""

    def parse(text: str) -> list[str]:
        chosen = [c.strip() for c in text.split(",") if c.strip()]
        if not chosen or any(c not in allowed for c in chosen):
            raise argparse.ArgumentTypeError(f"{text!r}: choose among {','.join(allowed)}")
        return chosen

    return parse
