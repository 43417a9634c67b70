"""Sweep grids: a TOML file or CLI flags -> the list of RunConfigs to run.

A grid is the cross product languages x PEs x bases x seeds x lrs x axes, where `axes` are any other
RunConfig fields with several values (`sweep --set FIELD=v1,v2`, a sweep file's [axes] table). A
sweep file's [[variants]] (each a named set of RunConfig settings) repeat that grid once per variant:
the union of the variants' grids, for ablations that change one choice at a time. A variant may be a
stage of a staged recipe (`continue_from` an earlier variant, `steps_scale`, `lr_scale`): each of its
runs continues from the run of the same grid point of that variant (RunConfig.init_from = that
run's id), and the runner trains it after its source (docs/sweeps.md, "Staged recipes").
RunConfigs are canonical, so settings that do not apply to a PE (the base of nope, rope_p, sipe_p;
the rotated fraction outside partial_rope, ...) collapse to one run per remaining grid point.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from formal_rope.errors import FormalRopeError
from formal_rope.files import read_bounded_text
from formal_rope.lang.source import parse_alphabet
from formal_rope.run_config.applies import grid_notes
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import BASE_ENCODINGS, POSITIONAL_ENCODINGS, is_periodic
from formal_rope.run_config.fields import FIELD_NAMES, coerce_field, field_kind
from formal_rope.training.scales import SCALES

BASE_FREE_PES = frozenset(pe for pe in POSITIONAL_ENCODINGS if pe not in BASE_ENCODINGS)
MAX_GRID_RUNS = 100_000  # a grid larger than this is refused before it is expanded
SCALE_NAMES = ("quick", "medium", "paper")
PAPER_TABLES = ("table2", "table4", "table5")  # the core paper's tables that `reproduce` reruns
# Our own experiments around those tables (`reproduce NAME`): name -> sweep file stem.
EXPERIMENTS = {
    "ablation": "ablation_table2", "ablation45": "ablation_tables45", "stability": "rope_p_stability",
    "joformer": "joformer", "test_sets": "table2_test_sets", "recipes": "rope_p_recipes", "e6": "e6_hybrid",
    "hybrids": "hybrids", "lc25": "lc25",
}

# Keys of a sweep TOML file (top level); per-scale tables [quick]/[paper] take RunConfig fields
# plus the grid keys `seeds` and `lrs`, and [reference] holds the paper's numbers for comparison.
_GRID_KEYS = {"name", "description", "languages", "alphabet", "pes", "bases", "periods", "seeds", "lrs", "scale"}
_VARIANT_NAME = "name"
# Keys of a [[variants]] table that make it a stage of a staged recipe (not RunConfig fields):
# continue_from names an earlier variant; steps_scale / lr_scale multiply the scale's steps and each
# grid point's learning rate (so one recipe holds at every scale).
_STAGE_KEYS = ("continue_from", "steps_scale", "lr_scale")
_SCALE_EXTRA_KEYS = {"seeds", "lrs"}
_RUNCONFIG_KEYS = set(FIELD_NAMES)
# RunConfig fields that are grid axes: a [quick]/[paper] table naming them would be ignored, so it is
# an error that points to the grid key instead.
_AXIS_FIELDS = {"language": "languages", "pe": "pes", "base": "bases", "seed": "seeds", "lr": "lrs",
                "periods": "periods", "alphabet": "alphabet"}
# Fields with their own grid key or option; `--set` / [axes] point there instead.
DEDICATED_AXES = {"language": "--lang / languages", "pe": "--pe / pes", "base": "--base / bases",
                  "seed": "--seeds / seeds", "lr": "--lrs / lrs"}
_REFERENCE_ROW = "[language, pe, base, accuracy max, accuracy mean, N* max, N* mean]"


@dataclass(frozen=True)
class SweepSpec:
    """A grid of runs: the axes (languages x PEs x bases x seeds x lrs x `axes`), fixed overrides, and the paper's
    numbers.

    `expand_grid(spec)` gives its RunConfigs.
    """

    name: str
    languages: tuple[str, ...]
    pes: tuple[str, ...]
    bases: tuple[float, ...] = (1e4,)
    seeds: tuple[int, ...] = (0,)
    lrs: tuple[float, ...] = (3e-4,)
    periods: tuple[int, ...] | str | None = "auto"
    alphabet: tuple[str, ...] | None = None
    overrides: dict = field(default_factory=dict)  # RunConfig field -> value, applied to every run
    axes: tuple = ()  # ((RunConfig field, (value, ...)), ...): further axes of the cross product
    variants: tuple = ()  # ((name, {RunConfig field: value}), ...): the grid once per variant
    # ((variant name, {"continue_from": name, "steps_scale": float, "lr_scale": float}), ...): the
    # variants that are stages of a staged recipe (build_spec resolves steps_scale into their steps).
    stages: tuple = ()
    description: str = ""
    reference: dict = field(default_factory=dict)  # paper numbers, for display only
    # ((language, {RunConfig field: value}), ...): settings of one language's runs (a sweep file's
    # [language_settings]: Li & Cotterell sample each language's negatives their own way).
    language_settings: tuple = ()

    def __post_init__(self) -> None:
        if not self.languages:
            raise FormalRopeError(f"sweep {self.name!r}: no languages given")
        unknown = [pe for pe in self.pes if pe not in POSITIONAL_ENCODINGS]
        if unknown:
            raise FormalRopeError(
                f"sweep {self.name!r}: unknown positional encoding {unknown[0]!r}; "
                f"expected one of {', '.join(POSITIONAL_ENCODINGS)}"
            )
        bad_bases = [b for b in self.bases if not b > 0]
        if bad_bases:
            raise FormalRopeError(f"sweep {self.name!r}: base must be > 0, got {bad_bases[0]}")
        bad_lrs = [lr for lr in self.lrs if not lr > 0]
        if bad_lrs:
            raise FormalRopeError(f"sweep {self.name!r}: learning rate must be > 0, got {bad_lrs[0]}")


def grid_size(spec: SweepSpec) -> int:
    """Points of the cross product before duplicates (runs of base-free PEs at several bases) collapse."""
    size = len(spec.languages) * len(spec.pes) * len(spec.bases) * len(spec.seeds) * len(spec.lrs)
    for _, values in spec.axes:
        size *= len(values)
    return size * max(1, len(spec.variants))


def expand_grid(spec: SweepSpec, resolve_periods=None) -> list[RunConfig]:
    """All RunConfigs of the grid, in a stable order, without duplicates.

    resolve_periods(language, alphabet) -> tuple[int, ...] turns periods="auto" into explicit
    periods for period-based PEs (so the run id pins the periods actually used).
    """
    configs: list[RunConfig] = []
    seen: set[str] = set()
    axis_names = [name for name, _ in spec.axes]
    variants = spec.variants or (("", {}),)
    stages = dict(spec.stages)
    by_point: dict = {}  # (variant name, grid point) -> its config: a stage's source at the same point
    per_language = dict(spec.language_settings)
    points = itertools.product(
        variants, spec.languages, spec.pes, spec.bases, spec.seeds, spec.lrs, *(values for _, values in spec.axes)
    )
    for (name, variant), language, pe, base, seed, lr, *axis_values in points:
        point = (language, pe, base, seed, lr, *axis_values)
        settings = {**spec.overrides, **per_language.get(language, {}), **variant, **dict(zip(axis_names, axis_values))}
        stage = stages.get(name)
        if stage is not None:
            lr = lr * stage.get("lr_scale", 1.0)
            if stage.get("continue_from") is not None:
                settings["init_from"] = by_point[(stage["continue_from"], point)].run_id()
        periodic = is_periodic(pe) or any(is_periodic(name) for name in settings.get("layer_pe") or ())
        if "periods" not in settings and periodic:
            if spec.periods == "auto" or spec.periods is None:
                settings["periods"] = resolve_periods(language, spec.alphabet) if resolve_periods else None
            else:
                settings["periods"] = tuple(int(p) for p in spec.periods)
        settings.setdefault("alphabet", spec.alphabet)
        config = RunConfig(language=language, pe=pe, base=float(base), seed=int(seed), lr=float(lr), **settings)
        by_point[(name, point)] = config
        run_id = config.run_id()
        if run_id not in seen:
            seen.add(run_id)
            configs.append(config)
    return configs


def variant_run_ids(spec: SweepSpec, resolve_periods=None) -> dict[str, str]:
    """run id -> the name of the [[variants]] entry that first produces it in `expand_grid`, for
    every run of the grid: a report's labels by identity, not by settings (a variant whose
    layer_pe names one encoding in every layer, or `pe`, becomes a plain run whose columns no
    longer show the variant's settings). Empty for a grid without variants."""
    names: dict[str, str] = {}
    for count in range(1, len(spec.variants) + 1):
        prefix = dataclasses.replace(spec, variants=spec.variants[:count])
        for config in expand_grid(prefix, resolve_periods):
            names.setdefault(config.run_id(), spec.variants[count - 1][0])
    return names


def unused_settings(configs: list[RunConfig], given: dict[str, str]) -> list[str]:
    """Notes for options (option text -> RunConfig field) that apply to none of the grid's runs
    (`run_config.applies.grid_notes`: the one rule of what applies)."""
    return grid_notes(configs, given)


def _line_of_key(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=", re.MULTILINE)
    match = pattern.search(text)
    if match is None:
        pattern = re.compile(rf"^\s*\[\s*{re.escape(key)}\s*\]", re.MULTILINE)
        match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _unknown_key_error(path: Path, text: str, key: str, where: str, allowed: set[str]) -> FormalRopeError:
    line = _line_of_key(text, key)
    at = f"{path}:{line}" if line else str(path)
    return FormalRopeError(
        f"{at}: unknown key {key!r} in {where}; allowed keys: {', '.join(sorted(allowed))}"
    )


def _as_tuple(value, kind, key: str, path: Path) -> tuple:
    items = value if isinstance(value, (list, tuple)) else [value]
    converted = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, float, str)):
            raise FormalRopeError(f"{path}: key {key!r} must be a value or a list of values, got {value!r}")
        if kind is float and isinstance(item, str):
            raise FormalRopeError(f"{path}: key {key!r} must hold numbers, got {item!r}")
        try:
            converted.append(kind(item))
        except ValueError:
            raise FormalRopeError(f"{path}: key {key!r}: {item!r} is not a valid {kind.__name__}") from None
    return tuple(converted)


def _seeds_value(value, path: Path):
    """`seeds = n` (seeds 0..n-1) or a list of integer seeds."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    raise FormalRopeError(
        f"{path}: key 'seeds' must be a count like 5 or a list of integers like [0, 3], got {value!r}"
    )


def _periods_value(value, path: Path):
    """`periods = "auto"`, one integer, or a list of integers."""
    if value == "auto" or value is None:
        return "auto"
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise FormalRopeError(f"{path}: key 'periods' must be \"auto\" or positive integers like [2, 3], got {value!r}")
    return items


def _checked_value(path: Path, text: str, where: str, key: str, value):
    """A TOML value for RunConfig field `key`, typed (`coerce_field`); an error with its line if not."""
    try:
        return coerce_field(key, value)
    except FormalRopeError as error:
        line = _line_of_key(text, key)
        problem = str(error).removeprefix(f"{key} ")  # "must be an integer, got 'many'"
        raise FormalRopeError(f"{path}:{line or '?'}: {key!r} in [{where}] {problem}") from None


def _checked_section(path: Path, text: str, where: str, section: dict) -> dict:
    """A [quick]/[paper] table with every RunConfig value checked against the field's type."""
    checked = {}
    for key, value in section.items():
        if key in _SCALE_EXTRA_KEYS:
            checked[key] = value
            continue
        if key in _AXIS_FIELDS:
            line = _line_of_key(text, key)
            raise FormalRopeError(
                f"{path}:{line or '?'}: {key!r} in [{where}] is a grid axis; "
                f"set {_AXIS_FIELDS[key]!r} (a list) instead"
            )
        checked[key] = _checked_value(path, text, where, key, value)
    return checked


def _checked_axes(path: Path, text: str, table) -> tuple:
    """The [axes] table: RunConfig field -> a non-empty list of values, each typed like the field."""
    if not isinstance(table, dict):
        raise FormalRopeError(f"{path}: [axes] must be a table of FIELD = [value, ...]")
    axes = []
    for key, values in table.items():
        line = _line_of_key(text, key)
        at = f"{path}:{line or '?'}"
        if key in DEDICATED_AXES:
            raise FormalRopeError(
                f"{at}: {key!r} in [axes] has its own grid key; use {DEDICATED_AXES[key].split(' / ')[1]!r}"
            )
        try:
            field_kind(key)
        except FormalRopeError as error:
            raise FormalRopeError(f"{at}: unknown key {key!r} in [axes]: {error}") from None
        if not isinstance(values, list) or not values:
            raise FormalRopeError(f"{at}: {key!r} in [axes] must be a non-empty list of values, got {values!r}")
        typed = [
            None if value in ("auto", "none") and field_kind(key) in ("symbols", "integers") else value
            for value in values
        ]
        axes.append((key, tuple(_checked_value(path, text, "axes", key, value) for value in typed)))
    return tuple(axes)


def _checked_reference(path: Path, reference) -> dict:
    if not isinstance(reference, dict):
        raise FormalRopeError(f"{path}: [reference] must be a table with rows = [{_REFERENCE_ROW}, ...]")
    rows = reference.get("rows", [])
    for row in rows if isinstance(rows, list) else [rows]:
        well_formed = (
            isinstance(row, list) and len(row) == 7 and all(isinstance(v, str) for v in row[:2])
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in row[2:])
        )
        if not well_formed:
            raise FormalRopeError(f"{path}: every [reference] row must be {_REFERENCE_ROW}, got {row!r}")
    return reference


def paper_sweep_path(table: str) -> Path:
    """The sweep file of one of the core paper's tables (`PAPER_TABLES`) or of one of our experiments
    around them (`EXPERIMENTS`), as `reproduce` runs it.

    Looked up in the checkout's sweeps/ folder, else in the copy an installed wheel carries
    (formal_rope/paper_sweeps/); pass the result to `load_sweep_file(path, scale)`.
    """
    if table not in PAPER_TABLES and table not in EXPERIMENTS:
        raise FormalRopeError(
            f"unknown table {table!r}; expected one of {', '.join(PAPER_TABLES)} or an "
            f"experiment: {', '.join(EXPERIMENTS)}"
        )
    stem = EXPERIMENTS.get(table, table)
    package = Path(__file__).resolve().parents[1]
    for folder in (package.parent / "sweeps", package / "paper_sweeps"):
        if (folder / f"{stem}.toml").is_file():
            return folder / f"{stem}.toml"
    raise FormalRopeError(
        f"the paper's sweep file {table}.toml was not found (looked in {package.parent / 'sweeps'} and "
        f"{package / 'paper_sweeps'}); in a checkout it is sweeps/{table}.toml"
    )


def load_sweep_file(path: str | Path, scale: str | None = None) -> tuple[SweepSpec, str]:
    """Read a sweep TOML file; return (spec for the chosen scale, the scale used).

    The scale defaults to the file's `scale` key, else "quick". Scale presets from
    formal_rope.training.scales are applied first, then the file's [<scale>] table.
    """
    path = Path(path)
    try:
        text = read_bounded_text(path, "MAX_CONFIG_BYTES", "the sweep file")
    except OSError as error:
        raise FormalRopeError(f"cannot read sweep file {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise FormalRopeError(f"{path}: not a TOML file (not UTF-8 text: {error.reason})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise FormalRopeError(f"{path}: invalid TOML: {error}") from None

    allowed_top = _GRID_KEYS | set(SCALE_NAMES) | {"reference", "axes", "variants", "language_settings"}
    for key in data:
        if key not in allowed_top:
            raise _unknown_key_error(path, text, key, "the sweep file", allowed_top)
    chosen = scale or data.get("scale", "quick")
    if chosen not in SCALE_NAMES:
        raise FormalRopeError(f"{path}: scale must be one of {', '.join(SCALE_NAMES)}, got {chosen!r}")

    section_allowed = (_RUNCONFIG_KEYS - set(_AXIS_FIELDS)) | _SCALE_EXTRA_KEYS
    sections = {}
    for scale_name in SCALE_NAMES:
        if not isinstance(data.get(scale_name, {}), dict):
            raise FormalRopeError(f"{path}: {scale_name!r} must be a table ([{scale_name}])")
        for key in data.get(scale_name, {}):
            if key not in section_allowed and key not in _AXIS_FIELDS:  # axis fields: a pointed error below
                raise _unknown_key_error(path, text, key, f"[{scale_name}]", section_allowed)
        sections[scale_name] = _checked_section(path, text, scale_name, data.get(scale_name, {}))
    section = dict(sections[chosen])
    axes = _checked_axes(path, text, data.get("axes", {}))
    for key, _ in axes:
        if key in section:
            raise FormalRopeError(
                f"{path}:{_line_of_key(text, key) or '?'}: {key!r} is both an [axes] entry "
                f"and fixed in [{chosen}]; keep one"
            )
    grid = {k: v for k, v in data.items() if k in _GRID_KEYS}
    for key in _SCALE_EXTRA_KEYS:
        if key in section:
            grid[key] = section.pop(key)
    alphabet = grid.get("alphabet")
    if alphabet is not None:
        if not isinstance(alphabet, (str, list)) or not all(isinstance(v, str) for v in alphabet):
            raise FormalRopeError(
                f"{path}: key 'alphabet' must be a string like \"ab\" or a list of symbols, got {alphabet!r}"
            )
        alphabet = parse_alphabet(alphabet)

    variants, stages = _checked_variants(path, text, data.get("variants", []), axes)
    return (
        build_spec(
            name=str(data.get("name", path.stem)),
            languages=_as_tuple(grid.get("languages", ()), str, "languages", path),
            pes=_as_tuple(grid.get("pes", ("rope",)), str, "pes", path),
            bases=_as_tuple(grid.get("bases", (1e4,)), float, "bases", path),
            seeds=_seeds_value(grid["seeds"], path) if "seeds" in grid else None,  # None: the preset's
            lrs=_as_tuple(grid["lrs"], float, "lrs", path) if "lrs" in grid else None,
            periods=_periods_value(grid.get("periods", "auto"), path),
            alphabet=alphabet,
            scale=chosen,
            overrides=section,
            axes=axes,
            variants=variants,
            stages=stages,
            description=str(data.get("description", "")),
            reference=_checked_reference(path, data.get("reference", {})),
            language_settings=_checked_language_settings(path, text, data.get("language_settings", {}),
                                                         grid.get("languages", ())),
        ),
        chosen,
    )


def _checked_language_settings(path: Path, text: str, table, languages) -> tuple:
    """The [language_settings] table: a language of the grid -> RunConfig settings for its runs
    (typed like [quick]; no grid axis)."""
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise FormalRopeError(f"{path}: [language_settings] must hold one table per language "
                              "([language_settings.NAME] with RunConfig settings)")
    checked = []
    for language, settings in table.items():
        if language not in languages:
            raise FormalRopeError(f"{path}: [language_settings] names {language!r}, which is not in languages")
        for key in settings:
            if key not in _RUNCONFIG_KEYS:
                raise _unknown_key_error(path, text, key, f"language_settings.{language}",
                                         _RUNCONFIG_KEYS - set(_AXIS_FIELDS))
        checked.append((language, _checked_section(path, text, f"language_settings.{language}", settings)))
    return tuple(checked)


def _checked_variants(path: Path, text: str, variants, axes) -> tuple[tuple, tuple]:
    """([[variants]], their stages): each a table with a unique `name` and RunConfig settings (typed
    like [quick]), none of them a grid axis or an [axes] field, and optionally the stage keys
    (`_STAGE_KEYS`): continue_from an earlier variant's name, steps_scale and lr_scale > 0."""
    if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
        raise FormalRopeError(f"{path}: variants must be an array of tables ([[variants]] with name = \"...\")")
    checked, names, stages = [], set(), []
    axis_names = {name for name, _ in axes}
    for index, variant in enumerate(variants, start=1):
        name = variant.get(_VARIANT_NAME)
        if not isinstance(name, str) or not name or name in names:
            raise FormalRopeError(f"{path}: variant {index} needs a unique name = \"...\", got {name!r}")
        stage = {key: variant[key] for key in _STAGE_KEYS if key in variant}
        if stage:
            stages.append((name, _checked_stage(path, name, stage, names, variant)))
        names.add(name)
        settings = {key: value for key, value in variant.items() if key != _VARIANT_NAME and key not in _STAGE_KEYS}
        for key in settings:
            if key not in _RUNCONFIG_KEYS:
                raise _unknown_key_error(path, text, key, f"variant {name!r}", _RUNCONFIG_KEYS - set(_AXIS_FIELDS))
            if key in axis_names:
                raise FormalRopeError(f"{path}: {key!r} is both an [axes] entry and set by variant {name!r}; keep one")
        checked.append((name, _checked_section(path, text, f"variant {name}", settings)))
    return tuple(checked), tuple(stages)


def _checked_stage(path: Path, name: str, stage: dict, earlier: set, variant: dict) -> dict:
    """A stage's keys, typed: continue_from (an earlier variant), steps_scale and lr_scale (> 0)."""
    source = stage.get("continue_from")
    if source is not None and (not isinstance(source, str) or source not in earlier):
        raise FormalRopeError(f"{path}: variant {name!r}: continue_from must name an earlier variant "
                              f"({', '.join(sorted(earlier)) or 'none yet'}), got {source!r}")
    for key in ("steps_scale", "lr_scale"):
        value = stage.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise FormalRopeError(f"{path}: variant {name!r}: {key} must be a number > 0, got {value!r}")
    if "steps_scale" in stage and "steps" in variant:
        raise FormalRopeError(f"{path}: variant {name!r} sets both steps and steps_scale; keep one")
    return {key: float(value) if key != "continue_from" else value for key, value in stage.items()}


def _scale_preset(scale: str) -> dict:
    """A named scale's RunConfig overrides plus its grid defaults `seeds` and `lrs`
    (training.scales.scale_overrides gives the RunConfig part alone)."""
    if scale not in SCALES:
        raise FormalRopeError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    return dict(SCALES[scale])


def build_spec(
    *,
    name: str,
    languages,
    pes,
    bases=(1e4,),
    seeds=1,
    lrs=None,
    periods="auto",
    alphabet=None,
    scale: str = "quick",
    overrides: dict | None = None,
    axes=(),
    variants=(),
    stages=(),
    description: str = "",
    reference: dict | None = None,
    language_settings=(),
) -> SweepSpec:
    """Combine a scale preset with explicit settings (explicit ones win).

    seeds: an int n means seeds 0..n-1; a list means exactly those seeds.
    axes: {field: [values]} or ((field, values), ...): further axes of the grid; an axis replaces
    the preset's value of its field, and may not repeat an explicit override or a dedicated axis.
    stages: ((variant name, {continue_from, steps_scale, lr_scale}), ...) (`load_sweep_file`); a
    stage's steps_scale becomes its variant's `steps` here (of the merged steps: preset, file, --steps).
    """
    preset = _scale_preset(scale)
    preset_seeds = preset.pop("seeds", 1)
    preset_lrs = preset.pop("lrs", (3e-4,))
    preset = {k: v for k, v in preset.items() if k in _RUNCONFIG_KEYS}
    axes = _checked_axis_values(axes, overrides or {}, periods, alphabet)
    merged = {**preset, **(overrides or {})}
    unknown = sorted(set(merged) - _RUNCONFIG_KEYS)
    if unknown:
        raise FormalRopeError(f"unknown run setting {unknown[0]!r}")
    for key in ("language", "pe", "base", "seed", "lr", "periods", "alphabet", *(name for name, _ in axes)):
        merged.pop(key, None)  # grid axes, not per-run overrides
    seeds = preset_seeds if seeds is None else seeds
    if isinstance(seeds, int) and seeds > MAX_GRID_RUNS:
        raise FormalRopeError(f"{seeds:,} seeds is more than a sweep may run ({MAX_GRID_RUNS:,} runs at most)")
    seed_tuple = tuple(range(int(seeds))) if isinstance(seeds, int) else tuple(int(s) for s in seeds)
    if not seed_tuple:
        raise FormalRopeError(f"a sweep needs at least one seed, got {seeds!r}")
    if periods not in (None, "auto"):
        periods = tuple(int(p) for p in (periods if isinstance(periods, (list, tuple)) else [periods]))
        if any(p <= 0 for p in periods):
            raise FormalRopeError(f"periods must be positive integers, got {list(periods)}")
    variants, stages = _resolved_stages(tuple(variants), tuple(stages), merged.get("steps", RunConfig.steps))
    spec = SweepSpec(
        name=name,
        languages=tuple(languages),
        pes=tuple(pes),
        bases=tuple(float(b) for b in bases),
        seeds=seed_tuple,
        lrs=tuple(float(x) for x in (lrs if lrs is not None else preset_lrs)),
        periods=periods,
        alphabet=tuple(alphabet) if alphabet else None,
        overrides=merged,
        axes=axes,
        variants=variants,
        stages=stages,
        description=description,
        reference=dict(reference or {}),
        language_settings=tuple(language_settings),
    )
    if grid_size(spec) > MAX_GRID_RUNS:
        raise FormalRopeError(
            f"sweep {name!r} has {grid_size(spec):,} grid points, more than {MAX_GRID_RUNS:,}; "
            "split it into smaller sweeps (they may share one --out folder)"
        )
    return spec


def _resolved_stages(variants: tuple, stages: tuple, steps: int) -> tuple[tuple, tuple]:
    """(variants with each stage's steps_scale turned into its `steps` of the sweep's `steps`, the
    stages). Resolving again (another scale, `--steps`) replaces the steps resolved before."""
    scales = {name: stage.get("steps_scale") for name, stage in stages}
    variants = tuple(
        (name, {**settings, "steps": max(1, round(int(steps) * scales[name]))} if scales.get(name) else settings)
        for name, settings in variants
    )
    return variants, stages


def _checked_axis_values(axes, overrides: dict, periods, alphabet) -> tuple:
    """((field, typed values), ...) of `axes` (a dict or pairs); FormalRopeError naming a field that
    is unknown, has its own grid key, is also fixed by an override, or has no values."""
    checked = []
    for name, values in (axes.items() if isinstance(axes, dict) else axes):
        field_kind(name)  # unknown -> error naming it
        if name in DEDICATED_AXES:
            raise FormalRopeError(f"{name} is already a grid axis: use {DEDICATED_AXES[name]}")
        clash = name in overrides or (name == "periods" and periods not in (None, "auto")) or (
            name == "alphabet" and alphabet
        )
        if clash:
            raise FormalRopeError(f"{name} is given both as a fixed setting and as an axis; give it once")
        values = tuple(values)
        if not values:
            raise FormalRopeError(f"the axis {name} has no values")
        checked.append((name, tuple(coerce_field(name, v) if v is not None else None for v in values)))
    return tuple(checked)
