"""The one logging setup: a single stderr handler with a compact format."""

from __future__ import annotations

import logging
import sys


def setup_logging(level: str = "info") -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            "%(asctime)s.%(msecs)03d %(levelname).1s %(name)s: %(message)s", "%H:%M:%S"
        )
    )
    root.addHandler(handler)
    root.setLevel(level.upper())
