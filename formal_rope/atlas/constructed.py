"""The atlas's "constructed" column: for every language a run predicts expressible, the exact model.

A run is predicted expressible when NoPE meets an LTL[P] language or RoPE_P (at the language's
period) an LTL[P,MOD] one. For each such language the compiler builds the transformer the theory
promises (`compiler.language_to_formula`: the automaton construction for LTL[P], the bounded search
otherwise; then `compile_formula`, fp32) and it is evaluated like a trained run: on the run's own
test sets at every test length it was tested on (`training.data.test_length_blocks`, so the same
sampling mode and seeds), then searched with the worst-case search at the atlas's budget
(`evaluation.worst_case`). `constructed_n_star` / `constructed_n_star_worst` stand beside the runs'
`n_star` / `n_star_worst`: "expressible, not learned" then reads as "a model exists (this big) and
training did not find it". An LTL[P] construction uses no rotation, so the same model answers for
NoPE and for RoPE_P runs of that language.

Results are cached in `constructed.json` of the atlas's folder, keyed by language, alphabet, test
lengths and test-set settings (each records the search budget it was measured with), so the page
regenerates without recompiling.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from formal_rope.atlas.agreement import cell_value
from formal_rope.automata import language_dfa
from formal_rope.compiler import compile_formula
from formal_rope.compiler.language_to_formula import language_to_formula
from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.engine import n_star_of
from formal_rope.evaluation.models import worst_case
from formal_rope.lang.source import resolve_formula_first
from formal_rope.run_config.config import RunConfig
from formal_rope.theory import EXPRESSIBLE
from formal_rope.training.data import test_length_blocks

CACHE_FILE = "constructed.json"
CONSTRUCTED_ENCODINGS = ("nope", "rope_p")


@dataclass(frozen=True)
class ConstructedModel:
    """The compiled model of one expressible language and how far it is right, measured like a run."""

    language: str
    alphabet: tuple[str, ...]
    key: str
    method: str = ""  # automaton | search | given
    formula_size: int = 0
    layers: int = 0
    heads: int = 0
    d_model: int = 0
    n_star: int | None = None  # the run's sampled test sets alone
    n_star_worst: int | None = None  # with the worst-case search
    longest: int = 0
    failure: str | None = None
    strings_tried: int = 0
    seconds: float = 0.0
    status: str = "ok"  # ok | the reason no model was built
    budget: int = 0  # the worst-case search's strings per length beyond the test sets
    lengths_measured: int = 0  # of the run's tested lengths, how many the model was measured at
    lengths_tested: int = 0

    def to_json(self) -> dict:
        return {**asdict(self), "alphabet": list(self.alphabet)}


def _key(language: str, alphabet, config) -> str:
    # The search's budget is not in the key: a model measured at another budget answers (it records
    # its own), so one expensive model can be searched less without orphaning the cache.
    evaluation = config.evaluation
    return json.dumps([language, list(alphabet), evaluation.test_min_length, evaluation.test_max_length,
                       list(evaluation.test_lengths or ()), config.n_per_length, config.eval_seed,
                       config.test_near_miss_fraction, config.sampling])


def expressible_languages(runs) -> list[tuple[str, tuple[str, ...], object]]:
    """(language, alphabet, a run's config) for each language some NoPE / RoPE_P run predicts expressible."""

    chosen: dict[tuple, object] = {}
    for row in runs.to_dict("records"):
        if cell_value(row.get("predicted")) != EXPRESSIBLE or row.get("pe") not in CONSTRUCTED_ENCODINGS:
            continue
        config = RunConfig.from_dict(json.loads(row["config"]))
        chosen.setdefault((config.language, tuple(config.alphabet or ())), config)
    return [(language, alphabet, config) for (language, alphabet), config in chosen.items()]


def measured_lengths(config, stride: int) -> list[int]:
    """Every `stride`-th length the run tested, the longest always among them."""
    if stride < 1:
        raise FormalRopeError(f"the length stride must be at least 1, got {stride}")
    lengths = list(config.tested_lengths())
    chosen = lengths[::stride]
    return chosen if chosen[-1] == lengths[-1] else [*chosen, lengths[-1]]


def construct_and_measure(language: str, alphabet: tuple[str, ...], config, budget: int,
                          stride: int = 1) -> ConstructedModel:
    """Compile the language and evaluate the model on the run's test sets, then search it; with
    `stride` > 1 only every stride-th tested length (the longest included): the evaluator's cost grows
    with d_model² per layer, and the largest constructions cost hours at all 460 lengths."""

    key = _key(language, alphabet, config)
    started = time.perf_counter()
    resolved = resolve_formula_first(language, alphabet or None)
    dfa = language_dfa(resolved)
    try:
        built = language_to_formula(resolved, dfa=dfa)
        compiled = compile_formula(built.formula, built.alphabet, fmt="fp32", language=language)
    except FormalRopeError as error:
        return ConstructedModel(language, tuple(resolved.alphabet), key, status=str(error).splitlines()[0],
                                budget=budget)
    lengths = measured_lengths(config, stride)
    measured = config if stride == 1 else config.with_(test_lengths=tuple(lengths))
    found = worst_case(model=compiled, dfa=built.dfa, lengths=lengths, budget=budget, seed=config.eval_seed,
                       start_sets=test_length_blocks(built.dfa, measured), fmt="fp32", mode="native")
    return ConstructedModel(
        language, tuple(built.alphabet), key, built.method, built.metrics.dag_size, len(compiled.ir.layers),
        sum(len(layer.heads) for layer in compiled.ir.layers), len(compiled.ir.coordinates),
        n_star_of(found.per_length, start_only=True), found.n_star_worst, max(lengths), found.failure, found.tried,
        time.perf_counter() - started, budget=budget, lengths_measured=len(lengths),
        lengths_tested=len(list(config.tested_lengths())))


def read_constructed(folder: str | Path) -> dict[str, ConstructedModel]:
    """The cached constructed models of an atlas folder, by key ({} when none were measured)."""
    path = Path(folder) / CACHE_FILE
    if not path.is_file():
        return {}
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {row["key"]: ConstructedModel(**{**row, "alphabet": tuple(row["alphabet"])}) for row in rows}


def constructed_models(folder: str | Path, runs, budget: int, on_language: Callable[[ConstructedModel], None]
                       | None = None, compute: bool = True,
                       on_built: Callable[[ConstructedModel], None] | None = None) -> list[ConstructedModel]:
    """Every expressible language's constructed model: cached ones read back (whatever budget they
    were searched with), the others (when `compute`) built, measured with `budget` and added to the
    cache as each finishes (`on_built` hears of those, `on_language` of every one)."""
    cache = read_constructed(folder)
    results = []
    for language, alphabet, config in expressible_languages(runs):
        key = _key(language, alphabet, config)
        if key not in cache and compute:
            cache[key] = construct_and_measure(language, alphabet, config, budget)
            if on_built is not None:
                on_built(cache[key])
            path = Path(folder) / CACHE_FILE
            path.write_text(json.dumps([item.to_json() for item in cache.values()], indent=1, ensure_ascii=False)
                            + "\n", encoding="utf-8")
        if key in cache:
            results.append(cache[key])
            if on_language is not None:
                on_language(cache[key])
    return results


def constructed_by_language(models: list[ConstructedModel]) -> dict[tuple[str, tuple[str, ...]], ConstructedModel]:
    return {(model.language, model.alphabet): model for model in models}
