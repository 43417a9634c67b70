"""CLI: `sample` — labelled test strings of exact lengths, uniform inside / outside a language."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from formal_rope.commands.terminal import prepare_out, prepare_out_folder, stdout_console

from formal_rope.errors import FormalRopeError

# Requests with more strings than this get a progress bar (on stderr, so stdout stays clean JSON).
_PROGRESS_THRESHOLD = 20_000
# All strings are held at once (int64 symbols, then text): about 14 bytes per symbol at peak, so
# this is about 3.5 GB -- four times the paper's test set (512 × 41..500 = 63.7M symbols). Larger
# requests used to die in numpy's MemoryError (or the OOM killer) after minutes of work.
_MAX_SYMBOLS = 256_000_000
# Checked while --lengths is expanded, before a range such as 0..10^12 becomes a list.
_MAX_LENGTHS = 1_000_000


def parse_lengths(text: str) -> list[int]:
    """'41..500' (inclusive range), '10,20,30', '5', or a comma-separated mix ('1..3,10')."""
    lengths: list[int] = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        try:
            if ".." in part:
                low_text, high_text = part.split("..", 1)
                low, high = int(low_text), int(high_text)
                if low > high:
                    raise FormalRopeError(f"--lengths range {part!r} is empty (start > end)")
                if high - low + 1 + len(lengths) > _MAX_LENGTHS:
                    raise FormalRopeError(
                        f"--lengths {text!r} lists more than {_MAX_LENGTHS:,} lengths; sample fewer per call"
                    )
                lengths.extend(range(low, high + 1))
            else:
                lengths.append(int(part))
        except ValueError:
            raise FormalRopeError(
                f"--lengths: {part!r} is not a length; use e.g. 41..500, 10,20,30 or 5"
            ) from None
    if not lengths:
        raise FormalRopeError("--lengths is empty; use e.g. 41..500, 10,20,30 or 5")
    if min(lengths) < 0:
        raise FormalRopeError(f"--lengths must be non-negative, got {min(lengths)}")
    return lengths


def distinct_lengths(lengths: list[int]) -> tuple[list[int], list[int]]:
    """(each length once, in first-seen order; the lengths that were listed more than once).

    A length's strings depend only on (seed, length), so sampling it twice would only repeat rows."""
    counts: dict[int, int] = {}
    for length in lengths:
        counts[length] = counts.get(length, 0) + 1
    return list(counts), [length for length, count in counts.items() if count > 1]


def describe_lengths(lengths: list[int]) -> str:
    """The lengths as written back: consecutive runs as ranges ('1, 3, 7, 20', '41..500', '1..3, 10')."""
    parts: list[str] = []
    ordered = sorted(lengths)
    start = 0
    for index in range(1, len(ordered) + 1):
        if index == len(ordered) or ordered[index] != ordered[index - 1] + 1:
            low, high = ordered[start], ordered[index - 1]
            parts.append(str(low) if low == high else (f"{low}, {high}" if high == low + 1 else f"{low}..{high}"))
            start = index
    return ", ".join(parts)


def _repeated_note(repeated: list[int]) -> str:
    shown = ", ".join(map(str, repeated[:10])) + (f" and {len(repeated) - 10} more" if len(repeated) > 10 else "")
    return (
        f"--lengths lists {shown} more than once; each length is sampled once "
        "(its strings depend only on --seed and the length, so a repeat would only duplicate rows)"
    )


def _generate(dfa, lengths: list[int], n: int, seed: int, near_miss: float, quiet: bool):
    from formal_rope.sampling import test_sets

    total = len(lengths) * n
    if quiet or total < _PROGRESS_THRESHOLD:
        return test_sets(dfa, lengths, n, seed, near_miss)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]sampling lengths"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("sample", total=len(lengths))
        return test_sets(dfa, lengths, n, seed, near_miss, progress=lambda done: progress.update(task, completed=done))


def _rows(sets, alphabet):
    """(string, label, length, near_miss) columns for all sets, decoded once per length."""
    import numpy as np

    from formal_rope.sampling import decode

    strings: list[str] = []
    for labeled in sets:
        strings.extend(decode(labeled.symbols, alphabet))
    labels = np.concatenate([labeled.labels for labeled in sets]) if sets else np.zeros(0, bool)
    lengths = np.concatenate([np.full(len(labeled), labeled.length) for labeled in sets]) if sets else np.zeros(0, int)
    near = np.concatenate([labeled.near_miss for labeled in sets]) if sets else np.zeros(0, bool)
    return strings, labels, lengths, near


def _summary(language, sets, elapsed: float, out: Path | None) -> dict:
    n_total = sum(len(labeled) for labeled in sets)
    n_positive = int(sum(int(labeled.labels.sum()) for labeled in sets))
    n_near = sum(labeled.n_near_miss for labeled in sets)
    notes = [labeled.note for labeled in sets if labeled.note]
    return {
        "language": language.expression,
        "alphabet": list(language.alphabet),
        "lengths": [s.length for s in sets],  # every length sampled, in the order given
        "n_lengths": len(sets),
        "strings": n_total,
        "positive": n_positive,
        "negative": n_total - n_positive,
        "near_miss": n_near,
        "one_class_lengths": sum("only" in note for note in notes),
        "no_near_miss_lengths": sum("no near-miss" in note for note in notes),
        "notes": notes[:5],
        "seconds": round(elapsed, 3),
        "out": str(out) if out is not None else None,
    }


def register(app: typer.Typer) -> None:
    @app.command("sample")
    def sample(
        expression: str = typer.Argument(
            ..., help="Language: registry name, ltl:<formula>, re:<regex>, bare expression, or .att file."
        ),
        lengths: str = typer.Option("41..500", "--lengths", help="Exact string lengths: 41..500, 10,20,30 or 5."),
        n: int = typer.Option(512, "--n", help="Strings per length (>= 1; half positive, half negative when both exist)."),
        seed: int = typer.Option(0, "--seed", help="Seed; each length's strings depend only on (seed, length)."),
        near_miss: float = typer.Option(
            0.5, "--near-miss", help="Fraction of the negatives (0..1) that are near-misses: one substitution from a positive."
        ),
        alphabet: Optional[str] = typer.Option(None, "--alphabet", "-a", help="Alphabet override, e.g. ab or a,b."),
        out: Optional[Path] = typer.Option(
            None, "--out", help="Write a Parquet file (columns string,label,length,near_miss) instead of JSON lines on stdout."
        ),
        data_format: Optional[str] = typer.Option(
            None, "--format", help="With --out: parquet (default; one file), flare (a FLaRe split folder: main.tok, labels.txt, "
            "num-edits.txt, log-probabilities.txt, next-symbols.jsonl) or mlregtest (one string<TAB>TRUE|FALSE file). See docs/formats.md."
        ),
        next_symbols: Optional[bool] = typer.Option(
            None, "--next-symbols/--no-next-symbols", help="--format flare: also write next-symbols.jsonl (default: yes; len+1 entries per positive; large for long strings)."
        ),
        json_output: bool = typer.Option(False, "--json", help="With --out: print the summary as a JSON object (without --out the output is already JSON lines)."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar or notes on stderr."),
    ) -> None:
        """Sample labelled strings of exact lengths, uniformly inside and outside the language.

        Without --out, prints one JSON object per line: {"string", "label", "length", "near_miss"}.
        """
        from formal_rope.automata import language_dfa
        from formal_rope.lang.source import resolve_language

        # Range checks here rather than typer's min/max, so they surface as one-paragraph user errors.
        if n < 1:
            raise FormalRopeError(f"--n must be at least 1, got {n}")
        if not 0.0 <= near_miss <= 1.0:
            raise FormalRopeError(f"--near-miss is a fraction of the negatives and must lie in [0, 1], got {near_miss}")
        if seed < 0:
            raise FormalRopeError(f"--seed must be a non-negative integer, got {seed}")
        if data_format is not None and (data_format not in ("flare", "mlregtest", "parquet") or out is None):
            raise FormalRopeError(f"--format takes flare, mlregtest or parquet, with --out; got --format {data_format}"
                                  + ("" if out is not None else " without --out"))
        if next_symbols is not None and data_format != "flare" and not quiet:
            option = "--next-symbols" if next_symbols else "--no-next-symbols"
            print(f"note: {option} concerns FLaRe's next-symbols.jsonl and has no effect without --format flare",
                  file=sys.stderr)
        next_symbols = True if next_symbols is None else next_symbols
        if out is not None and data_format in (None, "parquet", "mlregtest"):
            prepare_out(out, "--out")  # before sampling: a directory or an unwritable folder
        elif out is not None:
            prepare_out_folder(out, "--out")  # a FLaRe split is a folder
        requested, repeated = distinct_lengths(parse_lengths(lengths))
        if repeated and not quiet:
            print(f"note: {_repeated_note(repeated)}", file=sys.stderr)
        total_symbols = n * sum(requested)
        if total_symbols > _MAX_SYMBOLS:
            raise FormalRopeError(
                f"--lengths {lengths} with --n {n} asks for {total_symbols:,} symbols (n × the sum of the "
                f"lengths), more than one call holds in memory ({_MAX_SYMBOLS:,}, about 14 bytes each); "
                "split the lengths over several calls (each length's strings depend only on --seed and the length)"
            )
        language = resolve_language(expression, alphabet)
        if language.detected and not quiet:
            print(f"note: {expression!r} {language.detected}", file=sys.stderr)
        dfa = language_dfa(language)
        started = time.perf_counter()
        sets = _generate(dfa, requested, n, seed, near_miss, quiet)
        elapsed = time.perf_counter() - started
        if out is None:
            strings, labels, string_lengths, near = _rows(sets, dfa.alphabet)
            write = sys.stdout.write
            for string, label, length, is_near in zip(strings, labels.tolist(), string_lengths.tolist(), near.tolist()):
                write(json.dumps({"string": string, "label": label, "length": length, "near_miss": is_near}) + "\n")
            if not quiet:
                for labeled in sets:
                    if labeled.note:
                        print(f"note: {labeled.note}", file=sys.stderr)
            return

        from formal_rope.sampling.formats import write_sets

        files = write_sets(data_format or "parquet", out, sets, dfa, next_symbols=next_symbols)
        summary = _summary(language, sets, elapsed, out)
        summary["format"], summary["files"] = data_format or "parquet", [str(path) for path in files]
        if json_output:
            print(json.dumps(summary))
            return
        from rich.table import Table

        table = Table(title=f"sample {language.expression} over {{{', '.join(language.alphabet)}}}", show_header=False)
        table.add_column("key", style="bold")
        table.add_column("value", overflow="fold")  # long output paths wrap instead of being cut
        table.add_row("lengths", f"{describe_lengths(summary['lengths'])} ({summary['n_lengths']} lengths)")
        table.add_row("strings", f"{summary['strings']:,} ({summary['positive']:,} positive, {summary['negative']:,} negative)")
        table.add_row("near-misses", f"{summary['near_miss']:,}")
        table.add_row("one-class lengths", str(summary["one_class_lengths"]))
        table.add_row("lengths without near-misses", str(summary["no_near_miss_lengths"]))
        table.add_row("sampling time", f"{elapsed:.2f} s ({summary['strings'] / max(elapsed, 1e-9):,.0f} strings/s)")
        table.add_row("written", "\n".join(summary["files"]))
        stdout_console().print(table)
