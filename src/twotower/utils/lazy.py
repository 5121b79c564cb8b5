"""Public names of a package imported on first use (PEP 562 module ``__getattr__``).

The package ``__init__`` files list their public names with the module defining each and import none of them:
most of those modules load torch, and ``import twotower`` or ``twotower data split`` must not.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str], namespace: dict[str, Any], *,
                 subpackages: tuple[str, ...] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``names`` maps a public name to the module defining it.

    A name is imported on first access and kept in ``namespace`` (the package's ``globals()``), so later
    lookups are plain attribute reads. ``subpackages`` are reachable as ``package.<name>`` without importing them
    first (an attribute lookup does not import a submodule).
    """

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
