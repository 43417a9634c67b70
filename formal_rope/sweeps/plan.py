"""What a sweep runs: a sweep file and the command line's settings merged into one SweepSpec and its
runs (`plan_sweep`, what `formalrope sweep` runs), and the paper tables `reproduce` reruns
(`plan_reproduce`).

Everything here takes parsed values (lists, numbers, RunConfig fields); the command line parses
its flags and renders what comes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.applies import MAYBE_UNUSED
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.fields import FIELD_NAMES
from formal_rope.storage.training_state import state_subfolder
from formal_rope.sweeps import grid
from formal_rope.sweeps.checks import resolve_grid
from formal_rope.sweeps.grid import (
    EXPERIMENTS,
    PAPER_TABLES,
    SCALE_NAMES,
    SweepSpec,
    build_spec,
    expand_grid,
    load_sweep_file,
    unused_settings,
)
from formal_rope.training.data import data_settings, fit_to_data

# The option that sets such a field in `settings`, where it is not the field's name.
_SETTING_OPTIONS = {"n_per_length": "--n-per-length", "nnch_samples": "--nnch-samples"}


@dataclass(frozen=True)
class GridRequest:
    """A sweep as the command line asks for it: a sweep file (`config`) and settings on top of it,
    or the settings alone. Empty or None: not given (the file's value, else the default).

    languages, pes, bases, seeds (a count), lrs, periods ("auto" or a list), alphabet: the grid's
    dedicated axes; scale: quick, medium or paper; settings: RunConfig fields fixed for every run;
    axes: further grid axes (`--set`), field -> values; data: train and test every run on these files.
    """

    config: Path | None = None
    languages: tuple[str, ...] = ()
    pes: tuple[str, ...] = ()
    bases: tuple[float, ...] = ()
    seeds: int | None = None
    lrs: tuple[float, ...] = ()
    periods: str | list | None = None
    alphabet: tuple[str, ...] | None = None
    scale: str | None = None
    settings: dict = field(default_factory=dict)
    axes: dict = field(default_factory=dict)
    data: Path | None = None


@dataclass(frozen=True)
class SweepPlan:
    """The grid to run: its spec, the scale it was built at, its runs (configs, and each resolved),
    and notes on settings that have no effect on some of them (for the user, before anything runs)."""

    spec: SweepSpec
    scale: str
    configs: tuple[RunConfig, ...]
    notes: tuple[str, ...] = ()
    runs: tuple = ()  # the configs resolved (`sweeps.checks.resolve_grid`), which the sweep trains

    @property
    def axis_names(self) -> list[str]:
        """The fields of the grid's further axes (`--set`, a sweep file's [axes])."""
        return [name for name, _ in self.spec.axes]

    def runs_payload(self) -> list[dict]:
        """The runs as `sweep --dry-run --json` prints them: run id, then every RunConfig field."""
        return [{"run_id": config.run_id(), **config.to_dict()} for config in self.configs]


# What a run's line names anyway (language, PE, β, seed, lr; a hybrid's label names its layers'
# encodings and windows, `from=` a staged run's source).
LABELLED_ANYWAY = frozenset({"language", "pe", "base", "seed", "lr", "layer_pe", "window", "init_from"})


def swept_fields(configs) -> list[str]:
    """The RunConfig fields, in field order, that take more than one value across `configs` among the
    runs they apply to: `--set` and [axes] fields, and what [[variants]] change (steps, negatives,
    ...), so that two runs' lines never read the same."""
    configs = list(configs)
    swept = []
    for name in FIELD_NAMES:
        if name in LABELLED_ANYWAY:
            continue
        values = {repr(getattr(config, name)) for config in configs if config.applies(name)}
        if len(values) > 1:
            swept.append(name)
    return swept


def check_axes(axes: dict, settings: dict) -> dict:
    """`axes` (`--set` fields -> values); FormalRopeError for a field also given by its own option."""
    both = sorted(set(axes) & set(settings))
    if both:
        raise FormalRopeError(f"{both[0]} is given both by its own option and by --set; give it once")
    return axes


def plan_sweep(request: GridRequest) -> SweepPlan:
    """The runs of `request`, each checked (`check_grid`), with the notes to show before they run.

    With `data`, the grid has one language (the given one, whose labels are checked, or data:PATH),
    the files' training and test lengths are every run's defaults (lengths given explicitly select
    part of the files' strings), and runs that become the same run once fitted to the files are kept once.
    """
    languages, data_defaults = request.languages, None
    if request.data is not None:
        language, data_defaults = data_language(request.data, request.languages, request.alphabet)
        languages = (language,)
    spec, scale = sweep_spec(request, languages, data_defaults)
    configs = expand_grid(spec)
    fitted: list[str] = []
    if request.data is not None:
        configs, fitted = fit_grid_to_data(configs)
    given = given_options(request)
    given.update({f"the sweep file's [axes] {name}": name for name, _ in spec.axes
                  if name not in request.axes and name in MAYBE_UNUSED})
    resolved = resolve_grid(configs)
    notes = unused_settings(configs, given) + fitted + list(resolved.notes)
    return SweepPlan(spec=spec, scale=scale, configs=tuple(configs), notes=tuple(notes), runs=resolved.runs)


def data_language(data: Path, languages, alphabet) -> tuple[str, dict]:
    """`sweep --data`: (the grid's one language: the given one, or data:PATH; the data's settings for
    every run: path, content hash, and the files' training and test lengths, which are defaults:
    lengths given by an option or an axis win and select part of the files' strings)."""
    if languages and len(languages) > 1:
        raise FormalRopeError("sweep --data takes at most one --lang (the data's labels are checked against it)")
    settings = data_settings(data, language=languages[0] if languages else None, alphabet=alphabet)
    return settings.pop("language"), settings


def fit_grid_to_data(configs) -> tuple[list, list[str]]:
    """`sweep --data`: every run fitted to the files (`training.data.fit_to_data`: the lengths it
    trains and tests on), then runs that became the same run kept once; the fitting notes, once each."""
    fitted, notes, seen = [], [], set()
    for config in configs:
        config, config_notes = fit_to_data(config)
        notes.extend(note for note in config_notes if note not in notes)
        if config.run_id() not in seen:
            seen.add(config.run_id())
            fitted.append(config)
    return fitted, notes


def sweep_spec(request: GridRequest, languages, defaults: dict | None = None) -> tuple[SweepSpec, str]:
    """(The SweepSpec of the request's sweep file with its settings on top, or of the settings
    alone; the scale it was built at).

    A dedicated axis or a `--set` axis replaces the file's axis of the same field. defaults
    (`sweep --data`: the files' lengths) replace the scale preset's and the file's fixed values,
    but not a setting, a `--set` axis or the file's [axes]."""
    defaults, settings, axes = defaults or {}, request.settings, request.axes
    if request.config is None:
        if not languages:
            raise FormalRopeError("sweep needs --lang (one or more) or --config FILE.toml")
        overrides = {key: value for key, value in {**defaults, **settings}.items() if key not in axes}
        return build_spec(
            name="cli", languages=languages, pes=request.pes or ["rope"], bases=request.bases or [1e4],
            seeds=request.seeds, lrs=request.lrs or None,
            periods="auto" if request.periods is None else request.periods,
            alphabet=request.alphabet, scale=request.scale or "quick", overrides=overrides, axes=axes,
        ), request.scale or "quick"
    spec, chosen = load_sweep_file(request.config, request.scale)
    file_axes = {name: values for name, values in spec.axes if name not in settings and name not in axes}
    defaults = {key: value for key, value in defaults.items() if key not in file_axes}
    periods = (spec.periods if request.periods is None else request.periods) if "periods" not in axes else "auto"
    return build_spec(
        name=spec.name, languages=languages or spec.languages, pes=request.pes or spec.pes,
        bases=request.bases or spec.bases, seeds=request.seeds if request.seeds is not None else spec.seeds,
        lrs=request.lrs or spec.lrs, periods=periods, alphabet=request.alphabet or spec.alphabet, scale=chosen,
        overrides={key: value for key, value in {**spec.overrides, **defaults, **settings}.items() if key not in axes},
        axes={**file_axes, **axes}, variants=spec.variants, stages=spec.stages, description=spec.description,
        reference=spec.reference,
        # A language's own settings yield to what the command sets (--steps, --set FIELD=..., an axis).
        language_settings=tuple((language, {key: value for key, value in own.items()
                                            if key not in settings and key not in axes})
                                for language, own in spec.language_settings),
    ), chosen


def given_options(request: GridRequest) -> dict[str, str]:
    """Options the user gave that only some runs use (option text -> RunConfig field)."""
    given = {"--base": "base"} if request.bases else {}
    if request.periods:
        given["--periods"] = "periods"
    given.update({f"--set {name}": name for name in request.axes if name in MAYBE_UNUSED})
    given.update({_SETTING_OPTIONS.get(name, name): name for name in request.settings if name in MAYBE_UNUSED})
    return given


# ----------------------------------------------------------------------------------------------
# reproduce


@dataclass(frozen=True)
class TablePlan:
    """One table `reproduce` reruns: its name, spec and runs, the folder its results go to, the
    folder of its training states (None: the default, OUT/state) and the notes `check_grid` gave."""

    name: str
    spec: SweepSpec
    out: Path
    configs: tuple[RunConfig, ...]
    state_dir: str | None = None
    notes: tuple[str, ...] = ()
    runs: tuple = ()  # the configs resolved (`sweeps.checks.resolve_grid`), which the sweep trains


def reproduce_tables(table: str) -> tuple[str, ...]:
    """The sweep files `reproduce TABLE` runs: the table, or the paper's three for `all`."""
    if table not in PAPER_TABLES + ("all",) and table not in EXPERIMENTS:
        raise FormalRopeError(
            f"unknown table {table!r}; expected one of {', '.join(PAPER_TABLES)}, all, or an experiment: "
            f"{', '.join(EXPERIMENTS)}"
        )
    return PAPER_TABLES if table == "all" else (table,)


def check_scale(scale: str) -> str:
    if scale not in SCALE_NAMES:
        raise FormalRopeError(f"unknown scale {scale!r}; expected {', '.join(SCALE_NAMES)}")
    return scale


def plan_reproduce(table: str, scale: str, *, out: Path | None = None, seeds: int | None = None,
                   steps: int | None = None, n_per_length: int | None = None, nnch_samples: int | None = None,
                   state_dir: str | None = None, hybrid: dict | None = None,
                   objective: str | None = None) -> list[TablePlan]:
    """The tables of `reproduce TABLE` at `scale` (seeds, steps, strings per length and NNCH's uniform
    strings per length overridden where given): each sweep file's grid, in `out` (`all`: a folder per
    table inside it; default results/<table>-<scale>), each table of `all` with its own subfolder of
    `state_dir`. `hybrid`: layer_pe / window for every run (`reproduce --layer-pe/--window`);
    `objective`: every run's training objective (`reproduce --objective`)."""
    settings = {key: value for key, value in (("steps", steps), ("n_per_length", n_per_length),
                                              ("nnch_samples", nnch_samples)) if value is not None}
    settings.update(hybrid or {})
    if objective is not None:
        settings["objective"] = objective
    plans = []
    for name in reproduce_tables(table):
        # Asked of the grid module when called: the one lookup of the paper's files that Python users share.
        path = grid.paper_sweep_path(name)
        spec, _ = sweep_spec(GridRequest(config=path, seeds=seeds, scale=scale, settings=settings), ())
        if out is None:
            target = Path("results") / f"{name}-{scale}"
        else:
            target = out / name if table == "all" else out
        configs = expand_grid(spec)
        resolved = resolve_grid(configs, "reproduce")
        plans.append(TablePlan(
            name=name, spec=spec, out=target, configs=tuple(configs),
            state_dir=state_dir if state_dir is None or table != "all" else state_subfolder(state_dir, name),
            notes=resolved.notes, runs=resolved.runs,
        ))
    return plans
