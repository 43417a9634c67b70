"""`reproduce lc25`: Li & Cotterell's languages (classes as their Table 1 says), their sampling per
language, a sweep file's [language_settings], and the table printed beside theirs."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace

import pytest

from formal_rope.automata import language_dfa
from formal_rope.classes import classify
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.sweeps.grid import expand_grid, load_sweep_file, paper_sweep_path
from formal_rope.sweeps.lc25 import lc25_rows, paper_table
from formal_rope.sweeps.plan import GridRequest, sweep_spec
from sweeps_support import cli, fake_runner

FLIPPED = {"lc_dyck12", "lc_dyck11", "lc_rdp1", "lc_ldp1", "lc_ldp2"}  # "one symbol flipped / incorrect"


def test_each_language_has_the_class_their_table_gives_it():
    rows = paper_table()
    assert len(rows) == 11 and "CNT" not in {row.paper_name for row in rows}
    for row in rows:
        found = classify(language_dfa(resolve_language(row.language)))
        assert found.ltl_p == row.ltl_p, row.paper_name
        assert found.star_free == (row.paper_name != "PARITY"), row.paper_name


def test_the_reference_rows_are_their_table():
    data = tomllib.loads(paper_sweep_path("lc25").read_text(encoding="utf-8"))
    reference = {row[0]: row for row in data["reference"]["rows"]}
    for row in paper_table():
        assert reference[row.language][3] == pytest.approx(row.max / 100)
        assert reference[row.language][4] == pytest.approx(row.mean / 100)


def test_each_language_samples_its_negatives_as_they_do():
    spec, _ = load_sweep_file(paper_sweep_path("lc25"), "quick")
    configs = expand_grid(spec)
    assert len(configs) == 11 * 3 * 2 and {c.pe for c in configs} == {"nope"}
    for config in configs:
        flipped = config.language in FLIPPED
        assert config.train_near_miss_fraction == config.test_near_miss_fraction == (1.0 if flipped else 0.0)
        if config.language.startswith("lc_dyck"):
            assert list(config.tested_lengths()) == list(range(42, 501, 2))  # even lengths only
        else:
            assert list(config.tested_lengths()) == list(range(41, 501))
    paper, _ = load_sweep_file(paper_sweep_path("lc25"), "paper")
    runs = expand_grid(paper)
    assert len(runs) == 11 * 15 and {c.steps for c in runs} == {1_000_000} and {c.layers for c in runs} == {5}
    assert {c.lr for c in runs} == {1e-4, 3e-4, 5e-4}


def test_a_language_setting_yields_to_the_command_and_names_a_grid_language(tmp_path):
    spec, _ = sweep_spec(GridRequest(config=paper_sweep_path("lc25"), seeds=1,
                                     settings={"test_near_miss_fraction": 0.5, "objective": "prefix"}), ())
    configs = expand_grid(spec)
    assert {c.test_near_miss_fraction for c in configs} == {0.5} and {c.objective for c in configs} == {"prefix"}
    bad = tmp_path / "bad.toml"
    bad.write_text('languages = ["(ab)*"]\npes = ["nope"]\n[language_settings."(aa)*"]\nsteps = 3\n')
    with pytest.raises(FormalRopeError, match="not in languages"):
        load_sweep_file(bad)
    bad.write_text('languages = ["(ab)*"]\npes = ["nope"]\n[language_settings."(ab)*"]\nstep = 3\n')
    with pytest.raises(FormalRopeError, match="step"):
        load_sweep_file(bad)


def test_dry_run_lists_the_runs_with_the_objective(capsys, tmp_path):
    code, stdout, _ = cli(capsys, ["reproduce", "lc25", "--dry-run", "--json", "--objective", "final+next-set:0.5",
                                   "--out", str(tmp_path / "r")])
    runs = json.loads(stdout)["lc25"]["runs"]
    assert code == 0 and len(runs) == 66 and {run["objective"] for run in runs} == {"final+next-set:0.5"}
    code, _, stderr = cli(capsys, ["reproduce", "lc25", "--dry-run", "--objective", "lm", "--out", str(tmp_path)])
    assert code == 2 and "trains no eos verdict" in stderr


def _theory_runner(config):
    """Learned (seed 0: 100%) exactly where the theory says, and LAST too."""
    result = fake_runner(config)
    learned = config.language in {"lc_pt2", "lc_lt1", "lc_ldp1", "lc_ldp2", "lc_first", "lc_last"}
    return replace(result, accuracy=1.0 if learned and config.seed == 0 else 0.75)


def test_the_table_stands_beside_theirs_with_the_split(tmp_path, capsys, monkeypatch):
    import formal_rope.sweeps.runner as runner_module

    real_run_sweep = runner_module.run_sweep
    monkeypatch.setattr(runner_module, "run_sweep",
                        lambda *a, **k: real_run_sweep(*a, **{**k, "runner": _theory_runner}))
    code, stdout, _ = cli(capsys, ["reproduce", "lc25", "--seeds", "2", "--eval", "full", "--out", str(tmp_path / "r"),
                                   "--json"])
    assert code == 0
    table = json.loads(stdout)["lc25"]
    rows = {row["paper_name"]: row for row in table["rows"]}
    assert rows["FIRST"]["learned"] and rows["FIRST"]["agrees"] and rows["FIRST"]["max"] == 100.0
    assert rows["FIRST"]["mean"] == pytest.approx(87.5) and rows["FIRST"]["std"] == pytest.approx(12.5)
    assert rows["LAST"]["learned"] and not rows["LAST"]["agrees"] and not table["split_agrees"]
    assert not rows["PARITY"]["learned"] and rows["PARITY"]["agrees"] and rows["PARITY"]["paper_std"] == 0.8
    assert any("CNT" in text for text in table["left_out"])
    assert [row.paper.paper_name for row in lc25_rows(tmp_path / "r")][:2] == ["PARITY", "DYCK(1,2)"]
    code, stdout, _ = cli(capsys, ["report", str(tmp_path / "r")])
    assert code == 0
