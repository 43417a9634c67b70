"""The compiler's view of positional machinery (issue 21): which layers and heads need a rotary
table. Checked against the formula's operators and by removing a table the view says is needed."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest

from cli_support import run_main
from formal_rope.automata import accepts, ltl_to_dfa
from formal_rope.compiler import compile_formula
from formal_rope.lang.parser import parse_ltl
from formal_rope.model import evaluate
from formal_rope.model.ir import RotaryPair
from formal_rope.model.positional_needs import NEEDS_NONE, NEEDS_OFFSET, NEEDS_PERIODIC, positional_needs


def _strings(alphabet, up_to):
    return ["".join(s) for n in range(up_to + 1) for s in itertools.product(alphabet, repeat=n)]


def _without_rotation(model, head_name):
    """`model` with the named head's rotary pairs replaced by the identity."""
    layers = []
    for layer in model.layers:
        heads = tuple(dataclasses.replace(head, rotary=tuple(RotaryPair("none") for _ in head.rotary))
                      if head.name == head_name else head for head in layer.heads)
        layers.append(dataclasses.replace(layer, heads=heads))
    return dataclasses.replace(model, layers=tuple(layers))


def test_past_and_boolean_formulas_need_no_rotary_table():
    needs = positional_needs(compile_formula("P(a) & !P(b & P(a))", "ab").ir)
    assert needs.positional_layers == () and needs.periods == () and needs.angles == ()
    assert all(head.needs == NEEDS_NONE for head in needs.heads)
    assert needs.summary().count("none (NoPE would do)") == needs.layers


@pytest.mark.parametrize("formula, kind", [("P(a) & MOD_2^0", NEEDS_PERIODIC), ("P(a) & Y(b)", NEEDS_OFFSET)])
def test_the_heads_said_to_need_a_table_fail_without_it(formula, kind):
    compiled = compile_formula(formula, "ab")
    needs = positional_needs(compiled.ir)
    (needed,) = [head for head in needs.heads if head.needs != NEEDS_NONE]
    assert needed.needs == kind and needs.positional_layers == (needed.layer,)
    strings = _strings("ab", 7)
    dfa = ltl_to_dfa(parse_ltl(formula), "ab")
    truth = accepts(dfa, strings).tolist()
    assert evaluate(compiled.ir, strings).to_list() == truth
    # Without that head's rotation the model no longer recognises the language...
    assert evaluate(_without_rotation(compiled.ir, needed.head), strings).to_list() != truth
    # ...while removing nothing from a head said to need nothing changes no verdict.
    for head in needs.heads:
        if head.needs == NEEDS_NONE:
            assert evaluate(_without_rotation(compiled.ir, head.head), strings).to_list() == truth


def test_periods_and_angles_follow_the_formula():
    needs = positional_needs(compile_formula("MOD_3^1 & Y^2(b) | MOD_2^0", "ab").ir)
    assert needs.periods == (2, 3) and len(needs.angles) == 1
    assert "RoPE_P period 2, 3" in needs.summary() and "offset rotation" in needs.summary()


def test_compile_prints_and_reports_the_needs(capsys):
    code, out, _ = run_main(capsys, ["compile", "P(a) & MOD_2^0", "-a", "ab", "--json"])
    payload = json.loads(out)
    assert code == 0 and payload["positional_needs"]["periods"] == [2]
    assert payload["positional_needs"]["positional_layers"] == [1]
    code, out, _ = run_main(capsys, ["compile", "P(a) & MOD_2^0", "-a", "ab"])
    assert code == 0 and "positional machinery needed: layer 1: RoPE_P period 2 (1 head)" in out
