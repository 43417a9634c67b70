"""A pack of runs from configs to results: train (`training.train`), evaluate (`evaluation.pack_evaluation`),
search for misclassified strings (`runs.search`, `--eval worst-case`), fall back to one run at a
time when the pack fails, and assemble one RunResult per run. A single run is a pack of one
(`run_training`).

Outcomes per run: "ok"; "diverged" when its loss becomes NaN/inf (that run is frozen, the others go
on; evaluation is skipped: n_star 0, accuracy NaN); "failed" when training or evaluation raises
(n_star None, accuracy NaN: nothing was measured). When a pack of several runs raises, each of its
runs is trained again alone, so each records its own outcome and a healthy run ends as it does in a
pack of one. Bad input (unknown PE or language, base <= 0, ...) raises FormalRopeError before any
work, so the CLI can report it. Given the same pack composition and seeds on CPU, two runs produce
bit-identical losses, weights and results.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.engine import SearchSettings, WorstCase
from formal_rope.evaluation.length_generalization import Evaluation
from formal_rope.evaluation.pack_evaluation import evaluate_pack
from formal_rope.progress import ProgressArg, RunProgress
from formal_rope.run_config.config import RunConfig
from formal_rope.runs.blind_spots import family_test, test_coverage
from formal_rope.runs.search import search_pack, with_worst_case
from formal_rope.scheduling.packs import check_packable, pack_key
from formal_rope.scheduling.workload import check_workload
from formal_rope.storage.checkpoints import check_checkpoint_path, save_checkpoint
from formal_rope.storage.curves import CurveOptions
from formal_rope.storage.provenance import software_versions, source_commit
from formal_rope.storage.tensorboard_log import PackLog, open_pack_log
from formal_rope.storage.training_state import StateOptions, TrainingStateError, check_state_dir, open_state_store
from formal_rope.training.context import run_warnings
from formal_rope.training.init_from import InitFromError, load_init_weights
from formal_rope.training.model import Classifier
from formal_rope.training.resolve import PackIngredients, pack_ingredients
from formal_rope.training.run_result import RunResult
from formal_rope.training.setup import build_pack, check_device
from formal_rope.training.train import learning_rate, train_pack


@dataclass(frozen=True)
class PackOptions:
    """How a pack is run (the same for each of its runs).

    progress: True draws a Rich progress bar, False is silent, a callable receives TrainingProgress.
    device: where the pack trains. threads: torch intra-op threads on CPU (1 by default: small models
    run fastest single-threaded and results are reproducible; None leaves torch's setting alone).
    The thread count is part of a run's numbers (torch splits a full reduction, such as the loss's
    mean or a weight gradient's sum over the batch, into one partial sum per thread), so a caller
    whose runs alone get other threads than its packs (a sweep: `scheduling.packs.default_threads`) passes
    threads_alone: the threads of each run trained again alone after the pack raised (None:
    `threads`); such a run ends bit-identical to the same run trained alone.
    state: save the training state every `state.every` steps and resume from it (deleted at the end
    unless `state.keep`; `train --resume`). on_step(step, losses) sees every step's per-run losses.
    worst_case: also search each evaluated run for misclassified strings (`runs.search`; the
    result's n_star_worst, worst_failure, worst_failure_margin, worst_strings_tried).
    init_dir: the folder a run id in a run's `init_from` is looked up in (ID.zip; a path needs none):
    such a run starts from that checkpoint's weights (`training.init_from`; an `InitFromError`,
    exit 2, when they do not fit, raised like a bad saved state rather than recorded).
    eval_threads(): the torch threads of the evaluation's (and the search's) passes, asked before
    each (None: `threads`). Evaluation gives the same bits at any thread count
    (`length_generalization`), so a sweep worker uses the cores of workers that have finished
    (`sweeps.backends.cores`); training keeps `threads`, part of its numbers.
    curve_options: each run's training curve (`storage.curves`: every log_every steps, the result's
    `curve`) and TensorBoard event files (None or log_every 0: no curve); neither changes a result.
    """

    progress: ProgressArg = False
    device: str | torch.device = "cpu"
    threads: int | None = 1
    threads_alone: int | None = None
    state: StateOptions | None = None
    on_step: Callable[[int, list[float]], None] | None = None
    worst_case: SearchSettings | None = None
    init_dir: str | Path | None = None
    eval_threads: Callable[[], int] | None = None
    curve_options: CurveOptions | None = CurveOptions()


@dataclass(frozen=True)
class _Measured:
    """What a pack's computation left: its model (None when it was not built), per run its training
    outcome (status, final loss, steps done), evaluation, search and notes on its initial weights,
    and the error that stopped it (None when none did)."""

    model: Classifier | None
    outcomes: list
    evaluations: list
    searches: list
    init_notes: list
    error: str | None = None
    log: PackLog | None = None  # the runs' training curves (None: not logged)
    blind_spots: list = None  # per run (FamilyTest | None, TransitionCoverage | None), runs.blind_spots


def run_pack(runs, options: PackOptions | None = None, *, checkpoint_paths=None,
             **overrides) -> tuple[list[RunResult], Classifier | None]:
    """Train, evaluate and (optionally) checkpoint a pack of compatible runs in one computation.

    runs: RunConfigs, resolved here, or ResolvedRuns (`training.resolve.resolve_runs`: resolved
    once by the caller, `train` and a sweep's grid check, and not again).

    Returns (one RunResult per config, in order; the pack's model, or None when the pack raised and
    its runs were trained again one by one, each with its own outcome). configs must share what
    `scheduling.packs.check_packable` names (language, architecture, steps, batch size, training and test
    lengths); each keeps its seed, learning rate and schedule, base or periods, weight decay,
    clipping norm, near-miss share and eval mode. options: `PackOptions` (default: silent, CPU, one
    thread); `overrides` replace its fields by name (`run_pack(configs, progress=True, state=...)`).
    checkpoint_paths: one path (or None) per config.
    """
    options = replace(options or PackOptions(), **overrides)
    runs = list(runs)
    configs = [run if isinstance(run, RunConfig) else run.config for run in runs]
    paths, ingredients = _prepare(runs, configs, options, checkpoint_paths)
    if options.threads is not None and str(options.device).startswith("cpu"):
        torch.set_num_threads(options.threads)
    key = pack_key(configs)
    started = time.perf_counter()
    measured = _measure(configs, ingredients, key, options)
    if measured.error is not None and len(configs) > 1:
        # The pack's half-trained weights are no run's result: each run is trained again alone.
        alone = options.threads if options.threads_alone is None else options.threads_alone
        options = replace(options, threads=alone, threads_alone=None)
        measured = None  # free the pack's model first
        return _run_alone(ingredients, paths, key, options), None
    results = _pack_results(configs, measured, ingredients, key, wall=time.perf_counter() - started)
    if options.worst_case is not None:
        results = [with_worst_case(result, found) for result, found in zip(results, measured.searches)]
    results = [with_blind_spots(result, found) for result, found in zip(results, measured.blind_spots)]
    results = [replace(result, warnings=(*result.warnings, *notes)) if notes else result
               for result, notes in zip(results, measured.init_notes)]
    if measured.log is not None:  # each run's curve on its result (and in its checkpoint below)
        results = measured.log.attach(results)
    if measured.model is not None:
        for run, path in enumerate(paths):
            if path is not None and not (results[run].status == "failed" and results[run].steps_done == 0):
                # (a run that failed before its first step has only its initialisation to save)
                single = measured.model if len(configs) == 1 else measured.model.select_runs([run])
                save_checkpoint(path, single, configs[run], results[run])
    if options.state is not None and not options.state.keep and measured.error is None:
        open_state_store(options.state.uri).delete(key)
    return results, measured.model


def check_pack(configs, device: str | torch.device) -> None:
    """Raise FormalRopeError for any run of a pack that cannot run here: one that cannot finish or
    fit (`scheduling.workload.check_workload`), a device or attention implementation this machine
    lacks (`training.setup.check_device`), runs that cannot share a pack
    (`scheduling.packs.check_packable`). Each config checked its own fields when it was built
    (`run_config.config.check_config`)."""
    for config in configs:
        check_workload(config)
        check_device(config, device)
    check_packable(configs)


def _prepare(runs: list, configs: list[RunConfig], options: PackOptions,
             checkpoint_paths) -> tuple[list, PackIngredients]:
    """The checks that come before any work (a user's error, never a failed run: FormalRopeError),
    then the checkpoint path of each run and the pack's ingredients (its runs resolved: DFA, data,
    periods, the checkpoints they continue from)."""
    if not configs:
        raise FormalRopeError("run_pack needs at least one run")
    check_pack(configs, options.device)
    paths = list(checkpoint_paths) if checkpoint_paths is not None else [None] * len(configs)
    if len(paths) != len(configs):
        raise FormalRopeError(f"need one checkpoint path (or None) per run: {len(configs)} runs, {len(paths)} paths")
    for path in paths:
        if path is not None:
            check_checkpoint_path(path)  # before training: an unwritable path must not cost a run
    if options.state is not None:
        check_state_dir(options.state.uri)
    # A language without balanced batches, unreadable or mislabelled data files, an unusable
    # checkpoint to continue from are the user's error, not a failed run (and cost no run).
    ingredients = pack_ingredients(runs, options.init_dir)
    if options.worst_case is not None and any(dfa is None for dfa in ingredients.dfas):
        raise FormalRopeError(f"--eval worst-case labels its strings with the language's DFA, and "
                              f"{configs[0].language} has none (data files without a language): give --lang too")
    return paths, ingredients


def _measure(configs: list[RunConfig], ingredients: PackIngredients, key: str, options: PackOptions) -> _Measured:
    """Build, train, evaluate and search the pack; an exception of its computation is recorded (a
    sweep must survive one bad pack), one of the user's input (a saved state or initial checkpoint
    that cannot be used) raised."""
    runs = len(configs)
    first = configs[0]
    encodings = "+".join(dict.fromkeys(config.pe for config in configs))
    label = f"{first.pe} {first.language}" if runs == 1 else f"pack of {runs} {encodings} {first.language}"
    reporter = RunProgress(options.progress, label)
    model: Classifier | None = None
    outcomes: list[tuple[str, float | None, int]] = [("failed", None, 0)] * runs
    init_notes: list[list[str]] = [[] for _ in configs]
    log = open_pack_log(configs, options.curve_options, learning_rate)
    failed = False
    try:
        model = build_pack(configs, ingredients.symbol_counts, ingredients.periods).to(options.device)
        if any(config.init_from is not None for config in configs):
            init_notes = load_init_weights(model, configs, ingredients.alphabets, sources=ingredients.init_sources)
        reporter.stage("train", first.steps)
        outcomes = train_pack(model, configs, ingredients.data, report=reporter.update, device=options.device,
                              state=options.state, state_key=key, on_step=options.on_step,
                              curves=None if log is None else log.recorder, dfas=ingredients.dfas)
        evaluations, searches = _evaluate(model, configs, ingredients, outcomes, options, reporter)
        spots = _blind_spots(model, configs, ingredients, outcomes, options)
        return _Measured(model, outcomes, evaluations, searches, init_notes, log=log, blind_spots=spots)
    except (TrainingStateError, InitFromError):
        raise  # a saved state or init checkpoint that cannot be used is the user's input, not this pack's failure
    except Exception as exception:  # recorded, not raised: a sweep must survive one bad pack
        # The exception belongs to the pack's computation, not to a known run: with pack-mates it may
        # come from any one of them (or from the pack's size), so it is no run's result; each run is
        # then trained alone (run_pack) and gets its own outcome.
        failed = runs > 1  # its runs train again alone, each with its own log
        return _Measured(model, [("failed", outcome[1], outcome[2]) for outcome in outcomes], [None] * runs,
                         [None] * runs, init_notes, error=f"{type(exception).__name__}: {exception}",
                         log=None if failed else log, blind_spots=[(None, None)] * runs)
    finally:
        reporter.close()
        if log is not None:  # logged points on disk (a pack that raised: closed, its runs log again alone)
            log.flush(close=failed)


def _evaluate(model: Classifier, configs, ingredients: PackIngredients, outcomes, options: PackOptions,
              reporter: RunProgress) -> tuple[list[Evaluation | None], list[WorstCase | None]]:
    """Per run: its evaluation and its worst-case search (None for a run that did not train to the
    end, and for every search unless `options.worst_case`)."""
    runs = len(configs)
    evaluations: list[Evaluation | None] = [None] * runs
    searches: list[WorstCase | None] = [None] * runs
    ok = [run for run in range(runs) if outcomes[run][0] == "ok"]
    if not ok:
        return evaluations, searches
    tested = len(configs[0].tested_lengths())
    reporter.stage("eval", tested)
    evaluated = model if len(ok) == runs else model.select_runs(ok)
    ok_configs, ok_data = [configs[r] for r in ok], [ingredients.data[r] for r in ok]
    for run, evaluation in zip(ok, evaluate_pack(evaluated, ok_configs, ok_data, report=reporter.update,
                                                 device=options.device, threads=options.eval_threads)):
        evaluations[run] = evaluation
    if options.worst_case is not None:
        reporter.stage("worst case", tested)
        for run, found in zip(ok, search_pack(
            evaluated, ok_configs, ok_data, [ingredients.dfas[r] for r in ok], [evaluations[r] for r in ok],
            settings=options.worst_case, report=reporter.update, device=options.device, threads=options.eval_threads,
        )):
            searches[run] = found
    return evaluations, searches


def _blind_spots(model: Classifier, configs, ingredients: PackIngredients, outcomes, options: PackOptions) -> list:
    """Per run (its family test, its test sets' transition coverage), `runs.blind_spots`; (None,
    None) for a run that did not train to the end. Runs sharing test sets share one count."""
    found: list = [(None, None)] * len(configs)
    counted: dict = {}
    for run, config in enumerate(configs):
        if outcomes[run][0] != "ok":
            continue
        dfa = ingredients.dfas[run]
        single = model if model.runs == 1 else model.select_runs([run])
        tested = family_test(single, config, dfa, ingredients.periods[run], device=options.device,
                             threads=options.eval_threads)
        key = (config.language, config.alphabet, config.eval_seed, config.n_per_length, config.test_near_miss_fraction,
               config.sampling, config.test_min_length, config.test_max_length, config.test_lengths)
        if key not in counted:
            counted[key] = test_coverage(config, dfa)
        found[run] = (tested, counted[key])
    return found


def with_blind_spots(result: RunResult, found) -> RunResult:
    """`result` with its family test and transition coverage (`_blind_spots`)."""
    tested, coverage = found if found is not None else (None, None)
    changes = {}
    if tested is not None:
        changes.update(family=tested.family, family_strings_tried=tested.tried, refuted_at=tested.refuted_at,
                       family_failure=tested.failure)
    if coverage is not None:
        changes.update(test_transitions_covered=coverage.covered, test_transitions=coverage.total)
    return replace(result, **changes) if changes else result


def _pack_results(configs, measured: _Measured, ingredients: PackIngredients, key: str, *,
                  wall: float) -> list[RunResult]:
    """One RunResult per run of a pack that did not raise as a pack: its outcome, its evaluation (None
    when it was not evaluated) and the pack's provenance."""
    versions, commit = software_versions(), source_commit()
    results = []
    for run, config in enumerate(configs):
        status, final_loss, steps_done = measured.outcomes[run]
        evaluation = measured.evaluations[run]
        results.append(
            RunResult(
                run_id=config.run_id(),
                config=config,
                status=status,
                # A diverged run was measured (it stopped learning: N* 0, SPEC §8); a failed run was
                # not, and an N* of 0 would count as a measurement in every statistic: None.
                n_star=evaluation.n_star if evaluation else (0 if status == "diverged" else None),
                accuracy=evaluation.accuracy if evaluation else math.nan,
                per_length=evaluation.per_length if evaluation else (),
                first_failure=evaluation.first_failure if evaluation else None,
                final_loss=final_loss,
                steps_done=steps_done,
                wall_s=wall,
                versions=versions,
                commit=commit,
                error=measured.error,
                alphabet=ingredients.alphabets[run],
                resolved_periods=ingredients.periods[run],
                eval_complete=evaluation.complete if evaluation else False,
                nnch_accuracy=evaluation.nnch_accuracy if evaluation else math.nan,
                pack_id=key,
                pack_size=len(configs),
                warnings=tuple(run_warnings(config)),
            )
        )
    return results


def _run_alone(ingredients: PackIngredients, paths, key: str, options: PackOptions) -> list[RunResult]:
    """After a pack raised: train each of its runs as a pack of one, so that every run gets its own
    outcome (a healthy run ends exactly as `run_pack([config])` does; the run that raised records its
    own error). The pack's saved training state is dropped (unless `state.keep`): the runs no longer
    train as that pack. on_step still sees one loss per run of the pack (NaN for the others).
    Each run keeps its resolution (DFA, periods, data, checked init checkpoint: not resolved again)."""
    runs = len(ingredients.runs)
    results = []
    for run, (resolved, path) in enumerate(zip(ingredients.runs, paths)):
        if resolved.pending_init:  # checked now: a pack of one does not check it again
            resolved = replace(resolved, init_source=ingredients.init_sources[run])
        step = None
        if options.on_step is not None:
            def step(index, losses, run=run):
                options.on_step(index, [losses[0] if other == run else math.nan for other in range(runs)])
        (result,), _ = run_pack([resolved], replace(options, on_step=step), checkpoint_paths=[path])
        results.append(result)
    if options.state is not None and not options.state.keep:
        open_state_store(options.state.uri).delete(key)
    return results


def run_training(config, options: PackOptions | None = None, *, checkpoint_path: str | Path | None = None,
                 **overrides) -> tuple[RunResult, Classifier | None]:
    """Train, evaluate and (optionally) checkpoint one run (a pack of one). Returns (result, model).

    config: a RunConfig, or its ResolvedRun (`training.resolve`; `train` resolves it first).

    options: `PackOptions`, with a progress bar by default (`PackOptions(progress=True)`);
    `overrides` replace its fields by name (`run_training(config, progress=False, state=...)`).
    checkpoint_path: where the trained model is saved (a .zip; None saves nothing).
    The model is None only when the run failed before it was built.
    """
    options = replace(options or PackOptions(progress=True), **overrides)
    results, model = run_pack([config], options, checkpoint_paths=[checkpoint_path])
    return results[0], model
