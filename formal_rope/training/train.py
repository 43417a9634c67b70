"""Train one pack: the optimisation loop, read top to bottom (nanoGPT's train.py is the model).

A pack is R runs that share an architecture and a training shape (`formal_rope.scheduling.packs`)
trained as one computation: every weight has a leading run axis, each step draws each run's own
batch from its own generator, sums the per-run losses (so each run gets exactly its own gradient),
clips each run's gradient norm and applies AdamW with each run's own learning rate. Given the same
pack composition and seeds on CPU, two runs produce bit-identical losses and weights; a run's
initial weights and batches depend on its own seed only, never on its pack. With a state store
(`StateOptions`), the whole training state is saved every `every` steps (`storage.training_state.save_pack_state`)
and a restarted pack resumes bit-identically. A run whose loss becomes NaN/inf is "diverged": it is
frozen, the others go on.

Building the pack (`setup`), evaluating it (`evaluate`) and a whole run — train, evaluate, search,
fall back, results — (`formal_rope.runs`) live elsewhere.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from formal_rope.progress import TrainingProgress
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.objective import Objective, parse_objective
from formal_rope.storage.training_state import PackTrainingState, load_pack_state, open_state_store, save_pack_state
from formal_rope.training.data import run_data, training_batches
from formal_rope.training.layout import TokenLayout, ragged_layout
from formal_rope.training.model import Classifier
from formal_rope.training.objectives import (
    ObjectiveStep,
    ObjectiveTargets,
    check_objective_dfas,
    objective_step,
    objective_targets,
    resolve_objective,
)
from formal_rope.training.setup import make_optimizer


def learning_rate(config: RunConfig, step: int) -> float:
    """Linear warm-up for warmup_steps, then constant or cosine decay to 10% of lr."""
    if config.warmup_steps and step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    if config.lr_schedule == "cosine":
        span = max(1, config.steps - config.warmup_steps)
        fraction = min(1.0, (step - config.warmup_steps) / span)
        return config.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * fraction)))
    return config.lr


FINAL_OBJECTIVE = parse_objective("final")

STRINGS_PER_BUCKET = 16  # a step's strings (all runs) per length bucket, roughly
MIN_BUCKETS, MAX_BUCKETS = 4, 16


def step_buckets(strings: int) -> int:
    """How many length buckets a step of `strings` strings (all runs of a pack) is split into.

    Each bucket is one attention call over sequences of one padded width: more buckets pad less
    (less attention and less per-token work) but make more, smaller calls. About 16 strings per
    bucket, 4 to 16 buckets, was the fastest on CPU at quick and paper dims (bench/packed_training.py).
    """
    return max(MIN_BUCKETS, min(MAX_BUCKETS, strings // STRINGS_PER_BUCKET))


def bucket_widths(min_length: int, max_length: int, buckets: int = MIN_BUCKETS) -> tuple[int, ...]:
    """Token widths (length + bos + eos) of the length buckets a training step is split into: the
    strings of [min_length, max_length] cut into `buckets` equal length ranges, each padded to its
    own longest length instead of all to max_length. Attention costs T^2, so on lengths uniform in
    [0, 40] four buckets already do about half the attention work and two thirds of the rest."""
    span = max_length - min_length + 1
    count = max(1, min(buckets, span))
    tops = sorted({min_length + math.ceil(span * (b + 1) / count) - 1 for b in range(count)})
    return tuple(top + 2 for top in tops)


@dataclass(frozen=True, eq=False)
class PackInputs:
    """One training step's strings of every run: their token layout (`formal_rope.training.layout`:
    each run's strings back to back, attention per length bucket) and what the objective scores
    them against (`objectives.ObjectiveTargets`: the labels (R, B) in each run's own batch order,
    and what its position components read)."""

    layout: TokenLayout
    targets: ObjectiveTargets
    objective: Objective = FINAL_OBJECTIVE


def pack_inputs(batches, n_symbols, widths, device="cpu", objective: Objective = FINAL_OBJECTIVE,
                dfas=None) -> PackInputs:
    """The runs' batches (one TrainingBatch per run, equal sizes) as one step's inputs: strings in
    the length buckets of `widths`, no run padded to another's strings. n_symbols: the alphabet
    size of every run, or one per run (`Classifier.symbol_counts`). An objective that reads every
    prefix takes its targets from each run's DFA (`dfas`)."""
    lengths = np.stack([np.asarray(b.lengths, dtype=np.int64) for b in batches])  # (R, B)
    layout = ragged_layout([b.symbols for b in batches], lengths, n_symbols, widths, device)
    return PackInputs(layout, objective_targets(objective, batches, dfas, layout, device), objective)


def pack_step(model: Classifier, inputs: PackInputs) -> ObjectiveStep:
    """Per-run loss (R,) of the inputs' objective over each run's own batch (`final`: the mean
    cross-entropy at eos), its count of correct eos verdicts (R,) and each component's loss
    (`objectives.objective_step`): the one place the loop meets the objective."""
    return objective_step(model, inputs.objective, inputs.layout, inputs.targets)


def train_pack(
    model: Classifier,
    configs,
    data,
    *,
    report: Callable[[TrainingProgress], None] | None = None,
    device: str | torch.device = "cpu",
    log_every: int = 25,
    state=None,
    state_key: str | None = None,
    on_step: Callable[[int, list[float]], None] | None = None,
    curves=None,
    dfas=None,
) -> list[tuple[str, float | None, int]]:
    """Optimise every run of the pack in place. Returns per run (status "ok" | "diverged", final mean
    loss, steps done).

    data[r] is run r's RunData (its batches come from its own generator, seeded by its seed). A run
    whose loss turns NaN/inf is recorded diverged at that step and frozen; the others go on.
    state: StateOptions (save every state.every steps to state.uri under state_key, resume from there).
    on_step(step, losses) sees every step's per-run losses (NaN for frozen runs).
    curves: a `storage.curves.PackCurves` that records each run's training curve from the step's losses.
    dfas: per run, its language's DFA (the targets of an objective that reads every prefix:
    `objectives`); not needed for `final`.
    """
    configs = list(configs)
    runs = len(configs)
    steps = configs[0].steps
    batch_size = configs[0].batch_size
    widths = bucket_widths(configs[0].train_min_length, configs[0].train_max_length, step_buckets(runs * batch_size))
    n_symbols = model.symbol_counts  # each run's own token ids (a mixed-language pack)
    objective = resolve_objective(configs)
    dfas = list(dfas) if dfas is not None else [None] * runs
    check_objective_dfas(objective, dfas, configs[0].language)
    optimizer = make_optimizer(model, configs)
    max_norms = torch.tensor([float(c.grad_clip) for c in configs], dtype=torch.float64)
    store = None
    progress = None
    if state is not None:
        store = open_state_store(state.uri)
        progress = load_pack_state(store, state_key, configs, model, optimizer, curves)
    if progress is None:
        progress = PackTrainingState.fresh(configs)
    model.train()
    last_batches: list = [None] * runs  # a frozen run's last batch keeps the pack's shapes
    started = time.perf_counter()
    first_step = progress.step
    for step in range(progress.step, steps):
        active_runs = [r for r in range(runs) if progress.status[r] == "ok"]
        if not active_runs:
            break
        fresh = training_batches([data[r] for r in active_runs], [progress.rngs[r] for r in active_runs], batch_size)
        for run, batch in zip(active_runs, fresh):
            last_batches[run] = batch
        batches = list(last_batches)
        scored = pack_step(model, pack_inputs(batches, n_symbols, widths, device, objective, dfas))
        losses, correct = scored.loss, scored.correct
        loss_values, correct_values = torch.stack((losses.detach().double(), correct.double())).cpu().tolist()
        for run in active_runs:
            if not math.isfinite(loss_values[run]):
                progress.status[run] = "diverged"
                progress.steps_done[run] = step
                progress.final_loss[run] = loss_values[run]
        active = torch.tensor([status == "ok" for status in progress.status])
        if on_step is not None:
            on_step(step, [loss_values[r] if r in active_runs else math.nan for r in range(runs)])
        if curves is not None:  # from this step's losses: no extra forward pass
            curves.add(step, active_runs, loss_values, correct_values, progress.status)
        if not bool(active.any()):
            break
        optimizer.zero_grad()
        total = torch.where(active.to(device), losses, torch.zeros((), device=losses.device)).sum()
        optimizer.backward(total)
        optimizer.clip(torch.where(active, max_norms, torch.zeros_like(max_norms)))
        lrs = torch.tensor([learning_rate(c, step) for c in configs], dtype=torch.float64)
        optimizer.step(lrs, active)
        for run in range(runs):
            if progress.status[run] == "ok":
                progress.window_loss[run] += loss_values[run] * batch_size
                progress.window_correct[run] += int(correct_values[run])
                progress.window_count[run] += batch_size
        progress.step = step + 1
        if (step + 1) % log_every == 0 or step + 1 == steps:
            going = [r for r in range(runs) if progress.status[r] == "ok"]
            for run in going:
                progress.final_loss[run] = progress.window_loss[run] / progress.window_count[run]
            if report is not None and going:
                elapsed = time.perf_counter() - started
                report(
                    TrainingProgress(
                        "train", step + 1, steps, float(np.mean([progress.final_loss[r] for r in going])),
                        float(np.mean([progress.window_correct[r] / progress.window_count[r] for r in going])),
                        {
                            "steps_per_s": (step + 1 - first_step) / max(elapsed, 1e-9), "runs": runs,
                            "active": len(going),
                        },
                    )
                )
            for run in going:
                progress.window_loss[run], progress.window_correct[run], progress.window_count[run] = 0.0, 0, 0
        if store is not None and (step + 1) % state.every == 0 and step + 1 < steps:
            save_pack_state(store, state_key, configs, model, optimizer, progress, curves)
    for run in range(runs):
        if progress.status[run] == "ok":
            progress.steps_done[run] = steps
    return [(progress.status[r], progress.final_loss[r], progress.steps_done[r]) for r in range(runs)]


def train_model(
    model: Classifier,
    config: RunConfig,
    dfa,
    *,
    report: Callable[[TrainingProgress], None] | None = None,
    device: str | torch.device = "cpu",
    log_every: int = 25,
) -> tuple[str, float | None, int]:
    """Optimise a single-run model in place (a pack of one). Returns (status "ok" | "diverged", final
    mean loss, steps done)."""
    return train_pack(model, [config], [run_data(config, dfa)], report=report, device=device, log_every=log_every,
                      dfas=[dfa])[0]
