"""CLI: `attack` — the worst-case search of a saved model (trained or compiled) against a language."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import torch
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from formal_rope.commands.terminal import describe_lengths, json_ready
from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.engine import SearchSettings
from formal_rope.evaluation.loading import load_runnable
from formal_rope.evaluation.models import model_dfa, model_language, worst_case
from formal_rope.model.certificate import model_certificate
from formal_rope.model.io import CompiledRunnable
from formal_rope.progress import progress_display
from formal_rope.run_config.text import lengths_fields


def _lengths(text: str | None, model) -> list[int] | range:
    """--lengths (a range 41..500 or a list 41,100,2000); default: a trained model's own test
    lengths, 41..500 for a compiled one."""
    if text is None:
        config = getattr(model, "config", None)
        return config.tested_lengths() if config is not None else range(41, 501)
    fields = lengths_fields(text, "--lengths")
    if fields.get("test_lengths") is not None:
        return list(fields["test_lengths"])
    return range(fields["test_min_length"], fields["test_max_length"] + 1)


def _render(payload: dict) -> None:
    console = Console()
    summary = Table(title=f"attack {payload['model']}", show_header=False)
    summary.add_column("key", style="bold")
    summary.add_column("value", overflow="fold")
    summary.add_row("model", f"{payload['kind']}" + (f" ({payload['format']}, {payload['mode']})"
                                                      if payload["kind"] == "compiled" else ""))
    summary.add_row("language", payload["language"])
    lengths = payload["lengths"]
    summary.add_row("lengths", f"{describe_lengths(lengths)} ({len(lengths)} lengths)" if len(lengths) > 1
                    else str(lengths[0]))  # as given: 41, 43, 45 is not 41..45
    summary.add_row("search", f"budget {payload['budget']} strings per length beyond {payload['start']} start strings, "
                    f"seed {payload['seed']}")
    if "certified_length" in payload:
        certified = payload["certified_length"]
        summary.add_row("certified length", "every length" if certified is None else str(certified))
    summary.add_row("N* (start sets)", str(payload["n_star_start"]))
    summary.add_row("worst-case N*", str(payload["n_star_worst"]))
    untested = [entry for entry in payload["per_length"]
                if not entry["failures"] and (entry["unscored"] or entry["start_unscored"])]
    if untested:
        first = untested[0]
        where = (f"no {' or '.join(first['unscored'])} string scored" if first["unscored"]
                 else f"no {' or '.join(first['start_unscored'])} string in the start set")
        summary.add_row("not counted", f"{len(untested)} length{'s' if len(untested) > 1 else ''} where a class that "
                        f"exists was not tested (first: length {first['length']}, {where}); N* stops at the first "
                        "(raise --start or --budget)")
    failure = payload["failure"]
    if failure is None:
        summary.add_row("failing string", "none found")
    else:
        label = "in L, rejected" if payload["failure_label"] else "not in L, accepted"
        margin = "" if payload["failure_margin"] is None else f", margin {payload['failure_margin']:.4g}"
        text = failure if failure else '"" (the empty string)'
        summary.add_row("failing string", f"{text} (length {payload['failure_length']}: {label}{margin})")
    summary.add_row("strings tried", f"{payload['tried']:,} ({payload['wall_s']:.1f} s)")
    console.print(summary)
    failing = [entry for entry in payload["per_length"] if entry["failures"]]
    if failing:
        table = Table(title="lengths with failures")
        for name in ("length", "tried", "failures", "in start set", "margin", "string"):
            table.add_column(name, justify="right" if name != "string" else "left", overflow="fold")
        for entry in failing[:20]:
            margin = "–" if entry["failure_margin"] is None else f"{entry['failure_margin']:.4g}"
            text = entry["failure"] if len(entry["failure"]) <= 60 else entry["failure"][:57] + "..."
            text = text or '""'  # the empty string
            table.add_row(str(entry["length"]), str(entry["tried"]), str(entry["failures"]),
                          str(entry["start_failures"]), margin, text)
        console.print(table)


def attack_command(
    model_path: Path = typer.Argument(..., metavar="MODEL", help="A model file: a trained checkpoint (train --out) "
                                      "or a compiled model (compile --out)."),
    lang: Optional[str] = typer.Option(
        None, "--lang",
        help="The language that labels the search's strings (default: the model's own: its training language, or "
        "its compiled formula), over the model's alphabet.",
    ),
    lengths: Optional[str] = typer.Option(
        None, "--lengths",
        help="Lengths to search: a range 41..500 or a list 41,100,2000 (default: a trained model's test lengths; "
        "41..500 for a compiled one).",
    ),
    budget: int = typer.Option(256, "--budget", help="Strings per length the search scores beyond the start set."),
    seed: int = typer.Option(0, "--seed", help="Seed of every draw of the search (and of its start sets)."),
    start: Optional[int] = typer.Option(
        None, "--start",
        help="Start strings per length, a balanced sampled set (default: a trained model's own test sets, its "
        "n_per_length and eval_seed; 16 for a compiled model).",
    ),
    fmt: Optional[str] = typer.Option(
        None, "--format", "-F", help="A compiled model's number format (default: the one it was compiled for)."
    ),
    mode: Optional[str] = typer.Option(
        None, "--mode", help="A compiled model's arithmetic: emulated (default) or native (torch)."
    ),
    all_lengths: bool = typer.Option(
        False, "--all-lengths", help="Search every length (default: stop at the first failing one)."
    ),
    device: str = typer.Option("cpu", "--device", help="torch device of a trained model, e.g. cpu or cuda."),
    json_output: bool = typer.Option(False, "--json", help="Print the result (every searched length) as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Search a saved model for misclassified strings (worst-case N*): mutate the sampled test strings toward the model's wrong class, enumerate small classes exactly."""  # noqa: E501 (Typer lists the command by this line, breaks included)
    if budget < 0 or (start is not None and start < 0) or seed < 0:
        raise FormalRopeError("--budget, --start and --seed must be non-negative")
    model = load_runnable(model_path, mode=mode or "emulated")
    compiled = isinstance(model, CompiledRunnable)
    if not compiled and (fmt is not None or mode is not None):
        raise FormalRopeError("--format and --mode apply to compiled models; a trained model is searched in fp32")
    torch.set_num_threads(1)
    tested = _lengths(lengths, model)
    language = lang if lang is not None else model_language(model)
    dfa = model_dfa(model, language)
    settings = SearchSettings(budget=budget, seed=seed, stop_at_first_failure=not all_lengths)
    fmt_name = (fmt or model.default_format) if compiled else "fp32"
    started = time.perf_counter()
    search = dict(model=model, dfa=dfa, lengths=tested, budget=budget, seed=seed, n_start=start, settings=settings,
                  fmt=fmt if compiled else None, mode=mode if compiled else None, device=device)
    found = _search(search, len(tested), show=not (json_output or quiet))
    payload = {
        "model": str(model_path), "kind": "compiled" if compiled else "trained", "language": language,
        "lengths": [int(n) for n in tested],
        "budget": budget, "seed": seed,
        "start": start if start is not None else (16 if compiled else model.config.n_per_length),
        "format": fmt_name, "mode": (mode or model.mode) if compiled else "native",
        **found.to_dict(), "wall_s": time.perf_counter() - started,
    }
    if compiled:
        certificate = model_certificate(model.model, fmt_name, payload["mode"], up_to=max(tested))
        if certificate.available:  # a hand-built model has no certificate
            payload["certified_length"] = certificate.certified_length
    if json_output:
        print(json.dumps(json_ready(payload), allow_nan=False))
    else:
        _render(payload)
    sys.stdout.flush()


def _search(search: dict, n_lengths: int, show: bool):
    """worst_case(**search), with a progress bar on stderr when `show`."""
    bar = None
    if show:
        bar = progress_display(TextColumn("[bold]attack"), BarColumn(), MofNCompleteColumn(),
                               TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=Console(stderr=True),
                               label="attack")
        bar.start()
        task = bar.add_task("", total=n_lengths, info="")
    seen = {"lengths": 0, "n_star_worst": 0, "perfect": True, "tried": 0}

    def on_length(entry) -> None:
        seen["lengths"] += 1
        seen["tried"] += entry.tried
        seen["perfect"] = seen["perfect"] and entry.passed
        seen["n_star_worst"] = entry.length if seen["perfect"] else seen["n_star_worst"]
        if bar is not None:
            bar.update(task, completed=seen["lengths"], info=f"len {entry.length} worst-case N* so far "
                       f"{seen['n_star_worst']} ({seen['tried']:,} strings)")

    try:
        return worst_case(**search, on_length=on_length)
    finally:
        if bar is not None:
            bar.stop()
