"""The size limits every input is held against before any work, in one place.

Each limit is a named constant; its error message names it (`describe`), and the `--help` of the
options it bounds states it. Sizes are in bytes. Limits that depend on an option (the automaton's
`--max-states`, a run's memory) live with that option; these do not.
"""

from __future__ import annotations

MIB = 2**20
GIB = 2**30

# Text files read whole: a sweep's TOML config, the JSON records of a results folder.
MAX_CONFIG_BYTES = 4 * MIB
# Data files and other text inputs read whole: FLaRe/MLRegTest files, .att automata, strings on stdin.
MAX_TEXT_INPUT_BYTES = 1 * GIB
# Members of a model zip (compiled models and trained checkpoints), uncompressed: the JSON metadata
# and the weights. Checked against the size the archive declares before reading, then while reading.
MAX_METADATA_BYTES = 64 * MIB
MAX_WEIGHTS_BYTES = 4 * GIB
# A saved training state (weights, optimizer moments, progress), read whole before it is parsed.
MAX_STATE_BYTES = 16 * GIB
# Temporal operators nested in one formula (P, H, S and Y^k, which counts k): its automaton is built
# position by position, and each step evaluates every subformula, so the work grows with the square
# of this depth (1,000 take about 3 s).
MAX_TEMPORAL_DEPTH = 1_000
# Sampling: the longest string (drawn position by position) and the count table behind it (one
# float64 per length 0..N and automaton node; the near-miss automaton has about twice the states).
MAX_SAMPLE_LENGTH = 1_000_000
# Symbols of the strings one call samples and holds at once (`sample`, `compile`'s sampled
# verification): about 14 bytes each at peak, so about 3.5 GB -- four times the paper's test set
# (512 × 41..500 = 63.7M symbols). Larger requests used to die in numpy's MemoryError (or the OOM
# killer) after minutes of work.
MAX_SAMPLED_SYMBOLS = 256_000_000
MAX_COUNT_TABLE_BYTES = 4 * GIB
# Local worker processes a sweep may start per CPU core (each imports torch and trains a pack).
MAX_WORKERS_PER_CORE = 4
# Strings `run`, `--trace` and `phases` may hold in memory at once for score matrices: see
# formal_rope.model.forward (row blocks) and formal_rope.diagnostics (an estimate, then a refusal).
MAX_SCORE_BYTES = 2 * GIB


def describe_bytes(count: float) -> str:
    """`count` bytes in the largest binary unit that keeps it at least 1 (e.g. 4 MiB, 1.5 GiB)."""
    for unit, size in (("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{int(count)} bytes"


def describe(name: str) -> str:
    """`the limit NAME = value`, as error messages name a limit of this module."""
    value = globals()[name]
    shown = describe_bytes(value) if name.endswith("_BYTES") else f"{value:,}"
    return f"the limit {name} = {shown}"
