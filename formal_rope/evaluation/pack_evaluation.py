"""Length generalisation of a trained pack on its configs' seeded test sets: per-length accuracy,
N* and NNCH's score of every run, all runs in the same forward passes (`length_generalization`
does the passes; this module picks the sets and reports progress)."""

from __future__ import annotations

import numpy as np

from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.length_generalization import EVAL_MODES, Evaluation, evaluate_pack_sets, passed
from formal_rope.progress import TrainingProgress
from formal_rope.run_config.config import RunConfig
from formal_rope.training.data import language_key, run_data
from formal_rope.training.model import Classifier


def evaluate_pack(
    model: Classifier, configs, data, *, report=None, device="cpu", modes=None, threads=None
) -> list[Evaluation]:
    """Per-length accuracy, N* and NNCH's score of every run of `model` on the seeded test sets of its
    config (and NNCH's uniform strings), all runs of one language in the same forward passes (they
    share their test sets: the first such run's; the runs of each language of a mixed-language pack
    are evaluated apart, each group cut out of the pack with `Classifier.select_runs`).

    `modes` overrides each config's eval_mode. A run in nstar mode stops costing compute at its
    first imperfect length. threads(): the torch threads of each length's passes (None: torch's
    setting; the results do not depend on it, `length_generalization`).
    """
    configs = list(configs)
    modes = list(modes) if modes is not None else [c.eval_mode for c in configs]
    groups: dict[tuple, list[int]] = {}
    for run, config in enumerate(configs):
        groups.setdefault(language_key(config), []).append(run)
    if len(groups) > 1:  # a mixed-language pack: each language's runs on their own test sets
        evaluations: list = [None] * len(configs)
        for members in groups.values():
            found = evaluate_pack(model.select_runs(members), [configs[r] for r in members], [data[r] for r in members],
                                  report=report, device=device, modes=[modes[r] for r in members], threads=threads)
            for run, evaluation in zip(members, found):
                evaluations[run] = evaluation
        return evaluations
    total = len(configs[0].tested_lengths())
    seen: dict = {"lengths": set(), "n_star": [0] * len(configs), "perfect": [True] * len(configs)}

    def on_length(run: int, result) -> None:
        if seen["perfect"][run] and passed(result):
            seen["n_star"][run] = result.length
        else:
            seen["perfect"][run] = False
        if result.length not in seen["lengths"]:
            seen["lengths"].add(result.length)
            if report is not None:
                report(
                    TrainingProgress(
                        "eval", len(seen["lengths"]), total, None, result.accuracy,
                        {"length": result.length, "n_star": max(seen["n_star"])},
                    )
                )

    return evaluate_pack_sets(
        model, data[0].test_sets(), decode=data[0].decode, modes=modes, device=device, on_length=on_length,
        uniform_sets=data[0].nnch_set, threads=threads,
    )


def evaluate_model(
    model: Classifier, config: RunConfig, dfa, *, report=None, device="cpu", mode: str | None = None
) -> Evaluation:
    """Per-length accuracy and N* of a single-run `model` on the seeded test sets of `config`
    (lengths test_min..test_max).

    The sets depend only on `dfa`, `config.eval_seed`, `n_per_length`, `test_near_miss_fraction` and
    `nnch_samples`; `mode` overrides `config.eval_mode`.
    """
    if mode is not None and mode not in EVAL_MODES:
        raise FormalRopeError(f"unknown eval mode {mode!r}; expected one of {', '.join(EVAL_MODES)}")
    return evaluate_pack(
        model, [config], [run_data(config, dfa)], report=report, device=device, modes=[mode or config.eval_mode]
    )[0]


def first_failing_length(evaluation: Evaluation) -> int | None:
    """The shortest tested length the sampled evaluation did not pass: a misclassified string, or a
    class that exists there with no test string (either ends its N*)."""
    return next((result.length for result in evaluation.per_length if not passed(result)), None)


def tested_position(config: RunConfig, length: int) -> int:
    """How many of the config's test lengths are at most `length` (a progress bar's count)."""
    tested = config.tested_lengths()
    if isinstance(tested, range):
        return max(0, min(len(tested), length - tested.start + 1))
    return int(np.searchsorted(np.asarray(tested), length, side="right"))
