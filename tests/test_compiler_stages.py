"""Stage-level tests of the compiler: each stage's output on small formulas, without running a model.

`formula_to_dag` (dag.py): node count, sharing of common subformulas, normalization, folding.
`dag_to_schedule` (schedule.py): ready times and head layers respect every dependency.
`schedule_to_coordinates` / `schedule_to_ir` (schedule_to_model.py): layout, embedding, head placement.
"""

from __future__ import annotations

import numpy as np
import pytest

from formal_rope.compiler import (
    CompileOptions,
    dag_to_schedule,
    formula_to_dag,
    schedule_to_coordinates,
    schedule_to_ir,
)
from formal_rope.compiler.dag import BOOLEAN_KINDS, TEMPORAL_KINDS
from formal_rope.compiler.examples import LTL_P_MOD_EXAMPLES
from formal_rope.compiler.schedule import MAX_SUPPORT
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import Mod
from formal_rope.lang.parser import parse_ltl
from formal_rope.model.ir import BOS, EOS


def _dag(text: str, alphabet: str = "ab"):
    return formula_to_dag(parse_ltl(text, tuple(alphabet)), tuple(alphabet))


def _index(dag, text: str) -> int:
    matches = [i for i, node in enumerate(dag.nodes) if node.text == text]
    assert len(matches) == 1, f"{text!r} occurs {len(matches)} times in the DAG"
    return matches[0]


# ------------------------------------------------------------------------------ formula_to_dag
def test_dag_shares_a_repeated_subformula_and_orders_children_first():
    dag = _dag("P(a) & !P(a)")
    assert [(node.kind, node.text) for node in dag.nodes] == [
        ("atom", "a"), ("past", "P(a)"), ("not", "!P(a)"), ("and", "P(a) & !P(a)")
    ]
    assert dag.root == 3 and dag.nodes[3].children == (1, 2) and dag.nodes[2].children == (1,)


def test_dag_shares_across_constructs():
    # The Y^2 gate P(P(true)) and the user's P(P(true)) are one node; so is P(a & b) under Y and |.
    dag = _dag("Y^2(a) & P(P(true))")
    gate = _index(dag, "P(P(true))")
    yesterday = dag.nodes[_index(dag, "Y^2(a)")]
    assert yesterday.gate == gate and yesterday.children == (_index(dag, "a"), gate) and yesterday.offset == 2
    assert dag.nodes[dag.root].children == (_index(dag, "Y^2(a)"), gate)
    shared = _dag("P(a & b) | Y(P(a & b))")
    assert [node.kind for node in shared.nodes].count("past") == 1
    assert shared.nodes[_index(shared, "Y(P(a & b))")].children == (_index(shared, "P(a & b)"),)


@pytest.mark.parametrize("example", LTL_P_MOD_EXAMPLES, ids=lambda e: e.formula)
def test_dag_nodes_are_distinct_and_topologically_ordered(example):
    dag = _dag(example.formula, "".join(example.alphabet))
    texts = [node.text for node in dag.nodes]
    assert len(set(texts)) == len(texts)  # hash-consed: no subformula twice
    for index, node in enumerate(dag.nodes):
        assert all(child < index for child in node.children)
    reachable, stack = set(), [dag.root]  # every node is reachable from the root (unused ones are dropped)
    while stack:
        current = stack.pop()
        if current not in reachable:
            reachable.add(current)
            stack.extend(dag.nodes[current].children)
    assert reachable == set(range(len(dag.nodes))) and dag.root == len(dag.nodes) - 1


def test_dag_normalizes_historically_and_yesterday_gates():
    dag = _dag("H(a)")
    assert [(node.kind, node.text) for node in dag.nodes] == [
        ("atom", "a"), ("not", "!a"), ("past", "P(!a)"), ("not", "!P(!a)")
    ]
    y3 = _dag("Y^3(a)")
    gate = y3.nodes[y3.nodes[y3.root].gate]
    assert gate.text == "P(P(P(true)))" and [node.kind for node in y3.nodes].count("past") == 3
    assert _dag("Y(a)").nodes[-1].gate is None  # k = 1: the strict mask is the gate


def test_dag_folds_constants_and_keeps_residues_modulo_m():
    assert [(n.kind, n.modulus, n.residue, n.text) for n in formula_to_dag(Mod(3, 4), ("a",)).nodes] == [
        ("mod", 3, 1, "MOD_3^1")
    ]
    assert [n.kind for n in _dag("MOD_1^0 & P(a)").nodes] == ["atom", "past"]
    assert [n.kind for n in _dag("P(a) & false").nodes] == ["false"]
    assert [n.kind for n in _dag("Y^2(false) | a").nodes] == ["atom"]
    with pytest.raises(FormalRopeError, match="not in the alphabet"):
        _dag("P(c)")


# ----------------------------------------------------------------------------- dag_to_schedule
def test_schedule_of_atoms_only_needs_no_layer():
    schedule = dag_to_schedule(_dag("a & !b"))
    assert set(schedule.ready) == {0} and schedule.n_layers == 0 and set(schedule.head_layer) == {None}
    assert schedule.nodes_in_embedding() == list(range(len(schedule.dag.nodes)))


def test_schedule_nests_heads_one_layer_per_level():
    schedule = dag_to_schedule(_dag("P(P(a))"))
    assert schedule.head_layer == (None, 1, 2) and schedule.ready == (0, 2, 4) and schedule.n_layers == 2
    assert schedule.heads_of_layer(2) == [2]


def test_schedule_boolean_over_heads_costs_one_feed_forward_whatever_its_nesting():
    dag = _dag("!(P(a) & !(P(b) | P(a)))")
    schedule = dag_to_schedule(dag)
    heads = (_index(dag, "P(a)"), _index(dag, "P(b)"))
    booleans = [i for i, node in enumerate(dag.nodes) if node.kind in BOOLEAN_KINDS]
    assert all(schedule.ready[i] == 4 and set(schedule.support[i]) == set(heads) for i in booleans)
    assert schedule.n_layers == 2 and sorted(schedule.booleans_of_layer(2)) == booleans


def test_schedule_places_mod_in_layer_one_and_y_after_its_gate():
    dag = _dag("P(a & MOD_2^0)")
    schedule = dag_to_schedule(dag)
    assert schedule.head_layer[_index(dag, "MOD_2^0")] == 1 and schedule.needs_first_flag
    assert schedule.ready[_index(dag, "a & MOD_2^0")] == 4  # the feed-forward of layer 2 combines a and MOD
    assert schedule.head_layer[_index(dag, "P(a & MOD_2^0)")] == 3
    y = _dag("Y^2(a)")
    y_schedule = dag_to_schedule(y)
    assert y_schedule.head_layer[_index(y, "P(P(true))")] == 2 and y_schedule.head_layer[_index(y, "Y^2(a)")] == 3
    assert not y_schedule.needs_first_flag


def test_schedule_falls_back_to_children_beyond_the_support_limit():
    letters = "abcdefghi"[: MAX_SUPPORT + 1]
    dag = _dag(" & ".join(f"P({c})" for c in letters), letters)
    schedule = dag_to_schedule(dag)
    root = dag.root
    assert schedule.support[root] == dag.nodes[root].children  # 9 heads > MAX_SUPPORT: one more block
    assert schedule.ready[root] == 6 and schedule.n_layers == 3
    below = dag.nodes[root].children[0]
    assert len(schedule.support[below]) == MAX_SUPPORT and schedule.ready[below] == 4


@pytest.mark.parametrize("example", LTL_P_MOD_EXAMPLES, ids=lambda e: e.formula)
def test_schedule_respects_every_dependency(example):
    dag = _dag(example.formula, "".join(example.alphabet))
    schedule = dag_to_schedule(dag)
    for index, node in enumerate(dag.nodes):
        layer, ready = schedule.head_layer[index], schedule.ready[index]
        if node.kind in TEMPORAL_KINDS:
            # The head reads exact inputs: every child is ready before its layer's attention runs.
            assert ready == 2 * layer and all(schedule.ready[child] <= 2 * layer - 2 for child in node.children)
            # ... and it sits in the first such layer (MOD has no input: layer 1).
            assert layer == 1 or any(schedule.ready[child] == 2 * layer - 2 for child in node.children)
        elif node.kind in BOOLEAN_KINDS and ready > 0:
            assert layer is None and ready == max(schedule.ready[s] for s in schedule.support[index]) + 2
        else:
            assert layer is None and ready == 0
    assert schedule.n_layers == max(schedule.ready) // 2


# --------------------------------------------------------------- schedule_to_coordinates / _ir
def test_coordinates_layout_and_embedding():
    schedule = dag_to_schedule(_dag("P(a) & MOD_2^0"))
    coordinates = schedule_to_coordinates(schedule)
    assert coordinates == ("const:1", "flag:bos", "true", "a", "b", "P(a)", "MOD_2^0", "P(a) & MOD_2^0",
                           "raw:first", "raw:P(a)", "raw:MOD_2^0")
    model, _ = schedule_to_ir(schedule, CompileOptions(), y_scale=None)
    assert model.coordinates == coordinates and model.vocabulary == ("a", "b", BOS, EOS)
    on = {
        symbol: {coordinates[i] for i in np.flatnonzero(row)} for symbol, row in zip(model.vocabulary, model.embedding)
    }
    assert on[BOS] == {"const:1", "flag:bos"}  # every subformula coordinate is 0 at bos
    assert on["a"] == {"const:1", "true", "a"} and on[EOS] == {"const:1", "true"}
    assert model.readout.coordinate == coordinates.index("P(a) & MOD_2^0")


def test_heads_sit_in_their_scheduled_layers_with_their_rotations():
    dag = _dag("Y(b) & P(a & MOD_3^1)")
    schedule = dag_to_schedule(dag)
    model, reports = schedule_to_ir(schedule, CompileOptions(fmt="bf16", freq=0.5), y_scale=256.0)
    placed = {head.name: (number, head) for number, layer in enumerate(model.layers, start=1) for head in layer.heads}
    assert set(placed) == {"first", "L1.mod:MOD_3^1", "L1.yesterday:Y(b)", "L3.past:P(a & MOD_3^1)"}
    assert placed["first"][0] == 1 and [p.kind for p in placed["first"][1].rotary] == ["none"]
    assert [(p.kind, p.period) for p in placed["L1.mod:MOD_3^1"][1].rotary] == [("periodic", 3), ("none", None)]
    assert [(p.kind, p.angle) for p in placed["L1.yesterday:Y(b)"][1].rotary] == [("angle", 0.5)]
    assert [p.kind for p in placed["L3.past:P(a & MOD_3^1)"][1].rotary] == ["none"]
    for index, node in enumerate(dag.nodes):
        if schedule.head_layer[index] is not None:
            assert placed[f"L{schedule.head_layer[index]}.{node.kind}:{node.text}"][0] == schedule.head_layer[index]
    assert [(r.construct, r.layer) for r in reports] == [("first", 1), ("Y", 1), ("MOD", 1), ("P", 3)]  # DAG order
    assert len(model.layers) == schedule.n_layers == 4 and model.layers[1].heads == ()  # layer 2: a & MOD only
