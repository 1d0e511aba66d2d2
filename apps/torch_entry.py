"""The entry point torch calls on ``import torch`` (group ``torch.backends``, see pyproject):
it registers backend ``icn`` and nothing more, so every program importing torch pays a
registration, not an import of the backend (which comes with the group's creation)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

BACKEND = "icn"


def register() -> None:
    """Make ``init_process_group(backend="icn")`` work; a second call does nothing."""
    import torch.distributed as dist

    if dist.is_available() and BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> Any:
    from apps.torch_backend import create

    return create(store, rank, size, timeout)
