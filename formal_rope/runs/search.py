"""The worst-case search of a trained pack (`train --eval worst-case`): each evaluated run searched
for misclassified strings (`formal_rope.evaluation`), and its result folded into the run's record."""

from __future__ import annotations

from dataclasses import replace

from formal_rope.evaluation.engine import SearchSettings, WorstCase
from formal_rope.evaluation.models import worst_case_pack
from formal_rope.evaluation.pack_evaluation import first_failing_length, tested_position
from formal_rope.progress import TrainingProgress
from formal_rope.training.model import Classifier
from formal_rope.training.run_result import RunResult


def search_pack(
    model: Classifier, configs, data, dfas, evaluations, *, settings: SearchSettings, report=None, device="cpu",
    threads=None,
) -> list[WorstCase]:
    """The worst-case search (`formal_rope.evaluation`) of every run of an evaluated pack, run by
    run so that a run's search depends on its own weights only: it starts from the run's sampled
    test sets and stops at its first sampled failure (its N* cannot be beaten there), or earlier at
    the first failure it finds. dfas: each run's language's DFA (the strings it labels; one DFA
    for every run is also taken). threads: as for `evaluation.pack_evaluation.evaluate_pack`."""
    configs = list(configs)
    dfas = list(dfas) if isinstance(dfas, (list, tuple)) else [dfas] * len(configs)
    total = len(configs[0].tested_lengths())
    searches = []
    for run, evaluation in enumerate(evaluations):
        seen = {"n_star_worst": 0, "perfect": True, "tried": 0}

        def on_length(_run: int, entry, seen=seen) -> None:
            seen["tried"] += entry.tried
            if seen["perfect"] and entry.passed:
                seen["n_star_worst"] = entry.length
            else:
                seen["perfect"] = False
            if report is not None:
                report(TrainingProgress("search", tested_position(configs[0], entry.length), total, None, None,
                                        {"length": entry.length, "n_star_worst": seen["n_star_worst"],
                                         "tried": seen["tried"]}))

        single = model if model.runs == 1 else model.select_runs([run])
        searches.append(worst_case_pack(
            model=single, dfa=dfas[run], start_sets=data[run].test_sets(), settings=settings,
            last_lengths=[first_failing_length(evaluation)], device=device, on_length=on_length, threads=threads,
        )[0])
    return searches


def with_worst_case(result: RunResult, found: WorstCase | None) -> RunResult:
    """`result` with its worst-case fields: from the search `found` (never above the sampled N*: the
    search starts from the same test sets, and a failure there counts even if the search's own pass
    rounds it the other way), N* 0 for a diverged run (as its N*), nothing for a failed one."""
    if found is None:
        if result.status == "diverged":
            return replace(result, n_star_worst=0, worst_strings_tried=0)
        return result
    n_star_worst = found.n_star_worst if result.n_star is None else min(found.n_star_worst, result.n_star)
    sampled_first = found.failure_length is None or n_star_worst < found.n_star_worst
    return replace(
        result,
        n_star_worst=n_star_worst,
        worst_failure=result.first_failure if sampled_first else found.failure,
        worst_failure_margin=None if sampled_first else found.failure_margin,
        worst_strings_tried=found.tried,
    )
