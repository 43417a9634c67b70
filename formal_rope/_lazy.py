"""Lazy package exports: names whose modules import torch load on first use, so that importing a
package (and the CLI's start-up path) stays torch-free."""

from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(package: str, table: dict[str, str], eager: dict) -> tuple[Callable, Callable]:
    """(__getattr__, __dir__) for `package`: each name in `table` is imported from the module
    named there when first asked for; `eager` is the package's globals()."""

    def __getattr__(name: str):
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(eager) | set(table))

    return __getattr__, __dir__
