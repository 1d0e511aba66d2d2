"""The Python API's reference is made from docstrings (mkdocstrings), so every public name of
compute.rmi, compute.collective and compute.stream (each in its ``__all__``), and every public
method and property of the classes among them, must have one of its own: not inherited, not
the signature a dataclass writes in for a class without one.  A constant's docstring is the
string literal right after its assignment, as mkdocstrings reads it."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PACKAGES = ["compute.rmi", "compute.collective", "compute.stream"]


def own_doc(obj: Any) -> str | None:
    """The docstring ``obj`` itself declares, or None."""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__")
        if doc and obj.__dict__.get("__dataclass_fields__") is not None:
            auto = f"{obj.__name__}("  # what @dataclass puts there when there is none
            return None if doc.startswith(auto) else doc
        return doc if isinstance(doc, str) else None
    if isinstance(obj, property):
        return obj.fget.__doc__ if obj.fget is not None else None
    if isinstance(obj, classmethod | staticmethod):
        return obj.__func__.__doc__
    return getattr(obj, "__doc__", None)


def where_imported(package: ModuleType) -> dict[str, str]:
    """Name -> the module the package's ``__init__`` imports it from."""
    assert package.__file__ is not None
    tree = ast.parse(Path(package.__file__).read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found


def constant_documented(module: ModuleType, name: str) -> bool:
    """Whether the assignment of ``name`` in ``module`` is followed by a string literal."""
    assert module.__file__ is not None
    body = ast.parse(Path(module.__file__).read_text()).body
    for stmt, after in zip(body, [*body[1:], None], strict=True):
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign)
            else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )  # fmt: skip
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            )
    return False


def undocumented(package_name: str) -> list[str]:
    package = importlib.import_module(package_name)
    missing = [] if package.__doc__ else [f"{package_name} (the module)"]
    sources = where_imported(package)
    for name in package.__all__:
        obj = getattr(package, name)
        label = f"{package_name}.{name}"
        if inspect.isclass(obj) or inspect.isroutine(obj):
            if not own_doc(obj):
                missing.append(label)
        elif not constant_documented(importlib.import_module(sources[name]), name):
            missing.append(f"{label} (a constant: a string literal on the line after it)")
        if not inspect.isclass(obj):
            continue
        for attr, member in vars(obj).items():
            if attr.startswith("_"):
                continue
            method = isinstance(member, property | classmethod | staticmethod)
            if (method or inspect.isfunction(member)) and not own_doc(member):
                missing.append(f"{label}.{attr}")
    return missing


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_has_a_docstring(package: str) -> None:
    missing = undocumented(package)
    assert not missing, "no docstring: " + ", ".join(missing)


def test_the_check_finds_what_has_none(workdir: Path) -> None:
    """The test above cannot pass by looking at nothing: a class, its method, a dataclass and
    a constant without docstrings are all caught, and the documented ones are not."""
    path = workdir / "probe.py"
    path.write_text(
        textwrap.dedent(
            '''
            """A module."""
            import dataclasses

            LIMIT = 3
            DOCUMENTED = 4
            """Four."""

            class Bare:
                def method(self): ...

            class Told:
                """Documented."""

                @property
                def size(self):
                    """Its size."""

            @dataclasses.dataclass
            class Plain:
                x: int
            '''
        )
    )
    spec = importlib.util.spec_from_file_location("icn_docstring_probe", path)
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    assert own_doc(probe.Bare) is None and own_doc(vars(probe.Bare)["method"]) is None
    assert own_doc(probe.Plain) is None  # (the signature @dataclass writes in is not one)
    assert own_doc(probe.Told) and own_doc(vars(probe.Told)["size"])
    assert not constant_documented(probe, "LIMIT")
    assert constant_documented(probe, "DOCUMENTED")
