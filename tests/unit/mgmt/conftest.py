"""Shared fixture: a daemon with no sockets, driven through memory faces."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon


@pytest.fixture
async def daemon() -> AsyncIterator[ForwarderDaemon]:
    d = ForwarderDaemon(config_from_dict({"listen": {}}))
    await d.start()
    try:
        yield d
    finally:
        await d.stop()
