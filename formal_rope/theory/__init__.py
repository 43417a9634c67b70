"""Theory stage: what the papers' theorems predict a run's model can express, from the class decider.

`predict(language, scheme)` reads a language's class verdicts (`formal_rope.classes.classify`) and a
run's positional scheme (encodings, periods, windows per layer) and returns a `Prediction`: the
verdict (expressible at every length, only up to a precision-dependent length, not expressible, or
no prediction), the theorem that gives it and a one-line reason. It never reads a training result.
docs/theory.md lists every rule with its citation.

This package imports neither torch nor numpy: torch-free commands (reports, sweeps' planning) use it.
"""

from formal_rope.auto_periods import AUTO_MIN_PERIOD, auto_periods, auto_periods_note
from formal_rope.theory.predictions import (
    BOUNDED,
    EXPRESSIBLE,
    NO_PREDICTION,
    NOT_EXPRESSIBLE,
    PREDICTION_COLUMNS,
    VERDICTS,
    LanguageFacts,
    PositionalScheme,
    Prediction,
    mlregtest_ltl_p_y,
    predict,
    predict_run,
)

__all__ = [
    "BOUNDED",
    "EXPRESSIBLE",
    "NOT_EXPRESSIBLE",
    "NO_PREDICTION",
    "PREDICTION_COLUMNS",
    "VERDICTS",
    "AUTO_MIN_PERIOD",
    "LanguageFacts",
    "PositionalScheme",
    "Prediction",
    "auto_periods",
    "auto_periods_note",
    "mlregtest_ltl_p_y",
    "predict",
    "predict_run",
]
