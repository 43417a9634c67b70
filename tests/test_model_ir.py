"""IR validation, evaluator semantics (emulated vs explicit arithmetic, native vs emulated), save/load."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.loading import load_runnable
from formal_rope.model.evaluate import evaluate
from formal_rope.model.io import load_model, read_metadata, save_model
from formal_rope.model.ir import BOS, EOS, AttentionHead, Layer, Readout, RotaryPair, TransformerIR
from formal_rope.precision import FormatOps, make_rounder, parse_format, round_to_format


def _counting_model() -> TransformerIR:
    """One uniform head whose value is the 'a' one-hot: output at i = (#a in 1..i-1) / i."""
    coordinates = ("one", "bos", "a", "b", "avg")
    vocabulary = ("a", "b", BOS, EOS)
    embedding = np.array([[1, 0, 1, 0, 0], [1, 0, 0, 1, 0], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=float)
    head = AttentionHead(
        name="uniform",
        w_query=np.zeros((2, 5)),
        b_query=np.zeros(2),
        w_key=np.zeros((2, 5)),
        b_key=np.zeros(2),
        w_value=np.array([[0, 0, 1, 0, 0]], dtype=float),
        b_value=np.zeros(1),
        w_out=np.array([[0], [0], [0], [0], [1]], dtype=float),
        rotary=(RotaryPair("none"),),
    )
    return TransformerIR(coordinates, vocabulary, embedding, (Layer(heads=(head,)),),
                         Readout(kind="coordinate", coordinate=4, threshold=0.3))


def test_ir_rejects_inconsistent_shapes():
    model = _counting_model()
    with pytest.raises(ValueError):
        TransformerIR(model.coordinates, model.vocabulary, model.embedding[:, :3], model.layers, model.readout)
    with pytest.raises(ValueError):
        AttentionHead("odd", np.zeros((3, 5)), np.zeros(3), np.zeros((3, 5)), np.zeros(3), np.zeros((1, 5)),
                      np.zeros(1), np.zeros((5, 1)), rotary=(RotaryPair("none"),))
    with pytest.raises(ValueError):
        RotaryPair("periodic", period=0)
    assert model.embedding.flags.writeable is False


def test_uniform_head_output_is_the_exact_average_and_bos_sees_nothing():
    model = _counting_model()
    result = evaluate(model, ["ab", "aab", ""], fmt="fp64", mode="emulated", trace=True)
    residual = result.residuals[1]  # bos a a b eos
    # position i averages the 'a' flags of keys 0..i-1 (bos contributes 0)
    assert residual[:, 4].tolist() == [0.0, 0.0, 0.5, 2 / 3, 0.5]
    assert result.residuals[2][:, 4].tolist() == [0.0, 0.0]
    assert result.accepted.tolist() == [True, True, False]
    assert result.mode == "emulated" and result.format == "fp64"


def test_unknown_symbol_is_a_user_error():
    # The same reading, and the same message, as `accepts` (issue 9: one way to read input strings).
    with pytest.raises(FormalRopeError, match="unknown symbol 'c' at column 3 of 'abc'"):
        evaluate(_counting_model(), ["abc"])
    with pytest.raises(FormalRopeError, match="not in the model's alphabet"):
        evaluate(_counting_model(), [("a", "c")])


@given(st.lists(st.floats(allow_nan=False, width=64, min_value=-1e40, max_value=1e40), min_size=1, max_size=30),
       st.sampled_from(["bf16", "fp16", "fp32", "fp8e4m3", "e6m9"]))
def test_fast_rounder_matches_round_to_format(values, name):
    fmt = parse_format(name)
    array = np.array(values + [1e-41, -3e-45, 2.0**-140, 65519.0, 65520.0, 1e39], dtype=np.float64)
    expected = round_to_format(array, fmt)
    got = make_rounder(fmt)(array)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("name", ["fp32", "fp16", "bf16"])
def test_sequential_sum_rounds_after_every_addition(name):
    fmt = parse_format(name)
    ops = FormatOps(fmt)
    rng = np.random.default_rng(1)
    values = ops.cast(rng.normal(size=(3, 257)) * 10.0 ** rng.integers(-3, 4, size=(3, 257)))
    expected = np.asarray(values[:, 0], dtype=np.float64)
    for j in range(1, values.shape[1]):
        expected = round_to_format(expected + np.asarray(values[:, j], dtype=np.float64), fmt)
    got = np.asarray(ops.sequential_sum(values, axis=1), dtype=np.float64)
    assert np.array_equal(got, expected)
    # a pairwise sum would differ somewhere: the order matters in low precision
    if name == "bf16":
        assert not np.array_equal(got, round_to_format(np.asarray(values, dtype=np.float64).sum(axis=1), fmt))


def test_save_load_roundtrip_and_metadata(tmp_path):
    model = _counting_model()
    path = save_model(model, tmp_path / "m.frm")
    with zipfile.ZipFile(path) as archive:
        assert set(archive.namelist()) == {"metadata.json", "weights.npz"}
        metadata = json.loads(archive.read("metadata.json"))
    assert metadata["kind"] == "compiled" and metadata["coordinates"] == list(model.coordinates)
    assert metadata["layers"][0]["heads"][0]["rotary"] == [{"kind": "none", "angle": None, "period": None}]
    loaded = load_model(path)
    assert loaded.coordinates == model.coordinates and np.array_equal(loaded.embedding, model.embedding)
    strings = ["", "a", "ab", "bba", "aaab"]
    assert evaluate(loaded, strings).to_list() == evaluate(model, strings).to_list()
    assert load_runnable(path).classify(strings) == evaluate(model, strings).to_list()


def test_missing_and_corrupt_files_are_user_errors(tmp_path):
    with pytest.raises(FormalRopeError, match="does not exist"):
        read_metadata(tmp_path / "nope.zip")
    junk = tmp_path / "junk.zip"
    junk.write_text("not a zip")
    with pytest.raises(FormalRopeError, match="not a formal-rope model file"):
        load_model(junk)
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("metadata.json", json.dumps({"kind": "compiled", "layers": [], "coordinates": []}))
    with pytest.raises(FormalRopeError, match="corrupt"):
        load_model(broken)
    odd = tmp_path / "odd.zip"
    with zipfile.ZipFile(odd, "w") as archive:
        archive.writestr("metadata.json", json.dumps({"kind": "mystery"}))
    with pytest.raises(FormalRopeError, match="unknown model kind"):
        load_runnable(odd)


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp32", "e8m4", "e5m6"])
def test_format_ops_are_correctly_rounded(name):
    fmt = parse_format(name)
    ops = FormatOps(fmt)
    rng = np.random.default_rng(7)
    scale = 10.0 ** rng.integers(-6, 6, size=(2, 4000))
    a, b = (ops.cast(rng.normal(size=4000) * scale[i]) for i in range(2))
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        for op, exact in ((ops.add, np.add), (ops.sub, np.subtract), (ops.mul, np.multiply), (ops.div, np.divide)):
            got = np.asarray(op(a, b), dtype=np.float64)
            assert np.array_equal(got, round_to_format(exact(a64, b64), fmt), equal_nan=True)


def test_load_runnable_dispatches_trained_checkpoints(tmp_path, monkeypatch):
    import formal_rope.training.trained_classifier as checkpoint

    path = tmp_path / "trained.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", json.dumps({"kind": "trained"}))
    seen = []

    class Fake:
        def classify(self, strings, fmt=None):
            return [len(s) % 2 == 0 for s in strings]

    monkeypatch.setattr(checkpoint, "load_checkpoint", lambda p: seen.append(p) or Fake())
    runnable = load_runnable(path)
    assert seen == [path] and runnable.classify(["", "a"]) == [True, False]


def test_multi_character_symbols_are_split_like_the_automata_stage():
    from formal_rope.compiler import compile_formula
    from formal_rope.lang.parser import parse_ltl

    alphabet = ("long", "b")
    compiled = compile_formula(parse_ltl("P('long') & MOD_2^1", alphabet=alphabet), alphabet)
    assert evaluate(compiled.ir, ["long b", "b b b", "long", ""]).to_list() == [True, False, False, False]


def test_directory_is_not_reported_as_missing(tmp_path):
    with pytest.raises(FormalRopeError, match="is a directory"):
        read_metadata(tmp_path)


def test_parameters_that_overflow_the_format_are_a_user_error():
    # Regression: an overflowed weight became inf, inf·0 = NaN spread through the residual stream
    # and every verdict silently read "rejected".
    model = _counting_model()
    scaled = AttentionHead(**{**model.layers[0].heads[0].__dict__, "b_value": np.array([300.0])})
    big = TransformerIR(model.coordinates, model.vocabulary, model.embedding, (Layer(heads=(scaled,)),),
                        model.readout)
    assert evaluate(big, ["ab"], fmt="fp16").to_list() == [True]  # 300 fits fp16
    with pytest.raises(FormalRopeError, match=r"do not fit in fp8e4m3.*uniform\.b_value holds 300"):
        evaluate(big, ["ab"], fmt="fp8e4m3")  # max finite 240
    with pytest.raises(FormalRopeError, match="do not fit"):
        evaluate(big, ["ab"], fmt="e4m3", mode="emulated")


def test_saving_onto_a_directory_is_a_user_error_and_leaves_no_temporary(tmp_path):
    # Regression: `compile --out DIR` failed on the final rename and left DIR.tmp behind.
    target = tmp_path / "models"
    target.mkdir()
    with pytest.raises(FormalRopeError, match="is a directory"):
        save_model(_counting_model(), target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models"]
