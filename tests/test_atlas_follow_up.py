"""The atlas's follow-up: its disagreements searched further and trained again at a larger scale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from formal_rope.atlas.agreement import LEARNED, NOT_LEARNED, read_agreement
from formal_rope.atlas.follow_up import (
    FOLLOW_UP_DIR,
    PLAN_FILE,
    SCALED,
    SEARCHED,
    FollowUpRequest,
    follow_up_folder,
    follow_up_of,
    follow_up_summary,
    plan_follow_up,
    scaled_config,
    searched_config,
    write_plan,
)
from formal_rope.atlas.plan import encoding_label
from formal_rope.atlas.render import follow_up_markdown
from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.results import read_results, write_run
from formal_rope.training.run_result import RunResult

AB = ("a", "b")
LONGEST = 6
# language -> (pe, periods, worst-case N* per seed): Σ*a is not LTL[P] (NoPE learned it: LEARNED);
# aΣ* is LTL[P] (RoPE_P learned nothing: NOT_LEARNED); (ab)* agrees with the theory (no follow-up)
ATLAS = {
    "Σ*a": ("nope", None, (LONGEST, LONGEST)),
    "aΣ*": ("rope_p", (1,), (0, 4)),
    "(ab)*": ("nope", None, (0, 0)),
}


def _config(language: str, pe: str, seed: int, periods=None) -> RunConfig:
    return RunConfig(language=language, alphabet=AB, pe=pe, seed=seed, periods=periods, steps=2, layers=1,
                     d_model=8, heads=2, batch_size=4, n_per_length=2, nnch_samples=0, test_min_length=4,
                     test_max_length=LONGEST)


def _result(config: RunConfig, worst) -> RunResult:
    longest = max(config.tested_lengths())
    return RunResult(run_id=config.run_id(), config=config, status="ok", n_star=max(worst, 4), accuracy=0.9,
                     n_star_worst=worst, resolved_periods=config.periods,
                     worst_failure=None if worst >= longest else "ab" * 3, worst_strings_tried=10)


@pytest.fixture(scope="module")
def atlas_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("follow-up") / "atlas"
    for language, (pe, periods, values) in ATLAS.items():
        for seed, worst in enumerate(values):
            config = _config(language, pe, seed, periods)
            write_run(out, config, _result(config, worst))
    return out


def test_the_plan_follows_each_kind_of_disagreement(atlas_folder):
    results, agreement = read_results(atlas_folder), read_agreement(atlas_folder)
    assert {(item.kind, item.language) for item in agreement.disagreements} == {(LEARNED, "Σ*a"),
                                                                               (NOT_LEARNED, "aΣ*")}
    planned = plan_follow_up(results, agreement, FollowUpRequest(max_length=9, sample=4, scale="medium"))
    searched = [item for item in planned if item.kind == SEARCHED]
    scaled = [item for item in planned if item.kind == SCALED]
    assert len(searched) == 2 and len(scaled) == 2  # every seed of each followed language
    for item in searched:  # the same run, tested further
        source = _config("Σ*a", "nope", item.config.seed)
        assert item.source_run_id == source.run_id()
        assert item.config == source.with_(test_max_length=9) and max(item.config.tested_lengths()) == 9
    for item in scaled:  # the paper's model size, the atlas's recipe and test lengths
        config = item.config
        assert (config.language, config.pe, config.periods) == ("aΣ*", "rope_p", (1,))
        assert (config.layers, config.d_model, config.heads, config.steps) == (5, 64, 8, 2000)
        assert config.train_near_miss_fraction == 1.0 and max(config.tested_lengths()) == LONGEST
        assert config.n_per_length == 2
    none = plan_follow_up(results, agreement, FollowUpRequest(sample=0, max_length=9))
    assert {item.kind for item in none} == {SEARCHED}


def test_a_windowed_hybrid_scales_its_windows_with_its_layers():
    hybrid = RunConfig(language="aΣ*", alphabet=AB, pe="rope", layers=2, layer_pe=("pe", "nope"), window=(8, -1))
    scaled = scaled_config(hybrid, "medium", steps=7)
    assert encoding_label(scaled) == encoding_label(hybrid) == "rope_w8+nope"
    assert scaled.window == (8, 8, 8, 8, -1) and scaled.steps == 7


def test_bad_requests_are_refused(atlas_folder):
    with pytest.raises(FormalRopeError, match="must exceed"):
        searched_config(_config("Σ*a", "nope", 0), LONGEST)
    with pytest.raises(FormalRopeError, match="unknown scale"):
        FollowUpRequest(scale="huge")
    with pytest.raises(FormalRopeError, match="non-negative"):
        FollowUpRequest(budget=-1)


def test_outcomes_beside_the_runs_they_follow(atlas_folder, tmp_path):
    out = tmp_path / "atlas"
    for folder in ("runs", "evals"):
        (out / folder).mkdir(parents=True)
        for path in (atlas_folder / folder).glob("*.parquet"):
            (out / folder / path.name).write_bytes(path.read_bytes())
    assert follow_up_of(out) == []  # no follow-up planned
    request = FollowUpRequest(max_length=9, sample=1, scale="quick")
    planned = plan_follow_up(read_results(out), read_agreement(out), request)
    folder = follow_up_folder(out, request)
    assert folder.name == "follow-up-max_length=9,sample=1,scale=quick"  # not the default follow-up's folder
    write_plan(folder, planned, request)
    assert follow_up_of(out) == []  # the default settings' follow-up is another
    pending = follow_up_of(out, request=request)
    assert len(pending) == 4 and all(item.learned is None for item in pending)
    assert "not run yet" in follow_up_markdown(pending)
    # seed 0 of Σ*a fails at 8 when searched further, seed 1 holds to 9; aΣ*'s seed 1 learns at scale
    found = {(SEARCHED, 0): 7, (SEARCHED, 1): 9, (SCALED, 0): 0, (SCALED, 1): LONGEST}
    for item in planned:
        write_run(folder, item.config, _result(item.config, found[(item.kind, item.config.seed)]))
    outcomes = {(item.kind, item.seed): item for item in follow_up_of(out, request=request)}
    assert outcomes[(SEARCHED, 0)].learned is False and outcomes[(SEARCHED, 0)].source_n_star_worst == LONGEST
    assert outcomes[(SEARCHED, 1)].learned is True and outcomes[(SEARCHED, 1)].longest == 9
    assert outcomes[(SCALED, 1)].learned is True and outcomes[(SCALED, 0)].learned is False
    assert outcomes[(SCALED, 1)].model == "2 layers, d_model 32, 1000 steps"
    summary = follow_up_summary(list(outcomes.values()))
    assert summary[SEARCHED] == {"runs": 2, "measured": 2, "pairs": 1, "failure_found_runs": 1,
                                 "failure_found_pairs": 1}
    assert summary[SCALED] == {"runs": 2, "measured": 2, "pairs": 1, "learned_runs": 1, "closed_pairs": 1}
    text = follow_up_markdown(list(outcomes.values()))
    assert "a failure found on 1 runs, 1 of 1 (language, encoding) pairs" in text
    assert "the gap closed on 1 of 1" in text and "at 6: `ababab`" in text


def test_the_command_runs_the_follow_up(atlas_folder, tmp_path, capsys):
    """`atlas --follow-up` trains the planned runs into OUT/follow-up, resumes, and prints them."""
    from tests.cli_support import run_main

    out = tmp_path / "atlas"
    for folder in ("runs", "evals"):
        (out / folder).mkdir(parents=True)
        for path in (atlas_folder / folder).glob("*.parquet"):
            (out / folder / path.name).write_bytes(path.read_bytes())
    argv = ["atlas", "--follow-up", "--out", str(out), "--follow-up-max-length", "8", "--follow-up-scale", "quick",
            "--steps", "2", "--follow-up-budget", "2", "--follow-up-sample", "1", "--workers", "1"]
    folder = out / "follow-up-max_length=8,budget=2,sample=1,scale=quick,steps=2"
    code, printed, _ = run_main(capsys, argv + ["--dry-run", "--json"])
    dry = json.loads(printed)
    assert code == 0 and dry["kinds"] == {SEARCHED: 2, SCALED: 2} and dry["follow_up"] == str(folder)
    # the dry run lists every planned run, as docs/atlas.md says
    assert len(dry["planned"]) == 4 and {item["test_max_length"] for item in dry["planned"] if item["kind"] ==
                                         SEARCHED} == {8}
    code, printed, _ = run_main(capsys, argv + ["--dry-run"])
    assert code == 0 and sum(line.strip().startswith((SEARCHED, SCALED)) for line in printed.splitlines()) == 4
    assert not folder.exists() and not (out / FOLLOW_UP_DIR).exists()  # a dry run writes nothing
    code, printed, _ = run_main(capsys, argv + ["--json"])
    assert code == 0, printed
    payload = json.loads(printed)
    assert payload["sweep"]["completed"] == 4 and len(payload["outcomes"]) == 4
    assert all(item["learned"] is not None for item in payload["outcomes"])
    plan = json.loads((folder / PLAN_FILE).read_text())
    assert {entry["run_id"] for entry in plan["runs"]} == set(read_results(folder).runs["run_id"])
    searched = [item for item in payload["outcomes"] if item["kind"] == SEARCHED]
    assert {item["longest"] for item in searched} == {8}
    code, printed, _ = run_main(capsys, argv)
    assert code == 0 and f"**{LEARNED}, {SEARCHED}**" in printed  # the rerun skips what is done


def test_a_zero_sample_says_so_and_options_of_the_atlas_are_refused(atlas_folder, capsys):
    """--follow-up-sample 0 on a folder with disagreements names both kinds, never 'no disagreement';
    the atlas's own options (--set, --pe, ...) with --follow-up are refused, not ignored."""
    from tests.cli_support import run_main

    base = ["atlas", "--follow-up", "--out", str(atlas_folder), "--follow-up-max-length", "8", "--dry-run"]
    code, printed, errors = run_main(capsys, base + ["--follow-up-sample", "0"])
    assert code == 0 and f"1 '{LEARNED}' and 1 '{NOT_LEARNED}'" in errors and "sample 0 reruns none" in errors
    for extra in (["--set", "registry"], ["--pe", "nope"], ["--seeds", "3"], ["--figure", "x.png"]):
        code, _, errors = run_main(capsys, base + extra)
        assert code == 2 and f"{extra[0]} has no effect with --follow-up" in errors, errors
    code, _, errors = run_main(capsys, ["atlas", "--follow-up-budget", "3", "--dry-run"])
    assert code == 2 and "--follow-up-budget has no effect without --follow-up" in errors


def test_a_new_plan_keeps_the_entries_an_earlier_one_recorded(atlas_folder, tmp_path):
    request = FollowUpRequest(max_length=9, sample=1, scale="quick")
    planned = plan_follow_up(read_results(atlas_folder), read_agreement(atlas_folder), request)
    folder = tmp_path / "follow-up"
    write_plan(folder, planned, request)
    write_plan(folder, planned[:1], request)  # a later plan of fewer runs
    recorded = [entry["run_id"] for entry in json.loads((folder / PLAN_FILE).read_text())["runs"]]
    assert sorted(recorded) == sorted(item.config.run_id() for item in planned) and len(recorded) == len(planned)
