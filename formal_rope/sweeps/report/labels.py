"""Labels of runs: which of a sweep file's [[variants]] each run is, and the scale a folder's runs
were trained at (for plot titles)."""

from __future__ import annotations

import math

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.fields import RUN_FIELDS, parse_field_text
from formal_rope.sweeps.report.cells import plain_value
from formal_rope.training.scales import scale_overrides

VARIANT_COLUMN = "variant"  # a sweep file's [[variants]] name, added by `label_variants`


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
            values = sorted({plain_value(value) for value in runs[key]} - {None})
            shown.append(f"{key} {'/'.join(f'{v:g}' if isinstance(v, float) else str(v) for v in values)}")
    return f"custom settings ({', '.join(shown)})" if shown else "custom settings"


def _same(value, expected, name: str | None = None) -> bool:
    value = plain_value(value)
    if isinstance(expected, float) and isinstance(value, (int, float)):
        return math.isclose(value, expected, rel_tol=1e-9)
    if isinstance(expected, tuple) and isinstance(value, str) and name is not None:
        # A tuple field (layer_pe, window, periods) is text in the Parquet files: compare it parsed.
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
    defaults = {spec.name: spec.default for spec in RUN_FIELDS}
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
