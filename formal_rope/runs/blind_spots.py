"""What a run's evaluation might not see: the theory's families tested on the trained model, and
which transitions of the minimal DFA its test strings took.

* `family_test`: for a run the theory says cannot be right at every length (predicted
  not_expressible), the witness family of its language against its encoding's class
  (`theory.families`: LTL[P] for NoPE, LTL[P,MOD_K] for periods of lcm K) is scored at every m up to
  the run's longest tested length. `refuted_at` is the shortest length of a misclassified family
  string (None: the model was right on every one of them).
* `test_coverage`: the transitions its test sets take (`sampling.coverage.CoverageTally`), of those
  some string of a tested length takes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formal_rope.evaluation.length_generalization import predict_pack
from formal_rope.run_config.config import RunConfig
from formal_rope.sampling.coverage import CoverageTally, TransitionCoverage
from formal_rope.theory import NOT_EXPRESSIBLE
from formal_rope.theory.families import family_modulus, family_strings, witness_family
from formal_rope.theory.runs import run_prediction
from formal_rope.training.data import test_length_blocks


@dataclass(frozen=True)
class FamilyTest:
    """A run scored on its language's witness family: the family (as text), the strings scored, the
    shortest length where one was misclassified (None: none was) and that string."""

    family: str
    tried: int
    refuted_at: int | None
    failure: str | None


def family_for(config: RunConfig, dfa, resolved_periods=None):
    """The witness family that must defeat the run (`theory.families.WitnessFamily`), or None when
    the theory does not say that it cannot be right at every length."""
    if dfa is None or run_prediction(config, resolved_periods).verdict != NOT_EXPRESSIBLE:
        return None
    periodic = config.periodic_encoding() is not None
    return witness_family(dfa, family_modulus(resolved_periods or config.periods) if periodic else 1)


def score_family(decide, family, dfa, max_length: int) -> FamilyTest:
    """Score a classifier on `family`'s strings up to `max_length`, length by length: decide(symbols
    (n, L)) -> bool (n,), accept. Stops after the shortest length with a misclassified string."""
    listed = family_strings(family, dfa, int(max_length))
    lengths = listed.lengths
    refuted_at, failure = None, None
    for length in sorted(set(lengths.tolist())):
        rows = np.flatnonzero(lengths == length)
        symbols = np.array([listed.strings[row] for row in rows], dtype=np.int64).reshape(len(rows), length)
        wrong = np.flatnonzero(np.asarray(decide(symbols), dtype=bool) != listed.labels[rows])
        if wrong.size:
            refuted_at, failure = int(length), family.word(listed.strings[rows[wrong[0]]])
            break  # the shortest failing length is known; longer strings cannot change it
    tried = int(np.sum(lengths <= refuted_at)) if refuted_at is not None else len(lengths)
    return FamilyTest(family.describe(), tried, refuted_at, failure)


def family_test(model, config: RunConfig, dfa, resolved_periods=None, *, device="cpu", threads=None,
                max_length: int | None = None) -> FamilyTest | None:
    """Score a single-run `model` on the family of `family_for` (None when there is none), every
    string up to `max_length` (default the run's longest tested length)."""
    family = family_for(config, dfa, resolved_periods)
    if family is None:
        return None
    longest = int(max_length if max_length is not None else max(config.tested_lengths()))

    def decide(symbols):
        return predict_pack(model, symbols, device=device, threads=threads)[0]

    return score_family(decide, family, dfa, longest)


def test_coverage(config: RunConfig, dfa) -> TransitionCoverage | None:
    """The transitions of `dfa` the run's sampled test sets take (None for a run on data files)."""
    if dfa is None or config.data is not None:
        return None
    tally = CoverageTally(dfa)
    for _ in tally.tap(test_length_blocks(dfa, config)):
        pass
    return tally.result(config.tested_lengths())


test_coverage.__test__ = False  # type: ignore[attr-defined]
