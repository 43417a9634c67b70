"""The blind-spot columns end to end (a tiny run: family test, transition coverage, Parquet, train
--sampling) and the atlas's three verdicts (refuted / learned / not learned, fit or not)."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

from formal_rope.atlas.agreement import LEARNED, MISSED, NOT_LEARNED, REFUTED, RIGHT, agreement_of, run_outcomes
from formal_rope.atlas.render import agreement_markdown, blind_spot_markdown
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.results import Results, read_results, write_run

TINY = dict(steps=4, layers=1, d_model=8, heads=2, batch_size=8, test_min_length=41, test_max_length=44,
            n_per_length=4, nnch_samples=0)


def test_train_records_family_and_coverage(tmp_path):
    command = [sys.executable, "-m", "formal_rope.cli", "train", "--lang", "(aa)*", "--pe", "nope", "--sampling",
               "coverage", "--steps", "4", "--layers", "1", "--d-model", "8", "--heads", "2", "--batch-size", "8",
               "--test-lengths", "41..44", "--n-per-length", "4", "--eval", "worst-case", "--worst-case-budget", "4",
               "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    result = result.get("result", result)
    assert result["config"]["sampling"] == "coverage"
    assert result["family"] == "(aa)^m·a vs (aa)^m"
    assert result["family_strings_tried"] >= 2
    assert result["test_transitions"] == 2 and result["test_transitions_covered"] == 2
    config = RunConfig.from_dict(result["config"])
    assert config.run_id() == RunConfig("(aa)*", pe="nope", sampling="coverage", **{
        **TINY, "nnch_samples": 2}).run_id()


def _row(language, pe, seed, predicted, *, n_star, worst, refuted_at=None, loss=0.5, accuracy=None, family=None):
    config = RunConfig(language, pe=pe, seed=seed, **TINY)
    return {"run_id": config.run_id(), "status": "ok", "config": json.dumps(config.to_dict()), "predicted": predicted,
            "predicted_by": "test", "n_star": n_star, "n_star_worst": worst, "worst_failure": None,
            "refuted_at": refuted_at, "family_failure": None if refuted_at is None else "aaa",
            "family_strings_tried": None if family is None else family, "final_loss": loss,
            "final_train_accuracy": accuracy}


def test_three_verdicts_and_fit():
    runs = pd.DataFrame([
        # not expressible, right on the sampled and searched strings, refuted by its family
        _row("(aa)*", "nope", 0, "not_expressible", n_star=44, worst=44, refuted_at=43, family=3),
        # not expressible and right everywhere, families held: the standing disagreement
        _row("(aa)*", "nope", 1, "not_expressible", n_star=44, worst=44, family=40),
        # expressible, not learned: fit by final loss (no training accuracy), and not fit by accuracy
        _row("ltl:P(a)", "nope", 0, "expressible", n_star=41, worst=41, loss=0.001),
        _row("ltl:P(a)", "nope", 1, "expressible", n_star=0, worst=0, loss=0.001, accuracy=0.5),
    ])
    outcomes = {(o.language, o.seed): o for o in run_outcomes(runs)}
    assert outcomes[("(aa)*", 0)].verdict == REFUTED
    assert outcomes[("(aa)*", 1)].verdict == RIGHT
    assert outcomes[("ltl:P(a)", 0)].verdict == MISSED and outcomes[("ltl:P(a)", 0)].fit
    assert outcomes[("ltl:P(a)", 0)].fit_by == "final loss"
    assert outcomes[("ltl:P(a)", 1)].fit is False and outcomes[("ltl:P(a)", 1)].fit_by == "train accuracy"
    agreement = agreement_of(Results(runs, pd.DataFrame()))
    kinds = {item.kind for item in agreement.disagreements}
    assert kinds == {NOT_LEARNED}  # seed 0's family refuted it: not every seed learned
    rows = {row.predicted: row for row in agreement.rows}
    assert rows["not_expressible"].refuted_runs == 1 and rows["not_expressible"].learned_runs == 1
    assert (rows["expressible"].missed_fit_runs, rows["expressible"].missed_unfit_runs) == (1, 1)
    text = agreement_markdown(agreement)
    assert "| nope | expressible | 0 | 0/2 | 1 / 1 |" in text
    assert "training fit (final loss < 0.01)" in text and "training did not fit (final training accuracy < 99%)" in text
    # without the family failure the language is a standing "not expressible, learned"
    held = runs.assign(refuted_at=[None] * 4)
    assert LEARNED in {item.kind for item in agreement_of(Results(held, pd.DataFrame())).disagreements}


def test_blind_spot_page_block(tmp_path):
    from formal_rope.runs import run_training

    config = RunConfig("(aa)*", pe="nope", sampling="coverage", **TINY)
    result, _ = run_training(config, progress=False)
    write_run(tmp_path, config, result)
    results = read_results(tmp_path)
    assert results.runs.loc[0, "sampling"] == "coverage"
    assert results.runs.loc[0, "test_transitions"] == 2
    text = blind_spot_markdown(results)
    assert "| nope | coverage | 0 |" in text and "(aa)^m·a vs (aa)^m" in text
    assert ("held on all" in text) or ("refuted at length" in text)
