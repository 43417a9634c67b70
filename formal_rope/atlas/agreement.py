"""The agreement table: the theory's prediction beside what training reached, per encoding.

A run's *outcome* is whether its worst-case N* (`n_star_worst`, `--eval worst-case`; the sampled N*
where a run was not searched) reached the longest length it was tested on and, for a run scored on
the theory's families (`runs.blind_spots`, runs predicted not expressible), no family string up to
that length was misclassified (`refuted_at` null): "learned at every tested length". Its *verdict*
is one of three (`RunOutcome.verdict`): **refuted** (predicted not expressible, and the failure the
theory guarantees was found: by the search, the sampled test sets or a family), **learned**, **not
learned** (predicted anything else and not learned; `fit` says whether training fit its training
lengths: final training accuracy >= FIT_ACCURACY, or for runs written before it was kept, final
loss < FIT_LOSS), so an optimisation failure, a generalisation failure and a real counterexample
read apart. Failed runs measured nothing and are left out (counted apart). For each encoding:

* **agreement rows** (`AgreementRow`): per predicted verdict, the runs and how many learned, and the
  languages and their mean success rate over seeds, each with the exact Clopper–Pearson interval
  of a rate (`sweeps.statistics.proportion_interval`; for languages, the sum of their success rates
  as the count, which keeps it conservative), never a bootstrap: 0 of 40 runs is 0–8.8 %, not 0–0 %;
* **class rows** (`ClassRow`): per MLRegTest class and per logic class, the success rate beside the
  predictions its languages got;
* **disagreements** (`Disagreement`): a language predicted `not_expressible` that every run learned
  at every tested length, and one predicted `expressible` that no run learned, with the evidence.

The prediction is the runs table's `predicted` column; rows written before it existed get it from
their stored config (`theory.runs.run_prediction`: the decider, never the result). Everything is
computed from a results folder (`agreement_of(read_results(OUT))`), so a committed folder
regenerates the tables without training.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from formal_rope.atlas.languages import LOGIC_CLASSES, logic_class
from formal_rope.atlas.plan import DEFAULT_ENCODINGS, encoding_label
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import AutomatonNotFoundError
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.results import read_results
from formal_rope.sweeps.statistics import DEFAULT_LEVEL, proportion_interval
from formal_rope.theory import BOUNDED, EXPRESSIBLE, NO_PREDICTION, NOT_EXPRESSIBLE, VERDICTS
from formal_rope.theory.runs import classification_of, mlregtest_class_of, run_prediction

NOT_LEARNED = "expressible, not learned"
LEARNED = "not expressible, learned"
# A run's verdict (`RunOutcome.verdict`): the theory's failure found, every tested length right, or neither.
REFUTED = "refuted"
RIGHT = "learned"
MISSED = "not learned"
RUN_VERDICTS = (REFUTED, RIGHT, MISSED)
# Whether training fit its training lengths: the final training accuracy (the curve's last point)
# at least FIT_ACCURACY; runs written before it was recorded: final loss below FIT_LOSS.
FIT_ACCURACY = 0.99
FIT_LOSS = 0.01
VERDICT_MARKS = {EXPRESSIBLE: "✓", BOUNDED: "≤N", NOT_EXPRESSIBLE: "✗", NO_PREDICTION: "?"}


@dataclass(frozen=True)
class RunOutcome:
    """One run as the agreement table reads it."""

    run_id: str
    language: str
    encoding: str
    seed: int
    predicted: str
    predicted_by: str
    status: str
    n_star: int | None
    n_star_worst: int | None
    longest: int
    learned: bool | None  # None: failed (nothing measured)
    worst_failure: str | None
    mlregtest_class: str | None
    logic_class: str | None
    refuted_at: int | None = None  # the shortest misclassified family string's length (runs.blind_spots)
    family_failure: str | None = None
    family_strings_tried: int | None = None
    sampling: str = "uniform"
    fit: bool | None = None  # training fit its lengths (None: unknown)
    fit_by: str | None = None  # "train accuracy" or "final loss" (written before training accuracy was kept)

    @property
    def verdict(self) -> str | None:
        """REFUTED (predicted not expressible and a failure found: by the search, the sampled test
        sets or the theory's families), RIGHT (right at every tested length and on the families up
        to it), MISSED (neither); None for a failed run."""
        if self.learned is None:
            return None
        if self.learned:
            return RIGHT
        return REFUTED if self.predicted == NOT_EXPRESSIBLE else MISSED


@dataclass(frozen=True)
class AgreementRow:
    encoding: str
    predicted: str
    runs: int
    learned_runs: int
    run_rate: float
    run_interval: dict
    languages: int
    languages_all_seeds: int  # languages every run of which learned
    languages_no_seed: int  # languages no run of which learned
    language_rate: float  # mean over languages of the per-language success rate
    language_interval: dict
    failed_runs: int
    refuted_runs: int = 0  # predicted not expressible, failure found
    missed_fit_runs: int = 0  # not learned, but training fit its lengths
    missed_unfit_runs: int = 0  # not learned, training did not fit (or unknown)


@dataclass(frozen=True)
class ClassRow:
    encoding: str
    kind: str  # "logic" or "MLRegTest"
    language_class: str
    predicted: dict  # verdict -> languages
    languages: int
    runs: int
    learned_runs: int
    rate: float


@dataclass(frozen=True)
class Disagreement:
    kind: str  # LEARNED or NOT_LEARNED
    encoding: str
    language: str
    predicted_by: str
    logic_class: str | None
    mlregtest_class: str | None
    runs: tuple  # ({run_id, seed, n_star, n_star_worst, longest, worst_failure}, ...)


@dataclass(frozen=True)
class Agreement:
    """An atlas's agreement: per encoding and prediction, runs and languages that reached their
    longest test length (`rows`, with intervals at `level`); per MLRegTest and logic class (`classes`);
    the runs where prediction and outcome disagree, with their evidence (`disagreements`)."""

    level: float
    encodings: tuple[str, ...]
    rows: tuple[AgreementRow, ...]
    classes: tuple[ClassRow, ...]
    disagreements: tuple[Disagreement, ...]
    runs: int
    languages: int
    searched: bool  # every measured run had the worst-case search
    sampling: dict = None  # sampling mode -> runs whose data it drew
    family_tested: int = 0  # runs scored on the theory's families

    def to_json(self) -> dict:
        return {"level": self.level, "encodings": list(self.encodings), "runs": self.runs,
                "languages": self.languages, "searched": self.searched, "sampling": self.sampling,
                "family_tested": self.family_tested,
                "agreement": [asdict(row) for row in self.rows], "classes": [asdict(row) for row in self.classes],
                "disagreements": [asdict(item) for item in self.disagreements]}


def cell_value(value):
    """A DataFrame cell as a Python value (None for NaN / pandas' NA)."""
    if value is None:
        return None
    try:
        if value != value:
            return None
    except TypeError:  # pandas.NA
        return None
    return value.item() if hasattr(value, "item") else value


def _language_classes(language: str, alphabet) -> tuple[str | None, str | None]:
    """(MLRegTest class, logic class) of a language; the logic class None when it cannot be resolved."""
    try:
        verdict = classification_of(language, alphabet)
    except AutomatonNotFoundError as error:  # a class left out would change the tables: refused instead
        raise FormalRopeError(f"cannot read the language of a run: {error}") from None
    except FormalRopeError:
        return mlregtest_class_of(language), None
    return mlregtest_class_of(language), logic_class(verdict)


def run_outcomes(runs) -> list[RunOutcome]:
    """Each row of a runs table (`read_results(OUT).runs`) as a RunOutcome."""
    outcomes = []
    for row in runs.to_dict("records"):
        config = RunConfig.from_dict(json.loads(row["config"]))
        predicted, predicted_by = cell_value(row.get("predicted")), cell_value(row.get("predicted_by"))
        if predicted is None:  # written before the prediction columns: computed from the config
            periods = cell_value(row.get("periods"))
            resolved = tuple(int(p) for p in periods.split(",")) if periods else None
            columns = run_prediction(config, resolved).columns()
            predicted, predicted_by = columns["predicted"], columns["predicted_by"]
        n_star, worst = cell_value(row.get("n_star")), cell_value(row.get("n_star_worst"))
        longest = max(config.tested_lengths())
        measured = worst if worst is not None else n_star
        failed = row["status"] == "failed" or measured is None
        refuted_at = cell_value(row.get("refuted_at"))
        right = None if failed else int(measured) >= longest and (refuted_at is None or int(refuted_at) > longest)
        mlregtest, logic = _language_classes(config.language, config.alphabet)
        fit, fit_by = _fit(row)
        tried = cell_value(row.get("family_strings_tried"))
        outcomes.append(RunOutcome(
            run_id=row["run_id"], language=config.language, encoding=encoding_label(config), seed=int(config.seed),
            predicted=predicted, predicted_by=predicted_by, status=row["status"],
            n_star=None if n_star is None else int(n_star), n_star_worst=None if worst is None else int(worst),
            longest=int(longest), learned=right,
            worst_failure=cell_value(row.get("worst_failure")), mlregtest_class=mlregtest, logic_class=logic,
            refuted_at=None if refuted_at is None else int(refuted_at),
            family_failure=cell_value(row.get("family_failure")),
            family_strings_tried=None if tried is None else int(tried), sampling=config.sampling, fit=fit,
            fit_by=fit_by,
        ))
    return outcomes


def _fit(row: dict) -> tuple[bool | None, str | None]:
    """Whether a run fit its training lengths, and by what: its final training accuracy (>= FIT_ACCURACY),
    or for runs written before it was kept, its final loss (< FIT_LOSS)."""
    accuracy = cell_value(row.get("final_train_accuracy"))
    if accuracy is not None:
        return float(accuracy) >= FIT_ACCURACY, "train accuracy"
    loss = cell_value(row.get("final_loss"))
    if loss is not None:
        return float(loss) < FIT_LOSS, "final loss"
    return None, None


def _rate(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan


def _interval(values, level: float) -> dict:
    """The exact interval of the rate of `values` (0/1 outcomes, or per-language rates in [0, 1])."""
    values = [float(v) for v in values]
    return proportion_interval(sum(values), len(values), level).to_dict()


def _by_language(outcomes) -> dict:
    """(encoding, language) -> its measured runs' outcomes."""
    cells: dict = {}
    for outcome in outcomes:
        cells.setdefault((outcome.encoding, outcome.language), []).append(outcome)
    return cells


def _agreement_rows(outcomes, encodings, level: float) -> list[AgreementRow]:
    rows = []
    cells = _by_language(outcomes)
    present = {o.predicted for o in outcomes}
    verdicts = [verdict for verdict in VERDICTS if verdict in present] + sorted(present - set(VERDICTS), key=str)
    for encoding in encodings:
        for verdict in verdicts:  # the theory's verdicts in order, then any other label the runs carry
            chosen = [o for o in outcomes if o.encoding == encoding and o.predicted == verdict]
            if not chosen:
                continue
            measured = [o for o in chosen if o.learned is not None]
            languages = sorted({o.language for o in chosen})
            rates = [_rate(o.learned for o in cells[(encoding, language)] if o.learned is not None)
                     for language in languages]
            rates = [rate for rate in rates if not math.isnan(rate)]
            rows.append(AgreementRow(
                encoding=encoding, predicted=verdict, runs=len(measured),
                learned_runs=sum(o.learned for o in measured), run_rate=_rate(o.learned for o in measured),
                run_interval=_interval([o.learned for o in measured], level), languages=len(languages),
                languages_all_seeds=sum(rate == 1 for rate in rates),
                languages_no_seed=sum(rate == 0 for rate in rates),
                language_rate=_rate(rates), language_interval=_interval(rates, level),
                failed_runs=len(chosen) - len(measured),
                refuted_runs=sum(o.verdict == REFUTED for o in measured),
                missed_fit_runs=sum(o.verdict == MISSED and bool(o.fit) for o in measured),
                missed_unfit_runs=sum(o.verdict == MISSED and not o.fit for o in measured),
            ))
    return rows


def _class_rows(outcomes, encodings) -> list[ClassRow]:
    rows = []
    for kind, attribute in (("logic", "logic_class"), ("MLRegTest", "mlregtest_class")):
        present = {getattr(o, attribute) for o in outcomes if getattr(o, attribute) is not None}
        values = [name for name in LOGIC_CLASSES if name in present] + sorted(present - set(LOGIC_CLASSES))
        for encoding in encodings:
            for value in values:
                chosen = [o for o in outcomes if o.encoding == encoding and getattr(o, attribute) == value]
                if not chosen:
                    continue
                verdicts: dict = {}
                for language, verdict in sorted({(o.language, o.predicted) for o in chosen}):
                    verdicts[verdict] = verdicts.get(verdict, 0) + 1
                measured = [o.learned for o in chosen if o.learned is not None]
                rows.append(ClassRow(encoding, kind, value, verdicts, len({o.language for o in chosen}), len(measured),
                                     sum(measured), _rate(measured)))
    return rows


def _disagreements(outcomes) -> list[Disagreement]:
    found = []
    for (encoding, language), cell in _by_language(outcomes).items():
        measured = [o for o in cell if o.learned is not None]
        verdict = cell[0].predicted
        if not measured:
            continue
        if verdict == NOT_EXPRESSIBLE and all(o.learned for o in measured):
            kind = LEARNED
        elif verdict == EXPRESSIBLE and not any(o.learned for o in measured):
            kind = NOT_LEARNED
        else:
            continue
        evidence = tuple({"run_id": o.run_id, "seed": o.seed, "n_star": o.n_star, "n_star_worst": o.n_star_worst,
                          "longest": o.longest, "worst_failure": o.worst_failure, "refuted_at": o.refuted_at,
                          "family_failure": o.family_failure, "family_strings_tried": o.family_strings_tried,
                          "sampling": o.sampling, "fit": o.fit, "fit_by": o.fit_by}
                         for o in sorted(measured, key=lambda o: o.seed))
        found.append(Disagreement(kind, encoding, language, cell[0].predicted_by, cell[0].logic_class,
                                  cell[0].mlregtest_class, evidence))
    return sorted(found, key=lambda d: (d.kind, d.encoding, d.language))


def agreement_of(results, level: float = DEFAULT_LEVEL) -> Agreement:
    """The agreement tables of a read results folder (`sweeps.results.Results`)."""
    outcomes = run_outcomes(results.runs)
    if not outcomes:
        raise FormalRopeError("the results folder holds no runs")
    present = {o.encoding for o in outcomes}
    encodings = tuple([name for name in DEFAULT_ENCODINGS if name in present]
                      + sorted(present - set(DEFAULT_ENCODINGS)))
    measured = [o for o in outcomes if o.learned is not None]
    return Agreement(
        level=level, encodings=encodings, rows=tuple(_agreement_rows(outcomes, encodings, level)),
        classes=tuple(_class_rows(outcomes, encodings)), disagreements=tuple(_disagreements(outcomes)),
        runs=len(outcomes), languages=len({o.language for o in outcomes}),
        searched=bool(measured) and all(o.n_star_worst is not None for o in measured),
        sampling={mode: sum(o.sampling == mode for o in outcomes) for mode in sorted({o.sampling for o in outcomes})},
        family_tested=sum(o.family_strings_tried is not None for o in outcomes),
    )


def read_agreement(out: str | Path, level: float = DEFAULT_LEVEL) -> Agreement:
    """`agreement_of(read_results(out))`."""
    return agreement_of(read_results(out), level)
