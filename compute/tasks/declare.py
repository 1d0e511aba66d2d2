"""Declaring tasks and actors: ``@task`` functions and ``@actor`` classes.

A task is named by where it is defined (``module:qualname``): an executor runs it by importing
that module, which it must be allowed to (``icn tasks executor --module NAME``).  The decorator
returns an object that stays callable locally and gains ``.remote(...)``, which submits a call
through the current runtime (:mod:`compute.tasks.runtime`) and returns its reference at once.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from icn.errors import ConfigError

if TYPE_CHECKING:
    from compute.tasks.refs import ActorHandle, TaskRef

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)


@dataclass(frozen=True)
class TaskSpec:
    """How a task runs: ``deterministic`` (same arguments, same result: its result is named by
    its lineage, so any caller's repeated call is answered by the network), ``num_cpus``
    (executor slots it takes) and ``memory`` (bytes it needs free on the executor),
    ``max_retries`` (re-executions after an executor is lost)."""

    name: str
    deterministic: bool = False
    num_cpus: float = 1.0
    memory: int = 0
    max_retries: int = 3


def qualified_name(obj: Any) -> str:
    """``module:qualname`` of a module-level function or class, as an executor imports it.
    A script run as ``python -m pkg.mod`` names its module ``pkg.mod``; one run as a file
    cannot be imported by an executor: ConfigError says so."""
    module = obj.__module__
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        if spec is None or not spec.name:
            raise ConfigError(
                f"{obj.__qualname__} is defined in a script run as a file: executors import "
                "tasks by module, so define it in a module (or run the script with "
                "`python -m`) and start the executors with `--module` naming that module"
            )
        module = spec.name
    if "<locals>" in obj.__qualname__:
        raise ConfigError(
            f"{obj.__qualname__}: a task or actor must be defined at a module's top level "
            "(executors import it by name)"
        )
    return f"{module}:{obj.__qualname__}"


def _check_resources(name: str, num_cpus: float, memory: int, max_retries: int) -> None:
    if num_cpus < 0:
        raise ConfigError(f"{name}: num_cpus must be >= 0 (got {num_cpus})")
    if memory < 0:
        raise ConfigError(f"{name}: memory must be >= 0 bytes (got {memory})")
    if max_retries < 0:
        raise ConfigError(f"{name}: max_retries must be >= 0 (got {max_retries})")


class RemoteFunction(Generic[F]):
    """A ``@task``: call it for a local run, ``.remote(...)`` for a task on an executor."""

    def __init__(self, func: F, spec: TaskSpec | None) -> None:
        self.func = func
        self._spec = spec
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__module__ = func.__module__
        self.signature = inspect.signature(func)

    @property
    def spec(self) -> TaskSpec:
        if self._spec is None or not self._spec.name:
            base = self._spec or TaskSpec("")
            self._spec = replace(base, name=qualified_name(self.func))
        return self._spec

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def options(
        self,
        *,
        num_cpus: float | None = None,
        memory: int | None = None,
        max_retries: int | None = None,
    ) -> RemoteFunction[F]:
        """The same task with other resources or retries for the calls made through it."""
        spec = self.spec
        new = replace(
            spec,
            num_cpus=spec.num_cpus if num_cpus is None else num_cpus,
            memory=spec.memory if memory is None else memory,
            max_retries=spec.max_retries if max_retries is None else max_retries,
        )
        _check_resources(new.name, new.num_cpus, new.memory, new.max_retries)
        return RemoteFunction(self.func, new)

    def remote(self, *args: Any, **kwargs: Any) -> TaskRef:
        """Submit the call; returns its reference at once (``get(ref)`` or ``await ref``)."""
        from compute.tasks.current import current_runtime

        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"task {self.spec.name}: {exc}") from None
        return current_runtime().submit(self.spec, args, kwargs)


@overload
def task(fn: F) -> RemoteFunction[F]: ...


@overload
def task(
    *,
    deterministic: bool = False,
    num_cpus: float = 1.0,
    memory: int = 0,
    max_retries: int = 3,
) -> Callable[[F], RemoteFunction[F]]: ...


def task(
    fn: F | None = None,
    *,
    deterministic: bool = False,
    num_cpus: float = 1.0,
    memory: int = 0,
    max_retries: int = 3,
) -> RemoteFunction[F] | Callable[[F], RemoteFunction[F]]:
    """Mark a module-level function as a task: ``@task`` or ``@task(deterministic=True,
    num_cpus=1, memory=0, max_retries=3)``."""

    def mark(f: F) -> RemoteFunction[F]:
        if inspect.isclass(f):
            raise ConfigError(f"{f.__qualname__}: a class is an @actor, not a @task")
        _check_resources(f.__qualname__, num_cpus, memory, max_retries)
        return RemoteFunction(
            f,
            TaskSpec(
                "",
                deterministic=deterministic,
                num_cpus=num_cpus,
                memory=memory,
                max_retries=max_retries,
            ),
        )

    return mark(fn) if fn is not None else mark


@dataclass(frozen=True)
class ActorSpec:
    """An actor class: ``name`` (``module:qualname``), the slots it holds on its executor, and
    ``checkpoint``: its state is saved after every method call, so that a restarted actor
    resumes from the last one (off for state that cannot or need not be saved)."""

    name: str
    num_cpus: float = 0.0
    memory: int = 0
    checkpoint: bool = True
    max_restarts: int = 3


class ActorClass(Generic[C]):
    """An ``@actor``: ``.remote(...)`` creates one on an executor and returns its handle."""

    def __init__(self, cls: C, spec: ActorSpec) -> None:
        self.cls = cls
        self._spec = spec
        self.__doc__ = cls.__doc__
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__module__ = cls.__module__

    @property
    def spec(self) -> ActorSpec:
        if not self._spec.name:
            self._spec = replace(self._spec, name=qualified_name(self.cls))
        return self._spec

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.cls(*args, **kwargs)

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle:
        from compute.tasks.current import current_runtime

        try:
            inspect.signature(self.cls).bind(*args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"actor {self.spec.name}: {exc}") from None
        return current_runtime().create_actor(self.spec, self.cls, args, kwargs)


@overload
def actor(cls: C) -> ActorClass[C]: ...


@overload
def actor(
    *,
    num_cpus: float = 0.0,
    memory: int = 0,
    checkpoint: bool = True,
    max_restarts: int = 3,
) -> Callable[[C], ActorClass[C]]: ...


def actor(
    cls: C | None = None,
    *,
    num_cpus: float = 0.0,
    memory: int = 0,
    checkpoint: bool = True,
    max_restarts: int = 3,
) -> ActorClass[C] | Callable[[C], ActorClass[C]]:
    """Mark a module-level class as an actor: ``@actor`` or ``@actor(num_cpus=0, memory=0,
    checkpoint=True, max_restarts=3)``.  Its methods are called through the handle
    ``.remote(...)`` returns: ``handle.method.remote(...)``, one call at a time, in order."""

    def mark(c: C) -> ActorClass[C]:
        if not inspect.isclass(c):
            raise ConfigError(f"{c!r}: @actor marks a class")
        _check_resources(c.__qualname__, num_cpus, memory, max_restarts)
        return ActorClass(c, ActorSpec("", num_cpus, memory, checkpoint, max_restarts))

    return mark(cls) if cls is not None else mark


def resolve(name: str, allowed: frozenset[str]) -> RemoteFunction[Any] | ActorClass[Any]:
    """The task or actor ``module:qualname``, imported if its module is in ``allowed`` (an
    executor's ``--module`` list): KeyError with a message saying why not."""
    module, _, qualname = name.partition(":")
    if not qualname or module not in allowed:
        raise KeyError(
            f"{name} is not served here: this executor imports only "
            f"{', '.join(sorted(allowed)) or 'no module'} (start it with --module {module})"
        )
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise KeyError(f"{name}: cannot import {module}: {exc}") from None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise KeyError(f"{name}: {module} has no {qualname}")
    if isinstance(obj, RemoteFunction | ActorClass):
        return obj
    # ``count = task(count_fn)``: the function keeps its own name, its task another
    for other in vars(importlib.import_module(module)).values():
        if isinstance(other, RemoteFunction) and other.func is obj:
            return other
        if isinstance(other, ActorClass) and other.cls is obj:
            return other
    raise KeyError(f"{name} is not marked @task or @actor")
