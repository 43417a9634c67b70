"""Train classifier runs (RunConfigs -> RunResults + model): packs of runs, one code path.

A pack is R runs that share an architecture and a training shape (`formal_rope.training.packing`)
trained as one computation: every weight has a leading run axis, each step draws each run's own
batch from its own generator, sums the per-run losses (so each run gets exactly its own gradient),
clips each run's gradient norm and applies AdamW with each run's own learning rate. A single run
is a pack of one (`run_training`). Per run: resolve the language to a DFA, resolve periods, build,
train on fresh balanced batches from the sampler, evaluate length generalisation (all runs of the
pack in the same forward passes), optionally checkpoint. Given the same pack composition and seeds
on CPU, two runs produce bit-identical losses, weights and results; a run's initial weights and
batches depend on its own seed only, never on its pack. With a state store (`StateOptions`), the
whole training state is saved every `every` steps and a restarted pack resumes bit-identically.

Outcomes per run: "ok"; "diverged" when its loss becomes NaN/inf (that run is frozen, the others go
on; evaluation is skipped: n_star 0, accuracy NaN); "failed" when training or evaluation raises
(n_star None, accuracy NaN: nothing was measured). When a pack of several runs raises, each of its
runs is trained again alone, so each records its own outcome and a healthy run ends as it does in a
pack of one. Bad input (unknown PE or language, base <= 0, ...) raises FormalRopeError before any
work, so the CLI can report it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
from torch.nn import functional as F

from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.engine import SearchSettings, WorstCase
from formal_rope.evaluation.models import worst_case_pack
from formal_rope.progress import progress_display
from formal_rope.training.checkpoint import check_checkpoint_path, save_checkpoint
from formal_rope.training.config import RunConfig, RunResult
from formal_rope.training.context import run_warnings
from formal_rope.training.curve_log import open_pack_log
from formal_rope.training.curves import CurveOptions
from formal_rope.training.data import run_data, training_batches
from formal_rope.training.init_from import InitFromError, check_init_sources, load_init_weights
from formal_rope.training.layout import TokenLayout, ragged_layout
from formal_rope.training.length_generalization import EVAL_MODES, Evaluation, evaluate_pack_sets, passed
from formal_rope.training.model import Classifier
from formal_rope.training.optim import PackedAdamW
from formal_rope.training.packing import pack_key
from formal_rope.training.provenance import software_versions, source_commit
from formal_rope.training.setup import (  # noqa: F401 (the names docs/training.md listed here before setup.py)
    PackIngredients,
    build_model,
    build_pack,
    check_trainable,
    make_optimizer,
    pack_ingredients,
    resolve_dfa,
    resolve_periods,
    validate_config,
    validate_device,
    validate_pack,
)
from formal_rope.training.state import (
    STATE_FORMAT,
    TrainingStateError,
    check_state_dir,
    open_state_store,
    pack_payload,
    read_saved_state,
)


@dataclass(frozen=True)
class TrainingProgress:
    """What a progress callback receives: stage "train" (per logging interval), "eval" (per length)
    or "search" (per length of the worst-case search, `--eval worst-case`)."""

    stage: str
    done: int
    total: int
    loss: float | None = None
    accuracy: float | None = None
    info: dict = field(default_factory=dict)


ProgressArg = bool | Callable[[TrainingProgress], None]


# ----------------------------------------------------------------------------------------------
# Optimisation


def learning_rate(config: RunConfig, step: int) -> float:
    """Linear warm-up for warmup_steps, then constant or cosine decay to 10% of lr."""
    if config.warmup_steps and step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    if config.lr_schedule == "cosine":
        span = max(1, config.steps - config.warmup_steps)
        fraction = min(1.0, (step - config.warmup_steps) / span)
        return config.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * fraction)))
    return config.lr


class _Reporter:
    """Rich progress bar, a user callback, or nothing."""

    def __init__(self, progress: ProgressArg, description: str) -> None:
        self.callback = progress if callable(progress) else None
        self.bar = None
        if progress is True:
            # rich only when a bar is drawn: library callers with a callback or silence never load it
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            # stderr keeps stdout clean for --json output; off a terminal, a plain line per tenth of a stage.
            self.bar = progress_display(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                label=description,
            )
            self.bar.start()
        self.description = description
        self.task = None

    def stage(self, name: str, total: int) -> None:
        if self.bar is not None:
            if self.task is not None:
                self.bar.stop_task(self.task)
            self.task = self.bar.add_task(f"{self.description} {name}", total=total, info="")

    def update(self, event: TrainingProgress) -> None:
        if self.callback is not None:
            self.callback(event)
        if self.bar is not None and self.task is not None:
            if event.stage == "train":
                runs = event.info.get("runs", 1)
                pack = f" ({event.info.get('active', runs)}/{runs} runs)" if runs > 1 else ""
                info = (f"loss {event.loss:.4f} acc {event.accuracy:.3f} "
                        f"{event.info.get('steps_per_s', 0):.0f} steps/s{pack}")
            elif event.stage == "search":
                info = (f"len {event.info.get('length')} worst-case N* so far {event.info.get('n_star_worst')} "
                        f"({event.info.get('tried')} strings)")
            else:
                info = f"len {event.info.get('length')} acc {event.accuracy:.3f} N* so far {event.info.get('n_star')}"
            self.bar.update(self.task, completed=event.done, info=info)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


# ----------------------------------------------------------------------------------------------
# Training a pack


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
    each run's strings back to back, attention per length bucket) and labels (R, B) in each run's
    own batch order."""

    layout: TokenLayout
    labels: torch.Tensor


def pack_inputs(batches, n_symbols: int, widths, device="cpu") -> PackInputs:
    """The runs' batches (one TrainingBatch per run, equal sizes) as one step's inputs: strings in
    the length buckets of `widths`, no run padded to another's strings."""
    lengths = np.stack([np.asarray(b.lengths, dtype=np.int64) for b in batches])  # (R, B)
    layout = ragged_layout([b.symbols for b in batches], lengths, n_symbols, widths, device)
    labels = torch.from_numpy(np.stack([np.asarray(b.labels, dtype=np.int64) for b in batches])).to(device)
    return PackInputs(layout, labels)


def pack_losses(model: Classifier, inputs: PackInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-run mean cross-entropy (R,) over each run's own batch, and its count of correct answers (R,)."""
    logits = model.forward_layout(inputs.layout)  # (R, B, 2)
    runs, batch = inputs.labels.shape
    losses = F.cross_entropy(logits.reshape(-1, 2), inputs.labels.reshape(-1), reduction="none").view(runs, batch)
    return losses.mean(1), (logits.detach().argmax(-1) == inputs.labels).sum(1)


@dataclass
class PackTrainingState:
    """Everything that changes while a pack trains, besides weights and optimizer moments: what a
    resumed pack restores to continue bit-identically (per run: generator, status, counters)."""

    step: int
    rngs: list
    status: list[str]
    steps_done: list[int]
    final_loss: list
    window_loss: list[float]
    window_correct: list[int]
    window_count: list[int]

    @classmethod
    def fresh(cls, configs) -> "PackTrainingState":
        runs = len(configs)
        return cls(
            step=0,
            rngs=[np.random.default_rng(np.random.SeedSequence([int(c.seed), 1])) for c in configs],
            status=["ok"] * runs,
            steps_done=[0] * runs,
            final_loss=[None] * runs,
            window_loss=[0.0] * runs,
            window_correct=[0] * runs,
            window_count=[0] * runs,
        )

    def to_dict(self) -> dict:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "rngs"}
        data["rngs"] = [rng.bit_generator.state for rng in self.rngs]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "PackTrainingState":
        rngs = []
        for saved in data["rngs"]:
            rng = np.random.default_rng()
            rng.bit_generator.state = saved
            rngs.append(rng)
        return cls(**{**{k: v for k, v in data.items() if k != "rngs"}, "rngs": rngs})


def _save_state(
    store, key: str, configs, model: Classifier, optimizer: PackedAdamW, progress: PackTrainingState, curves=None
) -> None:
    """The pack's whole training state in a format that cannot run code when read: the tensors
    (weights, optimizer steps and moments) as safetensors, everything else as JSON."""
    moments = optimizer.state_dict()
    tensors = {f"model.{name}": tensor for name, tensor in model.state_dict().items()}
    tensors["optimizer.steps"] = moments["steps"]
    for name in ("exp_avg", "exp_avg_sq"):
        tensors.update({f"optimizer.{name}.{index}": tensor for index, tensor in enumerate(moments[name])})
    header = {
        "format": STATE_FORMAT,
        "run_ids": [c.run_id() for c in configs],
        "moments": len(moments["exp_avg"]),
        "progress": progress.to_dict(),
    }
    if curves is not None:  # [curves hook c] the curves so far, so a resumed run continues them
        header["curves"] = curves.state_dict()
    # Contiguous copies on the CPU: safetensors refuses views that share memory.
    payload = safetensors.torch.save({name: tensor.detach().cpu().contiguous().clone() for name, tensor in
                                      tensors.items()})
    store.save(key, pack_payload(header, payload))


def _load_state(store, key: str, configs, model: Classifier, optimizer: PackedAdamW,
                curves=None) -> PackTrainingState | None:
    """Restore the state saved under `key`, or None when there is none. TrainingStateError (bad input:
    the caller must not record it as a failed run) when it cannot be used; nothing in it is executed."""
    saved = read_saved_state(store, key, [c.run_id() for c in configs])
    if saved is None:
        return None
    header, payload = saved
    where = store.location(key)
    try:
        tensors = safetensors.torch.load(payload)
        moments = int(header["moments"])
        model_state = {name[len("model."):]: t for name, t in tensors.items() if name.startswith("model.")}
        model.load_state_dict(model_state)
        optimizer.load_state_dict({
            "steps": tensors["optimizer.steps"],
            **{name: [tensors[f"optimizer.{name}.{index}"] for index in range(moments)]
               for name in ("exp_avg", "exp_avg_sq")},
        })
        progress = PackTrainingState.from_dict(header["progress"])
        runs = len(configs)
        if not (isinstance(progress.step, int) and 0 <= progress.step <= configs[0].steps) or any(
            len(getattr(progress, name)) != runs for name in PackTrainingState.__dataclass_fields__ if name != "step"
        ):
            raise ValueError(f"its progress is not that of {runs} run(s) of {configs[0].steps} steps")
        if curves is not None:  # [curves hook c] continue the curves the state holds
            curves.load_state_dict(header.get("curves"))
        return progress
    except Exception as error:  # noqa: BLE001 - safetensors, torch and numpy raise many types for one bad file
        detail = (str(error).strip().splitlines() or [""])[0][:300]
        raise TrainingStateError(where, f"does not fit this pack ({type(error).__name__}: {detail})") from None


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
) -> list[tuple[str, float | None, int]]:
    """Optimise every run of the pack in place. Returns per run (status "ok" | "diverged", final mean
    loss, steps done).

    data[r] is run r's RunData (its batches come from its own generator, seeded by its seed). A run
    whose loss turns NaN/inf is recorded diverged at that step and frozen; the others go on.
    state: StateOptions (save every state.every steps to state.uri under state_key, resume from there).
    on_step(step, losses) sees every step's per-run losses (NaN for frozen runs).
    curves: a `curves.PackCurves` that records each run's training curve from the step's losses.
    """
    configs = list(configs)
    runs = len(configs)
    steps = configs[0].steps
    batch_size = configs[0].batch_size
    widths = bucket_widths(configs[0].train_min_length, configs[0].train_max_length, step_buckets(runs * batch_size))
    n_symbols = model.n_symbols
    optimizer = make_optimizer(model, configs)
    max_norms = torch.tensor([float(c.grad_clip) for c in configs], dtype=torch.float64)
    store = None
    progress = None
    if state is not None:
        store = open_state_store(state.uri)
        progress = _load_state(store, state_key, configs, model, optimizer, curves)
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
        losses, correct = pack_losses(model, pack_inputs(batches, n_symbols, widths, device))
        loss_values, correct_values = torch.stack((losses.detach().double(), correct.double())).cpu().tolist()
        for run in active_runs:
            if not math.isfinite(loss_values[run]):
                progress.status[run] = "diverged"
                progress.steps_done[run] = step
                progress.final_loss[run] = loss_values[run]
        active = torch.tensor([status == "ok" for status in progress.status])
        if on_step is not None:
            on_step(step, [loss_values[r] if r in active_runs else math.nan for r in range(runs)])
        if curves is not None:  # [curves hook a] from this step's losses: no extra forward pass
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
            _save_state(store, state_key, configs, model, optimizer, progress, curves)
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
    return train_pack(model, [config], [run_data(config, dfa)], report=report, device=device, log_every=log_every)[0]


def evaluate_pack(
    model: Classifier, configs, data, *, report=None, device="cpu", modes=None, threads=None
) -> list[Evaluation]:
    """Per-length accuracy, N* and NNCH's score of every run of `model` on the seeded test sets of its
    config (and NNCH's uniform strings), all runs in the same forward passes (the runs of a pack share
    their test sets: data[0]'s).

    `modes` overrides each config's eval_mode. A run in nstar mode stops costing compute at its
    first imperfect length. threads(): the torch threads of each length's passes (None: torch's
    setting; the results do not depend on it, `length_generalization`).
    """
    configs = list(configs)
    total = len(configs[0].tested_lengths())
    modes = list(modes) if modes is not None else [c.eval_mode for c in configs]
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


def search_pack(
    model: Classifier, configs, data, dfa, evaluations, *, settings: SearchSettings, report=None, device="cpu",
    threads=None,
) -> list[WorstCase]:
    """The worst-case search (`formal_rope.evaluation`) of every run of an evaluated pack, run by
    run so that a run's search depends on its own weights only: it starts from the run's sampled
    test sets and stops at its first sampled failure (its N* cannot be beaten there), or earlier at
    the first failure it finds. threads: as for `evaluate_pack`."""
    configs = list(configs)
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
                report(TrainingProgress("search", _position(configs[0], entry.length), total, None, None,
                                        {"length": entry.length, "n_star_worst": seen["n_star_worst"],
                                         "tried": seen["tried"]}))

        single = model if model.runs == 1 else model.select_runs([run])
        searches.append(worst_case_pack(
            model=single, dfa=dfa, start_sets=data[run].test_sets(), settings=settings,
            last_lengths=[first_failing_length(evaluation)], device=device, on_length=on_length, threads=threads,
        )[0])
    return searches


def _position(config: RunConfig, length: int) -> int:
    """How many of the config's test lengths are at most `length` (the progress bar's count)."""
    tested = config.tested_lengths()
    if isinstance(tested, range):
        return max(0, min(len(tested), length - tested.start + 1))
    return int(np.searchsorted(np.asarray(tested), length, side="right"))


# ----------------------------------------------------------------------------------------------
# Runs


def run_pack(
    configs,
    *,
    progress: ProgressArg = False,
    checkpoint_paths=None,
    device: str | torch.device = "cpu",
    threads: int | None = 1,
    threads_alone: int | None = None,
    dfa=None,
    state=None,
    on_step: Callable[[int, list[float]], None] | None = None,
    worst_case: SearchSettings | None = None,
    init_dir: str | Path | None = None,
    eval_threads: Callable[[], int] | None = None,
    curve_options: CurveOptions | None = CurveOptions(),
) -> tuple[list[RunResult], Classifier | None]:
    """Train, evaluate and (optionally) checkpoint a pack of compatible runs in one computation.

    Returns (one RunResult per config, in order; the pack's model, or None when the pack raised and
    its runs were trained again one by one, each with its own outcome). configs must share what
    `packing.check_packable` names (language, architecture, steps, batch size, training and test
    lengths); each keeps its seed, learning rate and schedule, base or periods, weight decay,
    clipping norm, near-miss share and eval mode. checkpoint_paths: one path (or None) per config.
    state: a `formal_rope.training.state.StateOptions` to save the training state every
    `state.every` steps and resume from it (deleted at the end unless `state.keep`).
    progress, device, threads, dfa: as for `run_training`. threads_alone: the threads of each run
    trained again alone after the pack raised (default `threads`). The thread count is part of a
    run's numbers (torch splits a full reduction, such as the loss's mean or a weight gradient's
    sum over the batch, into one partial sum per thread), so a caller whose runs alone get other
    threads than its packs (a sweep: `packing.default_threads`) passes theirs, and such a run ends
    bit-identical to the same run trained alone.
    worst_case: also search each evaluated run for misclassified strings (`search_pack`; the
    result's n_star_worst, worst_failure, worst_failure_margin, worst_strings_tried).
    init_dir: the folder a run id in a run's `init_from` is looked up in (ID.zip; a path needs none):
    such a run starts from that checkpoint's weights (`training.init_from`; an `InitFromError`,
    exit 2, when they do not fit, raised like a bad saved state rather than recorded).
    eval_threads(): the torch threads of the evaluation's (and the search's) passes, asked before
    each (None: `threads`). Evaluation gives the same bits at any thread count
    (`length_generalization`), so a sweep worker uses the cores of workers that have finished
    (`sweeps.backends.cores`); training keeps `threads`, part of its numbers.
    curve_options: each run's training curve (`training.curves`: every log_every steps, the result's
    `curve`) and TensorBoard event files (None or log_every 0: no curve); neither changes a result.
    """
    configs = list(configs)
    if not configs:
        raise FormalRopeError("run_pack needs at least one run")
    validate_pack(configs, device)
    paths = list(checkpoint_paths) if checkpoint_paths is not None else [None] * len(configs)
    if len(paths) != len(configs):
        raise FormalRopeError(f"need one checkpoint path (or None) per run: {len(configs)} runs, {len(paths)} paths")
    for path in paths:
        if path is not None:
            check_checkpoint_path(path)  # before training: an unwritable path must not cost a run
    if state is not None:
        check_state_dir(state.uri)
    # Before the try: a language without balanced batches, unreadable or mislabelled data files are
    # the user's error, not a failed run.
    ingredients = pack_ingredients(configs, dfa)
    data = ingredients.data
    if worst_case is not None and ingredients.dfa is None:
        raise FormalRopeError(f"--eval worst-case labels its strings with the language's DFA, and "
                              f"{configs[0].language} has none (data files without a language): give --lang too")
    check_init_sources(configs, ingredients.alphabet, init_dir)  # a checkpoint that cannot be used costs no run
    if threads is not None and str(device).startswith("cpu"):
        torch.set_num_threads(threads)
    runs = len(configs)
    key = pack_key(configs)
    started = time.perf_counter()
    first = configs[0]
    encodings = "+".join(dict.fromkeys(config.pe for config in configs))
    label = f"{first.pe} {first.language}" if runs == 1 else f"pack of {runs} {encodings} {first.language}"
    reporter = _Reporter(progress, label)
    model: Classifier | None = None
    outcomes: list[tuple[str, float | None, int]] = [("failed", None, 0)] * runs
    evaluations: list[Evaluation | None] = [None] * runs
    searches: list[WorstCase | None] = [None] * runs
    error: str | None = None
    pack_failed = False
    init_notes: list[list[str]] = [[] for _ in configs]
    log = open_pack_log(configs, curve_options, learning_rate)  # [curves hook b] None: no curves
    try:
        model = build_pack(configs, len(ingredients.alphabet), ingredients.periods).to(device)
        if any(config.init_from is not None for config in configs):
            init_notes = load_init_weights(model, configs, ingredients.alphabet, init_dir)
        reporter.stage("train", first.steps)
        outcomes = train_pack(
            model, configs, data, report=reporter.update, device=device, state=state, state_key=key, on_step=on_step,
            curves=None if log is None else log.recorder,
        )
        ok = [run for run in range(runs) if outcomes[run][0] == "ok"]
        if ok:
            reporter.stage("eval", len(first.tested_lengths()))
            evaluated = model if len(ok) == runs else model.select_runs(ok)
            for run, evaluation in zip(
                ok,
                evaluate_pack(
                    evaluated, [configs[r] for r in ok], [data[r] for r in ok], report=reporter.update, device=device,
                    threads=eval_threads,
                ),
            ):
                evaluations[run] = evaluation
            if worst_case is not None:
                reporter.stage("worst case", len(first.tested_lengths()))
                for run, found in zip(ok, search_pack(
                    evaluated, [configs[r] for r in ok], [data[r] for r in ok], ingredients.dfa,
                    [evaluations[r] for r in ok], settings=worst_case, report=reporter.update, device=device,
                    threads=eval_threads,
                )):
                    searches[run] = found
    except (TrainingStateError, InitFromError):
        raise  # a saved state or init checkpoint that cannot be used is the user's input, not this pack's failure
    except Exception as exception:  # recorded, not raised: a sweep must survive one bad pack
        # The exception belongs to the pack's computation, not to a known run: with pack-mates it may
        # come from any one of them (or from the pack's size), so it is no run's result; each run is
        # then trained alone below and gets its own outcome.
        pack_failed = runs > 1
        outcomes = [("failed", outcome[1], outcome[2]) for outcome in outcomes]
        evaluations = [None] * runs
        searches = [None] * runs
        error = f"{type(exception).__name__}: {exception}"
    finally:
        reporter.close()
        if log is not None:  # [curves hook b] logged points on disk (a pack that raised: its runs log alone)
            log.flush(close=pack_failed)
    if pack_failed:
        model = None  # the pack's half-trained weights are no run's result; free them first
        alone = threads if threads_alone is None else threads_alone
        return _run_alone(configs, paths, key, progress=progress, device=device, threads=alone,
                          dfa=ingredients.dfa, state=state, on_step=on_step, worst_case=worst_case,
                          init_dir=init_dir, eval_threads=eval_threads, curve_options=curve_options), None
    results = _pack_results(configs, outcomes, evaluations, ingredients, key=key, wall=time.perf_counter() - started,
                            error=error)
    if worst_case is not None:
        results = [with_worst_case(result, found) for result, found in zip(results, searches)]
    results = [replace(result, warnings=(*result.warnings, *notes)) if notes else result
               for result, notes in zip(results, init_notes)]
    if log is not None:  # [curves hook b] each run's curve on its result (and in its checkpoint below)
        results = log.attach(results)
    if model is not None:
        for run, path in enumerate(paths):
            if path is not None and not (results[run].status == "failed" and results[run].steps_done == 0):
                # (a run that failed before its first step has only its initialisation to save)
                single = model if runs == 1 else model.select_runs([run])
                save_checkpoint(path, single, configs[run], results[run])
    if state is not None and not state.keep and error is None:
        open_state_store(state.uri).delete(key)
    return results, model


def _pack_results(configs, outcomes, evaluations, ingredients: PackIngredients, *, key: str, wall: float,
                  error: str | None) -> list[RunResult]:
    """One RunResult per run of a pack that did not raise as a pack: its outcome, its evaluation (None
    when it was not evaluated) and the pack's provenance."""
    versions, commit = software_versions(), source_commit()
    results = []
    for run, config in enumerate(configs):
        status, final_loss, steps_done = outcomes[run]
        evaluation = evaluations[run]
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
                error=error,
                alphabet=ingredients.alphabet,
                resolved_periods=ingredients.periods[run],
                eval_complete=evaluation.complete if evaluation else False,
                nnch_accuracy=evaluation.nnch_accuracy if evaluation else math.nan,
                pack_id=key,
                pack_size=len(configs),
                warnings=tuple(run_warnings(config)),
            )
        )
    return results


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


def _run_alone(configs, paths, key: str, *, progress, device, threads, dfa, state, on_step,
               worst_case=None, init_dir=None, eval_threads=None, curve_options=None) -> list[RunResult]:
    """After a pack raised: train each of its runs as a pack of one, so that every run gets its own
    outcome (a healthy run ends exactly as `run_pack([config])` does; the run that raised records its
    own error). The pack's saved training state is dropped (unless `state.keep`): the runs no longer
    train as that pack. on_step still sees one loss per run of the pack (NaN for the others)."""
    runs = len(configs)
    results = []
    for run, (config, path) in enumerate(zip(configs, paths)):
        step = None
        if on_step is not None:
            def step(index, losses, run=run):
                on_step(index, [losses[0] if other == run else math.nan for other in range(runs)])
        (result,), _ = run_pack([config], progress=progress, checkpoint_paths=[path], device=device, threads=threads,
                                dfa=dfa, state=state, on_step=step, worst_case=worst_case, init_dir=init_dir,
                                eval_threads=eval_threads, curve_options=curve_options)
        results.append(result)
    if state is not None and not state.keep:
        open_state_store(state.uri).delete(key)
    return results


def run_training(
    config: RunConfig,
    *,
    progress: ProgressArg = True,
    checkpoint_path: str | Path | None = None,
    device: str | torch.device = "cpu",
    threads: int | None = 1,
    dfa=None,
    state=None,
    worst_case: SearchSettings | None = None,
    init_dir: str | Path | None = None,
    curve_options: CurveOptions | None = CurveOptions(),
) -> tuple[RunResult, Classifier | None]:
    """Train, evaluate and (optionally) checkpoint one run (a pack of one). Returns (result, model).

    progress: True draws a Rich progress bar, False is silent, a callable receives TrainingProgress.
    threads: torch intra-op threads on CPU (1 by default: small models run fastest single-threaded
    and results are reproducible); None leaves torch's setting alone.
    dfa: a pre-resolved DFA for config.language (skips resolution; the config still names it).
    state: StateOptions to checkpoint the training state and resume from it (`train --resume`).
    worst_case: also search the run for misclassified strings (`SearchSettings`; `train --eval worst-case`).
    init_dir: where a run id in config.init_from is looked up (`run_pack`).
    curve_options: the training curve and TensorBoard files (`run_pack`).
    The model is None only when the run failed before it was built.
    """
    results, model = run_pack(
        [config], progress=progress, checkpoint_paths=[checkpoint_path], device=device, threads=threads, dfa=dfa,
        state=state, worst_case=worst_case, init_dir=init_dir, curve_options=curve_options,
    )
    return results[0], model
