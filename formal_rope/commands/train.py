"""CLI: `train` — train one classifier, evaluate length generalisation (N*), save a checkpoint."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import NamedTuple, Optional

import typer
from rich.console import Console
from rich.table import Table

from formal_rope.commands import run_options as ro
from formal_rope.commands.run_options import check_positive, parse_assignments, parse_periods
from formal_rope.commands.terminal import describe_lengths, json_ready
from formal_rope.errors import FormalRopeError, Interrupted
from formal_rope.lang.source import parse_alphabet
from formal_rope.run_config.applies import refusal
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import encoding_names, hybrid_label
from formal_rope.run_config.text import lengths_fields
from formal_rope.training.data import data_settings, fit_to_data
from formal_rope.training.init_from import TRAIN_CHECKPOINT_DIR
from formal_rope.training.resolve import resolve_runs
from formal_rope.training.scales import scale_overrides

# `sweep` still imports check_positive, json_ready, parse_assignments and parse_periods from here;
# their home is run_options and terminal.


def _length_runs(per_length) -> list[tuple[int, int, float]]:
    """Consecutive lengths with equal accuracy collapsed into (first, last, accuracy) runs."""
    runs: list[tuple[int, int, float]] = []
    for result in per_length:
        if runs and runs[-1][2] == result.accuracy and runs[-1][1] + 1 == result.length:
            runs[-1] = (runs[-1][0], result.length, result.accuracy)
        else:
            runs.append((result.length, result.length, result.accuracy))
    return runs


def _nnch_text(result) -> str:
    """NNCH's score with what it averages, or why the run has none."""
    lengths = [r for r in result.per_length if r.nnch_n]
    if not math.isnan(result.nnch_accuracy):
        # the lengths as given: 41, 43, 45 is not 41..45
        return (f"{result.nnch_accuracy:.4f} (uniformly random strings, {lengths[0].nnch_n} per length, mean over "
                f"lengths {describe_lengths([r.length for r in lengths])}: Delétang et al.'s number)")
    config = result.config
    if config.data is not None:
        return "– (a run on files: NNCH's score needs uniformly random strings)"
    if config.nnch_samples == 0:
        return "– (not measured: --nnch-samples 0)"
    if result.per_length and not result.eval_complete:
        return "– (evaluation stopped early: NNCH's score needs every length)"
    if result.per_length:
        return f"– (no test length beyond {config.train_max_length + 1}: NNCH's score leaves out the first)"
    return "– (not evaluated)"


def _render(result, checkpoint: Path | None) -> None:
    console = Console()
    config = result.config
    summary = Table(title=f"train {config.language} with {config.pe}", show_header=False)
    summary.add_column("key", style="bold")
    summary.add_column("value", overflow="fold")
    summary.add_row("status", result.status + (f" ({result.error})" if result.error else ""))
    summary.add_row("run id", result.run_id)
    summary.add_row("alphabet", "{" + ", ".join(result.alphabet or ()) + "}")
    if result.resolved_periods is not None:
        summary.add_row(
            "periods", ",".join(map(str, result.resolved_periods)) + (" (auto)" if config.periods is None else "")
        )
    summary.add_row("model", f"{config.layers} layers, d_model {config.d_model}, {config.heads} heads")
    if config.is_hybrid():
        summary.add_row("hybrid", hybrid_label(config.pe, config.layer_pe, config.window))
    if config.init_from is not None:
        summary.add_row("init from", config.init_from)
    if config.objective != "final":
        summary.add_row("objective", config.objective)
    summary.add_row("training", f"{result.steps_done} steps, batch {config.batch_size}, lr {config.lr:g}, final loss "
                    + (f"{result.final_loss:.3g}" if result.final_loss is not None else "-"))
    tested = config.tested_lengths()
    summary.add_row(
        "test lengths",
        f"{tested.start}..{tested.stop - 1}"
        if isinstance(tested, range)
        else ", ".join(map(str, tested[:12])) + (f", … ({len(tested)} lengths)" if len(tested) > 12 else ""),
    )
    if config.data is not None:
        summary.add_row("data", f"{config.data} (content hash {config.data_hash}; train lengths "
                        f"{config.train_min_length}..{config.train_max_length})")
    summary.add_row("N*", "– (not measured: the run failed)" if result.n_star is None else str(result.n_star))
    if result.per_length:
        stopped = "" if result.eval_complete else ", stopped at the first imperfect length"
        summary.add_row("accuracy", f"{result.accuracy:.4f} (mean over {len(result.per_length)} lengths{stopped})")
    else:
        summary.add_row("accuracy", "- (not evaluated)")
    summary.add_row("NNCH score", _nnch_text(result))
    summary.add_row("first failing string", result.first_failure if result.first_failure is not None else "none")
    if result.n_star_worst is not None:
        margin = "" if result.worst_failure_margin is None else f" (margin {result.worst_failure_margin:.3g})"
        summary.add_row("worst-case N*", f"{result.n_star_worst} ({result.worst_strings_tried:,} strings searched)")
        summary.add_row("worst-case failure", "none found" if result.worst_failure is None
                        else f"{result.worst_failure}{margin}")
    if result.family is not None:
        summary.add_row("theory's family", f"{result.family}: " + (
            f"held on all {result.family_strings_tried} strings" if result.refuted_at is None
            else f"refuted at length {result.refuted_at} by {result.family_failure}"))
    if result.test_transitions is not None:
        summary.add_row("test transitions", f"{result.test_transitions_covered} of {result.test_transitions} "
                        f"transitions of the minimal DFA taken by the test strings ({config.sampling} sampling)")
    summary.add_row("wall time", f"{result.wall_s:.1f} s")
    if checkpoint is not None:
        summary.add_row("checkpoint", str(checkpoint))
    console.print(summary)
    if result.per_length:
        lengths = Table()
        lengths.add_column("lengths", justify="right")
        lengths.add_column("accuracy", justify="right")
        runs = _length_runs(result.per_length)
        shown = runs if len(runs) <= 30 else runs[:20] + [None] + runs[-9:]
        for run in shown:
            if run is None:
                lengths.add_row("…", f"({len(runs) - 29} more runs)")
                continue
            first, last, accuracy = run
            lengths.add_row(str(first) if first == last else f"{first}..{last}", f"{accuracy:.4f}")
        # The title on its own line: as the table's title it would wrap to the narrow table's width.
        console.print(" per-length accuracy (consecutive lengths merged)", style="table.title", highlight=False)
        console.print(lengths)


# Options that set a field which some runs do not use (RunConfig.applies): the base of NoPE, the
# strings per test length of a run on data files, ... Giving one where it does nothing is an error.
_EFFECT_OPTIONS = {"--base": "base", "--periods": "periods", "--rope-fraction": "rope_fraction",
                   "--phase-precision": "phase_precision", "--n-per-length": "n_per_length",
                   "--nnch-samples": "nnch_samples",
                   "--train-near-miss": "train_near_miss_fraction", "--sampling": "sampling"}


def _merge_set(fields: dict, assignments: dict[str, list]) -> dict:
    """`train --set FIELD=VALUE` on top of the dedicated options (one value each, no field twice)."""
    for name, values in assignments.items():
        if len(values) != 1:
            raise FormalRopeError(
                f"train --set {name} takes one value (a list of values is a sweep axis: use sweep --set)"
            )
        if name in fields:
            raise FormalRopeError(f"{name} is given both by its own option and by --set; give it once")
        if name in ("language", "pe"):
            raise FormalRopeError(f"--set {name}: use --{'lang' if name == 'language' else 'pe'}")
    return {**fields, **{name: values[0] for name, values in assignments.items()}}


def _refuse_options_without_effect(config, given: dict[str, str], device: str, threads: int | None,
                                   out: Path | None, no_save: bool) -> None:
    """A user error for every option that would change nothing in this run (`given`: option text ->
    the RunConfig field it sets)."""
    refused = refusal(config, given)  # the one rule of what applies (`run_config.applies`)
    if refused:
        raise FormalRopeError(refused)
    if out is not None and no_save:
        raise FormalRopeError("--out names a checkpoint but --no-save writes none; give one of them")
    if threads is not None and not device.startswith("cpu"):
        raise FormalRopeError(f"--threads sets torch's CPU threads; it has no effect with --device {device}")


def _resolve_with_notes(config):
    """Resolve the run once (`training.resolve`: its language can be trained on, its periods, its
    strings, the checkpoint its init_from names: a compiled model or a typo costs nothing), print a
    note on stderr for each setting without effect on it, and return the resolved run."""
    (run,) = resolve_runs([config], command="train", init_dir=TRAIN_CHECKPOINT_DIR)
    for note in run.notes:
        _note(note)
    return run


def _note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)


class TrainSettings(NamedTuple):
    """The run's settings as `train` takes them (None: not given; the scale's, the data's or
    RunConfig's default)."""

    periods: Optional[str] = typer.Option(
        None, "--periods",
        help="rope_p/sipe_p periods: 'auto' (least k from the language's class, at least 2, default; an error "
        "outside LTL[P,MOD]) or e.g. 2 or 2,3.",
    )
    base: Optional[float] = typer.Option(
        None, "--base",
        help="Base beta of sipe/rope/partial_rope/jof_* (> 0; default 1e4). An error with nope/rope_p/sipe_p. Read "
        "as a float64 (1e-12: the double nearest it); the phases are exact for that double, and a note gives how "
        "far they are from the decimal's (docs/training.md).",
    )
    rope_fraction: Optional[float] = typer.Option(
        None, "--rope-fraction", help="partial_rope: fraction of rotated pairs (0..1, default 0.5)."
    )
    alphabet: Optional[str] = typer.Option(None, "--alphabet", "-a", help="Alphabet override, e.g. ab or a,b.")
    scale: Optional[str] = typer.Option(
        None, "--scale",
        help="Defaults from a named scale: quick (about a minute on one core), medium (the paper's model, batch and "
        "negatives, 2,000 steps) or paper (appendix E).",
    )
    steps: Optional[int] = typer.Option(None, "--steps", help="Training steps.")
    lr: Optional[float] = typer.Option(None, "--lr", help="AdamW learning rate.")
    lr_schedule: Optional[str] = typer.Option(
        None, "--lr-schedule", help="constant (default) or cosine (decay to 10% of --lr)."
    )
    warmup_steps: Optional[int] = typer.Option(
        None, "--warmup-steps", help="Linear learning-rate warm-up steps (default 0)."
    )
    weight_decay: Optional[float] = typer.Option(
        None, "--weight-decay", help="AdamW weight decay on weight matrices (default 0.01)."
    )
    train_near_miss: Optional[float] = typer.Option(
        None, "--train-near-miss",
        help="Share of training negatives replaced by near-misses (0..1; default 0, the paper's uniform negatives).",
    )
    sampling: Optional[str] = typer.Option(
        None, "--sampling",
        help="uniform (default: uniform within each class and length) or coverage: a quarter of each training "
        "batch's positives and negatives, half of each test length's positives and uniform negatives, drawn per "
        "transition of the minimal DFA, so rare transitions are trained and tested (docs/sampling.md).",
    )
    train_lengths: Optional[str] = typer.Option(
        None, "--train-lengths",
        help="Training length range, e.g. 0..40 (the default; with --data: the training file's lengths, and a range "
        "trains on its strings of those lengths).",
    )
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for initialisation and training batches.")
    batch_size: ro.BatchSize = None
    layers: ro.Layers = None
    d_model: ro.DModel = None
    heads: Optional[int] = typer.Option(None, "--heads", help="Attention heads (head dimension must be even).")
    eval_mode: ro.EvalMode = None
    worst_case_budget: ro.WorstCaseBudget = None
    phase_precision: Optional[str] = typer.Option(
        None, "--phase-precision",
        help="fp64: theta*i reduced mod 2pi in float64 (default); fp32: naive float32 product. "
        "Only for encodings with a base.",
    )
    attention: Optional[str] = typer.Option(
        None, "--attention", help="Attention implementation: auto, triton or torch."
    )
    n_per_length: Optional[int] = typer.Option(
        None, "--n-per-length",
        help="Test strings per length (default 512; quick scale 16). An error with --data (the "
        "test files' strings are used).",
    )
    nnch_samples: ro.NnchSamples = None
    layer_pe: ro.LayerPe = None
    window: ro.Window = None
    objective: ro.Objective = None
    init_from: Optional[str] = typer.Option(
        None, "--init-from",
        help="Continue from a checkpoint's weights with this run's settings: a .zip path, or a run id "
        "(checkpoints/ID.zip). Tensors both models have are loaded (same shapes); new ones keep their "
        "initialisation (jof_fixed -> jof_projected: a zero projector).",
    )
    test_lengths: Optional[str] = typer.Option(
        None, "--test-lengths",
        help="Test lengths: a range 41..500 (default) or a list 41,45,50 (ranges may be mixed in: 41..45,100). With "
        "--data: the test files' strings in the range, or of each listed length.",
    )

    def fields(self) -> dict:
        """RunConfig fields of the options given explicitly (None: not given), the text options parsed."""
        plain = {
            "base": self.base, "rope_fraction": self.rope_fraction, "steps": self.steps, "lr": self.lr,
            "lr_schedule": self.lr_schedule, "warmup_steps": self.warmup_steps, "weight_decay": self.weight_decay,
            "train_near_miss_fraction": self.train_near_miss, "seed": self.seed, "batch_size": self.batch_size,
            "layers": self.layers, "d_model": self.d_model, "heads": self.heads,
            "eval_mode": ro.parse_eval(self.eval_mode)[0],
            "phase_precision": self.phase_precision, "attention": self.attention, "n_per_length": self.n_per_length,
            "nnch_samples": self.nnch_samples, "init_from": self.init_from, "sampling": self.sampling,
            "objective": self.objective,
        }
        fields = {key: value for key, value in plain.items() if value is not None}
        if self.periods is not None:
            fields["periods"] = parse_periods(self.periods)
        fields.update(ro.hybrid_fields(self.layer_pe, self.window))
        if self.alphabet is not None:
            fields["alphabet"] = tuple(parse_alphabet(self.alphabet))
        if self.test_lengths is not None:
            fields.update(lengths_fields(self.test_lengths, "--test-lengths"))
        if self.train_lengths is not None:
            fields.update(lengths_fields(self.train_lengths, "--train-lengths", prefix="train"))
        return fields


@ro.with_option_groups
def train_command(
    lang: Optional[str] = typer.Option(
        None, "--lang",
        help="Language: registry name, ltl:<formula>, re:<regex>, bare expression, or .att file. With --data: the "
        "data's labels are checked against it.",
    ),
    data: Optional[Path] = typer.Option(
        None, "--data",
        help="Train and test on files instead of sampling: a FLaRe language folder (main.tok, labels.txt, "
        "datasets/test/) or an MLRegTest language DIR/<language> (see docs/formats.md).",
    ),
    pe: str = typer.Option("rope", "--pe", help=f"Positional encoding: {encoding_names()}."),
    settings: TrainSettings = None,
    set_fields: Optional[list[str]] = typer.Option(
        None, "--set",
        help="Any RunConfig field, FIELD=VALUE (repeatable), e.g. --set ffn_mult=2 --set grad_clip=0.5.",
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Checkpoint path (.zip; missing folders are created); default checkpoints/<run id>.zip."
    ),
    no_save: bool = typer.Option(False, "--no-save", help="Do not write a checkpoint."),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="torch CPU threads (default 1, fastest for these small models)."
    ),
    device: str = typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda."),
    state_flags: ro.TrainStateFlags = None,
    curve_flags: ro.CurveFlags = None,
    json_output: bool = typer.Option(False, "--json", help="Print the run result as one JSON object."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Train a transformer classifier, evaluate per-length accuracy and N*, and save a checkpoint.

    Example: formalrope train --lang "(ab)*" --pe rope_p --periods auto --scale quick
    """
    # function-local: the runs package imports torch, which `train --help` does without
    from formal_rope.runs import run_training

    check_positive(threads=threads)
    if lang is None and data is None:
        raise FormalRopeError("train needs --lang (a language to sample from) or --data (files to read), or both")
    explicit = settings.fields()
    assignments = parse_assignments(set_fields)
    explicit = _merge_set(explicit, assignments)
    defaults = dict(scale_overrides(settings.scale)) if settings.scale is not None else {}
    if data is not None:
        # The files' training and test lengths replace a scale's; lengths given explicitly
        # (--train-lengths, --test-lengths, --set) select part of the files' strings instead.
        defaults.update(data_settings(data, language=lang, alphabet=explicit.get("alphabet")))
    config = RunConfig(**{"language": lang, "pe": pe, **defaults, **explicit})
    given = {
        option: name for option, name in _EFFECT_OPTIONS.items() if name in explicit and name not in assignments
    }
    given.update({f"--set {name}": name for name in assignments})
    _refuse_options_without_effect(config, given, device, threads, out, no_save)
    if data is not None:
        config, fitted = fit_to_data(config)  # the run records the lengths it trains and tests on
        for note in fitted:
            _note(note)
    run = _resolve_with_notes(config)
    dfa = run.dfa
    checkpoint = None if no_save else (out if out is not None else Path("checkpoints") / f"{config.run_id()}.zip")
    state = state_flags.state(config, note=_note)
    curves = curve_flags.curves()
    worst_case = ro.worst_case_settings(ro.parse_eval(settings.eval_mode)[1], settings.worst_case_budget)
    if worst_case is not None and dfa is None:
        raise FormalRopeError("--eval worst-case labels its strings with the language's DFA; a run on data files "
                              "needs --lang for it")
    try:
        result, _ = run_training(
            run, progress=not (quiet or json_output), checkpoint_path=checkpoint, device=device,
            threads=1 if threads is None else threads, state=state, worst_case=worst_case,
            init_dir=TRAIN_CHECKPOINT_DIR, curve_options=curves,
        )
    except KeyboardInterrupt:
        kept = ("no checkpoint was written" if state is None else
                f"the training state saved every {state.every:,} steps is kept in {state.uri}; run the same "
                "command with --resume to continue from it")
        raise Interrupted(kept) from None
    if result.status == "failed":
        checkpoint = None if result.steps_done == 0 else checkpoint
    if json_output:
        payload = result.to_dict()
        payload["checkpoint"] = str(checkpoint) if checkpoint is not None else None
        print(json.dumps(json_ready(payload), allow_nan=False))
    else:
        _render(result, checkpoint)
    if result.status == "failed":
        print(f"run failed: {result.error}", file=sys.stderr)
        raise typer.Exit(1)
