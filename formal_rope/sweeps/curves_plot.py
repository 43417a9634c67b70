"""`report --plot-curves FILE`: every run's training curve (OUT/curves) in one figure.

Two panels, training loss (log scale) and training accuracy against the step, one line per run,
coloured by a runs column (`--color-by`, default pe): one colour per value for a few values, a
colour scale for a numeric column with many.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pandas as pd

matplotlib.use("Agg")  # files only: this module is loaded to draw one (`report --plot-curves`), never at start-up
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)
from matplotlib.lines import Line2D  # noqa: E402

from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_file, output_path
from formal_rope.sweeps.curve_table import read_curves
from formal_rope.sweeps.results import read_results

DEFAULT_COLOR_BY = "pe"
MAX_LEGEND_VALUES = 12  # more distinct values than this (of a numeric column): a colour bar instead of a legend


def plot_curves(results: str | Path, path: str | Path, color_by: str = DEFAULT_COLOR_BY) -> Path:
    """Draw the curves of the results folder `results` into the PNG `path` (written atomically, a
    missing suffix gets .png). FormalRopeError when the folder has no curves or `color_by` is not a
    runs column."""
    read = read_results(results)
    runs = read.runs
    if color_by not in runs.columns:
        raise FormalRopeError(f"--color-by {color_by!r} is not a runs column; choose one of "
                              f"{', '.join(c for c in runs.columns if c != 'config')}")
    curves = read_curves(results, runs)
    if curves.empty:
        raise FormalRopeError(f"{results} holds no training curves ({results}/curves is missing or empty): runs "
                              "trained before curves existed, or with --log-every 0, have none; rerun them")
    path = Path(path)
    if path.is_dir():
        raise FormalRopeError(f"cannot write the plot {str(path)!r}: it is a folder; give a file name such as "
                              f"{str(path / 'curves.png')!r}")
    path = path if path.suffix else path.with_name(path.name + ".png")
    output_path(path, "the plot")
    values = dict(zip(runs["run_id"], runs[color_by]))
    figure = _draw(curves, values, color_by, title=f"training curves: {results}")
    return _save(figure, path)


def _colours(values: dict, color_by: str):
    """(colour of each run id, legend handles or None, a scalar mappable for a colour bar or None)."""
    distinct = sorted({str(v) for v in values.values()})
    numeric = pd.api.types.is_numeric_dtype(pd.Series(list(values.values())).dropna())
    if numeric and len(distinct) > MAX_LEGEND_VALUES:
        numbers = {run: float(v) for run, v in values.items()}
        norm = matplotlib.colors.Normalize(min(numbers.values()), max(numbers.values()))
        mapper = matplotlib.cm.ScalarMappable(norm=norm, cmap="viridis")
        return {run: mapper.to_rgba(v) for run, v in numbers.items()}, None, mapper
    palette = matplotlib.colormaps["tab10" if len(distinct) <= 10 else "tab20"]
    colour_of = {value: palette(index % palette.N) for index, value in enumerate(distinct)}
    handles = [Line2D([], [], color=colour_of[value], label=f"{color_by}={value}") for value in distinct]
    return {run: colour_of[str(v)] for run, v in values.items()}, handles, None


def _draw(curves, values: dict, color_by: str, title: str):
    colour_of, handles, mapper = _colours(values, color_by)
    figure, (loss_axes, accuracy_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
    alpha = 0.9 if len(values) <= 20 else 0.5
    for run_id, points in curves.groupby("run_id", sort=True):
        colour = colour_of.get(run_id, "grey")
        loss_axes.plot(points["step"], points["loss"], color=colour, linewidth=1, alpha=alpha)
        accuracy_axes.plot(points["step"], points["train_accuracy"], color=colour, linewidth=1, alpha=alpha)
    loss_axes.set(xlabel="step", ylabel="training loss (mean since the previous point)", yscale="log")
    accuracy_axes.set(xlabel="step", ylabel="training accuracy", ylim=(0, 1.02))
    if handles is not None:
        accuracy_axes.legend(handles=handles, fontsize=8, loc="lower right")
    else:
        figure.colorbar(mapper, ax=accuracy_axes, label=color_by)
    figure.suptitle(f"{title} ({curves['run_id'].nunique()} runs)", fontsize=10)
    figure.tight_layout()
    return figure


def _save(figure, path: Path) -> Path:
    try:
        with atomic_file(path, "the plot") as temporary:  # the temporary keeps the suffix: the format
            figure.savefig(temporary, dpi=120)
    except (OSError, ValueError) as error:
        raise FormalRopeError(f"cannot write the plot {str(path)!r}: {getattr(error, 'strerror', None) or error}") \
            from None
    finally:
        plt.close(figure)
    return path
