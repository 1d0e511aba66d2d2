"""Which key a caller signs with: an explicit file, else $ICN_IDENTITY, else a new key; the same
rule for ``icn call --key`` and for scripts' ``call``/``call_sync``."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from compute.rmi import call_sync, current_identity, resolve_identity, set_identity
from compute.rmi.identity import IDENTITY_ENV, default_key_path, identity_file
from icn.errors import ConfigError
from icn.security.keys import Identity


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No $ICN_IDENTITY from the machine running the tests; no identity left set by a test."""
    monkeypatch.delenv(IDENTITY_ENV, raising=False)
    yield
    # unset first: this runs after the test's workdir is gone, and a $ICN_IDENTITY still
    # naming a file in it would have set_identity(None) create the file, and the directory,
    # again (a /tmp/icn-test-* left behind by every run)
    monkeypatch.delenv(IDENTITY_ENV, raising=False)
    set_identity(None)


def test_explicit_file_is_created_private_then_loaded(workdir: Path) -> None:
    path = workdir / "keys" / "me"
    first = resolve_identity(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve_identity(str(path)).fingerprint == first.fingerprint


def test_env_names_the_file_and_an_explicit_file_wins(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_key, own_key = Identity.generate(), Identity.generate()
    env_key.save(workdir / "env")
    own_key.save(workdir / "own")
    monkeypatch.setenv(IDENTITY_ENV, str(workdir / "env"))
    assert identity_file() == workdir / "env"
    assert resolve_identity().fingerprint == env_key.fingerprint
    assert resolve_identity(workdir / "own").fingerprint == own_key.fingerprint


def test_neither_gives_a_new_key_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IDENTITY_ENV, "")  # empty counts as unset, as it always did for the CLI
    assert identity_file() is None
    assert resolve_identity().fingerprint != resolve_identity().fingerprint


def test_default_key_path_follows_xdg(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(workdir))
    assert default_key_path() == workdir / "icn" / "id_ed25519"


def test_a_bad_env_file_is_named_with_the_fix(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = workdir / "garbage.key"
    bad.write_bytes(b"not a key")
    bad.chmod(0o600)
    # an explicit file: the key loader's message as `icn call --key` has always printed it
    with pytest.raises(ConfigError) as explicit:
        resolve_identity(bad)
    assert str(explicit.value).startswith(f"identity file {bad} is not an unencrypted PEM")
    assert IDENTITY_ENV not in str(explicit.value)
    # picked by the environment: the message says so, and how to change it
    monkeypatch.setenv(IDENTITY_ENV, str(bad))
    with pytest.raises(ConfigError, match=rf"{bad}.*\$ICN_IDENTITY names this file.*unset it"):
        resolve_identity()
    # a script fails the same way, before it connects to anything
    with pytest.raises(ConfigError, match=r"garbage\.key.*\$ICN_IDENTITY"):
        call_sync("/svc/add", 1, 2)


def test_scripts_sign_with_env_key_else_one_key_per_process(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    process_key = current_identity()
    assert current_identity() is process_key  # not a new key per call, as `icn call` per run
    saved = Identity.generate()
    saved.save(workdir / "id")
    monkeypatch.setenv(IDENTITY_ENV, str(workdir / "id"))
    assert current_identity().fingerprint == saved.fingerprint
    monkeypatch.delenv(IDENTITY_ENV)
    assert current_identity() is process_key


def test_set_identity_overrides_the_env_until_cleared(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_key = Identity.generate()
    env_key.save(workdir / "env")
    monkeypatch.setenv(IDENTITY_ENV, str(workdir / "env"))
    mine = Identity.generate()
    assert set_identity(mine) is mine and current_identity() is mine
    from_file = set_identity(workdir / "new")  # created, as --key creates it
    assert (workdir / "new").exists() and current_identity() is from_file
    assert set_identity(None).fingerprint == env_key.fingerprint
