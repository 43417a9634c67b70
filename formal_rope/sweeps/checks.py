"""Checks of a planned grid before its first run (`check_grid`): every run's language, workload
and init source, so a typo stops a sweep at once instead of failing once per grid point."""

from __future__ import annotations

from formal_rope.run_config.config import RunConfig
from formal_rope.training.context import context_notes, language_note
from formal_rope.training.workload import check_workload


def check_grid(configs: list[RunConfig], command: str = "sweep") -> list[str]:
    """Check every run's settings and language before the first run starts (FormalRopeError), so a
    typo stops the sweep at once instead of being recorded as one failed run per grid point; this
    includes `periods auto` on a language outside LTL[P,MOD]. Returns notes (`context_notes`) on
    settings that have no effect on some language, once each, suggesting `command`'s options."""
    from formal_rope.training.init_from import check_init_source, is_run_id  # reads checkpoints with torch
    from formal_rope.training.setup import (  # torch: not on the sweeps import
        check_trainable,
        resolve_dfa,
        resolve_periods,
    )

    dfas: dict = {}
    notes: list[str] = []
    checked: set = set()
    for config in configs:
        check_workload(config)  # each config checked its own fields when built; whether it fits, here
        if config.init_from is not None and not is_run_id(config.init_from):
            check_init_source(config.init_from, None)  # a path: usable or refused now (run ids come from the sweep)
        language_key = (config.language, config.alphabet)
        if language_key not in dfas:
            dfas[language_key] = resolve_dfa(config)
            read_as = language_note(config)
            if read_as and read_as not in notes:
                notes.append(read_as)
        dfa = dfas[language_key]
        # (with everything `run_warnings` reads: a note for one base, window or layer count is no other's)
        key = (language_key, config.pe, config.periods, config.train_min_length, config.train_max_length,
               config.train_near_miss_fraction, config.base, config.phase_precision, config.window, config.layers,
               config.d_model, config.heads, config.rope_fraction, config.test_max_length, config.steps,
               config.warmup_steps)
        if key in checked:
            continue
        checked.add(key)
        check_trainable(config, dfa)
        for note in context_notes(config, dfa, resolve_periods(config, dfa), command):
            if note not in notes:
                notes.append(note)
    return notes
