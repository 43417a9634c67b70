"""Sweep backends, one table: where the units of a sweep run (`sweep --backend NAME`).

Each row names a backend's class and its options class (the contract: `backends/base.py`) and says
in a phrase what it runs where (the `--backend` help is built from these phrases). Adding a backend
is one file `backends/<name>.py` and one row here (docs/sweeps.md, "How to extend").
"""

from __future__ import annotations

from dataclasses import fields
from typing import NamedTuple

from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.backends.base import (
    WORKER_DIED,
    Backend,
    BackendOptions,
    Capacity,
    NodeLost,
    SweepStopped,
    Unit,
    UnitRunner,
    WorkerDied,
)
from formal_rope.sweeps.backends.local import LocalBackend, LocalOptions
from formal_rope.sweeps.backends.ray import RayBackend, RayOptions


class BackendRow(NamedTuple):
    """A registered backend: `backend(options)` builds it from an `options` (a BackendOptions
    subclass) that checked the run flags; `help` says what runs where, for `--backend`'s help."""

    name: str
    backend: type
    options: type
    help: str


BACKENDS: dict[str, BackendRow] = {row.name: row for row in (
    BackendRow("local", LocalBackend, LocalOptions, "--workers processes on this machine"),
    BackendRow("ray", RayBackend, RayOptions, "Ray tasks on a local Ray instance, or on the cluster at --address; "
               'needs pip install -e ".[ray]"'),
)}

RUN_FLAGS = tuple(field.name for field in fields(BackendOptions))  # the flags every backend's options take


def one_of(names) -> str:
    """'a', 'a or b', 'a, b or c'."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def backend_row(name: str) -> BackendRow:
    """The registered backend `name`; FormalRopeError naming the choices otherwise."""
    if name not in BACKENDS:
        raise FormalRopeError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def backend_options(name: str, **flags) -> BackendOptions:
    """The options of backend `name` from the run flags (`RUN_FLAGS`; omitted ones keep their
    defaults), checked: FormalRopeError for an unknown backend or a flag value it cannot honour."""
    return backend_row(name).options(**flags)


def options_row(options: BackendOptions) -> BackendRow:
    """The row whose options class built `options`."""
    for row in BACKENDS.values():
        if type(options) is row.options:
            return row
    raise FormalRopeError(f"{type(options).__name__} is no registered backend's options; expected the options of "
                          f"{', '.join(BACKENDS)}")


def make_backend(options: BackendOptions) -> Backend:
    """The backend that `options` were built for, ready to open."""
    return options_row(options).backend(options)


__all__ = ["BACKENDS", "RUN_FLAGS", "WORKER_DIED", "Backend", "BackendOptions", "BackendRow", "Capacity",
           "LocalBackend", "LocalOptions", "NodeLost", "RayBackend", "RayOptions", "SweepStopped", "Unit", "UnitRunner",
           "WorkerDied",
           "backend_options", "backend_row", "make_backend", "one_of", "options_row"]
