"""The report's figures: mean N* against the base per language (Figures 2-3 of the core paper), or
bars per encoding for grids without a base (Table 2), the paper's values hollow beside ours.

matplotlib is imported where a figure is drawn: it is the report's one heavy optional part, and a
report without --plot never needs it."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_file, output_path
from formal_rope.sweeps.report.aggregate import DEFAULT_GROUPING, AggregateRow
from formal_rope.sweeps.report.cells import PE_LABELS, reference_index


def _whiskers(rows) -> list[list[float]]:
    """±1 std whiskers of the rows' mean N*, cut to what N* can be: never below 0, never above the
    largest N* a run reached (no run measures past its longest test length, so neither does a whisker)."""
    lower, upper = [], []
    for row in rows:
        std = float(row.n_star_std) if _finite(row.n_star_std) else 0.0
        top = float(row.n_star_max) if _finite(row.n_star_max) else row.n_star_mean + std
        lower.append(max(0.0, min(std, row.n_star_mean)))
        upper.append(max(0.0, min(std, top - row.n_star_mean)))
    return [lower, upper]


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


def _pyplot():
    """matplotlib's pyplot on the Agg backend (files, no window), imported when the first figure is drawn."""
    import matplotlib  # function-local: matplotlib loads only when a plot is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finite(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def plot_n_star(rows: list[AggregateRow], path: str | Path, title: str = "", reference: dict | None = None) -> Path:
    """Mean N* vs base (log x) with ±1 std whiskers per base-dependent PE; NoPE as a band, other
    base-free PEs (RoPE_P, SiPE_P) as dashed lines. One panel per language. The paper's values
    (`reference`: a sweep file's [reference] table) are hollow markers beside ours.

    Rows must be grouped by language and pe (and base); further grouping columns split series."""
    plt = _pyplot()
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
            ax.errorbar([r.base for r in series], [r.n_star_mean for r in series], yerr=_whiskers(series),
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
                (low,), (high,) = _whiskers([r])
                ax.axhspan(
                    r.n_star_mean - low, r.n_star_mean + high, color="grey", alpha=0.25,
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
    plt = _pyplot()
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
    plt = _pyplot()
    series = _series(rows)
    fig, ax = plt.subplots(figsize=(1.6 + 1.9 * len(languages) * max(1, len(series)) / 2, 3.4))
    width = 0.8 / max(1, len(series))
    tops = [1.0]
    labelled = set()
    for index, ((pe, extra), members) in enumerate(series.items()):
        xs, means, drawn, maxima, paper_max, paper_mean = [], [], [], [], [], []
        for position, language in enumerate(languages):
            match = [r for r in members if r.language == language]
            if not match:
                continue
            x = position + (index - (len(series) - 1) / 2) * width
            xs.append(x)
            means.append(match[0].n_star_mean)
            drawn.append(match[0])
            maxima.append(match[0].n_star_max)
            ref = paper.get((language, pe, None))
            if ref and _finite(ref["n_star_max"]):
                paper_max.append((x + width * 0.3, ref["n_star_max"]))
            if ref and _finite(ref["n_star_mean"]):
                paper_mean.append((x + width * 0.3, ref["n_star_mean"]))
        ax.bar(
            xs, means, width=width * 0.95, yerr=_whiskers(drawn), capsize=3, label=f"{_label(pe, extra)} (mean ±1 std)",
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
        tops.extend(m + s for m, s in zip(means, _whiskers(drawn)[1]))
        tops.extend(maxima)
    ax.set_xticks(range(len(languages)), languages)
    ax.set_ylabel("N*")
    ax.set_ylim(0, max(tops) * 1.1)
    if ax.get_legend_handles_labels()[0]:  # nothing drawn when every run failed
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        fig.suptitle(_wrapped(title, fig))
    return _save_figure(fig, path)
