"""CLI: `export` — a saved model as safetensors + config.json + one self-contained PyTorch file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from formal_rope.export import export_model


def export_command(
    model: Path = typer.Argument(
        ...,
        help="Model file: a compiled model (`formalrope compile --out`) or a trained "
        "checkpoint (`formalrope train --out`).",
    ),
    out: Path = typer.Option(
        ..., "--out", help="Folder to write model.safetensors, config.json and model.py into."
    ),
    fmt: str = typer.Option(
        "safetensors", "--format",
        help="safetensors (weights + config + a torch-only model.py). transformer-lens is refused with the reason: "
        "HookedTransformer cannot hold these models exactly (strict-causal mask, "
        "per-pair/periodic rotary, eos readout).",
    ),
    dtype: Optional[str] = typer.Option(
        None, "--dtype",
        help="Compiled models: fp64, fp32, bf16 or fp16 (default: the compiled format). Trained models: fp32.",
    ),
    json_output: bool = typer.Option(False, "--json", help="Print what was written as a JSON object."),
) -> None:
    """Export a saved model as plain PyTorch: load it with `import model; model.load(DIR).classify([...])`."""
    result = export_model(model, out, fmt=fmt, dtype=dtype)
    summary = {"model": str(model), "kind": result.kind, "out": result.out, "files": list(result.files),
               "dtype": result.dtype, "tensors": result.tensors, "parameters": result.parameters,
               "notes": list(result.notes)}
    if json_output:
        print(json.dumps(summary))
        return
    table = Table(title=f"export {model} ({result.kind})", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("written", "\n".join(result.files))
    table.add_row("dtype", result.dtype)
    table.add_row("tensors", f"{result.tensors} ({result.parameters:,} numbers)")
    table.add_row(
        "load with", f"import sys; sys.path.insert(0, {result.out!r}); import model; model.load({result.out!r})"
    )
    for note in result.notes:
        table.add_row("note", note)
    Console().print(table)
