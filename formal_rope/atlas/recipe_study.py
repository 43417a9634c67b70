"""The recipe study (issue 45.3): which training factor makes expressible languages learn.

A sweep file whose [[variants]] each change one factor of the atlas's recipe (`sweeps/recipe_study.toml`)
is run on a development set of languages that is not the atlas's default set. Each run is read as
the atlas reads it (`atlas.agreement.run_outcomes`: learned = worst-case N* reached the longest tested
length; fit = final training accuracy >= 99%), and each variant is summarised over its (language,
encoding) pairs: the share of pairs predicted expressible that it learned, with the exact
(Clopper-Pearson) interval; the pairs it gained and lost against the baseline variant on the same
pairs, with the exact two-sided sign test of those changes; the share of not-expressible pairs it
learned (the control: a recipe that "learns" those is measuring its search, not the theory); and
its cost per run. docs/make_findings.py writes the table into docs/findings.md from the committed
results (`atlas/recipe-study`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from formal_rope.atlas.agreement import run_outcomes
from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.grid import load_sweep_file, variant_run_ids
from formal_rope.sweeps.report.labels import label_variants
from formal_rope.sweeps.results import read_results
from formal_rope.sweeps.statistics import proportion_interval
from formal_rope.theory import EXPRESSIBLE

BASELINE = "atlas recipe"


@dataclass(frozen=True)
class PairOutcome:
    """One run of the study, as the atlas reads it."""

    variant: str
    language: str
    encoding: str
    predicted: str
    learned: bool | None  # None: the run failed
    fit: bool | None
    n_star_worst: int | None
    seconds: float


@dataclass(frozen=True)
class VariantSummary:
    variant: str
    expressible_pairs: int
    learned: int
    interval: tuple[float, float]
    not_learned_fit: int
    not_learned_unfit: int
    gained: int  # pairs learned here and not under the baseline
    lost: int  # pairs learned under the baseline and not here
    sign_test_p: float | None  # exact two-sided, of gained vs lost (None for the baseline itself)
    control_pairs: int
    control_learned: int
    seconds_per_run: float
    failed_runs: int


def study_outcomes(results: str | Path, sweep_file: str | Path) -> list[PairOutcome]:
    """Every run of the study's results folder, labelled with its variant of `sweep_file`."""

    spec, _ = load_sweep_file(sweep_file)
    if not spec.variants:
        raise FormalRopeError(f"{sweep_file} has no [[variants]]: a recipe study compares variants")
    runs = read_results(results).runs
    runs = label_variants(runs, spec.variants, spec.overrides, variant_run_ids(spec))
    variant_of = dict(zip(runs["run_id"], runs["variant"]))
    # a packed run's wall time is its pack's: its share is the pack's time over the pack's size
    cost = {row["run_id"]: float(row["wall_s"] or 0.0) / max(int(row.get("pack_size") or 1), 1)
            for row in runs.to_dict("records")}
    order = {name: index for index, (name, _) in enumerate(spec.variants)}
    outcomes = [PairOutcome(variant_of[o.run_id], o.language, o.encoding, o.predicted, o.learned, o.fit,
                            o.n_star_worst, cost[o.run_id])
                for o in run_outcomes(runs) if isinstance(variant_of.get(o.run_id), str)]
    return sorted(outcomes, key=lambda o: order.get(o.variant, len(order)))  # the sweep file's order


def planned_runs(sweep_file: str | Path) -> int:
    """How many runs the study's sweep file plans (its variants over its languages, encodings and seeds)."""
    spec, _ = load_sweep_file(sweep_file)
    return len(variant_run_ids(spec))


def _sign_test(gained: int, lost: int) -> float:
    from scipy.stats import binomtest  # function-local: scipy.stats off the start-up path

    return 1.0 if gained + lost == 0 else float(binomtest(gained, gained + lost, 0.5).pvalue)


def summarise(outcomes: list[PairOutcome], baseline: str = BASELINE, level: float = 0.95) -> list[VariantSummary]:
    """One summary per variant, in the order the variants first appear."""

    variants = list(dict.fromkeys(o.variant for o in outcomes))
    if baseline not in variants:
        raise FormalRopeError(f"no run of the baseline variant {baseline!r} (variants: {', '.join(variants)})")

    def learned_pairs(variant: str) -> set[tuple[str, str]]:
        return {(o.language, o.encoding) for o in outcomes
                if o.variant == variant and o.predicted == EXPRESSIBLE and o.learned}

    base = learned_pairs(baseline)
    summaries = []
    for variant in variants:
        mine = [o for o in outcomes if o.variant == variant]
        possible = [o for o in mine if o.predicted == EXPRESSIBLE and o.learned is not None]
        control = [o for o in mine if o.predicted != EXPRESSIBLE and o.learned is not None]
        learned = learned_pairs(variant)
        pairs = {(o.language, o.encoding) for o in possible}
        gained, lost = len((learned - base) & pairs), len((base - learned) & pairs)
        interval = proportion_interval(len(learned & pairs), len(pairs), level) if pairs else None
        missed = [o for o in possible if not o.learned]
        seconds = sorted(o.seconds for o in mine)
        summaries.append(VariantSummary(
            variant, len(pairs), len(learned & pairs),
            (interval.low, interval.high) if interval is not None else (float("nan"), float("nan")),
            sum(bool(o.fit) for o in missed), sum(not o.fit for o in missed), gained, lost,
            None if variant == baseline else _sign_test(gained, lost), len(control),
            sum(bool(o.learned) for o in control), seconds[len(seconds) // 2] if seconds else 0.0,
            sum(o.learned is None for o in mine)))
    return summaries


def _percent(value: float) -> str:
    text = f"{100 * value:.1f}"
    return (text[:-2] if text.endswith(".0") else text) + "%"


def study_markdown(summaries: list[VariantSummary], outcomes: list[PairOutcome]) -> str:
    """The study's table and, per (language, encoding) pair predicted expressible, which variants learned it."""
    header = ["variant", "expressible pairs learned", "95% CI", "not learned (fit / not fit)",
              "vs atlas recipe: gained / lost", "sign test p", "not-expressible pairs learned (control)",
              "median s per run"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in summaries:
        lines.append("| " + " | ".join([
            s.variant, f"{s.learned}/{s.expressible_pairs}", f"{_percent(s.interval[0])}–{_percent(s.interval[1])}",
            f"{s.not_learned_fit} / {s.not_learned_unfit}",
            "–" if s.sign_test_p is None else f"+{s.gained} / −{s.lost}",
            "–" if s.sign_test_p is None else f"{s.sign_test_p:.2g}", f"{s.control_learned}/{s.control_pairs}",
            f"{s.seconds_per_run:.0f}" + (f" ({s.failed_runs} failed)" if s.failed_runs else "")]) + " |")
    variants = [s.variant for s in summaries]
    pairs = sorted({(o.language, o.encoding) for o in outcomes if o.predicted == EXPRESSIBLE})
    by_pair = {(o.language, o.encoding, o.variant): o for o in outcomes}
    lines += ["", "| language | encoding | " + " | ".join(variants) + " |", "|---|---|" + "---|" * len(variants)]
    for language, encoding in pairs:
        cells = []
        for variant in variants:
            o = by_pair.get((language, encoding, variant))
            if o is None or o.learned is None:
                cells.append("–")
            else:
                worst = "–" if o.n_star_worst is None else str(o.n_star_worst)
                cells.append(("**learned**" if o.learned else worst) + ("" if o.learned or o.fit else " (not fit)"))
        shown = language.replace("|", "\\|")  # a pipe inside a cell would end it
        lines.append(f"| `{shown}` | {encoding} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
