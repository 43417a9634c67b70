"""Aggregation: a results folder's runs grouped into rows (accuracy, N*, NNCH's score, intervals,
successes, the worst-case search), sorted, and the settings that vary within a row."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import formal_rope.sweeps.report.columns as columns
from formal_rope.errors import FormalRopeError
from formal_rope.run_config.encodings import BASE_ENCODINGS, hybrid_label
from formal_rope.sweeps.report.cells import DEFAULT_GROUPING, PE_LABELS, plain_value
from formal_rope.sweeps.report.labels import VARIANT_COLUMN
from formal_rope.sweeps.results import CONFIG_COLUMNS
from formal_rope.sweeps.statistics import DEFAULT_LEVEL, Interval, mean_interval


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
    # ((key, value), ...): the statistics of the COLUMNS entries that compute their own
    # (`columns.Column.statistic`), after the fields above in to_dict.
    extra: tuple = field(default=(), repr=False)

    def to_dict(self) -> dict:
        """The grouping columns, then runs, ok_runs and the statistics (NaN -> None, strict JSON)."""
        def clean(value):
            if isinstance(value, Interval):
                return value.to_dict()
            return None if isinstance(value, float) and math.isnan(value) else value

        group = dict(self.group) if self.group else {"language": self.language, "pe": self.pe, "base": self.base}
        stats = {
            key: clean(value) for key, value in self.__dict__.items()
            if key not in ("language", "pe", "base", "group", "extra")
        }
        return {**{key: clean(value) for key, value in group.items()}, **stats,
                **{key: clean(value) for key, value in self.extra}}

    def statistic(self, key: str):
        """The value of a column's own statistic (`columns.Column.statistic`) named `key`."""
        return dict(self.extra)[key]


def normalise_runs(runs):
    """A copy of a `runs` frame with the base of base-free encodings null (older results recorded
    whatever --base the grid had)."""
    frame = runs.copy()
    hybrid = hybrid_labels(frame)
    if "base" in frame.columns and "pe" in frame.columns:
        frame["base"] = [float(b) if (pe in BASE_ENCODINGS or label is not None) and b is not None else math.nan
                         for pe, b, label in zip(frame["pe"], frame["base"], hybrid)]
    if any(label is not None for label in hybrid):
        # A hybrid's cell names its layers and windows ('RoPE_NP+NoPE(L3) w32'): its own group and row.
        frame["pe"] = [pe if label is None else label for pe, label in zip(frame["pe"], hybrid)]
    return frame


def hybrid_labels(frame) -> list:
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
        values = dict(zip(by, (plain_value(key) for key in (keys if isinstance(keys, tuple) else (keys,)))))
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
                extra=tuple((column.statistic[0], column.statistic[1](group)) for column in columns.COLUMNS
                            if column.statistic is not None),
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
        groups.setdefault(tuple(plain_value(key) for key in keys), []).append(json.loads(config_text))
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
