"""Lazy re-exports: a package exports a name whose module imports a heavy library (matplotlib, scipy.optimize)
without loading that library when the package is imported, so start-up stays light and other packages still
import only from the package."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``homes[name]`` (a module path) on first use of
    ``name`` and caches the value on the package."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__


def callable_package(package: str, home: str, name: str) -> None:
    """Make the imported ``package`` callable as ``home.name``: ``fabricsim.topology(...)`` is the API function of
    `fabricsim topo` while ``fabricsim.topology.build_topology`` stays the package's own (a subpackage and the
    API function cannot otherwise share the name). ``home`` is imported only when the package is called."""
    import sys
    from types import ModuleType

    class CallablePackage(ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(home), name)(*args, **kwargs)

    sys.modules[package].__class__ = CallablePackage
