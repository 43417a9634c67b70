"""`formalrope phases`: JSON output, tables, head/query selection and user errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from formal_rope.commands.phases import phases_command
from formal_rope.errors import FormalRopeError

ALPHABET = ("a", "b")


@pytest.fixture(scope="module")
def app():
    application = typer.Typer()
    application.command("phases")(phases_command)

    @application.command("noop", hidden=True)
    def noop() -> None:  # a second command keeps `phases` a subcommand, as in the real CLI
        pass

    return application


@pytest.fixture(scope="module")
def compiled_path(tmp_path_factory):
    from formal_rope.compiler import compile_formula
    from formal_rope.lang.parser import parse_ltl
    from formal_rope.model.io import save_model

    ir = compile_formula(parse_ltl("P(a) & MOD_2^0 | Y(a)", ALPHABET), ALPHABET, fmt="fp32").ir
    return save_model(ir, tmp_path_factory.mktemp("phases") / "mod_y.zip")


@pytest.fixture(scope="module")
def trained_path(tmp_path_factory):
    import torch

    from formal_rope.run_config.config import RunConfig
    from formal_rope.storage.checkpoints import save_checkpoint
    from formal_rope.training.run_result import RunResult
    from formal_rope.training.setup import build_model

    torch.manual_seed(0)
    config = RunConfig(language="(ab)*", pe="rope", layers=2, d_model=16, heads=2, base=10.0, attention="torch")
    model = build_model(config, len(ALPHABET), None)
    result = RunResult(run_id=config.run_id(), config=config, status="ok", n_star=0, accuracy=0.0, alphabet=ALPHABET)
    return save_checkpoint(tmp_path_factory.mktemp("phases") / "rope.zip", model, config, result)


def invoke(app, *args):
    result = CliRunner().invoke(app, ["phases", *map(str, args)])
    return result


def test_json_compiled_defaults_to_rotary_heads_at_the_readout(app, compiled_path):
    result = invoke(app, compiled_path, "abbab", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["kind"] == "compiled" and data["string"] == "abbab"
    assert data["positions"] == ["<bos>", "a", "b", "b", "a", "b", "<eos>"]
    assert data["query"] == 6 and data["dtype"] == "fp32"
    assert [h["name"] for h in data["heads"]] == ["L1.mod:MOD_2^0", "L1.yesterday:Y(a)"]
    for head in data["heads"]:
        assert head["layer"] == 1
        assert head["max_rel_error"] < 1e-6
        keys = head["query"]["keys"]
        assert len(keys) == 6  # --json without --top: every key j < i
        actual = [key["actual"] for key in keys]
        assert actual == sorted(actual, reverse=True)
        for key in keys:
            assert abs(key["score"] - key["actual"]) == pytest.approx(key["abs_error"])
            terms = sum(p["term"] for p in key["pairs"]) * head["scale"]
            assert terms == pytest.approx(key["score"], rel=1e-12, abs=1e-12)
            for pair in key["pairs"]:
                assert -np.pi < pair["delta"] <= np.pi
        lemma = head["lemma1"]
        assert lemma["all_hold"] and lemma["hypothesis_count"] == len(lemma["entries"])
    y_head = data["heads"][1]
    assert y_head["pairs"] == [{"pair": 0, "rotation": "RoPE_NP g=1", "frequency": 1.0, "rotated": True}]
    best = y_head["query"]["keys"][0]
    assert best["key"] == 5 and abs(best["pairs"][0]["delta"]) < 1e-6  # Y attends to i − 1
    assert best["lemma1"]["hypothesis"] and best["lemma1"]["holds"]


def test_json_trained_selection(app, trained_path):
    result = invoke(app, trained_path, "abba", "--layer", 2, "--head", 1, "--query", 3, "--top", 2,
                    "--epsilon", 3.2, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (head,) = data["heads"]
    assert (head["layer"], head["head"], head["name"]) == (2, 1, "L2.H1")
    assert data["query"] == 3 and head["query"]["token"] == "b"
    assert head["query"]["keys_shown"] == 2 and head["query"]["keys_total"] == 3
    assert head["max_abs_error"] < 1e-5 and head["recompute_error"] < 1e-6
    # ε ≥ π: every visible (i, j) satisfies the hypothesis.
    assert head["lemma1"]["hypothesis_count"] == 6 * 5 // 2
    assert head["query"]["lemma1"]["hypothesis_count"] == 3
    assert [p["frequency"] for p in head["pairs"]] == pytest.approx([10.0 ** (-k / 4) for k in range(4)])


def test_table_output(app, compiled_path):
    result = invoke(app, compiled_path, "abbab", "--head", "y", "--top", 2)
    assert result.exit_code == 0, result.output
    assert "L1.yesterday:Y(a) (layer 1, head 4): query i = 6 (eos), top 2 of 6 keys" in result.output
    assert "Lemma 1 (ε = 0.25)" in result.output and "reconstruction" in result.output
    assert "L1.mod" not in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (("--layer", 3), "layer 3 (--layer) does not exist"),
        (("--head", 9), "head 9 (--head) does not exist"),
        (("--head", "nonsense"), "no head named"),
        (("--head", "L1"), "(--head) matches several heads"),
        (("--query", 0), "query 0 (--query) is bos"),
        (("--query", 7), "query 7 (--query) is outside the input"),
        (("--top", 0), "--top"),
        (("--format", "fp8e4m3"), "natively"),
        # Regressions: layer 2 holds only the Y snap's feed-forward block (it used to print an
        # empty report), and the fp32 Y scale 2^22 overflows fp16 (it used to print NaN scores
        # and "the bound fails").
        (("--layer", 2), "layer 2 (--layer) has no attention heads"),
        (("--format", "fp16"), "do not fit in fp16"),
    ],
)
def test_user_errors(app, compiled_path, args, message):
    result = invoke(app, compiled_path, "abbab", *args)
    assert isinstance(result.exception, FormalRopeError)
    assert message in str(result.exception)


def test_real_entry_point_exit_code(compiled_path, capsys):
    from formal_rope import cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["phases", str(compiled_path), "abc"])
    assert exit_info.value.code == 2
    assert "'c'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["phases", str(compiled_path) + ".missing", "ab"])
    assert exit_info.value.code == 2


def test_trained_rope_position_phases_are_exact_at_a_tiny_base(app, tmp_path):
    """`formalrope phases` on RoPE at beta = 1e-12 (head dim 32), a 500-symbol string: every position
    phase at the readout is within 1e-5 rad of theta_p (i - j) mod 2pi at 60 digits (the float64
    product of the rounded theta_p was ~0.1 rad off)."""
    import mpmath
    import torch

    from formal_rope.run_config.config import RunConfig
    from formal_rope.storage.checkpoints import save_checkpoint
    from formal_rope.training.run_result import RunResult
    from formal_rope.training.setup import build_model

    torch.manual_seed(0)
    config = RunConfig(language="(ab)*", pe="rope", layers=1, d_model=32, heads=1, base=1e-12, attention="torch")
    model = build_model(config, len(ALPHABET), None)
    result = RunResult(run_id=config.run_id(), config=config, status="ok", n_star=0, accuracy=0.0, alphabet=ALPHABET)
    path = save_checkpoint(tmp_path / "tiny_base.zip", model, config, result)
    string = "".join(np.random.default_rng(1).choice(list(ALPHABET), 500))
    out = invoke(app, path, string, "--top", 501, "--json")
    assert out.exit_code == 0, out.output
    (head,) = json.loads(out.output)["heads"]
    query = head["query"]["position"]
    assert query == 501 and len(head["query"]["keys"]) == 501
    worst = 0.0
    with mpmath.workdps(60):
        two_pi = 2 * mpmath.pi
        for key in head["query"]["keys"]:
            offset = query - key["key"]
            for pair in key["pairs"]:
                theta = mpmath.mpf(1e-12) ** (mpmath.mpf(-pair["pair"]) / 16)
                exact = theta * offset - two_pi * mpmath.floor(theta * offset / two_pi)
                difference = abs(mpmath.mpf(pair["position_phase"]) - exact) % two_pi
                worst = max(worst, float(min(difference, two_pi - difference)))
    assert worst < 1e-5
