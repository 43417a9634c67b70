"""Aggregate results like the core paper's Tables 4-5 and draw Figures 2-3 style plots."""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Callable

from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_file, output_path
from formal_rope.sweeps.grid import PAPER_TABLES, load_sweep_file, paper_sweep_path
from formal_rope.sweeps.results import CONFIG_COLUMNS, read_results
from formal_rope.sweeps.statistics import DEFAULT_LEVEL, Interval, compare, mean_interval
from formal_rope.training.config import BASE_ENCODINGS, RunConfig
from formal_rope.training.encodings import hybrid_label, report_labels
from formal_rope.training.scales import scale_overrides

PE_LABELS = report_labels()  # encoding -> the paper's name, in the paper's order (training.encodings)


DEFAULT_GROUPING = ("language", "pe", "base")
VARIANT_COLUMN = "variant"  # a sweep file's [[variants]] name, added by `label_variants`


@dataclass(frozen=True)
class AggregateRow:
    """One row of a results table: accuracy and N* over its runs (max, mean, std), grouped by
    (language, PE, base) or by any columns (`group`: the row's (column, value) pairs).

    `runs` counts every run and `ok_runs` those that finished ok. A diverged run enters the N*
    statistics with N* 0 (its NaN accuracy is left out); a failed run measured nothing and enters no
    statistic (nor `n_stars`). A statistic is NaN when no run of the row has a value (accuracy: every
    run diverged or failed; N*: every run failed); a std over one value is 0.
    """

    language: str | None
    pe: str | None
    base: float | None  # None for PEs without a base (and when the grouping has no base)
    runs: int
    ok_runs: int
    accuracy_max: float
    accuracy_mean: float
    accuracy_std: float
    n_star_max: float
    n_star_mean: float
    n_star_std: float
    # Delétang et al.'s metric: per run the mean accuracy over every test length (NaN for runs whose
    # evaluation stopped early, eval mode nstar); max/mean/std over the runs that have it.
    nnch_max: float = math.nan
    nnch_mean: float = math.nan
    nnch_std: float = math.nan
    group: tuple = ()  # ((column, value), ...) in the grouping's order
    n_stars: tuple = ()  # every measured N* (failed runs have none), largest first: the spread behind max and mean
    # Uncertainty over the row's runs (`sweeps.statistics.mean_interval`: bootstrap of the mean from
    # 5 runs on, the exact order-statistic interval of the median below); None: not computed.
    n_star_interval: Interval | None = None
    accuracy_interval: Interval | None = None
    # Runs whose N* reaches the row's longest test length (N* = 500 at the paper's lengths).
    successes: int = 0
    # The worst-case search (`--eval worst-case`): NaN / None where no run of the row was searched.
    n_star_worst_max: float = math.nan
    n_star_worst_mean: float = math.nan
    n_star_worst_std: float = math.nan
    successes_worst: int | None = None
    runs_searched: int = 0
    n_star_pairs: tuple = ()  # (N*, worst-case N*) of every searched run, largest N* first

    def to_dict(self) -> dict:
        """The grouping columns, then runs, ok_runs and the statistics (NaN -> None, strict JSON)."""
        def clean(value):
            if isinstance(value, Interval):
                return value.to_dict()
            return None if isinstance(value, float) and math.isnan(value) else value

        group = dict(self.group) if self.group else {"language": self.language, "pe": self.pe, "base": self.base}
        stats = {
            key: clean(value) for key, value in self.__dict__.items() if key not in ("language", "pe", "base", "group")
        }
        return {**{key: clean(value) for key, value in group.items()}, **stats}


def normalise_runs(runs):
    """A copy of a `runs` frame with the base of base-free encodings null (older results recorded
    whatever --base the grid had)."""
    frame = runs.copy()
    hybrid = _hybrid_labels(frame)
    if "base" in frame.columns and "pe" in frame.columns:
        frame["base"] = [float(b) if (pe in BASE_ENCODINGS or label is not None) and b is not None else math.nan
                         for pe, b, label in zip(frame["pe"], frame["base"], hybrid)]
    if any(label is not None for label in hybrid):
        # A hybrid's cell names its layers and windows ('RoPE_NP+NoPE(L3) w32'): its own group and row.
        frame["pe"] = [pe if label is None else label for pe, label in zip(frame["pe"], hybrid)]
    return frame


def _hybrid_labels(frame) -> list:
    """Per run: its hybrid label (`encodings.hybrid_label`), None for a run without layer_pe and window."""
    if "pe" not in frame.columns or not {"layer_pe", "window"} & set(frame.columns):
        return [None] * len(frame)
    def cell(column):
        values = frame[column] if column in frame.columns else [None] * len(frame)
        return [None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
                for value in values]
    labels = []
    for pe, layer_pe, window in zip(frame["pe"], cell("layer_pe"), cell("window")):
        if layer_pe is None and window is None:
            labels.append(None)
            continue
        windows = None if window is None else tuple(int(w) for w in window.split(","))
        labels.append(hybrid_label(pe, layer_pe.split(",") if layer_pe else None,
                                   windows[0] if windows and "," not in window else windows))
    return labels


def check_grouping(runs, by) -> tuple[str, ...]:
    """`by` as a tuple of columns of `runs`; FormalRopeError naming an unknown column."""
    by = tuple(by)
    unknown = [name for name in by if name not in runs.columns]
    if unknown or not by:
        columns = ", ".join(name for name in runs.columns if name not in ("config", "versions", "error"))
        raise FormalRopeError(f"cannot group by {', '.join(unknown) or 'nothing'}: the columns are {columns}")
    return by


def _cell(value):
    """A grouping value as a plain Python value (NaN/None -> None)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def aggregate(runs, by=DEFAULT_GROUPING, language_order=(), level: float = DEFAULT_LEVEL) -> list[AggregateRow]:
    """One row per distinct value of the `by` columns (default language, PE, base) over the other
    columns (seeds and learning rates, for a paper grid); sample std (ddof=1, as pandas), and an
    interval at confidence `level` for the row's N* and accuracy (`statistics.mean_interval`).
    Languages come in `language_order` (a sweep's own order) when given, else in order of first
    appearance.

    Diverged and failed runs count with their recorded accuracy/N* when available (a failed run has
    neither, a diverged one N* 0); `ok_runs` says how many finished normally. `successes` counts the
    runs whose N* reaches their longest test length; with worst-case results (`--eval
    worst-case`), the same statistics of n_star_worst.
    """
    frame = normalise_runs(runs)
    by = check_grouping(frame, by)
    rows: list[AggregateRow] = []
    for keys, group in frame.groupby(list(by), dropna=False, sort=False):
        values = dict(zip(by, (_cell(key) for key in (keys if isinstance(keys, tuple) else (keys,)))))
        accuracy = group["accuracy"].astype(float)  # NaN for diverged runs: left out of max/mean/std
        # Null for failed runs (read_results): not a measurement, left out like a missing accuracy.
        n_star = group["n_star"].astype(float).where(group["status"] != "failed")
        nnch = group["nnch_accuracy"].astype(float) if "nnch_accuracy" in group else accuracy * math.nan
        longest = group["test_max_length"].astype(float) if "test_max_length" in group else n_star * math.nan
        worst = (group["n_star_worst"].astype(float).where(group["status"] != "failed") if "n_star_worst" in group
                 else n_star * math.nan)
        searched = worst.notna()
        rows.append(
            AggregateRow(
                language=values.get("language"),
                pe=values.get("pe"),
                base=None if values.get("base") is None else float(values["base"]),
                runs=len(group),
                ok_runs=int((group["status"] == "ok").sum()),
                accuracy_max=float(accuracy.max()),
                accuracy_mean=float(accuracy.mean()),
                accuracy_std=_spread(accuracy),
                n_star_max=float(n_star.max()),
                n_star_mean=float(n_star.mean()),
                n_star_std=_spread(n_star),
                nnch_max=float(nnch.max()),
                nnch_mean=float(nnch.mean()),
                nnch_std=_spread(nnch),
                group=tuple(values.items()),
                n_stars=tuple(sorted((int(v) for v in n_star.dropna()), reverse=True)),
                n_star_interval=mean_interval(n_star.dropna().tolist(), level),
                accuracy_interval=mean_interval(accuracy.dropna().tolist(), level),
                successes=int((n_star >= longest).sum()),
                n_star_worst_max=float(worst.max()),
                n_star_worst_mean=float(worst.mean()),
                n_star_worst_std=_spread(worst),
                successes_worst=int((worst >= longest).sum()) if searched.any() else None,
                runs_searched=int(searched.sum()),
                n_star_pairs=tuple(sorted(((int(a), int(b)) for a, b in zip(n_star[searched], worst[searched])),
                                          reverse=True)),
            )
        )
    variant_order = list(frame.attrs.get("variant_order", ()))
    language_order = list(language_order or (
        dict.fromkeys(frame["language"]) if "language" in frame.columns else ()))
    pe_order = list(PE_LABELS)

    def sort_key(row: AggregateRow):
        key = []
        for name, value in row.group:
            if name == "language":
                key.append((0, language_order.index(value) if value in language_order else len(language_order)))
            elif name == "pe":
                key.append((0, pe_order.index(value) if value in pe_order else len(pe_order)))
            elif name == VARIANT_COLUMN:
                key.append((0, variant_order.index(value) if value in variant_order else len(variant_order)))
            else:
                key.append((0,) if value is None else (1, value))
        return key

    rows.sort(key=sort_key)
    return rows


def _spread(values) -> float:
    """Sample std (ddof 1) over the values present: 0 for one value (an empty whisker), NaN for none."""
    count = values.count()
    return math.nan if count == 0 else float(values.std()) if count > 1 else 0.0


# `report --sort`: each key orders rows by a metric's max over runs, then its mean (best first).
SORT_KEYS = {
    "n_star": ("n_star_max", "n_star_mean"),
    "nnch": ("nnch_max", "nnch_mean"),
    "accuracy": ("accuracy_max", "accuracy_mean"),
}


def sort_rows(rows: list[AggregateRow], key: str | None) -> list[AggregateRow]:
    """Rows best first by `key` (n_star, nnch or accuracy; NaN last, ties keep their order);
    None keeps `aggregate`'s order (language, PE, base)."""
    if key is None:
        return list(rows)
    if key not in SORT_KEYS:
        raise FormalRopeError(f"unknown sort key {key!r}; expected one of {', '.join(SORT_KEYS)}")
    fields = SORT_KEYS[key]

    def rank(row: AggregateRow):
        values = [getattr(row, name) for name in fields]
        return tuple((math.isnan(v), -v if not math.isnan(v) else 0.0) for v in values)

    return sorted(rows, key=rank)


AGGREGATED_AXES = ("seed", "lr")  # what a row of the table aggregates over, besides its own keys


def mixed_settings(runs, by=DEFAULT_GROUPING) -> list[tuple]:
    """Rows of `aggregate` whose runs differ in more than seed and lr (a results folder reused with
    other --steps, model sizes, ...): (*grouping values, {setting: sorted distinct values})."""
    frame = normalise_runs(runs)
    by = check_grouping(frame, by)
    groups: dict = {}
    for keys, config_text in zip(frame[list(by)].itertuples(index=False), frame["config"]):
        groups.setdefault(tuple(_cell(key) for key in keys), []).append(json.loads(config_text))
    mixed = []
    for keys, configs in groups.items():
        names = sorted(set().union(*configs) - {*by, *AGGREGATED_AXES})
        differing = {}
        for name in names:
            values = {json.dumps(c.get(name), sort_keys=True) for c in configs}
            if len(values) > 1:
                differing[name] = sorted(values)
        if differing:
            mixed.append((*keys, differing))
    return mixed


def swept_axes(runs, by=DEFAULT_GROUPING) -> tuple[str, ...]:
    """The settings that vary within the rows of `by` beyond seeds and learning rates (`mixed_settings`),
    as runs columns in RunConfig's field order: what the default grouping adds as row keys, so that
    `--set test_near_miss_fraction=0,0.5` gets a row per value rather than one row mixing both."""
    differing = {name for *_, settings in mixed_settings(runs, by) for name in settings}
    return tuple(name for name in CONFIG_COLUMNS if name in differing and name in runs.columns)


def default_grouping(runs, extra=()) -> tuple[str, ...]:
    """language, pe, base, the columns `extra` (a sweep file's variant), then every other swept axis."""
    by = (*DEFAULT_GROUPING, *(name for name in extra if name not in DEFAULT_GROUPING))
    return by + swept_axes(runs, by) if len(runs) else by


def cell_text(name: str, value) -> str:
    """A value of column `name` as the tables show it: "–" when missing, the paper's label of a
    PE, a base as 1e4, floats in %g."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if name == "pe":
        return PE_LABELS.get(value, value)
    if name == "base":
        return format_base(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def format_base(base: float | None) -> str:
    if base is None:
        return "–"
    exponent = math.log10(base)
    if abs(exponent - round(exponent)) < 1e-9:
        return "1" if round(exponent) == 0 else f"1e{int(round(exponent))}"
    return f"{base:g}"


def reference_index(reference: dict | None) -> dict:
    """A sweep file's [reference] rows keyed by (language, pe, base); base 0 (base-free) -> None.
    Values: {accuracy_max, accuracy_mean, n_star_max, n_star_mean} (NaN where the paper gives none)."""
    index = {}
    for row in (reference or {}).get("rows", []):
        language, pe, base = row[0], row[1], (None if row[2] == 0 else float(row[2]))
        index[(language, pe, base)] = dict(zip(("accuracy_max", "accuracy_mean", "n_star_max", "n_star_mean"),
                                               (float(value) for value in row[3:7])))
    return index


def _series(rows: list[AggregateRow]) -> dict:
    """Rows per plotted series: (pe, other grouping values) -> rows; the label names the PE and the
    values of any extra grouping columns (report --by language,pe,layers: one series per layers)."""
    series: dict = {}
    for row in rows:
        extra = tuple((name, value) for name, value in row.group if name not in DEFAULT_GROUPING)
        series.setdefault((row.pe, extra), []).append(row)
    return series


def _label(pe: str, extra: tuple) -> str:
    return " ".join([PE_LABELS.get(pe, pe), *(f"{name}={value}" for name, value in extra)])


def _finite(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def plot_n_star(rows: list[AggregateRow], path: str | Path, title: str = "", reference: dict | None = None) -> Path:
    """Mean N* vs base (log x) with ±1 std whiskers per base-dependent PE; NoPE as a band, other
    base-free PEs (RoPE_P, SiPE_P) as dashed lines. One panel per language. The paper's values
    (`reference`: a sweep file's [reference] table) are hollow markers beside ours.

    Rows must be grouped by language and pe (and base); further grouping columns split series."""
    import matplotlib  # function-local: matplotlib loads only when a plot is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = {name for row in rows for name, _ in row.group} or set(DEFAULT_GROUPING)
    if not {"language", "pe"} <= names:
        raise FormalRopeError("a plot needs rows grouped by language and pe (e.g. report --by language,pe,base)")
    paper = reference_index(reference)
    languages = list(dict.fromkeys(r.language for r in rows))
    # A row whose runs all failed has no N* (NaN): nothing to draw, and NaN would break the axes'
    # limits; its language keeps its panel.
    rows = [r for r in rows if _finite(r.n_star_mean)]
    if all(r.base is None for r in rows):
        return _plot_base_free(rows, languages, path, title, paper)
    fig, axes = plt.subplots(1, len(languages), figsize=(4.2 * len(languages), 3.4), squeeze=False)
    for ax, language in zip(axes[0], languages):
        mine = [r for r in rows if r.language == language]
        based = sorted({r.base for r in mine if r.base is not None})
        paper_drawn = False
        for index, ((pe, extra), series) in enumerate(_series([r for r in mine if r.base is not None]).items()):
            series.sort(key=lambda r: r.base)
            colour = f"C{index}"
            ax.errorbar([r.base for r in series], [r.n_star_mean for r in series], yerr=[r.n_star_std for r in series],
                        marker="o", capsize=3, color=colour, label=_label(pe, extra))
            points = [(r.base, paper[(language, pe, r.base)]["n_star_mean"]) for r in series
                      if (language, pe, r.base) in paper and _finite(paper[(language, pe, r.base)]["n_star_mean"])]
            if points:
                ax.scatter(*zip(*points), marker="o", s=70, facecolors="none", edgecolors=colour, linewidths=1.4,
                           zorder=4, label=None if paper_drawn else "paper (hollow)")
                paper_drawn = True
        for r in mine:
            if r.base is not None:
                continue
            if r.pe == "nope":
                ax.axhspan(
                    r.n_star_mean - r.n_star_std, r.n_star_mean + r.n_star_std, color="grey", alpha=0.25,
                    label="NoPE ±1 std",
                )
                ax.axhline(r.n_star_mean, color="grey", lw=1)
            else:
                ax.axhline(
                    r.n_star_mean, ls="--", lw=1.2, label=f"{PE_LABELS.get(r.pe, r.pe)} (mean)",
                    color="C3" if r.pe == "rope_p" else "C4",
                )
            level = paper.get((language, r.pe, None), {}).get("n_star_mean")
            if _finite(level) and based:
                ax.scatter(based, [level] * len(based), marker="s", s=40, facecolors="none", edgecolors="dimgrey",
                           zorder=4, label=f"paper {PE_LABELS.get(r.pe, r.pe)} (hollow)")
        if based:
            ax.set_xscale("log")
            ax.set_xlabel("base β")
        else:
            ax.set_xticks([])
        ax.set_ylabel("mean N*")
        ax.set_title(language)
        ax.set_ylim(bottom=0)
        if ax.get_legend_handles_labels()[0]:  # a panel whose runs all failed has nothing to label
            ax.legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(_wrapped(title, fig))
    return _save_figure(fig, path)


def _wrapped(title: str, fig) -> str:
    """`title` with each line wrapped to the figure's width (about 10 characters per inch)."""
    width = max(30, int(fig.get_figwidth() * 10))
    return "\n".join(textwrap.fill(line, width) for line in title.splitlines())


PLOT_SUFFIX = ".png"  # what a --plot path without a suffix gets (matplotlib's default format)


def plot_path(path: str | Path) -> Path:
    """The file a plot to `path` is written to: `path`, with .png added when it has no suffix (the
    format matplotlib picks then); FormalRopeError when it is a folder, a FIFO or a device."""
    path = Path(path)
    if path.is_dir():
        raise FormalRopeError(f"cannot write the plot {str(path)!r}: it is a folder; give a file name such as "
                              f"{str(path / ('nstar' + PLOT_SUFFIX))!r}")
    if not path.suffix:
        path = path.with_name(path.name + PLOT_SUFFIX)
    output_path(path, "the plot")
    return path


def _save_figure(fig, path: str | Path) -> Path:
    import matplotlib.pyplot as plt  # function-local: matplotlib loads only when a plot is drawn

    fig.tight_layout()
    path = plot_path(path)
    try:
        with atomic_file(path, "the plot") as temporary:  # the temporary keeps the suffix: the format
            fig.savefig(temporary, dpi=120)
    except (OSError, ValueError) as error:  # unwritable folder, or an extension matplotlib cannot write
        raise FormalRopeError(
            f"cannot write the plot {str(path)!r}: {getattr(error, 'strerror', None) or error}"
        ) from None
    finally:
        plt.close(fig)
    return path


def _plot_base_free(rows: list[AggregateRow], languages: list[str], path: str | Path, title: str, paper: dict) -> Path:
    """Table 2 style grids have no base axis: bars of mean N* (±1 std) per encoding, our max as a
    dot, the paper's N* max (and mean, where it gives one) as hollow markers beside each bar."""
    import matplotlib  # function-local: matplotlib loads only when a plot is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = _series(rows)
    fig, ax = plt.subplots(figsize=(1.6 + 1.9 * len(languages) * max(1, len(series)) / 2, 3.4))
    width = 0.8 / max(1, len(series))
    tops = [1.0]
    labelled = set()
    for index, ((pe, extra), members) in enumerate(series.items()):
        xs, means, stds, maxima, paper_max, paper_mean = [], [], [], [], [], []
        for position, language in enumerate(languages):
            match = [r for r in members if r.language == language]
            if not match:
                continue
            x = position + (index - (len(series) - 1) / 2) * width
            xs.append(x)
            means.append(match[0].n_star_mean)
            stds.append(match[0].n_star_std)
            maxima.append(match[0].n_star_max)
            ref = paper.get((language, pe, None))
            if ref and _finite(ref["n_star_max"]):
                paper_max.append((x + width * 0.3, ref["n_star_max"]))
            if ref and _finite(ref["n_star_mean"]):
                paper_mean.append((x + width * 0.3, ref["n_star_mean"]))
        ax.bar(
            xs, means, width=width * 0.95, yerr=stds, capsize=3, label=f"{_label(pe, extra)} (mean ±1 std)",
            color=f"C{index}",
        )
        ax.scatter(
            xs, maxima, marker="D", s=22, color="black", zorder=3, label="ours: max over runs" if index == 0 else None
        )
        for points, marker, name in ((paper_max, "D", "paper: N* max"), (paper_mean, "o", "paper: N* mean")):
            if points:
                ax.scatter(*zip(*points), marker=marker, s=48, facecolors="none", edgecolors="crimson", linewidths=1.4,
                           zorder=4, label=None if name in labelled else f"{name} (hollow)")
                labelled.add(name)
                tops.extend(y for _, y in points)
        tops.extend(m + s for m, s in zip(means, stds))
        tops.extend(maxima)
    ax.set_xticks(range(len(languages)), languages)
    ax.set_ylabel("N*")
    ax.set_ylim(0, max(tops) * 1.1)
    if ax.get_legend_handles_labels()[0]:  # nothing drawn when every run failed
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        fig.suptitle(_wrapped(title, fig))
    return _save_figure(fig, path)


def scale_label(runs) -> str:
    """'quick scale' / 'paper scale' when every run has that scale's settings, else 'custom
    settings (...)' naming the model size and steps the runs used (for plot titles)."""
    for name in ("quick", "paper"):
        preset = {key: value for key, value in scale_overrides(name).items() if key != "lr"}  # lr: a grid axis
        if all(key in runs.columns and all(_same(value, preset[key]) for value in runs[key]) for key in preset):
            return f"{name} scale"
    shown = []
    for key in ("layers", "d_model", "heads", "steps", "batch_size", "n_per_length"):
        if key in runs.columns:
            values = sorted({_cell(value) for value in runs[key]} - {None})
            shown.append(f"{key} {'/'.join(f'{v:g}' if isinstance(v, float) else str(v) for v in values)}")
    return f"custom settings ({', '.join(shown)})" if shown else "custom settings"


def _same(value, expected, name: str | None = None) -> bool:
    value = _cell(value)
    if isinstance(expected, float) and isinstance(value, (int, float)):
        return math.isclose(value, expected, rel_tol=1e-9)
    if isinstance(expected, tuple) and isinstance(value, str) and name is not None:
        # A tuple field (layer_pe, window, periods) is text in the Parquet files: compare it parsed.
        from formal_rope.training.config import parse_field_text

        try:
            return parse_field_text(name, value) == expected
        except FormalRopeError:
            return False
    return value == expected


def label_variants(runs, variants, baseline: dict | None = None, run_variants: dict | None = None):
    """`runs` with a `variant` column naming which of a sweep file's [[variants]] ((name, settings),
    ...) each run is: by its run id in `run_variants` (`grid.variant_run_ids`: run id -> variant)
    where given, else the variant whose settings, with `baseline` (the sweep's own values, e.g. its
    scale preset; a field's RunConfig default when absent) for the fields other variants change,
    equal the run's columns exactly. A run of the folder that is no variant (left there by another
    sweep) gets None. Rows keep the file's variant order."""
    defaults = {f.name: f.default for f in dataclass_fields(RunConfig)}
    baseline = dict(baseline or {})
    varied = sorted({name for _, settings in variants for name in settings})
    expected = [
        (name, {field: settings.get(field, baseline.get(field, defaults.get(field))) for field in varied})
        for name, settings in variants
    ]
    frame = runs.copy()
    labels = []
    run_variants = run_variants or {}
    for _, row in frame.iterrows():
        if row.get("run_id") in run_variants:
            labels.append(run_variants[row["run_id"]])
            continue
        labels.append(next(
            (name for name, values in expected
             if all(field in row and _same(row[field], value, field) for field, value in values.items())),
            None,
        ))
    frame[VARIANT_COLUMN] = labels
    frame.attrs["variant_order"] = [name for name, _ in variants]
    return frame


def markdown_table(rows: list[AggregateRow], by, reference: dict | None = None) -> str:
    """The aggregate rows as a GitHub Markdown table: the grouping columns, runs, accuracy max and
    mean±std, N* max and mean±std, every run's N* and how many reached the longest test length
    (what docs/findings.md holds); when some run was searched (`--eval worst-case`), every searched
    run's worst-case N* in the same order and how many of those reached it. With a sweep
    file's [reference] and a grouping that names language and pe, a last column gives the paper's
    accuracy max / N* max (mean) for the row's (language, pe, base)."""
    by = tuple(by)
    paper = reference_index(reference) if reference and {"language", "pe"} <= set(by) else None
    searched = any(row.runs_searched for row in rows)
    header = [*({"pe": "PE"}.get(name, name) for name in by),
              "runs", "acc max", "acc mean±std", "N* max", "N* mean±std", "N* of each run", "reached max",
              *(["worst-case N* of each run", "reached max, worst case"] if searched else []),
              *(["paper: acc max / N* max (mean)"] if paper is not None else [])]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        cells = [cell_text(name, value) for name, value in row.group]
        cells += [
            str(row.runs) + ("" if row.ok_runs == row.runs else f" ({row.runs - row.ok_runs} not ok)"),
            "–" if math.isnan(row.accuracy_max) else f"{row.accuracy_max:.3f}",
            "–" if math.isnan(row.accuracy_mean) else f"{row.accuracy_mean:.3f}±{row.accuracy_std:.3f}",
            "–" if math.isnan(row.n_star_max) else f"{row.n_star_max:.0f}",
            "–" if math.isnan(row.n_star_mean) else f"{row.n_star_mean:.1f}±{row.n_star_std:.1f}",
            ", ".join(str(n) for n in row.n_stars) or "–",
            f"{row.successes}/{len(row.n_stars)}" if row.n_stars else "–",
        ]
        if searched:  # in the order of "N* of each run" (pairs sorted by N*, then by worst-case N*)
            cells += [", ".join(str(worst) for _, worst in row.n_star_pairs) or "–",
                      f"{row.successes_worst}/{row.runs_searched}" if row.runs_searched else "–"]
        if paper is not None:
            group = dict(row.group)
            base = group.get("base")
            base = None if base is None or (isinstance(base, float) and math.isnan(base)) else float(base)
            values = paper.get((group["language"], group["pe"], base))
            cells.append("–" if values is None else (
                f"{values['accuracy_max']:.2f} / {values['n_star_max']:.0f}"
                + ("" if math.isnan(values["n_star_mean"]) else f" ({values['n_star_mean']:.1f})")))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Comparing two cells over seeds (`report --compare A B`)

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
            **{name: _cell(key) for name, key in zip(strata, keys)},
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
                f"{name} takes " + ", ".join(sorted({_selection_value(name, _cell(v)) for v in frame[name]}))
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
        return {_cell(v) for v in side[name]}

    separating = [name for name in strata if not values(sides[0], name) & values(sides[1], name)]
    names = separating or list(strata)
    if not names:  # cannot happen: without strata both sides share the one group
        return f"{head}: no runs of both sides to compare"

    def listed(side, name) -> str:
        return ", ".join(_selection_value(name, v) for v in sorted(values(side, name), key=str))

    described = "; ".join(f"{name} is {listed(sides[0], name)} for {texts[0]!r} but {listed(sides[1], name)} for "
                          f"{texts[1]!r}" for name in names)
    first_run = sides[0].iloc[0]  # its values of the columns: a cell of the first side that exists
    example = ",".join([texts[0], *(f"{name}={_selection_value(name, _cell(first_run[name]))}" for name in names)])
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


# ----------------------------------------------------------------------------------------------
# A results folder, reported (what `formalrope report` prints)


INTERVAL_NOTE = ("intervals: percentile bootstrap of the mean over a cell's runs (10,000 resamples, seed 0) from 5 "
                 "runs on; below 5, the exact order-statistic interval of the median, with its coverage")


@dataclass(frozen=True)
class Report:
    """A results folder aggregated: its rows (grouped `by`), the runs they aggregate (pandas), the
    notes for the reader, and `payload`, the `report --json` document (with the plot's path)."""

    payload: dict
    rows: list
    runs: object
    by: tuple
    notes: list


def reference_table(reference: str | None) -> dict | None:
    """`--reference`: a paper table name (table2, table4, table5) or a sweep TOML path -> its [reference]."""
    if reference is None:
        return None
    path = Path(reference)
    if reference in PAPER_TABLES and not path.exists():
        path = paper_sweep_path(reference)
    elif not path.exists():
        raise FormalRopeError(
            f"--reference {reference!r} is neither a paper table ({', '.join(PAPER_TABLES)}) nor an existing sweep file"
        )
    return load_sweep_file(path)[0].reference


def build_report(out: str | Path, *, by=None, sort: str | None = None, reference: dict | None = None,
                 plot: str | Path | None = None, title: str = "", scale: str | None = None, variants=(),
                 variant_baseline: dict | None = None, run_variants: dict | None = None, languages=(),
                 on_note: Callable[[str], None] = lambda text: None, level: float = DEFAULT_LEVEL,
                 comparison: tuple[str, str] | None = None, metric: str = "n_star") -> Report:
    """Aggregate the results folder `out` by `by` (default `default_grouping`: language, PE, base and
    every other setting that varies within those rows beyond seeds and learning rates), rows in `sort`
    order (`SORT_KEYS`; None: the grouping's, languages in `languages` order), and draw the N* plot
    to `plot` when given (titled `title` and the scale: `scale`, or what the runs' settings say).

    variants (a sweep file's [[variants]], with its fixed values `variant_baseline`, and
    `run_variants`, run id -> variant, from `grid.variant_run_ids`): each run is labelled with its
    variant, rows are grouped by it too, and runs of no variant are left out
    (on_note says how many). The notes: the folder's own (`read_results`) and one per row whose
    runs differ in more than seeds and learning rates. level: the confidence of each row's
    intervals; comparison (FIRST, SECOND): the payload's "comparisons" (`compare_cells` on `metric`)."""
    if plot is not None:
        plot = plot_path(plot)  # before reading: the file the plot really goes to, or why it cannot
    results = read_results(out)
    runs = results.runs
    extra = ()
    if variants:  # a sweep file's [[variants]]: label each run, and group by the label too
        runs = label_variants(runs, variants, variant_baseline, run_variants)
        strangers = runs[VARIANT_COLUMN].isna()
        if strangers.any():
            on_note(
                f"{int(strangers.sum())} run(s) in {out} are none of the sweep's variants (another sweep's); left out"
            )
            runs = runs[~strangers]
        extra = (VARIANT_COLUMN,)
    # No grouping given: every swept axis is a row key (a row never mixes two values of an axis).
    by = default_grouping(runs, extra) if by is None else tuple(by) + tuple(name for name in extra if name not in by)
    check_grouping(runs, by)
    # The sweep's own language order ((aa)* before (ab)*), not the order the runs finished in.
    rows = sort_rows(aggregate(runs, by, language_order=languages, level=level), sort)
    notes = list(results.notes)
    for *keys, differing in mixed_settings(runs, by):
        settings = "; ".join(f"{key} {', '.join(values)}" for key, values in differing.items())
        group = " ".join(cell_text(name, value) if name != "base" else f"β={cell_text(name, value)}"
                         for name, value in zip(by, keys) if value is not None)
        notes.append(f"{group} aggregates runs with different settings ({settings}), not only seeds and learning rates")
    payload = {
        "results": str(out),
        "by": list(by),
        "runs": int(len(runs)),
        "evals": int(len(results.evals)),
        "statuses": {str(k): int(v) for k, v in runs["status"].value_counts().items()},
        "rows": [row.to_dict() for row in rows],
        "notes": notes,
        "plot": None,  # always present, so the JSON keys do not depend on the options
        "level": level,
        "intervals": INTERVAL_NOTE,
        "comparisons": None if comparison is None else compare_cells(runs, *comparison, by=by, metric=metric),
    }
    if plot is not None:
        label = f"{scale} scale" if scale else scale_label(runs)
        heading = f"{title or Path(out).name}\n{label}" + (" (hollow markers: the paper)" if reference else "")
        payload["plot"] = str(plot_n_star(rows, plot, title=heading, reference=reference))
    return Report(payload=payload, rows=rows, runs=runs, by=by, notes=notes)


def failure_lines(runs, by, limit: int = 12) -> list[str]:
    """One line per run with a first failing string (the first `limit`), naming what tells the run
    apart: its grouping values, seed, lr, and every other setting that varies across the runs."""
    # A hybrid's PE is its label ('RoPE_NP+NoPE(L2) w8(L1)', as in the table's rows), which names
    # its layers' encodings and windows.
    hybrids = any(label is not None for label in _hybrid_labels(runs))
    runs = normalise_runs(runs)
    failures = runs[runs["first_failure"].notna()]
    # A setting that is null where it does not apply (phase_precision for NoPE) does not tell the
    # runs where it applies apart, so only differing present values count as varying.
    folded = ("layer_pe", "window") if hybrids and "pe" in by else ()
    varying = [name for name in CONFIG_COLUMNS
               if name not in by and name not in ("seed", "lr", "alphabet", *folded)
               and name in runs.columns and runs[name].nunique(dropna=True) > 1]
    lines = []
    for _, run in failures.head(limit).iterrows():
        label = [cell_text(name, run[name]) for name in by if name in ("language", "pe")]
        label += [f"β={cell_text('base', run['base'])}"] if "base" in by and _present(run["base"]) else []
        label += [f"{name}={cell_text(name, run[name])}" for name in by if name not in ("language", "pe", "base")]
        label += [f"seed={run['seed']}"] if "seed" not in by else []
        label += [f"lr={run['lr']:g}"] if "lr" not in by else []
        label += [f"{name}={cell_text(name, run[name])}" for name in varying if _present(run[name])]
        text = str(run["first_failure"])
        shown = text if len(text) <= 40 else text[:37] + "..."
        lines.append(f"{' '.join(label)} N*={run['n_star']}: {shown!r} (len {len(text)})")
    return lines


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))
