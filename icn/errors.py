"""The one exception hierarchy of the project.

Bad input from the network raises :class:`DecodeError` inside a codec; the forwarder catches it,
drops the packet and counts it.  Bad input from a user (config, YAML, CLI) raises
:class:`ConfigError` with a message that names the field and the fix.
"""


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
