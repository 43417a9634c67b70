"""What a run is trained to predict: the `objective` setting, parsed (torch-free: configs read it).

An objective is a weighted sum of components (`final+next-set:0.5`), each a loss the trainer
computes in one place (`training.objectives`):

- `final` — the string's label at its eos (SPEC §8; the only objective before there were others);
- `prefix` — the label of every prefix, each read at the position after it (so the eos position
  reads the whole string, as `final` does); the eos term counts as in `final`, the other prefixes
  add their mean;
- `next-set` — at every position, which symbols the prefix can continue with and still be completed
  into the language, and whether it may end (eos: the prefix is in the language) — FLaRe's
  next-symbol-set head, multi-label;
- `lm` — next-symbol cross-entropy on positive strings (FLaRe's language-modeling loss). It trains
  no verdict, so it is an auxiliary term only: combined with `final`, `prefix` or `next-set`.

Whatever the objective, a run is scored by its eos verdict (N*, accuracy, the worst-case search):
every objective answers the same question.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from formal_rope.errors import FormalRopeError

COMPONENTS = ("final", "prefix", "next-set", "lm")
FINAL = "final"
# Components whose loss trains the eos verdict (the readout's two logits: `prefix` at every
# position, `next-set` through its eos column, which is that readout).
VERDICT_COMPONENTS = ("final", "prefix", "next-set")
# Components that read every position (the last block then runs at every token, not at eos alone).
POSITION_COMPONENTS = ("prefix", "next-set", "lm")


@dataclass(frozen=True)
class Objective:
    """Components and their weights, in `COMPONENTS` order, each at most once (weights > 0)."""

    terms: tuple[tuple[str, float], ...]

    @property
    def text(self) -> str:
        """The canonical spelling (`RunConfig.objective`): components in `COMPONENTS` order, a
        weight written only when it is not 1."""
        return "+".join(name if weight == 1.0 else f"{name}:{_weight_text(weight)}" for name, weight in self.terms)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.terms)

    def weight(self, name: str) -> float:
        """The weight of component `name` (0 when the objective lacks it)."""
        return dict(self.terms).get(name, 0.0)

    @property
    def reads_positions(self) -> bool:
        """Whether some component reads positions other than eos."""
        return any(name in POSITION_COMPONENTS for name in self.names)

    @property
    def is_final(self) -> bool:
        """The eos label alone at weight 1: the trainer's path before objectives existed."""
        return self.terms == ((FINAL, 1.0),)


# The output heads beside the eos readout that components need, and each head's width for an
# alphabet of n symbols: next-set's symbol columns (its eos column is the readout itself), and the
# language model's classes (column 0: eos, column 1 + s: symbol s). A run's columns come first, so
# runs over smaller alphabets in a pack use a prefix of the pack's head.
HEADS = {"next-set": "next_set", "lm": "lm"}


def head_width(head: str, n_symbols: int) -> int:
    """Columns of auxiliary head `head` (`HEADS` values) for an alphabet of `n_symbols` symbols."""
    return n_symbols + 1 if head == "lm" else n_symbols


def auxiliary_heads(objective: "Objective | str") -> tuple[str, ...]:
    """The auxiliary heads (`HEADS` values) a model trained with `objective` carries."""
    if isinstance(objective, str):
        objective = parse_objective(objective)
    return tuple(head for name, head in HEADS.items() if name in objective.names)


def _weight_text(weight: float) -> str:
    return repr(float(weight)).removesuffix(".0")


def parse_objective(text: str) -> Objective:
    """`final`, `prefix`, `next-set`, `lm`, or a sum `a+b:w` (w: the component's weight, default 1);
    FormalRopeError naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise FormalRopeError(f"objective must be one of {', '.join(COMPONENTS)} or a sum such as "
                              f"final+next-set:0.5, got {text!r}")
    weights: dict[str, float] = {}
    for part in text.split("+"):
        name, colon, weight_text = part.strip().partition(":")
        name = name.strip().lower().replace("_", "-")
        if name not in COMPONENTS:
            raise FormalRopeError(f"objective {text!r}: unknown component {name!r}; expected "
                                  f"{', '.join(COMPONENTS)} (sums such as final+next-set:0.5)")
        if name in weights:
            raise FormalRopeError(f"objective {text!r} names {name} twice")
        weight = 1.0
        if weight_text.strip():
            try:
                weight = float(weight_text)
            except ValueError:
                raise FormalRopeError(f"objective {text!r}: the weight of {name} must be a number, "
                                      f"got {weight_text.strip()!r}") from None
        elif colon:
            raise FormalRopeError(f"objective {text!r}: {name}: needs a weight after the colon")
        if not (math.isfinite(weight) and weight > 0):
            raise FormalRopeError(f"objective {text!r}: the weight of {name} must be a positive number, got {weight}")
        weights[name] = weight
    if not any(name in VERDICT_COMPONENTS for name in weights):
        raise FormalRopeError(
            f"objective {text!r} trains no eos verdict, and runs are scored by it (N*, accuracy): lm is an "
            "auxiliary loss on positive strings; combine it with final, prefix or next-set (e.g. final+lm:0.5)"
        )
    return Objective(tuple((name, weights[name]) for name in COMPONENTS if name in weights))


def canonical_objective(text: str) -> str:
    """The canonical spelling of an objective (`parse_objective(text).text`)."""
    return parse_objective(text).text
