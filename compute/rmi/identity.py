"""Which Ed25519 key a caller or a server signs with: one rule for ``icn call``/``icn serve``
(``--key``) and for scripts (:func:`compute.rmi.call`, ``call_sync``).

An explicit key file, else the file named by $ICN_IDENTITY, loaded or created (0600) if
missing; with neither, a new key that lives only as long as the process.
"""

from __future__ import annotations

import os
from pathlib import Path

from icn.errors import ConfigError
from icn.security.keys import Identity

IDENTITY_ENV = "ICN_IDENTITY"


def default_key_path() -> Path:
    """Where ``icn key generate`` writes a key (and ``show`` reads it) when given no file and no
    $ICN_IDENTITY: $XDG_CONFIG_HOME/icn/id_ed25519."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "icn" / "id_ed25519"


def identity_file(path: str | Path | None = None) -> Path | None:
    """The key file to use: ``path``, else $ICN_IDENTITY (unset or empty: none)."""
    if path:
        return Path(path)
    env = os.environ.get(IDENTITY_ENV)
    return Path(env) if env else None


def resolve_identity(path: str | Path | None = None) -> Identity:
    """The identity in ``path`` or $ICN_IDENTITY, created if missing; else a new one.

    ConfigError names the file and the fix when it cannot be read or is not a private Ed25519
    key, and says when the file was named by $ICN_IDENTITY rather than by the caller.
    """
    chosen = identity_file(path)
    if chosen is None:
        return Identity.generate()
    try:
        return Identity.load_or_create(chosen)
    except ConfigError as exc:
        if path:
            raise
        # the user may not know a variable in their environment picked this file
        raise ConfigError(
            f"{exc} (${IDENTITY_ENV} names this file: point it at an Ed25519 key file, "
            "or unset it to sign with a new key)"
        ) from None
