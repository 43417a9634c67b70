"""NNCH's score: Delétang et al.'s length-generalisation number ("Neural Networks and the Chomsky
Hierarchy", ICLR 2023), computed as their reference code computes it.

DeepMind's `experiments/range_evaluation.py` (google-deepmind/neural_networks_chomsky_hierarchy)
measures, for every length 1..max_test_length, the accuracy on `range_test_total_batch_size` (512)
strings from the task's `sample_batch`, which for the regular tasks draws every symbol independently
and uniformly (`jrandom.randint`) and labels the string by the task; the per-length accuracy is the
mean over equal sub-batches (64), i.e. over all 512 strings. `experiments/example.py` then prints
`np.mean(accuracies[sequence_length + 1:])`: entry i holds length i + 1, so after training on lengths
up to 40 the score averages lengths 42..max_test_length, leaving out 41, the first length past
training.

Here the same: per tested length L > train_max_length + 1 (`training.data.is_nnch_length`),
`nnch_samples` strings uniform over Σ^L labelled by the language's DFA (`training.data.nnch_set`, a
run's data like its test sets; evaluated in the same forward passes as the balanced test set of L),
and the score is the plain mean of those per-length
accuracies (`nnch_score`). It differs from our `accuracy`, the mean over *balanced* sets (half
positives, negatives half near-misses): on uniform strings most languages' positives are rare at long
lengths, so for (ab)* a model that always rejects scores about 1.0 here and 0.5 there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from formal_rope.training.run_result import LengthResult

NNCH_TOTAL_BATCH = 512  # strings per length in NNCH's range evaluation (range_test_total_batch_size)


def nnch_score(per_length: Iterable[LengthResult]) -> float:
    """The mean of the per-length accuracies on uniform strings (the lengths that have any: NNCH's
    lengths; np.mean, as example.py); NaN when no length has them."""
    accuracies = [result.nnch_accuracy for result in per_length if result.nnch_n]
    return float(np.mean(accuracies)) if accuracies else math.nan
