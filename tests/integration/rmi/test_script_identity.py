"""Scripts sign with $ICN_IDENTITY as ``icn call`` does: a forwarder on a Unix socket in this
process serves ``guarded`` (only fingerprints in ``funcs.ALLOWED`` may call it); ``call`` and
``call_sync`` reach it by NDN_CLIENT_TRANSPORT, ``icn call`` as a real process."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apps.inproc import attach_endpoint
from apps.procs import icn_argv
from compute.rmi import (
    RmiServer,
    Unauthorized,
    call,
    call_sync,
    collect,
    default_client,
    set_identity,
)
from compute.rmi.identity import IDENTITY_ENV
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.security.keys import Identity
from tests.integration.rmi import funcs

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
async def guarded_at(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """The forwarder's URI, set as NDN_CLIENT_TRANSPORT; $ICN_IDENTITY unset; nobody allowed."""
    daemon = ForwarderDaemon(config_from_dict({"listen": {"unix": str(workdir / "fwd.sock")}}))
    await daemon.start()
    server = RmiServer(attach_endpoint(daemon), "/svc", collect(funcs))
    await server.start()
    uri = daemon.listen_uris[0]
    monkeypatch.setenv("NDN_CLIENT_TRANSPORT", uri)
    monkeypatch.delenv(IDENTITY_ENV, raising=False)
    funcs.RAN.clear()
    try:
        yield uri
    finally:
        funcs.ALLOWED.clear()
        set_identity(None)
        (await default_client()).close()  # this loop's shared client, if a test made one
        await server.close()
        server.ep.close()
        await daemon.stop()


def allowed_key(path: Path) -> Identity:
    identity = Identity.load_or_create(path)
    funcs.ALLOWED.add(identity.fingerprint)
    return identity


async def test_call_and_call_sync_sign_with_icn_identity(
    guarded_at: str, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed_key(workdir / "id_ed25519")
    # without $ICN_IDENTITY a script signs with a key of its own, which nobody listed
    with pytest.raises(Unauthorized, match="not authorized"):
        await call("/svc/guarded", 1)
    with pytest.raises(Unauthorized, match="not authorized"):
        await asyncio.to_thread(call_sync, "/svc/guarded", 1)  # its own loop, in a thread
    assert funcs.RAN["guarded"] == 0
    # call's client is kept per loop: drop it, so the next one is made under the variable
    (await default_client()).close()
    monkeypatch.setenv(IDENTITY_ENV, str(workdir / "id_ed25519"))
    assert await call("/svc/guarded", 21) == 42
    assert await asyncio.to_thread(call_sync, "/svc/guarded", 4) == 8
    assert funcs.RAN["guarded"] == 2


async def test_set_identity_switches_the_shared_client(guarded_at: str, workdir: Path) -> None:
    client = await default_client()
    with pytest.raises(Unauthorized):
        await call("/svc/guarded", 1)
    set_identity(workdir / "mine")  # created, then listed by the server
    funcs.ALLOWED.add(Identity.load(workdir / "mine").fingerprint)
    assert await call("/svc/guarded", 5) == 10
    assert await default_client() is client  # the same connection, now signing as "mine"
    assert await asyncio.to_thread(call_sync, "/svc/guarded", 6) == 12


async def icn(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    """``icn ARGS`` as a process, while this loop keeps the forwarder and server running."""
    proc = await asyncio.create_subprocess_exec(
        *icn_argv(*args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_cli_resolves_the_key_the_same_way(
    guarded_at: str, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {k: v for k, v in os.environ.items() if k != IDENTITY_ENV}
    key = workdir / "cli.key"
    # `icn key generate FILE` makes the key and prints the fingerprint a server lists
    code, out, err = await icn("key", "generate", str(key), env=env)
    assert code == 0, err
    fingerprint = out.split()[0]
    assert fingerprint == Identity.load(key).fingerprint
    funcs.ALLOWED.add(fingerprint)
    # neither --key nor $ICN_IDENTITY: a new key for this run only
    code, out, err = await icn("call", "/svc/guarded", "1", env=env)
    assert code == 1 and "Unauthorized" in err, (out, err)
    code, out, err = await icn("call", "/svc/guarded", "21", "--key", str(key), env=env)
    assert code == 0 and out.strip() == "42", err
    with_env = {**env, IDENTITY_ENV: str(key)}
    code, out, err = await icn("call", "/svc/guarded", "4", env=with_env)
    assert code == 0 and out.strip() == "8", err
    # --key wins over the variable
    code, out, err = await icn(
        "call", "/svc/guarded", "1", "--key", str(workdir / "other.key"), env=with_env
    )
    assert code == 1 and "Unauthorized" in err, (out, err)
    # a bad file named by the variable: exit 2, the file, the variable and the fix
    bad = workdir / "bad.key"
    bad.write_text("not a key")
    bad.chmod(0o600)
    code, out, err = await icn("call", "/svc/guarded", "1", env={**env, IDENTITY_ENV: str(bad)})
    assert code == 2 and str(bad) in err and "$ICN_IDENTITY names this file" in err, err
    assert funcs.RAN["guarded"] == 2
