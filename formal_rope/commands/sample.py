"""CLI: `sample` — labelled test strings of exact lengths, uniform inside / outside a language.

`sample --help` lists the formats and distributions from light modules; the library that samples
(numpy and up) is imported inside the functions that use it, so that the help stays numpy-free."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

import formal_rope.sampling.formats.registry as format_registry
from formal_rope import limits
from formal_rope.commands.terminal import describe_lengths, prepare_out, prepare_out_folder, stdout_console
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.numbers import int_text
from formal_rope.progress import progress_display
from formal_rope.sampling.distributions import (
    DEFAULT_DISTRIBUTION,
    DISTRIBUTIONS,
    positive_distribution,
)
from formal_rope.sampling.formats.layout import FolderSplit
from formal_rope.sampling.formats.registry import DEFAULT_FORMAT, dataset_format, format_help, listed, write_sets

# Requests with more strings than this get a progress bar (on stderr, so stdout stays clean JSON).
_PROGRESS_THRESHOLD = 20_000
# All strings are held at once (int64 symbols, then text).
_MAX_SYMBOLS = limits.MAX_SAMPLED_SYMBOLS
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
                low, high = int_text(low_text), int_text(high_text)
                if low > high:
                    raise FormalRopeError(f"--lengths range {part!r} is empty (start > end)")
                if high - low + 1 + len(lengths) > _MAX_LENGTHS:
                    raise FormalRopeError(
                        f"--lengths {text!r} lists more than {_MAX_LENGTHS:,} lengths; sample fewer per call"
                    )
                lengths.extend(range(low, high + 1))
            else:
                lengths.append(int_text(part))
        except ValueError:
            raise FormalRopeError(
                f"--lengths: {part!r} is not a length; use e.g. 41..500, 10,20,30 or 5"
            ) from None
    if not lengths:
        raise FormalRopeError("--lengths is empty; use e.g. 41..500, 10,20,30 or 5")
    if min(lengths) < 0:
        raise FormalRopeError(f"--lengths must be non-negative, got {min(lengths)}")
    if max(lengths) > limits.MAX_SAMPLE_LENGTH:
        raise FormalRopeError(
            f"--lengths {text!r}: at most {limits.describe('MAX_SAMPLE_LENGTH')} symbols per string (they are drawn "
            f"position by position); got {max(lengths):,}"
        )
    return lengths


def distinct_lengths(lengths: list[int]) -> tuple[list[int], list[int]]:
    """(each length once, in first-seen order; the lengths that were listed more than once).

    A length's strings depend only on (seed, length), so sampling it twice would only repeat rows."""
    counts: dict[int, int] = {}
    for length in lengths:
        counts[length] = counts.get(length, 0) + 1
    return list(counts), [length for length, count in counts.items() if count > 1]


def _repeated_note(repeated: list[int]) -> str:
    shown = ", ".join(map(str, repeated[:10])) + (f" and {len(repeated) - 10} more" if len(repeated) > 10 else "")
    return (
        f"--lengths lists {shown} more than once; each length is sampled once "
        "(its strings depend only on --seed and the length, so a repeat would only duplicate rows)"
    )


def parse_split(text: str) -> FolderSplit:
    """--split NAME=A..B:STRINGS (either part may be left out: NAME=A..B, NAME=:STRINGS) as an
    override of one split of a language folder; unset parts are -1 (kept from the format's split)."""
    name, equals, rest = text.partition("=")
    lengths, colon, count = rest.partition(":")
    low = high = strings = -1
    try:
        if lengths:
            low_text, dots, high_text = lengths.partition("..")
            if not dots:
                raise ValueError
            low, high = int_text(low_text), int_text(high_text)
        if colon:
            strings = int_text(count)
    except ValueError:
        raise FormalRopeError(
            f"--split {text!r}: expected NAME=A..B:STRINGS, NAME=A..B or NAME=:STRINGS, e.g. test=0..500:5010"
        ) from None
    if not name.strip() or not equals or (low < 0 and strings < 0):
        raise FormalRopeError(
            f"--split {text!r}: expected NAME=A..B:STRINGS, NAME=A..B or NAME=:STRINGS, e.g. test=0..500:5010"
        )
    if lengths and not 0 <= low <= high:
        raise FormalRopeError(f"--split {text!r}: the lengths must satisfy 0 <= A <= B")
    if colon and strings < 1:
        raise FormalRopeError(f"--split {text!r}: a split needs at least one string")
    return FolderSplit(name.strip(), "", low, high, strings)


def _folder_splits(fmt: str, texts: list[str]) -> tuple[FolderSplit, ...]:
    """The format's folder splits with each --split applied (its unset parts kept)."""
    defaults = {split.name: split for split in dataset_format(fmt).folder_splits}
    overrides = []
    for override in map(parse_split, texts):
        base = defaults.get(override.name)
        if base is None:
            raise FormalRopeError(
                f"--split {override.name}: {fmt} language folders have the splits {', '.join(defaults)}"
            )
        low, high = (override.min_length, override.max_length) if override.min_length >= 0 else (
            base.min_length, base.max_length)
        overrides.append(FolderSplit(base.name, base.path, low, high,
                                     override.strings if override.strings >= 0 else base.strings))
    from formal_rope.sampling.formats.folders import folder_splits  # function-local: numpy, off `sample --help`

    return folder_splits(fmt, overrides)


def _generate(dfa, lengths: list[int], n: int, seed: int, near_miss: float, quiet: bool, distribution: str):
    from formal_rope.sampling import test_sets  # function-local: numpy, off `sample --help`

    total = len(lengths) * n
    if quiet or total < _PROGRESS_THRESHOLD:
        return test_sets(dfa, lengths, n, seed, near_miss, distribution=distribution)
    with progress_display(
        TextColumn("[bold]sampling lengths"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        label="sampling lengths",
    ) as progress:
        task = progress.add_task("", total=len(lengths))
        return test_sets(dfa, lengths, n, seed, near_miss, progress=lambda done: progress.update(task, completed=done),
                         distribution=distribution)


def _rows(sets, alphabet):
    """(string, label, length, near_miss) columns for all sets, decoded once per length."""
    import numpy as np  # function-local: numpy, off `sample --help`

    from formal_rope.sampling import decode  # function-local: numpy, as above

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


def _counts(sets) -> tuple[int, int, int]:
    n_total = sum(len(labeled) for labeled in sets)
    return (
        n_total, int(sum(int(labeled.labels.sum()) for labeled in sets)), sum(labeled.n_near_miss for labeled in sets)
    )


def _folder_summary(language, written, elapsed: float, out: Path, fmt: str, distribution: str) -> dict:
    splits = []
    for split in written:
        n_total, n_positive, n_near = _counts(split.sets)
        splits.append({
            "name": split.split.name, "out": str(split.out),
            "lengths": f"{split.split.min_length}..{split.split.max_length}", "strings": n_total,
            "positive": n_positive, "negative": n_total - n_positive, "near_miss": n_near,
            "files": [str(path) for path in split.files],
        })
    return {
        "language": language.expression, "alphabet": list(language.alphabet), "format": fmt,
        "layout": "language-folder", "distribution": distribution, "out": str(out), "splits": splits,
        "files": [path for split in splits for path in split["files"]], "seconds": round(elapsed, 3),
    }


def _print_folder_table(language, summary: dict) -> None:
    table = Table(title=f"sample {language.expression} over {{{', '.join(language.alphabet)}}}: "
                        f"{summary['format']} language folder {summary['out']}")
    for column in ("split", "folder", "lengths", "strings", "positive", "near-misses"):
        table.add_column(column, overflow="fold")
    for split in summary["splits"]:
        table.add_row(split["name"], split["out"], split["lengths"], f"{split['strings']:,}",
                      f"{split['positive']:,}", f"{split['near_miss']:,}")
    stdout_console().print(table)


def _print_table(language, summary: dict, elapsed: float) -> None:
    table = Table(title=f"sample {language.expression} over {{{', '.join(language.alphabet)}}}", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")  # long output paths wrap instead of being cut
    table.add_row("lengths", f"{describe_lengths(summary['lengths'])} ({summary['n_lengths']} lengths)")
    table.add_row(
        "strings", f"{summary['strings']:,} ({summary['positive']:,} positive, {summary['negative']:,} negative)"
    )
    table.add_row("near-misses", f"{summary['near_miss']:,}")
    table.add_row("one-class lengths", str(summary["one_class_lengths"]))
    table.add_row("lengths without near-misses", str(summary["no_near_miss_lengths"]))
    table.add_row("sampling time", f"{elapsed:.2f} s ({summary['strings'] / max(elapsed, 1e-9):,.0f} strings/s)")
    table.add_row("written", "\n".join(summary["files"]))
    stdout_console().print(table)


def _check_format_options(data_format, out, next_symbols, language_folder: bool, splits: list[str],
                          lengths_given: bool, quiet: bool):
    """The format's row, or None for JSON lines; FormalRopeError for options that cannot work together."""
    names = [row.name for row in format_registry.DATASET_FORMATS]
    if data_format is not None and (data_format not in names or out is None):
        raise FormalRopeError(f"--format takes {listed(names)}, with --out; got --format {data_format}"
                              + ("" if out is not None else " without --out"))
    row = dataset_format(data_format or DEFAULT_FORMAT) if out is not None else None
    if language_folder and (row is None or not row.folder_splits):
        with_folders = [r.name for r in format_registry.DATASET_FORMATS if r.folder_splits]
        raise FormalRopeError(f"--language-folder writes a whole language folder, with --format {listed(with_folders)} "
                              "and --out DIR")
    if language_folder and lengths_given:
        raise FormalRopeError("--lengths and --n do not apply with --language-folder (each split has its own lengths "
                              "and size); change a split with --split NAME=A..B:STRINGS")
    if splits and not language_folder:
        raise FormalRopeError("--split changes a split of a language folder; give --language-folder")
    if next_symbols is not None and (row is None or not row.next_symbols) and not quiet:
        option = "--next-symbols" if next_symbols else "--no-next-symbols"
        print(f"note: {option} concerns FLaRe's next-symbols.jsonl and has no effect without --format "
              f"{listed([r.name for r in format_registry.DATASET_FORMATS if r.next_symbols])}", file=sys.stderr)
    if next_symbols is False and row is not None and row.next_symbols:
        print(f"warning: {row.no_next_symbols_warning}", file=sys.stderr)  # shown even with --quiet
    return row


def _requested_lengths(row, language_folder: bool, split_texts: list[str], lengths: str, n: int, quiet: bool):
    """(the distinct lengths to sample, the language folder's splits or None), refused when they
    would not fit in memory."""
    splits = None
    if language_folder:
        splits = _folder_splits(row.name, split_texts)
        requested = sorted({length for folder_split in splits for length in folder_split.lengths})
        total_symbols = sum(
            count * length for folder_split in splits for length, count in folder_split.per_length().items()
        )
    else:
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
    return requested, splits


def _print_json_lines(sets, dfa, quiet: bool) -> None:
    strings, labels, string_lengths, near = _rows(sets, dfa.alphabet)
    write = sys.stdout.write
    for string, label, length, is_near in zip(strings, labels.tolist(), string_lengths.tolist(), near.tolist()):
        write(json.dumps({"string": string, "label": label, "length": length, "near_miss": is_near}) + "\n")
    if not quiet:
        for labeled in sets:
            if labeled.note:
                print(f"note: {labeled.note}", file=sys.stderr)


def _write_split(language, dfa, sets, row, out, elapsed, distribution, next_symbols, json_output) -> None:
    files = write_sets(row.name, out, sets, dfa, next_symbols=next_symbols, distribution=distribution)
    summary = _summary(language, sets, elapsed, out)
    summary["format"], summary["files"] = row.name, [str(path) for path in files]
    if distribution != DEFAULT_DISTRIBUTION:  # only then: the default summary keeps its keys
        summary["distribution"] = distribution
    if json_output:
        print(json.dumps(summary))
    else:
        _print_table(language, summary, elapsed)


def _write_folder(language, dfa, row, out, splits, seed, near_miss, distribution, next_symbols, json_output) -> None:
    from formal_rope.sampling.formats.folders import write_language_folder  # function-local: numpy, off --help

    started = time.perf_counter()
    written = write_language_folder(row.name, out, dfa, splits=splits, seed=seed, near_miss_fraction=near_miss,
                                    distribution=distribution, next_symbols=next_symbols)
    summary = _folder_summary(language, written, time.perf_counter() - started, out, row.name, distribution)
    if json_output:
        print(json.dumps(summary))
    else:
        _print_folder_table(language, summary)


def sample_command(
    ctx: typer.Context,
    expression: str = typer.Argument(
        ..., help="Language: registry name, ltl:<formula>, re:<regex>, bare expression, or .att file."
    ),
    lengths: str = typer.Option("41..500", "--lengths", help="Exact string lengths: 41..500, 10,20,30 or 5."),
    n: int = typer.Option(
        512, "--n", help="Strings per length (>= 1; half positive, half negative when both exist)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed; each length's strings depend only on (seed, length)."),
    near_miss: float = typer.Option(
        0.5, "--near-miss",
        help="Fraction of the negatives (0..1) that are near-misses: one substitution from a positive.",
    ),
    alphabet: Optional[str] = typer.Option(None, "--alphabet", "-a", help="Alphabet override, e.g. ab or a,b."),
    out: Optional[Path] = typer.Option(
        None, "--out",
        help="Write a Parquet file (columns string, label, length, near_miss) instead of JSON lines on stdout.",
    ),
    data_format: Optional[str] = typer.Option(None, "--format", help=format_help()),
    next_symbols: Optional[bool] = typer.Option(
        None, "--next-symbols/--no-next-symbols",
        help="--format flare: also write next-symbols.jsonl (default: yes; len+1 entries per "
        "positive; large for long strings).",
    ),
    distribution: str = typer.Option(
        DEFAULT_DISTRIBUTION, "--distribution",
        help="How the positives of a length are drawn: "
        + "; ".join(f"{row.name}: {row.help}" for row in DISTRIBUTIONS)
        + ". Negatives are the same under each; "
        "FLaRe's log-probabilities.txt follows it. See docs/formats.md.",
    ),
    language_folder: bool = typer.Option(
        False, "--language-folder",
        help="With --format flare --out DIR: write a whole FLaRe language folder "
        "(training at the top; validation-short, validation-long and test under datasets/) with FLaRe's default "
        "lengths and sizes; split i is drawn with --seed + i.",
    ),
    split: Optional[List[str]] = typer.Option(
        None, "--split", metavar="<str>",
        help="With --language-folder: change one split's lengths and size, NAME=A..B:STRINGS "
        "(or NAME=A..B, NAME=:STRINGS), e.g. --split test=41..500:4600; repeatable.",
    ),
    json_output: bool = typer.Option(
        False, "--json",
        help="With --out: print the summary as a JSON object (without --out the output is already JSON lines).",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar or notes on stderr."),
) -> None:
    """Sample labelled strings of exact lengths, uniformly inside and outside the language.

    Without --out, prints one JSON object per line: {"string", "label", "length", "near_miss"}.
    """
    from formal_rope.automata import language_dfa  # function-local: numpy, off `sample --help`

    # Range checks here rather than typer's min/max, so they surface as one-paragraph user errors.
    if n < 1:
        raise FormalRopeError(f"--n must be at least 1, got {n}")
    if not 0.0 <= near_miss <= 1.0:
        raise FormalRopeError(f"--near-miss is a fraction of the negatives and must lie in [0, 1], got {near_miss}")
    if seed < 0:
        raise FormalRopeError(f"--seed must be a non-negative integer, got {seed}")
    positive_distribution(distribution)
    # Typer vendors its own Click: compare the parameter source by name.
    given = {name for name in ("lengths", "n") if getattr(ctx.get_parameter_source(name), "name", "") != "DEFAULT"}
    row = _check_format_options(data_format, out, next_symbols, language_folder, split or [], bool(given), quiet)
    next_symbols = True if next_symbols is None else next_symbols
    if row is not None and row.writes == "file":
        prepare_out(out, "--out")  # before sampling: a directory or an unwritable folder
    elif row is not None:
        prepare_out_folder(out, "--out")  # a FLaRe split is a folder
    requested, splits = _requested_lengths(row, language_folder, split or [], lengths, n, quiet)
    language = resolve_language(expression, alphabet)
    if language.detected and not quiet:
        print(f"note: {expression!r} {language.detected}", file=sys.stderr)
    if row is not None:
        row.check_request(language.alphabet, requested)  # what the format cannot hold, before sampling
    dfa = language_dfa(language)
    started = time.perf_counter()
    if language_folder:
        _write_folder(language, dfa, row, out, splits, seed, near_miss, distribution, next_symbols, json_output)
        return
    sets = _generate(dfa, requested, n, seed, near_miss, quiet, distribution)
    elapsed = time.perf_counter() - started
    if out is None:
        _print_json_lines(sets, dfa, quiet)
    else:
        _write_split(language, dfa, sets, row, out, elapsed, distribution, next_symbols, json_output)
