"""Verification of a compiled model against the formula's minimal DFA.

1. Exhaustive: every string of length 0..n, n = ``exhaustive_up_to`` (default 10) lowered until
   the count Σ_{l ≤ n} |Σ|^l stays ≤ ``EXHAUSTIVE_BUDGET`` and their symbols Σ_{l ≤ n} l·|Σ|^l stay
   ≤ ``EXHAUSTIVE_SYMBOL_BUDGET`` (so large alphabets, and the long strings of a one-symbol one, stay fast).
2. Sampled: at a geometric spread of lengths up to ``verify_to`` (about five per decade: 13, 20,
   32, 50, 79, 126, 200, 316, 501, 794, 1259, 1995 … and ``verify_to`` itself), plus the lengths
   around every certified length N_max (N_max, N_max+1, N_max+2) that lie in range,
   ``per_length`` strings per length drawn uniformly from L and from its complement (half each,
   when both are non-empty at that length; formal_rope.sampling, seeded).

The expected label is the DFA's (built only when there are sampled lengths: with ``verify_to = 0``
the exhaustive strings are labelled by evaluating the formula directly, so a formula whose DFA is
huge, like Y^20(a), can still be compiled); the model runs in the chosen format and mode. A disagreement
counts as *inside the certified range* when the string is no longer than the model's certified
length in the format and mode of the verification (the compile-time one, or the one recomputed for
another format or native mode; always, for models without a certified length).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from formal_rope import limits
from formal_rope.automata import accepts, ltl_to_dfa
from formal_rope.automata.dfa import DFA
from formal_rope.automata.ltl import ltl_accepts
from formal_rope.automata.membership import format_word
from formal_rope.compiler.compiling import CompiledModel
from formal_rope.errors import FormalRopeError
from formal_rope.model.evaluate import evaluate
from formal_rope.model.forward import check_mode
from formal_rope.model.positional_needs import positional_needs
from formal_rope.precision import FloatFormat, f_large, parse_format
from formal_rope.sampling import EmptyClassError, sample_strings

EXHAUSTIVE_BUDGET = 4096
# The symbols of the exhaustive strings: a one-symbol alphabet has one string per length, so the
# count alone never binds and --exhaustive 3000 ran ~4.5 million symbols through the model. 11 × 4096
# leaves every alphabet of two or more symbols where the count cap puts it (binary: 11, 40,962 symbols).
EXHAUSTIVE_SYMBOL_BUDGET = 11 * EXHAUSTIVE_BUDGET


@dataclass(frozen=True)
class VerificationOptions:
    """What `verify_compiled` checks: the arithmetic (`mode`), the exhaustive part, the sampled lengths
    and strings, their seed and the size limit of the formula's DFA (None: the automata default).

    Checked on construction, so a caller (the `compile` command) can refuse bad values before compiling.
    """

    mode: str = "emulated"
    exhaustive_up_to: int = 10
    verify_to: int = 2000
    per_length: int = 8
    seed: int = 0
    max_states: int | None = None

    def __post_init__(self) -> None:
        for name, flag, value in (("verify_to", "--verify-to", self.verify_to),
                                  ("exhaustive_up_to", "--exhaustive", self.exhaustive_up_to),
                                  ("per_length", "--per-length", self.per_length), ("seed", "--seed", self.seed)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise FormalRopeError(f"{name} ({flag}) must be a non-negative integer, got {value!r}")
        if self.per_length == 0 and self.verify_to > self.exhaustive_up_to:
            # Sampling nothing per length would leave --verify-to without effect while the report still
            # lists the sampled lengths it was meant to cover.
            raise FormalRopeError(
                f"--per-length 0 samples no strings, so --verify-to {self.verify_to} would verify nothing beyond the "
                f"exhaustive part (length {self.exhaustive_up_to}); give --per-length 1 or more, or --verify-to 0 to "
                "skip the sampled part"
            )
        if self.verify_to > limits.MAX_SAMPLE_LENGTH:
            raise FormalRopeError(
                f"--verify-to {self.verify_to:,}: sampled strings are at most {limits.describe('MAX_SAMPLE_LENGTH')} "
                "symbols long (each is drawn position by position from the DFA's count table)"
            )
        # Every count has a cap before any work, as `sample` has: the sampled strings (at most three
        # lengths around the certified length come on top of the spread) are held at once.
        spread = sampled_lengths(self.exhaustive_up_to, self.verify_to)
        symbols = self.per_length * (sum(spread) + 3 * self.verify_to * bool(spread))
        if symbols > limits.MAX_SAMPLED_SYMBOLS:
            raise FormalRopeError(
                f"--per-length {self.per_length:,} up to --verify-to {self.verify_to:,} samples up to {symbols:,} "
                f"symbols, more than {limits.describe('MAX_SAMPLED_SYMBOLS')} held at once; lower --per-length or "
                "--verify-to"
            )
        check_mode(self.mode)  # here, because the DFA and the samples come before the evaluation


@dataclass(frozen=True)
class Disagreement:
    """One string on which the compiled model and the DFA disagree (`expected` is the DFA's verdict)."""

    string: str
    length: int
    expected: bool
    got: bool
    inside_certified_range: bool

    def to_json(self) -> dict[str, Any]:
        return {"string": self.string, "length": self.length, "expected": self.expected, "got": self.got,
                "inside_certified_range": self.inside_certified_range}


@dataclass(frozen=True)
class VerificationResult:
    """What `verify_compiled` checked and found: lengths, counts and the shortest disagreements.

    `ok` is False only for a disagreement inside the certified range.
    """

    format: str
    mode: str
    exhaustive_up_to: int
    sampled_lengths: tuple[int, ...]
    verified_strings: int
    verified_max_length: int
    disagreements: int
    first_disagreement: Disagreement | None  # shortest failing string
    first_disagreement_inside: Disagreement | None  # shortest failing string inside the certified range
    certified_length: int | None
    per_length_failures: dict[int, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No disagreement inside the certified range (the compile command's exit status)."""
        return self.first_disagreement_inside is None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "mode": self.mode,
            "exhaustive_up_to": self.exhaustive_up_to,
            "sampled_lengths": list(self.sampled_lengths),
            "verified_strings": self.verified_strings,
            "verified_max_length": self.verified_max_length,
            "disagreements": self.disagreements,
            "first_disagreement": None if self.first_disagreement is None else self.first_disagreement.to_json(),
            "first_disagreement_inside_certified_range": None
            if self.first_disagreement_inside is None
            else self.first_disagreement_inside.to_json(),
            "certified_length": self.certified_length,
            "failures_per_length": {str(k): v for k, v in sorted(self.per_length_failures.items())},
        }


def exhaustive_length(alphabet_size: int, requested: int, budget: int = EXHAUSTIVE_BUDGET,
                      symbol_budget: int = EXHAUSTIVE_SYMBOL_BUDGET) -> int:
    """The largest n ≤ requested with Σ_{l ≤ n} |Σ|^l ≤ budget strings and Σ_{l ≤ n} l·|Σ|^l ≤ symbol_budget."""
    total, symbols, n = 1, 0, 0
    while n < requested:
        strings = alphabet_size ** (n + 1)
        total += strings
        symbols += (n + 1) * strings
        if total > budget or symbols > symbol_budget:
            break
        n += 1
    return n


def sampled_lengths(start: int, verify_to: int, extra: Sequence[int] = ()) -> tuple[int, ...]:
    """Geometric spread (ratio 10^(1/5)) from above ``start`` to ``verify_to``, plus ``extra``."""
    lengths: set[int] = set()
    if verify_to > start:
        value = 10.0
        while value < verify_to:
            length = int(round(value))
            if length > start:
                lengths.add(length)
            value *= 10 ** 0.2
        lengths.add(verify_to)
    lengths.update(length for length in extra if start < length <= verify_to)
    return tuple(sorted(lengths))


def _all_strings(alphabet: tuple[str, ...], up_to: int) -> list[tuple[str, ...]]:
    strings: list[tuple[str, ...]] = [()]
    layer: list[tuple[str, ...]] = [()]
    for _ in range(up_to):
        layer = [word + (symbol,) for word in layer for symbol in alphabet]
        strings.extend(layer)
    return strings


def verify_compiled(
    compiled: CompiledModel,
    options: VerificationOptions | None = None,
    *,
    fmt: FloatFormat | str | None = None,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    dfa: DFA | None = None,
    **settings,
) -> VerificationResult:
    """Check the compiled model against the formula's minimal DFA (the module docstring lists the strings).

    The settings are `options` (a VerificationOptions, checked when it was built) or, from Python,
    its fields as keywords: ``mode``, ``exhaustive_up_to``, ``verify_to``, ``per_length``, ``seed``,
    ``max_states``. `fmt` defaults to the compile format. Returns the counts, the sampled lengths
    and the shortest disagreements; ``.ok`` is False when the model is wrong on a string inside its
    certified range. Negative lengths or counts, ``per_length=0`` with sampled lengths, and unknown
    modes raise FormalRopeError before any work (`VerificationOptions`).

    `dfa`: the language's minimal DFA when the formula was built from it and checked equivalent
    (`language_to_formula`); it labels every string, and the formula's own automaton, which can be
    far larger than the language's, is never built.
    """
    if options is None:
        options = VerificationOptions(**settings)
    elif settings:
        raise TypeError(f"verify_compiled takes options or the keywords {', '.join(settings)}, not both")
    fmt = compiled.options.fmt if fmt is None else parse_format(fmt)
    alphabet = compiled.alphabet
    exhaustive_n = exhaustive_length(len(alphabet), options.exhaustive_up_to)
    words = _all_strings(alphabet, exhaustive_n)
    certified = compiled.certified_length
    extra = [] if certified is None else [certified, certified + 1, certified + 2]
    lengths = sampled_lengths(exhaustive_n, options.verify_to, extra)
    # Sampling needs the formula's DFA, which can be large (Y^k remembers k symbols); the
    # exhaustive part alone (at most EXHAUSTIVE_BUDGET short strings) is labelled straight from the
    # semantics, so --verify-to 0 never builds it.
    if dfa is not None and tuple(dfa.alphabet) != tuple(alphabet):
        raise FormalRopeError(f"the DFA reads {{{', '.join(dfa.alphabet)}}}, the model {{{', '.join(alphabet)}}}")
    if dfa is None and lengths:
        dfa = ltl_to_dfa(compiled.formula, alphabet) if options.max_states is None else ltl_to_dfa(
            compiled.formula, alphabet, max_states=options.max_states
        )
    words.extend(_sampled_strings(dfa, alphabet, lengths, options))
    if on_total is not None:
        on_total(len(words))
    if dfa is None:
        expected = np.array([ltl_accepts(compiled.formula, word) for word in words], dtype=bool)
    else:
        expected = np.asarray(accepts(dfa, words), dtype=bool)
    result = evaluate(compiled.ir, words, fmt=fmt, mode=options.mode, on_progress=on_progress)
    if result.certificate is not None and result.certificate.recomputed:
        # Another format or native arithmetic: the range the model is guaranteed in is the one
        # recomputed for them (formal_rope.model.certificate), not the compile-time one.
        certified = result.certificate.certified_length
    wrong = np.nonzero(result.accepted != expected)[0]
    per_length_failures: dict[int, int] = {}
    first = first_inside = None
    for index in sorted(wrong.tolist(), key=lambda i: (len(words[i]), i)):
        length = len(words[index])
        per_length_failures[length] = per_length_failures.get(length, 0) + 1
        inside = certified is None or length <= certified
        found = Disagreement(
            format_word(words[index], alphabet), length, bool(expected[index]), bool(result.accepted[index]), inside
        )
        if first is None:
            first = found
        if inside and first_inside is None:
            first_inside = found
    return VerificationResult(
        format=result.format,
        mode=options.mode,
        exhaustive_up_to=exhaustive_n,
        sampled_lengths=lengths,
        verified_strings=len(words),
        verified_max_length=max(len(word) for word in words),
        disagreements=int(len(wrong)),
        first_disagreement=first,
        first_disagreement_inside=first_inside,
        certified_length=certified,
        per_length_failures=per_length_failures,
    )


def _sampled_strings(dfa, alphabet: tuple[str, ...], lengths: Sequence[int],
                     options: VerificationOptions) -> list[tuple[str, ...]]:
    """`per_length` strings at each sampled length, half from L and half from its complement
    (all from the non-empty one where the other has no string of that length), seeded."""
    words: list[tuple[str, ...]] = []
    per_length = options.per_length
    rng = np.random.default_rng(options.seed)
    for length in lengths:
        blocks = []
        for accepted, count in ((True, per_length - per_length // 2), (False, per_length // 2)):
            try:
                blocks.append(sample_strings(dfa, length, count, rng, accepted=accepted))
            except EmptyClassError:
                other = sample_strings(dfa, length, count, rng, accepted=not accepted) if count else None
                if other is not None:
                    blocks.append(other)
        for block in blocks:
            words.extend(tuple(alphabet[s] for s in row) for row in block)
    return words


def compile_report(compiled: CompiledModel, verification: VerificationResult,
                   model_file: str | Path | None = None) -> dict[str, Any]:
    """The JSON object of `formalrope compile --json`: the compiled model, its constructs and
    certified length, and what the verification found (`model_file`: where the model was written)."""
    model = compiled.ir
    return {
        "formula": compiled.formula_text,
        "alphabet": list(compiled.alphabet),
        "format": compiled.options.fmt.name,
        "f_large": f_large(compiled.options.fmt),
        "layers": len(model.layers),
        "heads": model.n_heads,
        "d_model": model.d_model,
        "coordinates": list(model.coordinates),
        "freq": compiled.options.freq,
        "y_scale": None if compiled.y_scale is None else compiled.y_scale.scale,
        "certified_length": compiled.certified_length,
        "certified_length_is_lower_bound": compiled.certified_length_is_lower_bound,
        "constructs": [c.to_json() for c in compiled.constructs],
        # Which layers and heads need a rotary table at all (P and Boolean layers need none).
        "positional_needs": positional_needs(model).to_json(),
        "mode": verification.mode,
        # The certified length the verification judged "inside" by: in native mode it is recomputed
        # for torch's arithmetic and can differ from certified_length (emulated, as compiled).
        "verification_certified_length": verification.certified_length,
        "verified_strings": verification.verified_strings,
        "verified_max_length": verification.verified_max_length,
        "exhaustive_up_to": verification.exhaustive_up_to,
        "sampled_lengths": list(verification.sampled_lengths),
        "disagreements": verification.disagreements,
        "first_disagreement": None
        if verification.first_disagreement is None
        else verification.first_disagreement.to_json(),
        "first_disagreement_inside_certified_range": None
        if verification.first_disagreement_inside is None
        else verification.first_disagreement_inside.to_json(),
        "ok": verification.ok,
        "model_file": None if model_file is None else str(model_file),
    }
