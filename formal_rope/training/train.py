"""Train one classifier run (RunConfig -> RunResult + model): seeded, single-threaded by default.

One run = resolve the language to a DFA, resolve periods, build the model, train with AdamW on
fresh balanced batches from the sampler, evaluate length generalisation, optionally checkpoint.
Given the same config and seed on CPU, two runs produce bit-identical losses, weights and results.

Outcomes: "ok"; "diverged" when the loss becomes NaN/inf (training stops, the result is kept,
evaluation is skipped: n_star 0, accuracy NaN); "failed" when training or evaluation raises (the
error is recorded). Bad input (unknown PE or language, base <= 0, ...) raises FormalRopeError
before any work, so the CLI can report it.
"""

from __future__ import annotations

import math
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from formal_rope.errors import FormalRopeError
from formal_rope.training.config import POSITIONAL_ENCODINGS, RunConfig, RunResult
from formal_rope.training.evaluate import EVAL_MODES, Evaluation, evaluate_sets
from formal_rope.training.model import Classifier, encode_padded
from formal_rope.training.positional import PHASE_PRECISIONS, PositionalSpec, build_positional, validate_periods

PERIODIC_ENCODINGS = ("rope_p", "sipe_p")
ATTENTION_IMPLS = ("auto", "triton", "torch")
LR_SCHEDULES = ("constant", "cosine")
TEST_SYMBOL_BUDGET = 4_000_000  # symbols sampled per block of test lengths (bounds sampler memory)


@dataclass(frozen=True)
class TrainingProgress:
    """What a progress callback receives: stage "train" (per logging interval) or "eval" (per length)."""

    stage: str
    done: int
    total: int
    loss: float | None = None
    accuracy: float | None = None
    info: dict = field(default_factory=dict)


ProgressArg = bool | Callable[[TrainingProgress], None]


# ----------------------------------------------------------------------------------------------
# Resolution of the config's symbolic parts


def validate_config(config: RunConfig) -> None:
    """Raise FormalRopeError for any option a run cannot use, and for a run that cannot finish or fit
    (`formal_rope.training.workload.check_workload`)."""
    from formal_rope.training.config import MAX_LENGTH_LIST
    from formal_rope.training.workload import check_workload

    if config.pe not in POSITIONAL_ENCODINGS:
        raise FormalRopeError(f"unknown positional encoding {config.pe!r}; expected one of {', '.join(POSITIONAL_ENCODINGS)}")
    if not (config.base > 0 and math.isfinite(config.base)):
        raise FormalRopeError(f"the base must be a positive finite number, got {config.base!r}")
    if config.phase_precision not in PHASE_PRECISIONS:
        raise FormalRopeError(f"unknown phase precision {config.phase_precision!r}; expected fp64 or fp32")
    if config.attention not in ATTENTION_IMPLS:
        raise FormalRopeError(f"unknown attention implementation {config.attention!r}; expected auto, triton or torch")
    if config.eval_mode not in EVAL_MODES:
        raise FormalRopeError(f"unknown eval mode {config.eval_mode!r}; expected full or nstar")
    if config.lr_schedule not in LR_SCHEDULES:
        raise FormalRopeError(f"unknown lr schedule {config.lr_schedule!r}; expected constant or cosine")
    if config.periods is not None:
        validate_periods(config.periods)
    for name in ("steps", "train_min_length", "test_min_length", "warmup_steps", "seed", "eval_seed"):
        if getattr(config, name) < 0:
            raise FormalRopeError(f"{name} must be non-negative, got {getattr(config, name)}")
    for name in ("batch_size", "layers", "d_model", "heads", "ffn_mult", "n_per_length"):
        if getattr(config, name) <= 0:
            raise FormalRopeError(f"{name} must be positive, got {getattr(config, name)}")
    for name in ("lr", "weight_decay", "grad_clip", "rope_fraction", "train_near_miss_fraction"):
        if not math.isfinite(getattr(config, name)):
            raise FormalRopeError(f"{name} must be a finite number, got {getattr(config, name)}")
    if not config.lr > 0:
        raise FormalRopeError(f"the learning rate must be positive, got {config.lr}")
    if config.weight_decay < 0 or config.grad_clip < 0:
        raise FormalRopeError("weight_decay and grad_clip must be non-negative (grad_clip 0: no clipping)")
    if not 0.0 <= config.train_near_miss_fraction <= 1.0:
        raise FormalRopeError(f"train_near_miss_fraction must lie in [0, 1], got {config.train_near_miss_fraction}")
    if config.train_min_length > config.train_max_length:
        raise FormalRopeError("train_min_length must not exceed train_max_length")
    if config.test_min_length > config.test_max_length:
        raise FormalRopeError("test_min_length must not exceed test_max_length")
    if config.test_lengths is not None and len(config.test_lengths) > MAX_LENGTH_LIST:
        raise FormalRopeError(
            f"test_lengths lists {len(config.test_lengths):,} lengths, more than {MAX_LENGTH_LIST:,}; "
            "use a range (test_min_length..test_max_length) or fewer lengths"
        )
    if config.pe == "partial_rope" and not 0.0 <= config.rope_fraction <= 1.0:
        raise FormalRopeError(f"partial_rope: the rotated fraction must lie in [0, 1], got {config.rope_fraction}")
    if config.d_model % config.heads or (config.d_model // config.heads) % 2:
        raise FormalRopeError(
            f"d_model ({config.d_model}) must split into {config.heads} heads of even dimension (rotary pairs)"
        )
    check_workload(config)


def validate_device(config: RunConfig, device: str | torch.device) -> None:
    """Raise FormalRopeError when the torch device or the attention implementation cannot run here
    (checked before any work, so the CLI reports it as a user error rather than a failed run)."""
    from formal_rope.kernels import resolve_impl

    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise FormalRopeError(f"unknown torch device {str(device)!r}: {error}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise FormalRopeError(f"device {str(device)!r} was requested but torch sees no CUDA device; use --device cpu")
    resolve_impl(config.attention, on_cuda=resolved.type == "cuda")


def resolve_dfa(config: RunConfig):
    """The language's DFA (over config.alphabet when given)."""
    from formal_rope.automata import language_dfa
    from formal_rope.lang.source import resolve_language

    return language_dfa(resolve_language(config.language, config.alphabet))


def check_trainable(config: RunConfig, dfa) -> None:
    """FormalRopeError when balanced training batches cannot exist: the language (e.g. Σ* or ∅) has
    no positive or no negative string of any training length."""
    from formal_rope.sampling import training_batch

    try:
        training_batch(dfa, np.random.default_rng(0), 2, config.train_min_length, config.train_max_length)
    except FormalRopeError as error:
        raise FormalRopeError(f"cannot train on {config.language!r}: {error}") from None


def resolve_periods(config: RunConfig, dfa) -> tuple[int, ...] | None:
    """Explicit periods, or for periodic encodings with periods=None ("auto"): the least k such that
    the k-automaton A_k is partially ordered (classify(dfa).mod_k, the modulus LTL[P,MOD] needs; 1
    for LTL[P] languages, where rope_p/sipe_p rotate nothing and equal NoPE).

    Outside LTL[P,MOD] there is no such k, so "auto" is a FormalRopeError that names the language's
    stability period as a candidate for explicit periods (the periodic construction is not
    guaranteed to express such a language with any period)."""
    if config.pe not in PERIODIC_ENCODINGS:
        return None  # other encodings have no periods; never report ones given by mistake as used
    if config.periods is not None:
        return validate_periods(config.periods)
    from formal_rope.classes import classify

    classification = classify(dfa)
    if classification.mod_k is None:
        period = classification.stability_period
        hint = (
            f"--periods {period} (its length structure repeats with period {period})" if period > 1
            else "--periods 2 (its length structure has period 1, so nothing suggests a period)"
        )
        raise FormalRopeError(
            f"periods auto: {config.language!r} is not in LTL[P,MOD] (no k-automaton A_k is partially "
            f"ordered), so the periodic construction has no least period for {config.pe}; give the periods "
            f"explicitly, e.g. {hint}"
        )
    return (max(1, int(classification.mod_k)),)


def positional_spec(config: RunConfig, periods: tuple[int, ...] | None) -> PositionalSpec:
    return PositionalSpec(
        pe=config.pe,
        d_model=config.d_model,
        heads=config.heads,
        layers=config.layers,
        base=config.base,
        periods=periods,
        rope_fraction=config.rope_fraction,
        phase_precision=config.phase_precision,
    )


def build_model(config: RunConfig, n_symbols: int, periods: tuple[int, ...] | None) -> Classifier:
    """A freshly initialised (seeded by the caller) classifier for `config` over `n_symbols` symbols.

    `periods` are the resolved rope_p / sipe_p periods (`resolve_periods`); other encodings ignore them.
    """
    positional = build_positional(positional_spec(config, periods))
    return Classifier(
        n_symbols,
        positional,
        d_model=config.d_model,
        heads=config.heads,
        layers=config.layers,
        ffn_mult=config.ffn_mult,
        attention=config.attention,
    )


def software_versions() -> dict:
    import formal_rope

    return {
        "formal_rope": formal_rope.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def source_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


# ----------------------------------------------------------------------------------------------
# Optimisation


def make_optimizer(model: Classifier, config: RunConfig) -> torch.optim.Optimizer:
    """AdamW; weight decay only on weight matrices (not biases, norms, embeddings or frequencies)."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        is_matrix = parameter.dim() >= 2 and not name.startswith(("embedding.", "positional.frequencies"))
        (decay if is_matrix else no_decay).append(parameter)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # foreach=False keeps the update a plain per-tensor loop: deterministic and fastest for tiny models.
    return torch.optim.AdamW(groups, lr=config.lr, foreach=False)


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
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            from rich.console import Console

            # stderr keeps stdout clean for --json output.
            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
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
                info = f"loss {event.loss:.4f} acc {event.accuracy:.3f} {event.info.get('steps_per_s', 0):.0f} steps/s"
            else:
                info = f"len {event.info.get('length')} acc {event.accuracy:.3f} N* so far {event.info.get('n_star')}"
            self.bar.update(self.task, completed=event.done, info=info)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def mix_near_misses(batch, dfa, rng: np.random.Generator, fraction: float, min_length: int, max_length: int):
    """Replace round(fraction * #negatives) negatives by near-misses (a positive with one symbol
    substituted so that it leaves L), uniform over such strings at a length drawn uniformly from
    the lengths in [min_length, max_length] where near-misses exist. Returns a new batch."""
    from formal_rope.sampling import PAD, TrainingBatch, count_table, walk

    negatives = np.flatnonzero(~np.asarray(batch.labels, dtype=bool))
    count = int(round(fraction * len(negatives)))
    if count == 0:
        return batch
    counts = count_table(dfa, "near_miss", max_length)
    candidates = np.arange(min_length, max_length + 1)
    allowed = candidates[counts.nonempty(candidates)]
    if allowed.size == 0:
        return batch  # no near-miss of a training length exists (e.g. L = Σ*): keep uniform negatives
    chosen = allowed[rng.integers(0, allowed.size, size=count)]
    drawn = walk(counts, chosen, rng.random((max(1, int(chosen.max())), count)))
    symbols = np.array(batch.symbols, copy=True)
    lengths = np.array(batch.lengths, copy=True)
    rows = negatives[:count]  # the batch is already shuffled
    symbols[rows] = PAD
    symbols[rows, : drawn.shape[1]] = drawn
    lengths[rows] = chosen
    return TrainingBatch(symbols, lengths, batch.labels)


def train_model(
    model: Classifier,
    config: RunConfig,
    dfa,
    *,
    report: Callable[[TrainingProgress], None] | None = None,
    device: str | torch.device = "cpu",
    log_every: int = 25,
) -> tuple[str, float | None, int]:
    """Optimise in place. Returns (status "ok" | "diverged", final mean loss, steps done)."""
    from formal_rope.sampling import training_batch

    rng = np.random.default_rng(np.random.SeedSequence([int(config.seed), 1]))
    optimizer = make_optimizer(model, config)
    model.train()
    n_symbols = model.n_symbols
    window_loss, window_correct, window_count = 0.0, 0, 0
    final_loss: float | None = None
    started = time.perf_counter()
    for step in range(config.steps):
        batch = training_batch(dfa, rng, config.batch_size, config.train_min_length, config.train_max_length)
        if config.train_near_miss_fraction > 0:
            batch = mix_near_misses(
                batch, dfa, rng, config.train_near_miss_fraction, config.train_min_length, config.train_max_length
            )
        tokens, readout = encode_padded(batch.symbols, batch.lengths, n_symbols)
        labels = torch.from_numpy(np.asarray(batch.labels, dtype=np.int64))
        tokens, readout, labels = tokens.to(device), readout.to(device), labels.to(device)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(config, step)
        logits = model(tokens, readout)
        loss = F.cross_entropy(logits, labels)
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):
            return "diverged", loss_value, step
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip, foreach=False)
        optimizer.step()
        window_loss += loss_value * len(labels)
        window_correct += int((logits.detach().argmax(-1) == labels).sum())
        window_count += len(labels)
        if (step + 1) % log_every == 0 or step + 1 == config.steps:
            final_loss = window_loss / window_count
            if report is not None:
                elapsed = time.perf_counter() - started
                report(
                    TrainingProgress(
                        "train", step + 1, config.steps, final_loss, window_correct / window_count,
                        {"steps_per_s": (step + 1) / max(elapsed, 1e-9)},
                    )
                )
            window_loss, window_correct, window_count = 0.0, 0, 0
    return "ok", final_loss, config.steps


def test_length_blocks(dfa, config: RunConfig):
    """Labelled test sets in increasing length (`config.tested_lengths()`: the range or the sparse
    list), sampled lazily in blocks (bounded memory)."""
    from formal_rope.sampling import test_sets

    block: list[int] = []
    size = 0
    for length in config.tested_lengths():  # lazy: ranges may be huge
        block.append(length)
        size += max(1, length) * config.n_per_length
        if size >= TEST_SYMBOL_BUDGET:
            yield from test_sets(dfa, block, config.n_per_length, config.eval_seed)
            block, size = [], 0
    if block:
        yield from test_sets(dfa, block, config.n_per_length, config.eval_seed)


def evaluate_model(
    model: Classifier, config: RunConfig, dfa, *, report=None, device="cpu", mode: str | None = None
) -> Evaluation:
    """Per-length accuracy and N* of `model` on the seeded test sets of `config` (lengths test_min..test_max).

    The sets depend only on `dfa`, `config.eval_seed` and `n_per_length`; `mode` overrides `config.eval_mode`.
    """
    from formal_rope.sampling import decode

    total = config.test_max_length - config.test_min_length + 1
    state = {"done": 0, "n_star": 0, "perfect": True}

    def on_length(result) -> None:
        state["done"] += 1
        if state["perfect"] and result.accuracy == 1.0:
            state["n_star"] = result.length
        else:
            state["perfect"] = False
        if report is not None:
            report(
                TrainingProgress(
                    "eval", state["done"], total, None, result.accuracy, {"length": result.length, "n_star": state["n_star"]}
                )
            )

    return evaluate_sets(
        model,
        test_length_blocks(dfa, config),
        decode=lambda row: decode(np.asarray(row)[None, :], dfa.alphabet)[0],
        mode=mode or config.eval_mode,
        device=device,
        on_length=on_length,
    )


# ----------------------------------------------------------------------------------------------
# One run


def run_training(
    config: RunConfig,
    *,
    progress: ProgressArg = True,
    checkpoint_path: str | Path | None = None,
    device: str | torch.device = "cpu",
    threads: int | None = 1,
    dfa=None,
) -> tuple[RunResult, Classifier | None]:
    """Train, evaluate and (optionally) checkpoint one run. Returns (result, model).

    progress: True draws a Rich progress bar, False is silent, a callable receives TrainingProgress.
    threads: torch intra-op threads on CPU (1 by default: small models run fastest single-threaded
    and results are reproducible); None leaves torch's setting alone.
    dfa: a pre-resolved DFA for config.language (skips resolution; the config still names it).
    The model is None only when the run failed before it was built.
    """
    validate_config(config)
    validate_device(config, device)
    if checkpoint_path is not None:
        from formal_rope.training.checkpoint import check_checkpoint_path

        check_checkpoint_path(checkpoint_path)  # before training: an unwritable path must not cost a run
    if dfa is None:
        dfa = resolve_dfa(config)
    check_trainable(config, dfa)
    periods = resolve_periods(config, dfa)
    if threads is not None and str(device).startswith("cpu"):
        torch.set_num_threads(threads)
    started = time.perf_counter()
    reporter = _Reporter(progress, f"{config.pe} {config.language}")
    model: Classifier | None = None
    status, final_loss, steps_done = "failed", None, 0
    evaluation: Evaluation | None = None
    error: str | None = None
    try:
        torch.manual_seed(config.seed)
        model = build_model(config, len(dfa.alphabet), periods).to(device)
        reporter.stage("train", config.steps)
        status, final_loss, steps_done = train_model(model, config, dfa, report=reporter.update, device=device)
        if status == "ok":
            reporter.stage("eval", config.test_max_length - config.test_min_length + 1)
            evaluation = evaluate_model(model, config, dfa, report=reporter.update, device=device)
    except Exception as exception:  # recorded, not raised: a sweep must survive one bad run
        status, error = "failed", f"{type(exception).__name__}: {exception}"
    finally:
        reporter.close()
    result = RunResult(
        run_id=config.run_id(),
        config=config,
        status=status,
        n_star=evaluation.n_star if evaluation else 0,
        accuracy=evaluation.accuracy if evaluation else math.nan,
        per_length=evaluation.per_length if evaluation else (),
        first_failure=evaluation.first_failure if evaluation else None,
        final_loss=final_loss,
        steps_done=steps_done,
        wall_s=time.perf_counter() - started,
        versions=software_versions(),
        commit=source_commit(),
        error=error,
        alphabet=tuple(dfa.alphabet),
        resolved_periods=periods,
        eval_complete=evaluation.complete if evaluation else False,
    )
    if checkpoint_path is not None and model is not None:
        from formal_rope.training.checkpoint import save_checkpoint

        save_checkpoint(checkpoint_path, model, config, result)
    return result, model
