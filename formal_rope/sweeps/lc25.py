"""`reproduce lc25`: Li & Cotterell's Table 1 beside ours, language by language.

Their table (`paper_sweeps/lc25_table1.csv`, with its source) gives per language the maximum and
the mean ± std of the accuracy over test lengths 41..500 across 15 runs, and calls a language
learned when some run reaches 100%. Ours gives the same numbers over the results folder's runs,
plus N* and the worst-case N* (the search's, where it ran), which sampled accuracy cannot see, and
whether the split agrees: the theory (their Theorem, LTL[P]) says which languages a NoPE
transformer with strict masking can recognise, so every LTL[P] language should be learned by some
run and none of the others.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from formal_rope.sweeps.results import read_results

TABLE_FILE = "lc25_table1.csv"
# CNT (aⁿbⁿ) is in their Table 1 but not regular: no DFA, so no run here.
LEFT_OUT = ("CNT (aⁿbⁿ): a counter language, not regular (their max 83.3, mean 53.6 ± 8.6); no DFA, so no run",)


# What `reproduce lc25` shrinks at each scale but theirs (its sweep file's [quick] and [medium]).
SHRINKS = {
    "quick": (
        "model: 3 layers, d_model 32, 4 heads (theirs: 5 layers, D = 64)",
        "training: 1,000 steps of batch 64, lr 1e-3 and 3e-3 with 50 warm-up steps and cosine decay (theirs: 10^6 "
        "steps of batch 128, lr 1e-4, 3e-4, 5e-4)",
        "seeds: 3 (theirs: 5); test strings per length: 16 (theirs: 512); test lengths unchanged (41..500)",
    ),
    "medium": (
        "training: 2,000 steps, lr 1e-3 and 3e-3 with cosine decay (theirs: 10^6 steps, lr 1e-4, 3e-4, 5e-4)",
        "seeds: 3 (theirs: 5); test strings per length: 32 (theirs: 512)",
    ),
}
PROTOCOL_NOTES = (
    "positives of LT-1 and LT-2 are uniform positives (theirs hold exactly one a / one ab)",
    "RDP/LDP symbols b0, b1, b2 are written x, y, z and a1, a2 are a, b; LT-2 and PT-2 over {a, b, c}",
)


@dataclass(frozen=True)
class PaperRow:
    language: str  # our registry name
    paper_name: str
    language_class: str
    ltl_p: bool
    max: float  # accuracy, %
    mean: float
    std: float


@dataclass(frozen=True)
class Lc25Row:
    """One language: their numbers, ours (accuracy %, over the folder's runs), N* and the verdict."""

    paper: PaperRow
    runs: int
    max: float
    mean: float
    std: float
    n_star_max: int | None
    n_star_mean: float
    n_star_worst_max: int | None  # None: no worst-case search in the folder
    learned: bool  # some run reached 100% accuracy

    @property
    def agrees(self) -> bool:
        """Learned iff LTL[P] (the theory's split, which their Table 1 shows)."""
        return self.learned == self.paper.ltl_p


def paper_table() -> list[PaperRow]:
    """Their Table 1 without CNT, in their order (`paper_sweeps/lc25_table1.csv`)."""
    text = resources.files("formal_rope").joinpath("paper_sweeps", TABLE_FILE).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return [PaperRow(row["language"], row["paper_name"], row["class"], row["ltl_p"] == "True",
                     float(row["max"]), float(row["mean"]), float(row["std"]))
            for row in csv.DictReader(lines)]


def _number(value) -> float:
    """A results cell as a float (NaN for a missing value: None, NaN, pandas' NA)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


def lc25_rows(out: str | Path) -> list[Lc25Row]:
    """Their rows beside ours, from the runs in the results folder `out` (languages without runs
    are left out). Accuracy in %, std the population's over runs (ddof 0) as theirs is unstated."""
    runs = read_results(out).runs
    rows = []
    for paper in paper_table():
        mine = runs[(runs["language"] == paper.language) & (runs["status"] == "ok")]
        if not len(mine):
            continue
        accuracy = [100 * _number(value) for value in mine["accuracy"]]
        accuracy = [value for value in accuracy if not math.isnan(value)]
        n_stars = [int(value) for value in mine["n_star"] if not math.isnan(_number(value))]
        worst = [int(value) for value in mine.get("n_star_worst", []) if not math.isnan(_number(value))]
        mean = sum(accuracy) / len(accuracy) if accuracy else math.nan
        std = math.sqrt(sum((value - mean) ** 2 for value in accuracy) / len(accuracy)) if accuracy else math.nan
        rows.append(Lc25Row(
            paper=paper, runs=len(mine), max=max(accuracy, default=math.nan), mean=mean, std=std,
            n_star_max=max(n_stars, default=None), n_star_mean=sum(n_stars) / len(n_stars) if n_stars else math.nan,
            n_star_worst_max=max(worst, default=None), learned=any(value >= 100.0 for value in accuracy),
        ))
    return rows


def lc25_payload(rows: list[Lc25Row]) -> dict:
    """JSON-ready: one entry per language, the split's agreement, and what was left out."""
    return {
        "rows": [{
            "language": row.paper.language, "paper_name": row.paper.paper_name, "class": row.paper.language_class,
            "ltl_p": row.paper.ltl_p, "paper_max": row.paper.max, "paper_mean": row.paper.mean,
            "paper_std": row.paper.std, "runs": row.runs, "max": row.max, "mean": row.mean, "std": row.std,
            "n_star_max": row.n_star_max, "n_star_mean": row.n_star_mean, "n_star_worst_max": row.n_star_worst_max,
            "learned": row.learned, "agrees": row.agrees,
        } for row in rows],
        "split_agrees": all(row.agrees for row in rows),
        "left_out": list(LEFT_OUT),
    }
