"""The atlas figure: classes × encodings, the success rate as colour, the prediction marked in each cell."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from formal_rope.atlas.agreement import Agreement
from formal_rope.files import atomic_file
from formal_rope.theory import BOUNDED, EXPRESSIBLE, NO_PREDICTION, NOT_EXPRESSIBLE, VERDICTS

# What a cell says about the prediction for its languages (several when they differ).
MARKS = {EXPRESSIBLE: "yes", BOUNDED: "≤N", NOT_EXPRESSIBLE: "no", NO_PREDICTION: "?"}


def figure_cells(agreement: Agreement) -> tuple[list[str], list[list[float]], list[list[str]]]:
    """(row labels, success rates, cell texts): logic classes, then MLRegTest classes, by encoding."""
    cells = {(row.kind, row.language_class, row.encoding): row for row in agreement.classes}
    keys = list(dict.fromkeys((row.kind, row.language_class) for row in agreement.classes))
    labels, rates, texts = [], [], []
    for kind, language_class in keys:
        labels.append(language_class if kind == "logic" else f"MLRegTest {language_class}")
        rate_row, text_row = [], []
        for encoding in agreement.encodings:
            row = cells.get((kind, language_class, encoding))
            if row is None or row.runs == 0:
                rate_row.append(math.nan)
                text_row.append("")
                continue
            marks = "/".join(MARKS[verdict] for verdict in VERDICTS if verdict in row.predicted)
            rate_row.append(row.rate)
            text_row.append(f"{marks}\n{row.rate:.0%}")
        rates.append(rate_row)
        texts.append(text_row)
    return labels, rates, texts


def write_figure(agreement: Agreement, path: str | Path, title: str = "") -> Path:
    """Draw the figure as a PNG at `path` (written atomically; folders created)."""

    matplotlib.use("Agg")

    labels, rates, texts = figure_cells(agreement)
    data = np.ma.masked_invalid(np.array(rates, dtype=float).reshape(len(labels), len(agreement.encodings)))
    figure, axes = plt.subplots(figsize=(1.6 * len(agreement.encodings) + 3, 0.45 * len(labels) + 1.6))
    image = axes.imshow(data, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    axes.set_xticks(range(len(agreement.encodings)), agreement.encodings)
    axes.set_yticks(range(len(labels)), labels)
    for i, row in enumerate(texts):
        for j, text in enumerate(row):
            if text:
                colour = "black" if rates[i][j] > 0.6 else "white"
                axes.text(j, i, text, ha="center", va="center", fontsize=7, color=colour)
    figure.colorbar(image, ax=axes, label="runs learned at every tested length")
    axes.set_title(title or "predicted (yes / no / ≤N bounded / ? none) and success rate", fontsize=9)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "the atlas figure") as temporary:
        figure.savefig(temporary, format="png", dpi=120)
    plt.close(figure)
    return path
