"""A report's cells as text: grouping values, numbers, the paper's rows keyed like ours."""

from __future__ import annotations

import math

from formal_rope.run_config.encodings import report_labels

PE_LABELS = report_labels()  # encoding -> the paper's name, in the paper's order (training.encodings)
# A report's rows by default, and the key of the paper's rows (`reference_index`).
DEFAULT_GROUPING = ("language", "pe", "base")


def plain_value(value):
    """A grouping value as a plain Python value (NaN/None -> None)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def number(value: float | None, digits: int) -> str:
    """A statistic for a table: '–' when undefined (NaN: no run of the row has a value)."""
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def mean_std(mean: float, std: float, digits: int) -> str:
    """'mean±std' in `digits` decimals; '–' when the mean is undefined."""
    return "–" if math.isnan(mean) else f"{mean:.{digits}f}±{std:.{digits}f}"


def cell_text(name: str, value) -> str:
    """A value of column `name` as the tables show it: "–" when missing, the paper's label of a
    PE, a base as 1e4, floats in %g."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if name == "pe":
        return PE_LABELS.get(value, value)
    if name == "base":
        return format_base(value)
    if isinstance(value, (tuple, list)) and len(value) > 8:  # e.g. 230 even test lengths: their span
        return f"{value[0]}..{value[-1]} ({len(value)} values)"
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
