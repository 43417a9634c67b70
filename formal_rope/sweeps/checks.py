"""Checks of a planned grid before its first run: every run resolved once (`resolve_grid`:
language, periods, workload, data, init source), so a typo stops a sweep at once instead of
failing once per grid point, and the sweep's packs train the resolved runs without resolving
them again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from formal_rope.run_config.config import RunConfig
from formal_rope.training.resolve import ResolvedRun, all_notes, resolve_runs


@dataclass(frozen=True, eq=False)
class GridRuns:
    """A grid's runs, each resolved (`training.resolve.ResolvedRun`), and the notes to print before
    they run: settings without effect on some language, each once."""

    runs: tuple[ResolvedRun, ...]
    notes: tuple[str, ...]


def resolve_grid(configs: list[RunConfig], command: str = "sweep", dfas: Mapping | None = None) -> GridRuns:
    """Resolve every run before the first starts (FormalRopeError), so a typo stops the sweep at
    once instead of being recorded as one failed run per grid point; this includes `periods auto`
    on a language outside LTL[P,MOD] and an init_from checkpoint path that cannot be used (a run id
    names a run of the sweep, whose checkpoint is checked when it has trained). Notes suggest
    `command`'s options. dfas: DFAs already built, by (language, alphabet) (the atlas's set)."""
    runs = resolve_runs(configs, dfas=dfas, command=command, init_dir=None)
    return GridRuns(tuple(runs), tuple(all_notes(runs)))


def check_grid(configs: list[RunConfig], command: str = "sweep") -> list[str]:
    """`resolve_grid`'s notes (Python callers that run the configs themselves: `run_sweep(configs,
    out)` then resolves each run in its pack; give it `resolve_grid(...).runs` to resolve once)."""
    return list(resolve_grid(configs, command).notes)
