"""Comparing two cells of a report over seeds (`report --compare A B`): per stratum, an exact
permutation test or Mann-Whitney U and Cliff's δ (`sweeps.statistics.compare`), and why nothing
could be compared when no stratum holds runs of both sides."""

from __future__ import annotations

import math

from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.report.aggregate import DEFAULT_GROUPING, check_grouping, normalise_runs
from formal_rope.sweeps.report.cells import PE_LABELS, format_base, plain_value
from formal_rope.sweeps.statistics import compare

# `--metric` -> how a run's value is read from its row (success: N* at the longest test length).
COMPARE_METRICS = ("n_star", "accuracy", "nnch_accuracy", "n_star_worst", "success", "success_worst")


def parse_selection(text: str) -> tuple[tuple[str, str], ...]:
    """'pe=rope_p' or 'pe=rope,base=1e4' -> (('pe', 'rope_p'),) / (('pe', 'rope'), ('base', '1e4'))."""
    pairs = []
    for part in text.split(","):
        name, equals, value = part.partition("=")
        if not equals or not name.strip():
            raise FormalRopeError(f"--compare takes COLUMN=VALUE[,COLUMN=VALUE...] for each side, got {text!r}")
        pairs.append((name.strip(), value.strip()))
    return tuple(pairs)


def _matches(column, text: str):
    """Rows whose `column` value is `text` (numbers compared as numbers; a PE by its name or its
    paper label; 'none' or '–' for a missing value)."""
    if text.lower() in ("none", "–", "-", "null"):
        return column.isna()
    if column.name == "pe":
        names = {label: name for name, label in PE_LABELS.items()}
        text = names.get(text, text)
    numeric = column.dropna()
    if len(numeric) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numeric):
        try:
            number = float(text)
        except ValueError:
            raise FormalRopeError(f"--compare: column {column.name} holds numbers, got {text!r}") from None
        return column.astype(float).sub(number).abs().le(1e-9 * max(1.0, abs(number)))
    return column.astype(str).eq(text) & column.notna()


def metric_values(group, metric: str):
    """Each run's value of `metric` (NaN: not measured; failed runs measure nothing)."""
    failed = group["status"] == "failed"
    if metric in ("success", "success_worst"):
        column = group["n_star" if metric == "success" else "n_star_worst"].astype(float)
        values = (column >= group["test_max_length"].astype(float)).astype(float).where(column.notna())
    elif metric in COMPARE_METRICS:
        values = group[metric].astype(float) if metric in group else group["n_star"].astype(float) * math.nan
    else:
        raise FormalRopeError(f"unknown metric {metric!r}; expected one of {', '.join(COMPARE_METRICS)}")
    return values.where(~failed)


def compare_cells(runs, first: str, second: str, by=DEFAULT_GROUPING, metric: str = "n_star") -> list[dict]:
    """`report --compare FIRST SECOND`: within each value of the grouping columns that neither side
    names (per language, for the default grouping and --compare pe=rope_p pe=nope), the runs
    matching FIRST against those matching SECOND on `metric` (`statistics.compare`: exact
    permutation test or Mann-Whitney U, and Cliff's δ). Strata where a side has no run are left out."""
    frame = normalise_runs(runs)
    sides = (parse_selection(first), parse_selection(second))
    named = {name for side in sides for name, _ in side}
    check_grouping(frame, tuple(named))
    metric_values(frame.head(0), metric)  # an unknown metric: an error before any work
    strata = [name for name in check_grouping(frame, by) if name not in named]
    selected = []
    for side in sides:
        mask = frame["status"].notna()
        for name, value in side:
            mask &= _matches(frame[name], value)
        selected.append(mask)
    groups = frame.groupby(strata, dropna=False, sort=False) if strata else [((), frame)]
    comparisons = []
    for keys, group in groups:
        keys = keys if isinstance(keys, tuple) else (keys,)
        a = metric_values(group[selected[0].loc[group.index]], metric).dropna()
        b = metric_values(group[selected[1].loc[group.index]], metric).dropna()
        if not len(a) or not len(b):
            continue
        result = compare(a.tolist(), b.tolist())
        comparisons.append({
            **{name: plain_value(key) for name, key in zip(strata, keys)},
            "a": first, "b": second, "metric": metric, **result.to_dict(), "text": result.text(metric),
        })
    if not comparisons:
        raise FormalRopeError(_why_nothing_compared(frame, (first, second), selected, strata, by, metric))
    return comparisons


_NEVER_SEARCHED = ("were never searched for misclassified strings; run the same `sweep` or `reproduce` command "
                   "again with --eval worst-case (same --out: its runs without the search are trained again, with "
                   "the same numbers, and searched), or compare n_star")
# Why a run has no value of a metric, and how to get one (`report --compare ... --metric`).
METRIC_SOURCES = {
    "n_star_worst": _NEVER_SEARCHED,
    "success_worst": _NEVER_SEARCHED,
    "nnch_accuracy": "have no NNCH score (evaluation stopped early with --eval nstar, runs on data files, "
                     "nnch_samples 0, or results written before the score existed); compare n_star or accuracy, "
                     "or rerun with --eval full and --nnch-samples above 0",
}


def _why_nothing_compared(frame, texts, selected, strata, by, metric: str) -> str:
    """The message of a --compare with no stratum holding runs of both sides: a side that matches
    no run (and the values its columns take), a metric no matched run has (and what gives it), or the
    grouping columns whose values separate the two sides (and the two ways to compare across them)."""
    head = f"--compare {texts[0]!r} {texts[1]!r}"
    failed = frame["status"] == "failed"
    for text, mask in zip(texts, selected):
        if not mask.any():
            named = [name for name, _ in parse_selection(text)]
            taken = "; ".join(
                f"{name} takes " + ", ".join(sorted({_selection_value(name, plain_value(v)) for v in frame[name]}))
                for name in named)
            return f"{head}: no run matches {text!r} ({taken})"
        if (mask & ~failed).sum() == 0:
            return f"{head}: every run matching {text!r} failed, and a failed run measured nothing"
    for text, mask in zip(texts, selected):
        if metric_values(frame[mask], metric).notna().sum() == 0:
            why = METRIC_SOURCES.get(metric, "have no value of it")
            return (f"{head}: no run matching {text!r} has {metric}: its {int(mask.sum())} run(s) {why}")
    sides = [frame[mask][metric_values(frame[mask], metric).notna()] for mask in selected]  # runs with a value

    def values(side, name) -> set:
        return {plain_value(v) for v in side[name]}

    separating = [name for name in strata if not values(sides[0], name) & values(sides[1], name)]
    names = separating or list(strata)
    if not names:  # cannot happen: without strata both sides share the one group
        return f"{head}: no runs of both sides to compare"

    def listed(side, name) -> str:
        return ", ".join(_selection_value(name, v) for v in sorted(values(side, name), key=str))

    described = "; ".join(f"{name} is {listed(sides[0], name)} for {texts[0]!r} but {listed(sides[1], name)} for "
                          f"{texts[1]!r}" for name in names)
    first_run = sides[0].iloc[0]  # its values of the columns: a cell of the first side that exists
    example = ",".join([texts[0],
                        *(f"{name}={_selection_value(name, plain_value(first_run[name]))}" for name in names)])
    pooled = ",".join(name for name in by if name not in names)
    several = len(names) > 1
    return (f"{head}: no stratum has runs of both sides, because the grouping column{'s' if several else ''} "
            f"{', '.join(names)} separate{'' if several else 's'} them ({described}); name "
            f"{'them' if several else 'it'} on a side (e.g. --compare {example} {texts[1]}), or pool over "
            f"{'them' if several else 'it'} with a grouping without {'them' if several else 'it'}"
            + (f" (--by {pooled})" if pooled else ""))


def _selection_value(name: str, value) -> str:
    """A cell of column `name` as --compare's COLUMN=VALUE reads it back: 'none' for a missing value,
    a PE by its name, a base as 1e4."""
    if value is None:
        return "none"
    if name == "base":
        return format_base(float(value))
    return f"{value:g}" if isinstance(value, float) else str(value)
