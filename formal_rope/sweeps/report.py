"""Aggregate results like the core paper's Tables 4-5 and draw Figures 2-3 style plots."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.grid import BASE_FREE_PES

PE_LABELS = {
    "nope": "NoPE",
    "rope": "RoPE_NP",
    "rope_p": "RoPE_P",
    "sipe": "SiPE_NP",
    "sipe_p": "SiPE_P",
    "partial_rope": "partial RoPE",
    "jof_fixed": "JoFormer (fixed)",
    "jof_learned": "JoFormer (learned)",
    "jof_projected": "JoFormer (projected)",
}


@dataclass(frozen=True)
class AggregateRow:
    """One (language, PE, base) row of a results table: accuracy and N* over its runs (max, mean, std).

    Every run counts (a diverged run with N* 0; its NaN accuracy is left out); `ok_runs` of `runs` finished ok.
    """

    language: str
    pe: str
    base: float | None  # None for PEs without a base
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

    def to_dict(self) -> dict:
        def clean(value):
            return None if isinstance(value, float) and math.isnan(value) else value

        return {key: clean(value) for key, value in self.__dict__.items()}


def aggregate(runs) -> list[AggregateRow]:
    """One row per (language, PE, base) over seeds and learning rates (sample std, ddof=1 as pandas).

    Diverged and failed runs count with their recorded accuracy/N* when available; `ok_runs` says
    how many finished normally.
    """
    frame = runs.copy()
    frame["base_key"] = [None if pe in BASE_FREE_PES else float(b) for pe, b in zip(frame["pe"], frame["base"])]
    rows: list[AggregateRow] = []
    language_order = list(dict.fromkeys(frame["language"]))
    for (language, pe, base_key), group in frame.groupby(["language", "pe", "base_key"], dropna=False, sort=False):
        accuracy = group["accuracy"].astype(float)  # NaN for diverged runs: left out of max/mean/std
        n_star = group["n_star"].astype(float)
        nnch = group["nnch_accuracy"].astype(float) if "nnch_accuracy" in group else accuracy * math.nan
        rows.append(
            AggregateRow(
                language=language,
                pe=pe,
                base=None if base_key is None or (isinstance(base_key, float) and math.isnan(base_key)) else float(base_key),
                runs=len(group),
                ok_runs=int((group["status"] == "ok").sum()),
                accuracy_max=float(accuracy.max()),
                accuracy_mean=float(accuracy.mean()),
                accuracy_std=float(accuracy.std()) if accuracy.count() > 1 else 0.0,
                n_star_max=float(n_star.max()),
                n_star_mean=float(n_star.mean()),
                n_star_std=float(n_star.std()) if len(group) > 1 else 0.0,
                nnch_max=float(nnch.max()),
                nnch_mean=float(nnch.mean()),
                nnch_std=float(nnch.std()) if nnch.count() > 1 else (0.0 if nnch.count() else math.nan),
            )
        )
    pe_order = list(PE_LABELS)
    rows.sort(
        key=lambda r: (
            language_order.index(r.language),
            pe_order.index(r.pe) if r.pe in pe_order else len(pe_order),
            -math.inf if r.base is None else r.base,
        )
    )
    return rows


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


def mixed_settings(runs) -> list[tuple[str, str, float | None, dict]]:
    """Rows of `aggregate` whose runs differ in more than seed and lr (a results folder reused with
    other --steps, model sizes, ...): (language, pe, base, {setting: sorted distinct values})."""
    import json

    mixed = []
    base_keys = [None if pe in BASE_FREE_PES else float(b) for pe, b in zip(runs["pe"], runs["base"])]
    groups: dict = {}
    for (language, pe, config_text), base in zip(runs[["language", "pe", "config"]].itertuples(index=False), base_keys):
        groups.setdefault((language, pe, base), []).append(json.loads(config_text))
    for (language, pe, base), configs in groups.items():
        keys = sorted(set().union(*configs) - {"language", "pe", "base", *AGGREGATED_AXES})
        differing = {}
        for key in keys:
            values = {json.dumps(c.get(key), sort_keys=True) for c in configs}
            if len(values) > 1:
                differing[key] = sorted(values)
        if differing:
            mixed.append((language, pe, base, differing))
    return mixed


def format_base(base: float | None) -> str:
    if base is None:
        return "–"
    exponent = math.log10(base)
    if abs(exponent - round(exponent)) < 1e-9:
        return "1" if round(exponent) == 0 else f"1e{int(round(exponent))}"
    return f"{base:g}"


def plot_n_star(rows: list[AggregateRow], path: str | Path, title: str = "") -> Path:
    """Mean N* vs base (log x) with ±1 std whiskers per base-dependent PE; NoPE as a band, other
    base-free PEs (RoPE_P, SiPE_P) as dashed reference lines. One panel per language."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    languages = list(dict.fromkeys(r.language for r in rows))
    if all(r.base is None for r in rows):
        return _plot_base_free(rows, languages, path, title)
    fig, axes = plt.subplots(1, len(languages), figsize=(4.2 * len(languages), 3.4), squeeze=False)
    for ax, language in zip(axes[0], languages):
        mine = [r for r in rows if r.language == language]
        based = sorted({r.base for r in mine if r.base is not None})
        for pe in dict.fromkeys(r.pe for r in mine if r.base is not None):
            series = sorted((r for r in mine if r.pe == pe and r.base is not None), key=lambda r: r.base)
            ax.errorbar(
                [r.base for r in series],
                [r.n_star_mean for r in series],
                yerr=[r.n_star_std for r in series],
                marker="o",
                capsize=3,
                label=PE_LABELS.get(pe, pe),
            )
        for r in mine:
            if r.base is not None:
                continue
            if r.pe == "nope":
                ax.axhspan(r.n_star_mean - r.n_star_std, r.n_star_mean + r.n_star_std, color="grey", alpha=0.25, label="NoPE ±1 std")
                ax.axhline(r.n_star_mean, color="grey", lw=1)
            else:
                ax.axhline(r.n_star_mean, ls="--", lw=1.2, label=f"{PE_LABELS.get(r.pe, r.pe)} (mean)", color="C3" if r.pe == "rope_p" else "C4")
        if based:
            ax.set_xscale("log")
            ax.set_xlabel("base β")
        else:
            ax.set_xticks([])
        ax.set_ylabel("mean N*")
        ax.set_title(language)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    return _save_figure(fig, path)


def _save_figure(fig, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    except (OSError, ValueError) as error:  # unwritable folder, or an extension matplotlib cannot write
        raise FormalRopeError(f"cannot write the plot {str(path)!r}: {getattr(error, 'strerror', None) or error}") from None
    finally:
        plt.close(fig)
    return path


def _plot_base_free(rows: list[AggregateRow], languages: list[str], path: str | Path, title: str) -> Path:
    """Table 2 style grids have no base axis: bars of mean N* (±1 std) per encoding, max as a dot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pes = list(dict.fromkeys(r.pe for r in rows))
    fig, ax = plt.subplots(figsize=(1.6 + 1.9 * len(languages) * max(1, len(pes)) / 2, 3.4))
    width = 0.8 / max(1, len(pes))
    for index, pe in enumerate(pes):
        xs, means, stds, maxima = [], [], [], []
        for position, language in enumerate(languages):
            match = [r for r in rows if r.language == language and r.pe == pe]
            if match:
                xs.append(position + (index - (len(pes) - 1) / 2) * width)
                means.append(match[0].n_star_mean)
                stds.append(match[0].n_star_std)
                maxima.append(match[0].n_star_max)
        ax.bar(xs, means, width=width * 0.95, yerr=stds, capsize=3, label=f"{PE_LABELS.get(pe, pe)} (mean ±1 std)", color=f"C{index}")
        ax.scatter(xs, maxima, marker="D", s=22, color="black", zorder=3, label="max over runs" if index == 0 else None)
    ax.set_xticks(range(len(languages)), languages)
    ax.set_ylabel("N*")
    ax.set_ylim(0, max([r.n_star_max for r in rows] + [1]) * 1.1)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title)
    return _save_figure(fig, path)
