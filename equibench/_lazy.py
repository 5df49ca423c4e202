"""Names of a package imported from its submodules on first use (PEP 562), so that importing
the package stays fast."""

from __future__ import annotations

import importlib
import sys


def lazy_exports(package: str, exports: dict[str, str]):
    """The module ``__getattr__`` and ``__dir__`` of ``package``: each name of ``exports`` is
    read from its submodule (relative to ``package``) when first asked for."""

    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(f".{exports[name]}", package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
