"""The atlas's runs: a language set × encodings × seeds, planned through the sweep machinery.

`atlas_configs` builds one `SweepSpec` per group of encodings (`sweeps.grid.build_spec`) and
expands it (`sweeps.grid.expand_grid`), so an atlas run is an ordinary sweep run: same run ids,
same results folder, same resume (a rerun skips finished runs), same backends (local pool, Ray).

Encodings are named as `--pe` takes them, plus windowed hybrids `ENC_wW+nope`: every layer but the
last `ENC` with a sliding window of W keys, the last layer global NoPE (docs/findings.md, "Hybrid
models": `rope_w8+nope` is the windowed RoPE_NP + global NoPE model there). Periods "auto" resolve
from the set's verdicts to the least k, at least 2 (`theory.auto_periods`: period 1 would repeat
NoPE); a language outside LTL[P,MOD] has none, and its periodic runs
get the counting family's modulus, else `FALLBACK_PERIOD` (the theory's verdict there is "not
expressible" whatever the periods).

The training recipe (`ATLAS_RECIPE`): all training negatives near-misses
(`train_near_miss_fraction = 1`), under which RoPE_P reached N* = 500 on 5 of 5 seeds at periods 2
and 3 (docs/findings.md, "Stable RoPE_P"), where the quick recipe's uniform negatives got 1 of 5 at
period 3: inexpressibility is then less confounded with a failure to train. And coverage sampling
(`sampling.coverage`): training batches, test sets and so the worst-case search's seeds include
strings that take every transition of the minimal DFA, rare ones included. The committed atlas in
atlas/results was trained before coverage sampling existed, with uniform sampling (its runs' ids
lack the field); a new atlas run gets coverage, and so another id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from formal_rope.atlas.languages import LanguageEntry, LanguageSet, SetSpec, build_language_set
from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.engine import SearchSettings
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import POSITIONAL_ENCODINGS
from formal_rope.run_config.rules import GLOBAL_WINDOW
from formal_rope.sweeps.grid import MAX_GRID_RUNS, SCALE_NAMES, build_spec, expand_grid
from formal_rope.theory import auto_periods
from formal_rope.training.scales import SCALES

DEFAULT_ENCODINGS = ("nope", "rope_p", "rope", "rope_w8+nope")
ATLAS_RECIPE = {"train_near_miss_fraction": 1.0, "sampling": "coverage"}
DEFAULT_BUDGET = 64  # worst-case search: strings per length beyond the test set (`--worst-case-budget`)
FALLBACK_PERIOD = 2
CALIBRATION_LANGUAGE = "(ab)*"  # what the dry run's estimate trains on (any language costs about the same)
EVAL_MODES = ("worst-case", "full")
_HYBRID = re.compile(r"^(?P<pe>[a-z_]+?)_w(?P<window>\d+)\+nope$")


@dataclass(frozen=True)
class AtlasEncoding:
    """One encoding column of the atlas: a registry encoding, or a windowed hybrid (window set)."""

    name: str
    pe: str
    window: int | None = None

    def settings(self, layers: int) -> dict:
        """The RunConfig fields beyond `pe` for a model of `layers` layers."""
        if self.window is None:
            return {}
        if layers < 2:
            raise FormalRopeError(f"{self.name} needs at least 2 layers (windowed layers, then a global NoPE layer)")
        return {"layer_pe": ("pe",) * (layers - 1) + ("nope",),
                "window": (self.window,) * (layers - 1) + (GLOBAL_WINDOW,)}


def parse_encoding(name: str) -> AtlasEncoding:
    """`nope`, `rope_p`, ... or `ENC_wW+nope` (a windowed hybrid); FormalRopeError otherwise."""
    text = name.strip()
    if text in POSITIONAL_ENCODINGS:
        return AtlasEncoding(text, text)
    match = _HYBRID.match(text)
    if match and match["pe"] in POSITIONAL_ENCODINGS and int(match["window"]) >= 1:
        return AtlasEncoding(text, match["pe"], int(match["window"]))
    raise FormalRopeError(
        f"unknown atlas encoding {name!r}; expected one of {', '.join(POSITIONAL_ENCODINGS)} or a windowed "
        "hybrid ENC_wW+nope (e.g. rope_w8+nope: windowed RoPE_NP layers under a global NoPE layer)"
    )


@dataclass(frozen=True)
class AtlasRecipe:
    """What every atlas run shares: scale, seeds, base, the recipe's RunConfig fields."""

    scale: str = "quick"
    seeds: int = 2
    base: float = 1e4
    periods: tuple[int, ...] | str = "auto"  # "auto": `atlas_periods` per language
    settings: dict = field(default_factory=lambda: dict(ATLAS_RECIPE))

    @property
    def layers(self) -> int:
        return int(self.settings.get("layers", SCALES[self.scale]["layers"]))


@dataclass(frozen=True)
class AtlasRequest:
    """An atlas as the command line asks for it: its encodings, recipe and worst-case search (None: off)."""

    encodings: tuple[AtlasEncoding, ...]
    recipe: AtlasRecipe
    worst_case: SearchSettings | None


def atlas_request(encodings, *, scale: str = "quick", seeds: int = 2, periods="auto", eval_mode: str = "worst-case",
                  budget: int = DEFAULT_BUDGET, steps: int | None = None) -> AtlasRequest:
    """The request of `formalrope atlas`'s options (FormalRopeError for an unknown encoding, scale or mode)."""
    if scale not in SCALE_NAMES:
        raise FormalRopeError(f"unknown scale {scale!r}; expected {', '.join(SCALE_NAMES)}")
    if eval_mode not in EVAL_MODES:
        raise FormalRopeError(f"--eval must be {' or '.join(EVAL_MODES)}, got {eval_mode!r}")
    if budget < 0:
        raise FormalRopeError(f"--worst-case-budget must be non-negative, got {budget}")
    if int(seeds) > MAX_GRID_RUNS:  # before any language is built: the dry run refuses it as the run does
        raise FormalRopeError(f"--seeds {int(seeds):,} is more than a sweep may run ({MAX_GRID_RUNS:,} runs at most)")
    parsed = tuple(parse_encoding(name) for name in encodings)
    if not parsed:
        raise FormalRopeError("the atlas needs at least one encoding (--pe)")
    names = [item.name for item in parsed]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:  # its runs would be planned once: a count the user did not ask for
        raise FormalRopeError(f"--pe names {repeated[0]} twice; list each encoding once")
    settings = {**ATLAS_RECIPE, **({} if steps is None else {"steps": int(steps)})}
    return AtlasRequest(parsed, AtlasRecipe(scale=scale, seeds=int(seeds), periods=periods, settings=settings),
                        SearchSettings(budget=budget) if eval_mode == "worst-case" else None)


def calibration_config(recipe: AtlasRecipe) -> RunConfig:
    """A run shaped like the atlas's (model, steps, recipe, test lengths) for the dry run's calibration."""
    spec = build_spec(name="atlas-calibration", languages=(CALIBRATION_LANGUAGE,), pes=("rope",),
                      bases=(recipe.base,), seeds=1, scale=recipe.scale, overrides=dict(recipe.settings))
    return expand_grid(spec)[0]


def atlas_periods(entry: LanguageEntry) -> tuple[int, ...]:
    """The periods a periodic encoding gets on `entry`: auto's (the least k, at least 2:
    `theory.auto_periods`), else the counting family's modulus, else FALLBACK_PERIOD."""
    if entry.mod_k is not None:
        return auto_periods(entry.mod_k)
    return (int(entry.period),) if entry.family == "counting" and entry.period else (FALLBACK_PERIOD,)


def _grid_alphabet(entry: LanguageEntry) -> tuple[str, ...] | None:
    """The alphabet a grid must name for the entry: None where the text alone resolves to it (MLRegTest
    files, generated and registry languages), the list's alphabet for a user's line."""
    return entry.alphabet if entry.source == "user" else None


def atlas_configs(languages: LanguageSet, encodings, recipe: AtlasRecipe) -> list[RunConfig]:
    """Every run of the atlas, ordered language-major as the set, then encoding, then seed."""
    encodings = [item if isinstance(item, AtlasEncoding) else parse_encoding(item) for item in encodings]
    by_language = {(entry.language, _grid_alphabet(entry)): entry for entry in languages}

    def resolve_periods(language, alphabet):
        return atlas_periods(by_language[(language, alphabet)])

    configs: list[RunConfig] = []
    seen: set[str] = set()
    for entry in languages:
        alphabet = _grid_alphabet(entry)
        for encoding in encodings:
            spec = build_spec(
                name="atlas", languages=(entry.language,), pes=(encoding.pe,), bases=(recipe.base,),
                seeds=recipe.seeds, periods=recipe.periods, alphabet=alphabet, scale=recipe.scale,
                overrides={**recipe.settings, **encoding.settings(recipe.layers)},
            )
            for config in expand_grid(spec, resolve_periods):
                if config.run_id() not in seen:
                    seen.add(config.run_id())
                    configs.append(config)
    return configs


@dataclass(frozen=True)
class AtlasPlan:
    """What an atlas runs (`plan_atlas`), the one plan both `--dry-run` and the real run print:
    its languages (entries whose every run an earlier entry already plans are left out, in
    `dropped`) and its runs."""

    languages: LanguageSet
    configs: tuple[RunConfig, ...]
    dropped: tuple[LanguageEntry, ...] = ()
    # The DFA the set built for each run's language, by (language, alphabet) as the runs name it:
    # the runs are resolved with these (`sweeps.checks.resolve_grid(..., dfas=)`), not from text again.
    dfas: dict = field(default_factory=dict, compare=False, repr=False)


def plan_atlas(spec: "str | SetSpec", seed: int, request: AtlasRequest) -> AtlasPlan:
    """Build the language set of (`spec`, `seed`; text, or parsed once: `languages.parse_set_spec`)
    and expand its runs: FormalRopeError for whatever the set or the grid refuses (a bad part or
    option, an unfillable family, too many runs)."""
    languages = build_language_set(spec, seed)
    bound = len(languages) * len(request.encodings) * request.recipe.seeds
    if bound > MAX_GRID_RUNS:
        raise FormalRopeError(f"the atlas of {spec!r} plans up to {bound:,} runs ({len(languages)} languages × "
                              f"{len(request.encodings)} encodings × {request.recipe.seeds} seeds), more than a sweep "
                              f"may run ({MAX_GRID_RUNS:,}); use fewer seeds, encodings or languages")
    configs: list[RunConfig] = []
    kept: list[tuple[LanguageEntry, object]] = []
    dropped: list[LanguageEntry] = []
    dfas: dict = {}
    seen: set[str] = set()
    for entry, dfa in zip(languages.entries, languages.dfas, strict=True):
        new = [config for config in atlas_configs(LanguageSet(languages.spec, seed, (entry,)), request.encodings,
                                                  request.recipe) if config.run_id() not in seen]
        if not new:
            dropped.append(entry)  # the same language (text and alphabet) as an earlier entry
            continue
        kept.append((entry, dfa))
        seen.update(config.run_id() for config in new)
        configs.extend(new)
        dfas.update({(config.language, config.alphabet): dfa for config in new})
    kept_set = LanguageSet(languages.spec, languages.seed, tuple(entry for entry, _ in kept),
                           tuple(dfa for _, dfa in kept))
    return AtlasPlan(kept_set, tuple(configs), tuple(dropped), dfas)


def encoding_label(config: RunConfig) -> str:
    """The atlas's name for a run's encoding: the pe, or `ENC_wW+nope` for a windowed hybrid."""
    windows = config.layer_windows()
    encodings = config.layer_encodings()
    if config.is_hybrid() and encodings[-1] == "nope" and windows[-1] is None and len(set(windows[:-1])) == 1 \
            and windows[0] is not None and len(set(encodings[:-1])) == 1:
        return f"{encodings[0]}_w{windows[0]}+nope"
    if config.is_hybrid():
        return "+".join(f"{pe}" + ("" if w is None else f"_w{w}") for pe, w in zip(encodings, windows))
    return config.pe


def planned_runs(language_count: int, encodings, seeds: int) -> int:
    """The atlas's run count from its sizes alone (`--dry-run` without building the set)."""
    return int(language_count) * len(tuple(encodings)) * int(seeds)
