"""Declaring named functions: the ``@function`` decorator and collecting a module's functions.

The decorator returns the function itself (it stays callable and picklable by reference, which
the process pool needs) with its declaration attached as ``__rmi__``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType
from typing import Any, Literal, TypeVar, overload

from compute.rmi.policy import Policy, PolicySpec, resolve_policy
from compute.rmi.wire import function_component
from icn.errors import ConfigError

RunMode = Literal["loop", "thread", "process"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class FunctionSpec:
    """A served function: its name, the callable, and how the server treats calls to it.

    ``pure``: same arguments, same result, no side effects; results are named by the digest of
    the arguments so caches on the way answer repeated calls.  ``idempotent``: running a call
    twice does no harm (true of pure functions), so the network may clone it to a second
    replica and take the first answer (docs/guides/strategies.md, "Replicas").  ``duration``:
    the expected run time in seconds, the first completion estimate a thunk carries (later
    ones are learnt).
    ``run``: ``loop`` for coroutines, ``thread`` for ordinary functions (default), ``process``
    for CPU-bound work (a process pool, so the GIL does not stall the server).
    """

    name: str
    func: Callable[..., Any]
    pure: bool
    policy: Policy
    duration: float
    run: RunMode
    signature: inspect.Signature
    idempotent: bool = False

    @cached_property
    def arity(self) -> int | None:
        """How many positional arguments a call must pass when every parameter is a plain
        one without a default (then a call of that many positional arguments binds, and
        ``signature.bind`` is not needed); None for any other signature."""
        plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        params = self.signature.parameters.values()
        if all(p.kind in plain and p.default is inspect.Parameter.empty for p in params):
            return len(params)
        return None


@overload
def function(fn: F) -> F: ...


@overload
def function(
    *,
    name: str | None = None,
    pure: bool = False,
    authorize: PolicySpec = "anyone",
    duration: float = 0.0,
    cpu_bound: bool = False,
    idempotent: bool = False,
) -> Callable[[F], F]: ...


def function(
    fn: F | None = None,
    *,
    name: str | None = None,
    pure: bool = False,
    authorize: PolicySpec = "anyone",
    duration: float = 0.0,
    cpu_bound: bool = False,
    idempotent: bool = False,
) -> F | Callable[[F], F]:
    """Mark a function for serving: ``@function`` or ``@function(name=..., pure=...,
    authorize=..., duration=..., cpu_bound=..., idempotent=...)``.  ``authorize``: see
    :func:`compute.rmi.policy.resolve_policy`; ``idempotent`` (implied by ``pure``) lets the
    network run a call on two replicas and keep the first answer."""

    def mark(f: F) -> F:
        fname = name or f.__name__
        function_component(fname)  # ValueError for a name the protocol reserves
        if duration < 0:
            raise ConfigError(f"function {fname}: duration must be >= 0 seconds")
        is_async = inspect.iscoroutinefunction(f)
        if is_async and cpu_bound:
            raise ConfigError(f"function {fname}: a coroutine cannot be cpu_bound")
        run: RunMode = "loop" if is_async else "process" if cpu_bound else "thread"
        spec = FunctionSpec(
            fname,
            f,
            pure,
            resolve_policy(authorize),
            duration,
            run,
            inspect.signature(f),
            idempotent=pure or idempotent,
        )
        f.__rmi__ = spec  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


def spec_of(obj: object) -> FunctionSpec | None:
    spec = getattr(obj, "__rmi__", None)
    return spec if isinstance(spec, FunctionSpec) else None


def collect(module: ModuleType | str) -> dict[str, FunctionSpec]:
    """The ``@function`` functions of a module (or a module name to import), by name.
    ConfigError when the module cannot be imported, has none, or declares a name twice."""
    if isinstance(module, str):
        try:
            module = importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(
                f"cannot import module {module!r}: {exc} (is it on PYTHONPATH, or run from its "
                "directory?)"
            ) from None
    found: dict[str, FunctionSpec] = {}
    for obj in vars(module).values():
        spec = spec_of(obj)
        if spec is None:
            continue
        if spec.name in found and found[spec.name].func is not spec.func:
            raise ConfigError(f"module {module.__name__}: two functions named {spec.name!r}")
        found[spec.name] = spec
    if not found:
        raise ConfigError(
            f"module {module.__name__} declares no functions: decorate them with "
            "@compute.rmi.function"
        )
    return found
