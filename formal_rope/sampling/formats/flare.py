"""FLaRe split folders and language folders, written as FLaRe's own generator writes them (no torch).

FLaRe (Butoi et al., ICLR 2025, "Training Neural Networks as Recognizers of Formal Languages"; the
benchmark github.com/rycolab/flare is written by rycolab/neural-network-recognizers,
`string_sampling/sample_dataset.py`) stores each split as a folder of line-aligned text files:

  main.tok               one string per line, symbols separated by single spaces ("" = empty string)
  labels.txt             1 (in the language) or 0, one per line
  num-edits.txt          one line per *negative*, in order: the number of random edits that made it
                         from a positive, or an empty line for a uniformly drawn string
  log-probabilities.txt  one line per *positive*: see `log_probability_lines` (it depends on the
                         distribution the positives were drawn from)
  next-symbols.jsonl     one JSON array per *positive* with len+1 entries {"s": the symbols that keep
                         the prefix extendable to a member, sorted and space-joined, "e": prefix is a
                         member}, written as Python's json.dump writes it (ASCII escapes: "\\u03c3")

A language folder holds its training split at the top level and the others under datasets/<split>/;
FLaRe's own scripts (neural_networks/prepare_language.bash) need training, validation-short,
validation-long and test, each with next-symbols.jsonl (the registry row's `folder_splits`).

The end of the module is the dataset-format protocol (`formats.registry`): check_request, write,
read, locate, read_words.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from formal_rope.automata.ops import coaccessible_states
from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_folder
from formal_rope.sampling.counts import count_strings, flare_move_log_weights
from formal_rope.sampling.datasets import LabeledSet, count_table
from formal_rope.sampling.distributions import ACCEPTED, DEFAULT_DISTRIBUTION, FLARE_ACCEPTED
from formal_rope.sampling.formats.layout import DataFiles, WriteOptions
from formal_rope.sampling.formats.strings import (
    DataFormatError,
    StringFile,
    Words,
    character_words,
    encode_inferred,
    read_lines,
)

FLARE_STRINGS = "main.tok"
FLARE_LABELS = "labels.txt"
FLARE_NUM_EDITS = "num-edits.txt"
FLARE_LOG_PROBABILITIES = "log-probabilities.txt"
FLARE_NEXT_SYMBOLS = "next-symbols.jsonl"
FLARE_FILES = (FLARE_STRINGS, FLARE_LABELS, FLARE_NUM_EDITS, FLARE_LOG_PROBABILITIES, FLARE_NEXT_SYMBOLS)
FLARE_TEST_SPLIT = Path("datasets") / "test"

# ------------------------------------------------------------------------------------------ read
def read_flare_words(directory: Path, alphabet: Sequence[str] | None = None) -> Words:
    """The strings and labels of one split folder (main.tok + labels.txt), before encoding (its
    tokens are whitespace-separated whatever the alphabet, so `alphabet` does not change them)."""
    strings_path, labels_path = directory / FLARE_STRINGS, directory / FLARE_LABELS
    for path in (strings_path, labels_path):
        if not path.is_file():
            raise DataFormatError(path, None, f"missing: a FLaRe split folder holds {FLARE_STRINGS} and {FLARE_LABELS}")
    strings = read_lines(strings_path)
    label_lines = read_lines(labels_path)
    if len(strings) != len(label_lines):
        shorter, longer = (
            (labels_path, strings_path) if len(label_lines) < len(strings) else (strings_path, labels_path)
        )
        first = min(len(strings), len(label_lines)) + 1
        raise DataFormatError(
            shorter, None,
            f"has {min(len(strings), len(label_lines))} lines but {longer.name} has "
            f"{max(len(strings), len(label_lines))}; "
            f"line {first} of {longer.name} has no partner (the files must be line-aligned)",
        )
    labels = np.empty(len(label_lines), dtype=bool)
    for number, value in enumerate(label_lines, start=1):
        stripped = value.strip()
        if stripped not in ("0", "1"):
            raise DataFormatError(labels_path, number, f"expected a label 0 or 1, got {value!r}")
        labels[number - 1] = stripped == "1"
    lines = np.arange(1, len(strings) + 1, dtype=np.int64)
    joined, n_tokens = [], 0
    for line in strings:
        tokens = line.split()
        n_tokens += len(tokens)
        joined.append("".join(tokens))
    if n_tokens == sum(map(len, joined)):  # every token is one character: the separators can go
        return character_words(strings_path, joined, labels, lines, labels_path)
    return Words(strings_path, labels, lines, tokens=[line.split() for line in strings], label_path=labels_path)


def read_flare_split(directory: str | Path, alphabet: Sequence[str] | None = None) -> StringFile:
    """The labelled strings of one FLaRe split folder (main.tok + labels.txt; the per-string extras
    are not needed to train or test and are not read). Without `alphabet`, the alphabet is the
    sorted set of tokens in main.tok (FLaRe's prepare_data.py sorts its vocabulary the same way)."""
    return encode_inferred(read_flare_words(Path(directory)), alphabet)


def flare_split_files(split: Path) -> tuple[Path, ...]:
    """The files of a split that training reads (and that a run's data hash covers)."""
    return (split / FLARE_STRINGS, split / FLARE_LABELS)


def locate_flare(path: Path) -> DataFiles | None:
    """A FLaRe language folder at `path`: main.tok at the top (training) and datasets/test/ (test);
    None when `path` is no FLaRe folder, FormalRopeError when it is one without a test split."""
    if not (path.is_dir() and (path / FLARE_STRINGS).is_file()):
        return None
    test = path / FLARE_TEST_SPLIT
    if not (test / FLARE_STRINGS).is_file():
        raise FormalRopeError(
            f"{path} looks like a FLaRe language folder ({FLARE_STRINGS} at the top is its training split) "
            f"but has no test split {test}/{FLARE_STRINGS}; write one with "
            f"`formalrope sample LANG --lengths 41..500 --format flare --out {test}`"
        )
    return DataFiles("flare", str(path), path, (test,), files=flare_split_files(path) + flare_split_files(test),
                     files_root=path)


# ----------------------------------------------------------------------------------------- write
def check_flare_symbols(alphabet: Sequence[str]) -> None:
    """FormalRopeError for a symbol FLaRe's whitespace-split main.tok cannot hold."""
    for symbol in alphabet:
        if not symbol or any(character.isspace() for character in symbol):
            raise FormalRopeError(
                f"symbol {symbol!r} cannot be written in FLaRe's main.tok, whose tokens are separated by "
                "whitespace; rename it (multi-character symbols without blanks are fine)"
            )


def _next_symbol_fragments(dfa) -> list[str]:
    """Per DFA state, FLaRe's next-symbols entry {"s": sorted valid next symbols, "e": accepting},
    as FLaRe's tools/jsonl.py writes it (json.dump with separators (",", ":") and ASCII escapes)."""
    live = coaccessible_states(dfa)
    fragments = []
    for state in range(dfa.n_states):
        valid = sorted(dfa.alphabet[a] for a in range(dfa.n_symbols) if live[dfa.transitions[state, a]])
        entry = {"s": " ".join(valid), "e": bool(dfa.accepting[state])}
        fragments.append(json.dumps(entry, separators=(",", ":")))
    return fragments


def state_paths(dfa, symbols: np.ndarray) -> np.ndarray:
    """States (n, L+1) visited by strings (n, L) of one length, start state first."""
    n, length = symbols.shape
    states = np.empty((n, length + 1), dtype=np.int64)
    states[:, 0] = dfa.start
    for position in range(length):
        states[:, position + 1] = dfa.transitions[states[:, position], symbols[:, position]]
    return states


def flare_log_probabilities(dfa, symbols: np.ndarray, n_lengths: int) -> np.ndarray:
    """What FLaRe's sampler writes in log-probabilities.txt for members `symbols` (k, n) of one length.

    FLaRe (string_sampling/finite_automaton_weight_pushing.py, `sample`) adds, at each step, the
    weight-pushed log weight of the move it takes -- log(1/moves(q)) + β(q', r-1), β(q, r) being
    the log of the summed path weights of length r from q -- then log(1/moves) for stopping, and
    finite_automaton_language.py subtracts log(#lengths) and β(start, n). The pushed β terms make
    this sum differ from log P(w) under its own sampler (for (01)* over lengths 0..40 the string
    "0 1" gets -2 log 2 - log 21 = -4.43 where P is 1/21); this function reproduces the sum, in
    float64 (FLaRe's prepare_sampler.py computes β in float16 by default, so its files hold these
    numbers rounded: see tests/data/flare/README.md)."""
    k, length = symbols.shape
    table = count_table(dfa, FLARE_ACCEPTED, length)
    cumulative = np.cumsum(table.row_peak[: length + 1])
    beta = table.shifted[: length + 1] + cumulative[:, None]  # beta[r, q]
    weights = flare_move_log_weights(dfa)
    paths = state_paths(dfa, symbols)
    terms = np.empty((k, length + 1))
    remaining = length - 1 - np.arange(length)
    terms[:, :length] = weights[paths[:, :length]] + beta[remaining[None, :], paths[:, 1:]]
    terms[:, length] = weights[paths[:, length]]
    total = np.cumsum(terms, axis=1)[:, -1]  # left to right, as FLaRe's `log_probability +=`
    return total - math.log(n_lengths) - beta[length, dfa.start]


def _member_lengths(sets: Sequence[LabeledSet], dfa, split_lengths: Sequence[int] | None) -> int:
    """How many lengths the split draws members from: those of `split_lengths` that have a member
    (FLaRe's `valid_lengths`), by default the lengths of the sets that hold a positive."""
    if split_lengths is None:
        return len({labeled.length for labeled in sets if labeled.labels.any()})
    distinct = np.array(sorted(set(int(n) for n in split_lengths)), dtype=np.int64)
    if not distinct.size:
        return 0
    return int(count_table(dfa, ACCEPTED, int(distinct.max())).nonempty(distinct).sum())


def log_probability_lines(labeled: LabeledSet, dfa, distribution: str, n_lengths: int) -> list[str]:
    """log-probabilities.txt lines for the positives of `labeled` (one length):

    * uniform: the natural log of the positive's probability under the split's distribution,
      uniform over the split's lengths with members, then uniform among the members of that length:
      -log(#lengths) - log|L ∩ Σⁿ| (exact counts);
    * flare: what FLaRe's sampler writes (`flare_log_probabilities`)."""
    positives = labeled.symbols[labeled.labels]
    if not len(positives):
        return []
    if distribution == DEFAULT_DISTRIBUTION:
        value = -math.log(n_lengths) - math.log(count_strings(dfa, labeled.length))
        return [repr(value)] * len(positives)
    return [repr(float(value)) for value in flare_log_probabilities(dfa, positives, n_lengths)]


def _flare_lines(labeled: LabeledSet, tokens: np.ndarray) -> list[str]:
    if labeled.length == 0:
        return [""] * len(labeled)
    return [" ".join(row) for row in tokens[labeled.symbols].tolist()]


def _flare_rows(sets: Sequence[LabeledSet], dfa, next_symbols: bool, distribution: str, n_lengths: int):
    """Per set, the lines of each FLaRe file (generated set by set, so that a large split is
    streamed to disk rather than held as text)."""
    tokens = np.array(dfa.alphabet, dtype=object)
    fragments = np.array(_next_symbol_fragments(dfa), dtype=object) if next_symbols else None
    for labeled in sets:
        rows = {
            FLARE_STRINGS: _flare_lines(labeled, tokens),
            FLARE_LABELS: ["1" if label else "0" for label in labeled.labels.tolist()],
            # One line per negative: near-misses are one substitution away from a positive.
            FLARE_NUM_EDITS: ["1" if flag else "" for flag in labeled.near_miss[~labeled.labels].tolist()],
            FLARE_LOG_PROBABILITIES: log_probability_lines(labeled, dfa, distribution, n_lengths),
        }
        if fragments is not None and labeled.labels.any():
            paths = state_paths(dfa, labeled.symbols[labeled.labels])
            rows[FLARE_NEXT_SYMBOLS] = ["[" + ",".join(row) + "]" for row in fragments[paths].tolist()]
        yield rows


def write_flare_split(
    directory: str | Path,
    sets: Sequence[LabeledSet],
    dfa,
    *,
    next_symbols: bool = True,
    distribution: str = DEFAULT_DISTRIBUTION,
    split_lengths: Sequence[int] | None = None,
) -> list[Path]:
    """Write `sets` (strings of `dfa`'s language, e.g. from `test_sets`) as one FLaRe split folder.

    Files: main.tok, labels.txt, num-edits.txt (near-misses are one substitution from a positive:
    "1"; uniform negatives: empty), log-probabilities.txt (under `distribution`, the one the
    positives were drawn from; `split_lengths` are the lengths the split draws from, by default
    those of the sets) and, unless next_symbols=False, next-symbols.jsonl. Rows are in the sets'
    order (`StringFile.runs()` keeps a file's order). Returns the paths written."""
    check_flare_symbols(dfa.alphabet)
    directory = Path(directory)
    n_lengths = _member_lengths(sets, dfa, split_lengths)
    names = [FLARE_STRINGS, FLARE_LABELS, FLARE_NUM_EDITS, FLARE_LOG_PROBABILITIES] + (
        [FLARE_NEXT_SYMBOLS] if next_symbols else []
    )
    try:
        # All files go into a temporary folder that replaces the split at once: a split never pairs
        # the strings of one sampling with the labels of another (a kill between renames did).
        with atomic_folder(directory, "the FLaRe split", FLARE_FILES) as folder:
            handles = [open(folder / name, "w", encoding="utf-8", newline="\n") for name in names]
            try:
                for rows in _flare_rows(sets, dfa, next_symbols, distribution, n_lengths):
                    for name, handle in zip(names, handles):
                        for line in rows.get(name, ()):
                            handle.write(line)
                            handle.write("\n")
            finally:
                for handle in handles:
                    handle.close()
    except OSError as error:
        raise FormalRopeError(f"cannot write the FLaRe split {str(directory)!r}: {error.strerror or error}") from None
    return [directory / name for name in names]


# --------------------------------------------------------------- dataset-format protocol (registry)
def check_request(alphabet: Sequence[str], lengths: Sequence[int]) -> None:
    """What FLaRe cannot hold, checked before sampling: symbols with whitespace (any length is fine)."""
    check_flare_symbols(alphabet)


def write(out: Path, sets: Sequence[LabeledSet], dfa, options: WriteOptions) -> list[Path]:
    return write_flare_split(out, sets, dfa, next_symbols=options.next_symbols, distribution=options.distribution,
                             split_lengths=options.split_lengths)


read = read_flare_split
locate = locate_flare
read_words = read_flare_words
