"""The one exception hierarchy of the project.

Bad input from the network raises :class:`DecodeError` inside a codec; the forwarder catches it,
drops the packet and counts it.  Bad input from a user (config, YAML, CLI) raises
:class:`ConfigError` with a message that names the field and the fix.
"""

from __future__ import annotations

from typing import Any


class IcnError(Exception):
    """Base class of every error raised by this project."""


class DecodeError(IcnError, ValueError):
    """A packet or TLV element is malformed (truncated, bad length, unknown critical type...)."""


class EncodeError(IcnError, ValueError):
    """A value cannot be encoded (out of range, too long)."""


class ConfigError(IcnError):
    """A configuration file, scenario or command-line value is invalid."""


class FaceError(IcnError):
    """A face cannot be created or used (bad URI, address in use, closed)."""


class ForwarderUnreachable(IcnError):
    """No forwarder answers at the transport URI an app tried to connect to."""


class InterestTimeout(IcnError):
    """No Data came back for an Interest within its lifetime, retransmissions included."""

    def __init__(self, name: str, attempts: int, within: float | None = None) -> None:
        if within is None:
            super().__init__(f"no Data for {name} after {attempts} Interest(s)")
        else:
            super().__init__(f"no Data for {name} within {within} s")
        self.name = name
        self.attempts = attempts


class InterestNack(IcnError):
    """The network answered an Interest with a Nack; ``reason`` is the NackReason code."""

    _REASONS = {0: "None", 50: "Congestion", 100: "Duplicate", 150: "NoRoute"}

    def __init__(self, reason: int, name: str = "") -> None:
        self.reason = reason
        self.name = name
        where = f" for {name}" if name else ""
        super().__init__(f"Nack{where}: {self.reason_name} ({reason})")

    @property
    def reason_name(self) -> str:
        """NoRoute, Duplicate, Congestion or None (also for reasons this side does not know)."""
        return self._REASONS.get(self.reason, "None")


class InterestCanceled(IcnError):
    """A pending Interest was abandoned because the endpoint closed or lost its forwarder."""


class TooManyPending(IcnError):
    """The endpoint's table of pending Interests is full; wait for some to complete."""


class CommandFailed(IcnError):
    """A management command was refused: ``status`` is the ControlResponse StatusCode."""

    def __init__(
        self, status: int, text: str, command: str = "", body: dict[str, Any] | None = None
    ) -> None:
        self.status = status
        self.text = text
        self.command = command
        # the ControlParameters of the refusal: a 409 for faces/create carries the existing face
        self.body = body or {}
        what = f"{command}: " if command else ""
        super().__init__(f"{what}{status} {text}".rstrip())


class SecurityError(IcnError):
    """A key, signature or sealed message cannot be used (bad key bytes, low-order point...)."""


class ValidationError(SecurityError):
    """A packet's signature is of the wrong type, does not verify, or the packet is malformed."""


class DecryptError(SecurityError):
    """A sealed message was tampered with, sealed under another key, or is too short."""


class CertificateNotCached(ValidationError):
    """A validation without I/O (``Validator.validate_cached``) met a certificate it does not
    hold: the caller may validate again with fetching (``Validator.validate``)."""
