"""Phase diagnostics: per-pair decomposition vs the models' own scores, phases, Lemma 1 (paper 003)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.diagnostics import (
    capture_heads,
    check_lemma1,
    compiled_forward,
    decompose_head,
    lemma1_arrays,
    wrap_phase,
)
from formal_rope.errors import FormalRopeError
from formal_rope.training.encodings.builders import PositionalSpec, build_positional
from formal_rope.training.encodings.periods import assign_periods
from formal_rope.training.model import Classifier

ALPHABET = ("a", "b")
STRING = "abbaababbbaab"


def tiny_model(pe: str, *, d_model: int = 16, heads: int = 2, layers: int = 2, seed: int = 0) -> Classifier:
    torch.manual_seed(seed)
    spec = PositionalSpec(pe=pe, d_model=d_model, heads=heads, layers=layers, base=10.0, periods=(2, 3),
                          rope_fraction=0.5)
    positional = build_positional(spec)
    if pe == "jof_projected":
        # W2 starts at zero (= jof_fixed); give it content-dependent angles to decompose.
        for projector in positional.projectors:
            torch.nn.init.normal_(projector[-1].weight, std=0.5)
    return Classifier(len(ALPHABET), positional, d_model=d_model, heads=heads, layers=layers, attention="torch")


def visible_pairs(length: int) -> tuple[np.ndarray, np.ndarray]:
    return np.tril_indices(length, -1)


# ------------------------------------------------------------------------- trained models
@pytest.mark.parametrize("pe", ["rope", "rope_p", "partial_rope", "jof_fixed", "jof_learned", "jof_projected"])
def test_decomposition_reconstructs_trained_scores(pe):
    model = tiny_model(pe)
    captured = capture_heads(model, STRING, alphabet=ALPHABET)
    assert len(captured.heads) == 4  # every head of every layer rotates
    assert captured.positions == ("<bos>", *STRING, "<eos>")
    for inputs in captured.heads:
        # The hook's recomputation of the layer's attention output matches what the model produced.
        assert inputs.recompute_error is not None and inputs.recompute_error < 1e-6
        phases = decompose_head(inputs)
        assert phases.max_abs_error < 1e-5
        assert phases.max_rel_error < 1e-5
        assert np.all(np.abs(phases.phase) <= math.pi + 1e-12) and np.all(phases.phase > -math.pi)
        # δ is content + position phase modulo 2π.
        residue = wrap_phase(phases.phase - phases.content_phase - phases.position_phase)
        assert np.abs(residue).max() < 1e-9


class _ScoreRecorder:
    """Stands in for the model's attention kernel (q, k already rotated): records its scores."""

    def __init__(self, original):
        self.original = original
        self.scores = []

    def __call__(self, q, k, v, **kwargs):
        scores = torch.matmul(q.double(), k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (S, H, T, T)
        self.scores.append(scores)
        return self.original(q, k, v, **kwargs)


class _ReadoutScoreRecorder:
    """Stands in for the last layer's one-query kernel: records the readout row's scores (heads, T)."""

    def __init__(self, original, scores):
        self.original = original
        self.scores = scores  # shared with _ScoreRecorder: one entry per layer, in order

    def __call__(self, q, k, v, positions, **kwargs):
        count, length, heads, dim = k.shape
        assert count == 1  # one string
        position = int(positions[0])
        row = (k[0].double() * q[0].double()[None]).sum(-1).T / math.sqrt(dim)  # (H, T)
        scores = torch.full((1, heads, length, length), float("nan"), dtype=torch.float64)
        scores[0, :, position] = row
        self.scores.append(scores)
        return self.original(q, k, v, positions, **kwargs)


@pytest.mark.parametrize("pe", ["rope", "jof_projected"])
def test_captured_scores_match_the_kernel_inputs(monkeypatch, pe):
    """An independent capture: the q and k the model hands its kernels (rotated in the model, in
    pooled token order) against the capture's own rotation of q, k by the encoding's tables."""
    import formal_rope.training.model as model_module

    model = tiny_model(pe)
    recorder = _ScoreRecorder(model_module.causal_attention)
    monkeypatch.setattr(model_module, "causal_attention", recorder)
    # The last layer attends from the readout (eos) only: its recorded row is the last one.
    monkeypatch.setattr(
        model_module, "readout_attention", _ReadoutScoreRecorder(model_module.readout_attention, recorder.scores)
    )
    captured = capture_heads(model, STRING, alphabet=ALPHABET)
    length = len(STRING) + 2
    rows, cols = visible_pairs(length)
    last = len(model.blocks) - 1
    for inputs in captured.heads:
        recorded = recorder.scores[inputs.layer]
        expected = recorded[0, inputs.head].numpy()
        checked = rows == length - 1 if inputs.layer == last else np.ones_like(rows, dtype=bool)
        assert checked.any()
        assert np.abs(inputs.actual[rows[checked], cols[checked]] - expected[rows[checked], cols[checked]]).max() < 1e-5


def test_rope_position_phase_is_theta_times_offset():
    model = tiny_model("rope")
    captured = capture_heads(model, STRING, alphabet=ALPHABET)
    theta = np.asarray(model.positional.frequencies)[0]  # the single run's frequencies
    offsets = np.arange(len(STRING) + 2)[:, None] - np.arange(len(STRING) + 2)[None, :]
    expected = wrap_phase(offsets[..., None] * theta)
    for inputs in captured.heads:
        np.testing.assert_allclose(inputs.frequencies, theta)
        phases = decompose_head(inputs)
        difference = wrap_phase(phases.position_phase - expected)  # compare on the circle
        assert np.abs(difference).max() < 1e-6
        # The content phase does not depend on positions beyond the pair vectors themselves.
        q_angle = np.arctan2(inputs.query[..., 1], inputs.query[..., 0])
        k_angle = np.arctan2(inputs.key[..., 1], inputs.key[..., 0])
        np.testing.assert_allclose(
            wrap_phase(phases.content_phase - (q_angle[:, None] - k_angle[None, :])), 0, atol=1e-12
        )


def test_rope_p_position_phase_is_the_table_angle():
    model = tiny_model("rope_p")
    captured = capture_heads(model, STRING, alphabet=ALPHABET)
    periods, numerators = assign_periods((2, 3), 4)
    offsets = np.arange(len(STRING) + 2)[:, None] - np.arange(len(STRING) + 2)[None, :]
    expected = wrap_phase(2 * math.pi * numerators * offsets[..., None] / periods)
    for inputs in captured.heads:
        phases = decompose_head(inputs)
        assert np.abs(wrap_phase(phases.position_phase - expected)).max() < 1e-6


def test_partial_rope_unrotated_contribution_is_the_plain_dot_product():
    model = tiny_model("partial_rope")
    captured = capture_heads(model, STRING, alphabet=ALPHABET)
    for inputs in captured.heads:
        assert inputs.rotated.tolist() == [True, True, False, False]
        phases = decompose_head(inputs)
        assert np.all(phases.position_phase[..., 2:] == 0)
        plain = np.einsum("ipc,jpc->ij", inputs.query[:, 2:], inputs.key[:, 2:]) * inputs.scale
        np.testing.assert_allclose(phases.unrotated, plain, atol=1e-12)


def test_query_subset_and_head_selection():
    model = tiny_model("rope")
    captured = capture_heads(model, STRING, alphabet=ALPHABET, heads=[(1, 0)])
    assert [(h.layer, h.head, h.label) for h in captured.heads] == [(1, 0, "L2.H1")]
    full = decompose_head(captured.heads[0])
    readout = captured.readout
    row = decompose_head(captured.heads[0], queries=[readout])
    np.testing.assert_array_equal(row.score[0], full.score[readout])
    assert row.visible[0].sum() == readout
    with pytest.raises(FormalRopeError, match="outside the input"):
        decompose_head(captured.heads[0], queries=[readout + 1])
    with pytest.raises(FormalRopeError, match="layer 3 does not exist"):
        capture_heads(model, STRING, alphabet=ALPHABET, heads=[(2, 0)])
    with pytest.raises(FormalRopeError, match="not in the alphabet|unknown|symbol"):
        capture_heads(model, "abc", alphabet=ALPHABET)


def test_models_without_rotary_heads_are_refused_unless_a_head_is_chosen():
    model = tiny_model("nope")
    with pytest.raises(FormalRopeError, match="no rotary head"):
        capture_heads(model, STRING, alphabet=ALPHABET)
    captured = capture_heads(model, STRING, alphabet=ALPHABET, heads=[(0, 1)])
    phases = decompose_head(captured.heads[0])
    assert not captured.heads[0].is_rotary
    assert phases.max_abs_error < 1e-5
    np.testing.assert_allclose(phases.unrotated, phases.score)


# ------------------------------------------------------------------------- compiled models
@pytest.fixture(scope="module")
def compiled_mod_y():
    from formal_rope.compiler import compile_formula
    from formal_rope.lang.parser import parse_ltl

    return compile_formula(parse_ltl("P(a) & MOD_2^0 | Y(a)", ALPHABET), ALPHABET, fmt="fp32").ir


def _head(captured, fragment):
    (inputs,) = [h for h in captured.heads if fragment in h.name]
    return inputs


@pytest.mark.parametrize("fmt", ["fp64", "fp32"])
def test_decomposition_reconstructs_compiled_mod_and_y_heads(compiled_mod_y, fmt):
    string = "abbabaabba"
    captured = capture_heads(compiled_mod_y, string, fmt=fmt)
    assert {h.name for h in captured.heads} == {"L1.mod:MOD_2^0", "L1.yesterday:Y(a)"}  # the rotary heads
    for inputs in captured.heads:
        phases = decompose_head(inputs)
        assert phases.max_rel_error < (1e-12 if fmt == "fp64" else 1e-6)
    length = len(string) + 2
    queries = np.arange(1, length)

    # MOD_2^0: the periodic pair against the bos key is aligned exactly at even i, opposed at odd i.
    mod = decompose_head(_head(captured, "mod"))
    bos_phase = mod.phase[queries, 0, 0]
    np.testing.assert_allclose(np.abs(bos_phase), np.where(queries % 2 == 0, 0.0, math.pi), atol=1e-6)
    np.testing.assert_allclose(mod.position_phase[queries, 0, 0], np.where(queries % 2 == 0, 0.0, math.pi), atol=1e-6)

    # Y(a) (offset 1, g = 1): relative phase g·(i−j), content phase −g, so δ = 0 at the target i−1.
    y_inputs = _head(captured, "yesterday")
    assert y_inputs.frequencies.tolist() == [1.0]
    y = decompose_head(y_inputs)
    rows, cols = visible_pairs(length)
    np.testing.assert_allclose(wrap_phase(y.position_phase[rows, cols, 0] - (rows - cols)), 0, atol=1e-5)
    target = y.phase[queries, queries - 1, 0]
    assert np.abs(target).max() < 1e-6
    masked = np.where(y.visible, y.actual, -np.inf)
    assert np.all(np.argmax(masked[queries], axis=1) == queries - 1)


@pytest.mark.parametrize("fmt", ["fp64", "fp32"])
def test_compiled_forward_matches_the_native_evaluator(compiled_mod_y, fmt):
    from formal_rope.model.evaluate import evaluate

    string = "abbabaab"
    _, final = compiled_forward(compiled_mod_y, compiled_mod_y.encode(string), fmt)
    reference = evaluate(compiled_mod_y, [string], fmt=fmt, mode="native", trace=True).residuals[0]
    np.testing.assert_array_equal(final.double().numpy(), reference)


def test_compiled_format_errors(compiled_mod_y):
    with pytest.raises(FormalRopeError, match="natively"):
        capture_heads(compiled_mod_y, "ab", fmt="fp8e4m3")


# ------------------------------------------------------------------------- Lemma 1
@given(
    st.lists(st.tuples(st.floats(0, 10), st.floats(-1, 1)), min_size=1, max_size=8),
    st.floats(0, 3.0),
)
def test_lemma1_holds_whenever_its_hypothesis_does(pairs, epsilon):
    magnitude = np.array([p[0] for p in pairs])
    phase = np.array([p[1] for p in pairs]) * epsilon  # |δ| ≤ ε for every pair
    check = lemma1_arrays(magnitude, phase, epsilon)
    if magnitude.any():
        assert bool(check.hypothesis)
    assert bool(check.holds)
    assert check.score >= (1 - epsilon**2 / 2) * magnitude.sum() - 1e-9 * (1 + magnitude.sum())


def test_lemma1_on_random_models_where_the_hypothesis_holds():
    model = tiny_model("rope", d_model=8, heads=2, seed=3)  # 2 pairs per head: alignment is common
    captured = capture_heads(model, "abbaababbbaabbabaaabbbababbab", alphabet=ALPHABET)
    checked = 0
    for inputs in captured.heads:
        phases = decompose_head(inputs)
        for epsilon in (0.5, 1.0, 2.0):
            lemma = check_lemma1(phases, epsilon)
            assert lemma.all_hold
            # The hypothesis is exactly "every contributing |δ| ≤ ε" on visible entries.
            direct = phases.visible & np.all(np.abs(phases.phase) <= epsilon, axis=-1)
            np.testing.assert_array_equal(lemma.hypothesis, direct)
            assert np.all(phases.score[lemma.hypothesis] / inputs.scale
                          >= (1 - epsilon**2 / 2) * phases.magnitude.sum(-1)[lemma.hypothesis] - 1e-9)
            checked += lemma.n_hypothesis
        assert check_lemma1(phases, math.pi).n_hypothesis == phases.visible.sum()
    assert checked > 20


def test_lemma1_needs_its_hypothesis():
    # δ = 1.2ε on one pair: cos(1.2ε) < 1 − ε²/2 for small ε, so the conclusion fails without the hypothesis.
    epsilon = 0.2
    check = lemma1_arrays(np.array([1.0, 1.0]), np.array([1.2 * epsilon, 1.2 * epsilon]), epsilon)
    assert not check.hypothesis and not check.holds
    # Zero-weight pairs need no phase; an entry with no contributing pair is vacuous and left out.
    assert bool(lemma1_arrays(np.array([1.0, 0.0]), np.array([0.1, 3.0]), 0.2).hypothesis)
    assert not bool(lemma1_arrays(np.zeros(2), np.zeros(2), 0.2).hypothesis)
    with pytest.raises(FormalRopeError, match="epsilon"):
        lemma1_arrays(np.ones(2), np.zeros(2), -1.0)


def _single_rotation_head(angle: float):
    """A compiled-style model whose only head has q = k = (1, 0) rotated by angle·i: δ(i, j) = angle·(i−j)."""
    from formal_rope.model.ir import AttentionHead, Layer, Readout, RotaryPair, TransformerIR

    head = AttentionHead(
        name="rotation", w_query=np.zeros((2, 1)), b_query=np.array([1.0, 0.0]), w_key=np.zeros((2, 1)),
        b_key=np.array([1.0, 0.0]), w_value=np.zeros((1, 1)), b_value=np.zeros(1), w_out=np.zeros((1, 1)),
        rotary=(RotaryPair("angle", angle=angle),),
    )
    return TransformerIR(
        coordinates=("const",), vocabulary=("a", "<bos>", "<eos>"), embedding=np.ones((3, 1)),
        layers=(Layer(heads=(head,)),), readout=Readout(kind="coordinate", coordinate=0),
    )


def test_lemma1_is_tight_to_fourth_order():
    """With every δ = ±ε the slack S − (1 − ε²/2)S_max is (cos ε − 1 + ε²/2)·S_max ≈ ε⁴/24·S_max."""
    angle = 0.1
    captured = capture_heads(_single_rotation_head(angle), "aaaaaaaa", fmt="fp64")
    phases = decompose_head(captured.heads[0])
    assert phases.max_abs_error < 1e-12
    epsilon = angle * (1 + 1e-9)  # the realized phase g·1 may sit an ulp above g
    lemma = check_lemma1(phases, epsilon)
    rows, cols = np.nonzero(lemma.hypothesis)
    np.testing.assert_array_equal(rows - cols, 1)  # exactly the neighbours j = i − 1 are within ε
    assert lemma.all_hold
    expected = math.cos(angle) - 1 + epsilon**2 / 2
    assert lemma.min_slack == pytest.approx(expected, rel=1e-6)
    assert lemma.min_slack < angle**4 / 24
    # A slightly smaller ε excludes them: the bound is only claimed where the hypothesis holds.
    assert check_lemma1(phases, angle * (1 - 1e-6)).n_hypothesis == 0


@given(st.floats(-1e6, 1e6, allow_nan=False))
def test_wrap_phase_lands_in_half_open_interval_on_the_same_angle(angle):
    wrapped = float(wrap_phase(np.array(angle)))
    assert -math.pi < wrapped <= math.pi
    assert math.cos(wrapped) == pytest.approx(math.cos(angle), abs=1e-9)
    assert math.sin(wrapped) == pytest.approx(math.sin(angle), abs=1e-9)
    assert float(wrap_phase(np.array(-math.pi))) == math.pi
