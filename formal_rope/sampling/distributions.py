"""How the positives of a length are drawn: the distributions `test_sets` and `sample --distribution`
offer, one row each (light: the CLI reads it at start-up for --distribution's help)."""

from __future__ import annotations

from dataclasses import dataclass

from formal_rope.errors import FormalRopeError

# Count table kinds (`datasets.count_table`) the positives are walked on.
ACCEPTED = "accepted"
FLARE_ACCEPTED = "flare_accepted"  # members weighted as FLaRe's sampler weighs them


@dataclass(frozen=True)
class Distribution:
    """name: the --distribution value; table: the count table kind its positives are walked on;
    help: what it draws, for --help."""

    name: str
    table: str
    help: str


DISTRIBUTIONS = (
    Distribution("uniform", ACCEPTED, "every member of the length equally likely"),
    Distribution(
        "flare", FLARE_ACCEPTED,
        "as FLaRe's sampler: at every state each move (a symbol after which a member can still be "
        "reached, or stopping in an accepting state) equally likely, conditioned on the length",
    ),
)
DEFAULT_DISTRIBUTION = "uniform"


def positive_distribution(name: str) -> Distribution:
    """The row of DISTRIBUTIONS called `name` (FormalRopeError naming the others)."""
    for row in DISTRIBUTIONS:
        if row.name == name:
            return row
    raise FormalRopeError(
        f"unknown distribution {name!r}; expected one of {', '.join(row.name for row in DISTRIBUTIONS)}"
    )
