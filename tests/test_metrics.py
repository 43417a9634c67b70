"""NNCH's score (Delétang et al.: mean accuracy on uniformly random strings over lengths 42..500,
evaluation.nnch) beside N* and accuracy: Parquet columns, aggregation, `report --sort`, and its absence
(not a guess) for runs whose evaluation stopped early and for folders written before it was measured."""

from __future__ import annotations

import json
import math

import pandas as pd

from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.report import aggregate, sort_rows
from formal_rope.sweeps.results import load_results, read_results, write_run
from formal_rope.training.run_result import LengthResult, RunResult
from tests.cli_support import run_main

# Columns written after NNCH's score (old files lack them; pandas would rewrite their nullable
# integers as float64, which the reader refuses as a hand-made file).
WORST_CASE_COLUMNS = ("n_star_worst", "worst_failure", "worst_failure_margin", "worst_strings_tried",
                      "family", "family_strings_tried", "refuted_at", "family_failure", "test_transitions_covered",
                      "test_transitions", "final_train_accuracy")


def _result(config, accuracies, complete, nnch):
    per_length = tuple(LengthResult(41 + i, a, 4) for i, a in enumerate(accuracies))
    n_star = 0
    for r in per_length:
        if r.accuracy < 1:
            break
        n_star = r.length
    return RunResult(run_id=config.run_id(), config=config, status="ok", n_star=n_star,
                     accuracy=sum(accuracies) / len(accuracies), per_length=per_length, eval_complete=complete,
                     nnch_accuracy=nnch)


def _folder(tmp_path):
    """(ab)*: rope wins on NNCH (high mean, early failure), rope_p wins on N* (perfect longer, then collapses);
    nope's evaluation stopped at its first imperfect length (eval nstar)."""
    runs = [
        (RunConfig(language="(ab)*", pe="rope", seed=0), [1.0, 0.75, 1.0, 1.0], True, 0.9375),
        (RunConfig(language="(ab)*", pe="rope", seed=1), [1.0, 0.75, 0.75, 1.0], True, 0.875),
        (RunConfig(language="(ab)*", pe="rope_p", seed=0), [1.0, 1.0, 1.0, 0.5], True, 0.75),
        (RunConfig(language="(ab)*", pe="nope", seed=0, eval_mode="nstar"), [1.0, 1.0, 0.75], False, math.nan),
    ]
    for config, accuracies, complete, nnch in runs:
        write_run(tmp_path, config, _result(config, accuracies, complete, nnch))
    return tmp_path


def test_parquet_carries_nnch_and_eval_complete(tmp_path):
    runs, _ = load_results(_folder(tmp_path))
    by_pe = {(row.pe, row.seed): row for row in runs.itertuples()}
    assert by_pe[("rope", 0)].nnch_accuracy == 0.9375
    assert by_pe[("rope_p", 0)].nnch_accuracy == 0.75 and by_pe[("rope_p", 0)].accuracy == 0.875
    nope = by_pe[("nope", 0)]
    # Mean over the 3 evaluated lengths; NNCH's score needs every length: NaN, not a guess.
    assert not nope.eval_complete
    assert math.isclose(nope.accuracy, 2.75 / 3) and math.isnan(nope.nnch_accuracy)
    assert str(runs["eval_complete"].dtype) == "bool"


def test_aggregate_and_sort_by_either_metric(tmp_path):
    runs, _ = load_results(_folder(tmp_path))
    rows = {row.pe: row for row in aggregate(runs)}
    assert rows["rope"].nnch_max == 0.9375 and rows["rope"].nnch_mean == (0.9375 + 0.875) / 2
    assert math.isnan(rows["nope"].nnch_max) and rows["nope"].n_star_max == 42
    assert [r.pe for r in sort_rows(aggregate(runs), "nnch")] == ["rope", "rope_p", "nope"]
    assert [r.pe for r in sort_rows(aggregate(runs), "n_star")] == ["rope_p", "nope", "rope"]


def test_report_shows_and_sorts_by_nnch(tmp_path, capsys):
    folder = _folder(tmp_path)
    code, out, _ = run_main(capsys, ["report", str(folder), "--json", "--sort", "nnch"])
    payload = json.loads(out)
    assert code == 0 and [r["pe"] for r in payload["rows"]] == ["rope", "rope_p", "nope"]
    assert payload["rows"][0]["nnch_max"] == 0.9375 and payload["rows"][2]["nnch_max"] is None
    code, out, _ = run_main(capsys, ["report", str(folder), "--sort", "n_star"])
    assert code == 0 and "NNCH max" in out and out.index("RoPE_P") < out.index("RoPE_NP")
    code, _, err = run_main(capsys, ["report", str(folder), "--sort", "speed"])
    assert code == 2 and "n_star, nnch, accuracy" in err


def test_old_results_with_the_balanced_number_read_as_unknown(tmp_path):
    """Files written before nnch_samples existed held the balanced mean in nnch_accuracy: not NNCH's score."""
    folder = _folder(tmp_path)
    for path in (folder / "runs").glob("*.parquet"):
        # Written before worst-case evaluation too (its nullable integer columns would come back from pandas as
        # float64, which the reader refuses as a hand-made file).
        frame = pd.read_parquet(path).drop(columns=["nnch_samples", *WORST_CASE_COLUMNS])
        frame.to_parquet(path, index=False)
    results = read_results(folder)
    assert results.runs["nnch_accuracy"].isna().all() and results.runs["accuracy"].notna().all()
    assert any("before NNCH's score was measured on uniformly random strings" in note for note in results.notes)


def test_old_results_without_the_column_read_as_unknown(tmp_path):
    folder = _folder(tmp_path)
    for path in (folder / "runs").glob("*.parquet"):
        frame = pd.read_parquet(path).drop(columns=["nnch_accuracy", "eval_complete", *WORST_CASE_COLUMNS])
        frame.to_parquet(path, index=False)
    runs, _ = load_results(folder)
    assert runs["nnch_accuracy"].isna().all()
    assert all(math.isnan(row.nnch_max) for row in aggregate(runs))
