"""Public names of a package imported on first use (PEP 562 module ``__getattr__``).

The package ``__init__`` files list their public names with the module defining each and import none of them:
most of those modules load torch, and ``import twotower`` or ``twotower data split`` must not.
"""
from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str], namespace: dict[str, Any], *,
                 subpackages: tuple[str, ...] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``names`` maps a public name to the module defining it.

    A name is imported on first access and kept in ``namespace`` (the package's ``globals()``), so later
    lookups are plain attribute reads. ``subpackages`` are reachable as ``package.<name>`` without importing them
    first (an attribute lookup does not import a submodule).

    A public name that is also a submodule's (``twotower.pipeline.evaluate_run``, the function, defined in the
    module ``evaluate_run.py``) keeps naming the function: importing the submodule makes Python bind the module
    object to that attribute of the package, which turned ``tt.evaluate_run(...)`` into "'module' object is not
    callable" once any code had imported the module. The eager ``from ... import`` this replaced rebound it.
    """
    shadowed = {name for name, module in names.items() if module == f"{package}.{name}"}
    if shadowed:
        sys.modules[package].__class__ = _keeping(shadowed)

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module-level hook's own name
        if name in subpackages:
            return importlib.import_module(f"{package}.{name}")  # sets package.<name> itself
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(set(namespace.get("__all__", ())) | set(names) | set(subpackages))

    return __getattr__, __dir__


def _keeping(shadowed: set[str]) -> type[types.ModuleType]:
    """A module class whose ``shadowed`` attributes, when the import system binds the same-named submodule to
    them, take that submodule's public object of the same name instead."""

    class _PublicNamesModule(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if (name in shadowed and isinstance(value, types.ModuleType)
                    and value.__name__ == f"{self.__name__}.{name}" and hasattr(value, name)):
                value = getattr(value, name)
            super().__setattr__(name, value)

    return _PublicNamesModule
