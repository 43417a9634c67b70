"""Settings that are valid but have no effect on a particular language: said out loud, never silent.

`context_notes(config, dfa, periods)` returns one sentence per such setting, for `train` and `sweep`
to print on stderr before training (the run itself is unchanged and records what it used).
"""

from __future__ import annotations

import numpy as np

from formal_rope.auto_periods import AUTO_MIN_PERIOD, auto_periods_note
from formal_rope.classes import classify
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.sampling import count_table
from formal_rope.training.data import is_data_language
from formal_rope.training.encodings import phases

# How each command that prints these notes sets a RunConfig field: the fields with an option of their
# own, by command; any other field is `--set FIELD=VALUE` (train and sweep) or, for a command without
# --set (reproduce) and for the warnings a run records, FIELD=VALUE (a sweep file's or RunConfig's
# spelling). A note's suggestion must work when followed in the command that printed it.
OWN_OPTIONS = {
    "train": {"periods": "--periods", "phase_precision": "--phase-precision", "window": "--window"},
    "sweep": {"periods": "--periods", "window": "--window"},
    "reproduce": {"window": "--window"},
}
COMMANDS_WITH_SET = ("train", "sweep")


def setting_text(field: str, value: str, command: str | None = None) -> str:
    """How `command` sets `field` to `value` (text as the option takes it): `--window 32,global`,
    `--set phase_precision=fp64`, or `phase_precision=fp64` (no command, or one without --set)."""
    option = OWN_OPTIONS.get(command or "", {}).get(field)
    if option is not None:
        return f"{option} {value}"
    assignment = f"{field}=[{value}]" if "," in value else f"{field}={value}"  # --set splits values at commas
    return f"--set {assignment}" if command in COMMANDS_WITH_SET else assignment


def global_window_text(windows: tuple[int, ...]) -> str:
    """The --window text of `windows` (one per layer, all sliding) with the last layer made global."""
    kept = list(windows[:-1])
    if kept and len(set(kept)) == 1:
        return f"{kept[0]}*{len(kept)},global" if len(kept) > 1 else f"{kept[0]},global"
    return ",".join([*(str(window) for window in kept), "global"])


def context_notes(config: RunConfig, dfa, periods: tuple[int, ...] | None, command: str | None = "train") -> list[str]:
    """Notes for `config` on the language `dfa` with its resolved `periods` (`resolve_periods`);
    `command` (train, sweep, reproduce) is the one that prints them, whose options they suggest."""
    notes = []
    if config.periods is None and config.periodic_encoding() is not None and dfa is not None and periods == (
        AUTO_MIN_PERIOD,
    ):
        raised = auto_periods_note(classify(dfa).mod_k or AUTO_MIN_PERIOD)
        if raised:
            notes.append(f"{config.pe} on {config.language!r}: {raised}")
    if config.periodic_encoding() == config.pe and not config.is_hybrid() and periods is not None and set(
        periods
    ) == {1}:
        notes.append(
            f"{config.pe} on {config.language!r}: every period is 1, and a period-1 {config.pe} rotates nothing, "
            f"so this run is NoPE; give {setting_text('periods', 'k', command)} to train a periodic encoding anyway"
        )
    # (A run on data files has no near-miss share: RunConfig resets it, and train/sweep say so.)
    if config.train_near_miss_fraction > 0 and dfa is not None and not has_training_near_misses(config, dfa):
        notes.append(
            f"train_near_miss_fraction {config.train_near_miss_fraction:g} has no effect on {config.language!r}: "
            f"no string of length {config.train_min_length}..{config.train_max_length} is one substitution away "
            "from the language, so every training negative stays uniform"
        )
    base_note = decimal_base_note(config)
    if base_note:
        notes.append(base_note)
    notes.extend(run_warnings(config, command))
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


def _schedule_frequencies(config: RunConfig) -> np.ndarray | None:
    """The frequencies theta of the run's phase schedule (sipe: d_model/2, rotary: per head), or None
    for encodings that form no phases from a base."""
    if not config.applies("phase_precision"):
        return None
    row = config.encoding_row
    if row.additive:
        return phases.rope_frequencies(config.base, config.d_model // 2)
    pairs = config.d_model // config.heads // 2
    if row.takes_rope_fraction:
        return phases.partial_frequencies(config.base, pairs, config.rope_fraction)[0]
    return phases.rope_frequencies(config.base, pairs)


def decimal_base_note(config: RunConfig) -> str | None:
    """A note when the run's float64 base gives phases measurably off those of the decimal written
    (`phases.decimal_base_deviation` above `phases.DECIMAL_BASE_NOTE_RAD` over the run's
    positions): the convention (phases exact for the double, docs/training.md) said with its size."""
    try:
        if not config.applies("base"):
            return None
        row = config.encoding_row
        if not row.takes_base:
            return None
        if row.additive:
            ladder = config.d_model // 2
        else:
            ladder = config.d_model // config.heads // 2
            if row.takes_rope_fraction:
                ladder = phases.partial_rotated_pairs(config.rope_fraction, ladder)
        longest = max(config.test_max_length, config.train_max_length) + 1
        gap = phases.decimal_base_deviation(config.base, ladder, longest)
    except Exception:  # noqa: BLE001 - an invalid config is validation's to report, with context
        return None
    if gap <= phases.DECIMAL_BASE_NOTE_RAD:
        return None
    return (f"base {config.base!r} is the float64 {config.base:.20g}, and the phases are exact for it (the "
            f"convention: a run's numbers do not depend on how its base is written); against {config.base!r} "
            f"itself they are off by up to {gap:.2g} rad by position {longest}")


def run_warnings(config: RunConfig, command: str | None = None) -> list[str]:
    """Warnings a run records in its result (`RunResult.warnings`, the runs Parquet's `warnings`
    column) and `train`/`sweep` print: fp32 phases at a base where they are far off (their error bound
    over the tested positions, `phases.fp32_phase_error_bound`, above
    `phases.FP32_PHASE_WARNING_RAD`), and a partial_rope whose rounded fraction rotates every pair.
    `command`: the one that prints them, whose options their suggestions name (None: recorded, FIELD=VALUE)."""
    warnings = []
    try:
        frequencies = _schedule_frequencies(config)
    except Exception:  # noqa: BLE001 - an invalid config is validation's to report, with context
        return warnings
    longest = max(config.test_max_length, config.train_max_length) + 1  # eos sits at position N + 1
    if frequencies is not None and config.phase_precision == "fp32":
        bound = phases.fp32_phase_error_bound(frequencies, longest)
        if bound > phases.FP32_PHASE_WARNING_RAD:
            warnings.append(
                f"phase_precision fp32 at base {config.base:g}: the float32 phases theta*i are off by up to "
                f"{bound:.3g} rad by position {longest} (bound: float32 rounding of theta times i plus half an "
                f"ulp of the product; the warning threshold is {phases.FP32_PHASE_WARNING_RAD:g} rad), so "
                f"the run's rotations are not RoPE's; use {setting_text('phase_precision', 'fp64', command)} (exact "
                "phases) unless that is what is being measured"
            )
    windows = config.layer_windows() if isinstance(config.layers, int) and config.layers > 0 else ()
    if len(windows) == config.layers and all(window is not None for window in windows):
        reach = sum(windows)
        if reach < longest:
            fix = setting_text("window", global_window_text(windows), command)
            warnings.append(
                f"every layer attends through a sliding window (window {config.window}): the readout at eos sees "
                f"only the last {reach} positions, and the test strings reach position {longest}; give one of its "
                f"{config.layers} layers a global window (e.g. {fix}) "
                "for the readout to see the whole string"
            )
    if config.pe == "partial_rope" and config.applies("rope_fraction"):
        pairs = config.d_model // config.heads // 2
        try:
            rotated = phases.partial_rotated_pairs(config.rope_fraction, pairs)
        except Exception:  # noqa: BLE001
            return warnings
        if rotated == pairs:
            warnings.append(
                f"partial_rope with rope_fraction {config.rope_fraction:g} rotates all {pairs} rotary pairs per "
                f"head ({config.rope_fraction:g} x {pairs} = {config.rope_fraction * pairs:g}, rounded half up): this "
                "run is RoPE with RoPE's frequency ladder"
            )
    return warnings
