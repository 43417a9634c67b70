"""Settings that are valid but have no effect on a particular language: said out loud, never silent.

`context_notes(config, dfa, periods)` returns one sentence per such setting, for `train` and `sweep`
to print on stderr before training (the run itself is unchanged and records what it used).
"""

from __future__ import annotations

import numpy as np

from formal_rope.lang.source import resolve_language
from formal_rope.sampling import count_table
from formal_rope.training.config import RunConfig
from formal_rope.training.data import is_data_language
from formal_rope.training.encodings import is_periodic


def context_notes(config: RunConfig, dfa, periods: tuple[int, ...] | None) -> list[str]:
    """Notes for `config` on the language `dfa` with its resolved `periods` (`resolve_periods`)."""
    notes = []
    if is_periodic(config.pe) and periods is not None and set(periods) == {1}:
        how = "periods auto resolved to 1 (the language is in LTL[P]: no modular counting is needed)" if (
            config.periods is None
        ) else "every period is 1"
        notes.append(
            f"{config.pe} on {config.language!r}: {how}, and a period-1 {config.pe} rotates nothing, "
            "so this run is NoPE; give --periods k to train a periodic encoding anyway"
        )
    # (A run on data files has no near-miss share: RunConfig resets it, and train/sweep say so.)
    if config.train_near_miss_fraction > 0 and dfa is not None and not has_training_near_misses(config, dfa):
        notes.append(
            f"train_near_miss_fraction {config.train_near_miss_fraction:g} has no effect on {config.language!r}: "
            f"no string of length {config.train_min_length}..{config.train_max_length} is one substitution away "
            "from the language, so every training negative stays uniform"
        )
    if 0 < config.steps <= config.warmup_steps:
        notes.append(
            f"warmup_steps {config.warmup_steps} ≥ steps {config.steps}: the learning rate only ramps up and never "
            f"reaches lr {config.lr:g}"
            + (", so the cosine schedule has no effect" if config.lr_schedule == "cosine" else "")
        )
    return notes


def has_training_near_misses(config: RunConfig, dfa) -> bool:
    """Whether some training length has a near-miss (a positive with one symbol substituted out of L)."""
    counts = count_table(dfa, "near_miss", config.train_max_length)
    lengths = np.arange(config.train_min_length, config.train_max_length + 1)
    return bool(np.any(counts.nonempty(lengths)))


def language_note(config: RunConfig) -> str | None:
    """How the run's language text was read (a bare expression as a formula or regex, a registry
    entry's alphabet), as `classify` and `accepts` say it on stderr; None for files of strings."""
    if is_data_language(config.language):
        return None
    detected = resolve_language(config.language, config.alphabet).detected
    return f"{config.language!r} {detected}" if detected else None
