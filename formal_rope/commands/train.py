"""CLI: `train` — train one classifier, evaluate length generalisation (N*), save a checkpoint."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Optional

import typer

from formal_rope.commands import run_options as ro
from formal_rope.errors import FormalRopeError


def parse_periods(text: str | None) -> tuple[int, ...] | None:
    """'auto' (or nothing) -> None; '2' or '2,3' -> (2,) / (2, 3); anything else is a user error."""
    if text is None or text.strip().lower() == "auto":
        return None
    try:
        periods = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise FormalRopeError(f"error: --periods must be 'auto' or positive integers like 2 or 2,3, got {text!r}") from None
    if not periods or min(periods) <= 0:
        raise FormalRopeError(f"error: --periods must be 'auto' or positive integers like 2 or 2,3, got {text!r}")
    return periods


def parse_length_range(text: str) -> tuple[int, int]:
    """'41..500' -> (41, 500); a single number n -> (n, n)."""
    try:
        if ".." in text:
            low, high = (int(part) for part in text.split("..", 1))
        else:
            low = high = int(text)
    except ValueError:
        raise FormalRopeError(f"error: --test-lengths must look like 41..500, got {text!r}") from None
    if low < 0 or low > high:
        raise FormalRopeError(f"error: --test-lengths {text!r} is not a non-empty range of non-negative lengths")
    return low, high


def json_ready(value):
    """NaN/inf (a diverged or failed run's accuracy, a diverged loss) -> None, so --json output is
    strict JSON that every parser accepts (json.dumps would write the non-standard token NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    return value


def _length_runs(per_length) -> list[tuple[int, int, float]]:
    """Consecutive lengths with equal accuracy collapsed into (first, last, accuracy) runs."""
    runs: list[tuple[int, int, float]] = []
    for result in per_length:
        if runs and runs[-1][2] == result.accuracy and runs[-1][1] + 1 == result.length:
            runs[-1] = (runs[-1][0], result.length, result.accuracy)
        else:
            runs.append((result.length, result.length, result.accuracy))
    return runs


def _render(result, checkpoint: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    config = result.config
    summary = Table(title=f"train {config.language} with {config.pe}", show_header=False)
    summary.add_column("key", style="bold")
    summary.add_column("value", overflow="fold")
    summary.add_row("status", result.status + (f" ({result.error})" if result.error else ""))
    summary.add_row("run id", result.run_id)
    summary.add_row("alphabet", "{" + ", ".join(result.alphabet or ()) + "}")
    if result.resolved_periods is not None:
        summary.add_row("periods", ",".join(map(str, result.resolved_periods)) + (" (auto)" if config.periods is None else ""))
    summary.add_row("model", f"{config.layers} layers, d_model {config.d_model}, {config.heads} heads")
    summary.add_row("training", f"{result.steps_done} steps, batch {config.batch_size}, lr {config.lr:g}, final loss "
                    + (f"{result.final_loss:.3g}" if result.final_loss is not None else "-"))
    summary.add_row("N*", str(result.n_star))
    if result.per_length:
        stopped = "" if result.eval_complete else ", stopped at the first imperfect length"
        summary.add_row("accuracy", f"{result.accuracy:.4f} (mean over {len(result.per_length)} lengths{stopped})")
    else:
        summary.add_row("accuracy", "- (not evaluated)")
    summary.add_row("first failing string", result.first_failure if result.first_failure is not None else "none")
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


def register(app: typer.Typer) -> None:
    @app.command("train")
    def train(
        lang: str = typer.Option(..., "--lang", help="Language: registry name, ltl:<formula>, re:<regex>, bare expression, or .att file."),
        pe: str = typer.Option("rope", "--pe", help="Positional encoding: nope, sipe, sipe_p, rope, rope_p, partial_rope, jof_fixed, jof_learned, jof_projected."),
        periods: Optional[str] = typer.Option(None, "--periods", help="rope_p/sipe_p periods: 'auto' (least k from the language's class, default) or e.g. 2 or 2,3."),
        base: Optional[float] = typer.Option(None, "--base", help="Base beta of rope/sipe/partial_rope/jof_* (> 0; default 1e4)."),
        rope_fraction: Optional[float] = typer.Option(None, "--rope-fraction", help="partial_rope: fraction of rotated pairs (0..1, default 0.5)."),
        alphabet: Optional[str] = typer.Option(None, "--alphabet", help="Alphabet override, e.g. ab or a,b."),
        scale: Optional[str] = typer.Option(None, "--scale", help="Defaults from a named scale: quick (about a minute on one core) or paper (appendix E)."),
        steps: Optional[int] = typer.Option(None, "--steps", help="Training steps."),
        lr: Optional[float] = typer.Option(None, "--lr", help="AdamW learning rate."),
        seed: Optional[int] = typer.Option(None, "--seed", help="Seed for initialisation and training batches."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Training batch size."),
        layers: Optional[int] = typer.Option(None, "--layers", help="Transformer layers."),
        d_model: Optional[int] = typer.Option(None, "--d-model", help="Model width."),
        heads: Optional[int] = typer.Option(None, "--heads", help="Attention heads (head dimension must be even)."),
        eval_mode: Optional[str] = typer.Option(None, "--eval", help="full: every test length; nstar: stop at the first imperfect length."),
        phase_precision: Optional[str] = typer.Option(None, "--phase-precision", help="fp64: theta*i reduced mod 2pi in float64 (default); fp32: naive float32 product."),
        attention: Optional[str] = typer.Option(None, "--attention", help="Attention implementation: auto, triton or torch."),
        n_per_length: Optional[int] = typer.Option(None, "--n-per-length", help="Test strings per length (default 512; quick scale 16)."),
        test_lengths: Optional[str] = typer.Option(None, "--test-lengths", help="Test length range, e.g. 41..500."),
        out: Optional[Path] = typer.Option(None, "--out", help="Checkpoint path (.zip); default checkpoints/<run id>.zip."),
        no_save: bool = typer.Option(False, "--no-save", help="Do not write a checkpoint."),
        threads: int = typer.Option(1, "--threads", help="torch CPU threads (1 is fastest for these small models)."),
        device: str = typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda."),
        checkpoint_every: ro.CheckpointEvery = None, state_dir: ro.TrainStateDir = None, resume: ro.Resume = False,
        json_output: bool = typer.Option(False, "--json", help="Print the run result as one JSON object."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    ) -> None:
        """Train a transformer classifier, evaluate per-length accuracy and N*, and save a checkpoint.

        Example: formalrope train --lang "(ab)*" --pe rope_p --periods auto --scale quick
        """
        from formal_rope.training.config import RunConfig
        from formal_rope.training.scales import scale_overrides
        from formal_rope.training.train import run_training

        fields: dict = {"language": lang, "pe": pe}
        if alphabet is not None:
            from formal_rope.lang.source import parse_alphabet

            fields["alphabet"] = tuple(parse_alphabet(alphabet))
        if scale is not None:
            fields.update(scale_overrides(scale))
        explicit = {
            "periods": parse_periods(periods),
            "base": base,
            "rope_fraction": rope_fraction,
            "steps": steps,
            "lr": lr,
            "seed": seed,
            "batch_size": batch_size,
            "layers": layers,
            "d_model": d_model,
            "heads": heads,
            "eval_mode": eval_mode,
            "phase_precision": phase_precision,
            "attention": attention,
            "n_per_length": n_per_length,
        }
        fields.update({key: value for key, value in explicit.items() if value is not None})
        if test_lengths is not None:
            fields["test_min_length"], fields["test_max_length"] = parse_length_range(test_lengths)
        if threads < 1:
            raise FormalRopeError(f"error: --threads must be at least 1, got {threads}")
        config = RunConfig(**fields)
        checkpoint = None if no_save else (out if out is not None else Path("checkpoints") / f"{config.run_id()}.zip")
        state = ro.train_state(config, checkpoint_every, state_dir, resume)
        result, _ = run_training(
            config, progress=not (quiet or json_output), checkpoint_path=checkpoint, device=device, threads=threads,
            state=state,
        )
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
