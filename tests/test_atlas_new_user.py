"""What a new user hits in the atlas, curves and results commands: a results folder means the same
from any working directory, a rerun keeps what a folder records, output places are checked before
any work, and errors name the file, line and option at fault."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from formal_rope.atlas.generate import dfa_key
from formal_rope.atlas.languages import (
    LanguageSet,
    build_language_set,
    entry_dfa,
    merged_language_set,
    read_language_set,
)
from formal_rope.automata.language import language_dfa
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import PROJECT_ROOT, resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.results import write_run
from formal_rope.training.run_result import RunResult
from tests.cli_support import run_main

REPO = Path(__file__).resolve().parent.parent
MLREGTEST = sorted((REPO / "data" / "mlregtest").glob("*.att"))
RELATIVE = f"data/mlregtest/{MLREGTEST[0].name}"  # as atlas results store an MLRegTest language


# ------------------------------------------------------------- 1. the same folder from any directory
def test_a_stored_automaton_path_means_the_project_file_from_any_directory(tmp_path, monkeypatch):
    expected = dfa_key(language_dfa(resolve_language(str(MLREGTEST[0]))))
    monkeypatch.chdir(tmp_path)
    assert dfa_key(language_dfa(resolve_language(RELATIVE))) == expected
    entry = next(entry for entry in build_language_set("mlregtest:per_cell=1,sizes=4,classes=SL")
                 if entry.language.startswith("data/"))
    assert entry_dfa(entry).n_states == entry.states  # docs/atlas.md's snippet, away from the repository
    # the working directory's own file of that name: the same bytes are fine, other bytes are refused
    mine = tmp_path / RELATIVE
    mine.parent.mkdir(parents=True)
    mine.write_bytes(MLREGTEST[0].read_bytes())
    assert dfa_key(language_dfa(resolve_language(RELATIVE))) == expected
    mine.write_bytes(MLREGTEST[1].read_bytes())
    with pytest.raises(FormalRopeError, match="ambiguous"):
        resolve_language(RELATIVE)
    with pytest.raises(FormalRopeError, match=f"not found .*{PROJECT_ROOT}"):
        resolve_language("data/mlregtest/no-such-file.att")


def _run(language: str, seed: int, worst: int, pe: str = "nope") -> tuple[RunConfig, RunResult]:
    config = RunConfig(language=language, pe=pe, seed=seed, steps=2, layers=1, d_model=8, heads=2, batch_size=4,
                       n_per_length=2, nnch_samples=0, test_min_length=4, test_max_length=6)
    return config, RunResult(run_id=config.run_id(), config=config, status="ok", n_star=worst, accuracy=0.9,
                             n_star_worst=worst, worst_strings_tried=10)


def test_an_atlas_folder_reads_the_same_numbers_from_another_directory(tmp_path):
    out = tmp_path / "atlas"
    for index, path in enumerate(MLREGTEST[:3]):
        for seed in (0, 1):
            write_run(out, *_run(f"data/mlregtest/{path.name}", seed, 6 if index == 0 else 0))
    script = ("import json, sys; from formal_rope.atlas.agreement import read_agreement; "
              "print(json.dumps(read_agreement(sys.argv[1]).to_json(), sort_keys=True, default=str))")
    readings = []
    for where in (REPO, tmp_path):  # a fresh interpreter each: no cache carries one reading into the other
        done = subprocess.run([sys.executable, "-c", script, str(out)], cwd=where, capture_output=True, text=True,
                              check=True)
        readings.append(json.loads(done.stdout))
    assert readings[0] == readings[1]
    assert all(row["language_class"] is not None for row in readings[1]["classes"])
    assert sum(row["languages"] for row in readings[1]["classes"] if row["kind"] == "logic") == 3 * 1


# ---------------------------------------------------------------- 2. a rerun keeps what it records
def test_a_rerun_into_a_folder_keeps_its_language_entries_and_says_what_it_holds(tmp_path, capsys, monkeypatch):
    from formal_rope.commands import atlas as atlas_command

    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("(ab)*\n(aa)*\nΣ*a\n")
    second.write_text("aΣ*\n")
    out = tmp_path / "out"

    def stop(configs, out, console, **options):  # the plan is recorded; training is not the point
        raise KeyboardInterrupt

    monkeypatch.setattr(atlas_command, "run_with_progress", stop)
    argv = ["atlas", "--pe", "nope", "--seeds", "1", "--out", str(out)]
    assert run_main(capsys, argv + ["--set", f"file:{first}"])[0] == 130
    recorded = read_language_set(out / "atlas-languages.json")
    assert len(recorded) == 3
    for entry in recorded:  # three finished runs in the folder
        write_run(out, *_run(entry.language, 0, 0))
    code, _, errors = run_main(capsys, argv + ["--set", f"file:{second}"])
    assert code == 130 and ": 1 languages, 1 encodings, 1 seeds: 1 runs" in errors
    assert "holds 0 of these runs finished (skipped) and 3 other run(s), kept" in errors
    merged = read_language_set(out / "atlas-languages.json")
    assert [entry.language for entry in merged] == ["(ab)*", "(aa)*", "Σ*a", "aΣ*"]
    assert len(set(merged.ids)) == 4  # second.txt's user/second/0 beside first.txt's entries


def test_merging_never_drops_or_replaces_an_entry():
    one = build_language_set("registry")
    two = LanguageSet("other", 0, tuple(entry.__class__(**{**entry.__dict__, "language": entry.language + "|b"})
                                        for entry in one.entries[:1]))
    merged = merged_language_set(one, two)
    assert merged.entries[:len(one)] == one.entries and len(merged) == len(one) + 1
    assert merged.entries[-1].id == f"{one.entries[0].id}~2" and merged.spec == "registry + other"
    assert merged_language_set(merged, one) == merged  # nothing new: nothing added


# ---------------------------------------------------------------- 4. output places, before any work
@pytest.mark.parametrize("command", [
    ["train", "--lang", "(ab)*", "--steps", "2"],
    ["sweep", "--lang", "(ab)*", "--seeds", "1", "--steps", "2", "--dry-run"],
    ["atlas", "--set", "registry", "--pe", "nope", "--seeds", "1", "--steps", "2", "--dry-run", "--no-estimate"],
])
def test_a_tensorboard_folder_that_cannot_be_written_is_refused_first(command, tmp_path, capsys):
    pytest.importorskip("tensorboard")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for place in (blocker, blocker / "below", Path("/proc/formal-rope-board")):
        code, out, errors = run_main(capsys, command + ["--out", str(tmp_path / "out"), "--tensorboard", str(place)]
                                     if command[0] != "train" else command + ["--tensorboard", str(place)])
        assert code == 2 and "TensorBoard folder" in errors and "Traceback" not in errors, errors
        assert len(errors.strip().splitlines()[-1:]) == 1 and out == ""
    assert not (tmp_path / "out").exists()


def test_report_refuses_a_bad_output_before_printing(tmp_path, capsys):
    out = tmp_path / "results"
    write_run(out, *_run("(ab)*", 0, 6))
    for option, place in (("--html", "/proc/x.html"), ("--plot", str(tmp_path)), ("--plot-curves", "/proc/c.png")):
        for extra in ([], ["--json"]):
            code, printed, errors = run_main(capsys, ["report", str(out), option, place, *extra])
            assert code == 2 and printed == "" and "cannot write" in errors, (option, errors)


def test_report_only_writes_nothing_unless_asked(tmp_path, capsys):
    out = tmp_path / "atlas"
    write_run(out, *_run(RELATIVE, 0, 6))
    before = sorted(path.relative_to(out) for path in out.rglob("*"))
    code, printed, _ = run_main(capsys, ["atlas", "--report-only", str(out)])
    assert code == 0 and "Agreement per encoding" in printed
    assert sorted(path.relative_to(out) for path in out.rglob("*")) == before  # no atlas.png
    code, _, errors = run_main(capsys, ["atlas", "--report-only", str(out), "--figure", "/proc/atlas.png"])
    assert code == 2 and "cannot write the figure" in errors
    code, printed, _ = run_main(capsys, ["atlas", "--report-only", str(out), "--figure", str(tmp_path / "f.png")])
    assert code == 0 and (tmp_path / "f.png").is_file()
    code, _, errors = run_main(capsys, ["atlas", "--report-only", str(out), "--workers", "3"])
    assert code == 2 and "--workers has no effect with --report-only" in errors


# --------------------------------------------------------------------- 6. errors that name the cause
def test_set_errors_name_the_file_line_and_option(tmp_path, capsys):
    listed = tmp_path / "mine.txt"
    listed.write_text("# my languages\n(ab)*\n\n(ab\n")
    cases = [
        (f"file:{listed}", f"{listed}, line 4 ('(ab'): unbalanced parentheses"),
        ("mlregtest:per_cell=1,per_cell=2", "option per_cell is given twice"),
        ("generated:family=ltl_p,count=1,count=2", "option count is given twice"),
        ("generated:family=ltl_p,period=3", "period= applies to family=ltl_p_mod only"),
        ("generated:family=counting,period=3", "period= applies to family=ltl_p_mod only"),
        ("generated:family=ltl_p,alphabets=a", "'a' has 1 symbol"),
        ("generated:family=ltl_p,alphabets=ab/ab", "lists an alphabet twice"),
    ]
    for spec, message in cases:
        for extra in (["--dry-run", "--no-estimate"], ["--out", str(tmp_path / "never")]):
            code, _, errors = run_main(capsys, ["atlas", "--set", spec, *extra])
            assert code == 2 and message in errors and "P(a) | !P(a)" not in errors, (spec, errors)
    code, _, errors = run_main(capsys, ["atlas", "--set", "registry", "--per-cell", "2", "--dry-run"])
    assert code == 2 and "--per-cell" in errors and "no mlregtest part" in errors
    for option, value, message in (("--pe", "nope,nope", "--pe names nope twice"),
                                   ("--periods", "2,2", "names a period twice")):
        code, _, errors = run_main(capsys, ["atlas", "--set", "registry", option, value, "--dry-run"])
        assert code == 2 and message in errors, errors
    assert not (tmp_path / "never").exists()


# --------------------------------------------------------------------------------- 8. rough edges
def test_tensorboard_folder_names_keep_no_shell_characters():
    from formal_rope.storage.tensorboard_log import run_folder_name

    name = run_folder_name(RunConfig(language="(ab)*[a]", pe="nope", seed=0))
    assert not set("()[]* '\"$;&|") & set(name) and name.endswith(RunConfig(language="(ab)*[a]").with_(
        pe="nope").run_id())


def test_a_resumed_reproduce_says_how_many_runs_it_skipped(tmp_path, capsys, monkeypatch):
    import formal_rope.sweeps.grid as grid_module
    import formal_rope.sweeps.runner as runner_module
    from tests.sweeps_support import fake_runner

    mini = tmp_path / "mini.toml"
    mini.write_text('name = "table4"\nlanguages = ["(ab)*"]\npes = ["nope", "rope"]\n[quick]\nseeds = [0]\n')
    real_run_sweep = runner_module.run_sweep
    monkeypatch.setattr(grid_module, "paper_sweep_path", lambda table: mini)
    monkeypatch.setattr(runner_module, "run_sweep", lambda *a, **k: real_run_sweep(*a, **{**k, "runner": fake_runner}))
    argv = ["reproduce", "table4", "--out", str(tmp_path / "r")]
    code, first, errors = run_main(capsys, argv)
    assert code == 0 and "already finished there" not in first + errors and "0 already done" in first + errors
    code, again, errors = run_main(capsys, argv)
    again = " ".join((again + errors).split())
    assert code == 0 and "(2 already finished there, skipped)" in again
    assert "0 run(s) finished, 2 already done (skipped)" in again


def test_n_star_whiskers_stop_at_what_a_run_can_reach(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from formal_rope.sweeps.report import plots
    from formal_rope.sweeps.report.build import build_report

    rows = [SimpleNamespace(n_star_mean=347.0, n_star_std=265.0, n_star_max=500.0),
            SimpleNamespace(n_star_mean=20.0, n_star_std=30.0, n_star_max=60.0)]
    assert plots._whiskers(rows) == [[265.0, 20.0], [153.0, 30.0]]
    out = tmp_path / "results"
    for seed, n_star in enumerate((500, 500, 41)):  # mean ± std would reach about 612
        config, result = _run("(ab)*", seed, n_star)
        write_run(out, config.with_(test_max_length=500), result.__class__(
            **{**result.__dict__, "run_id": config.with_(test_max_length=500).run_id(),
               "config": config.with_(test_max_length=500)}))
    tops = []
    monkeypatch.setattr(plots, "_save_figure", lambda fig, path: tops.append(fig.axes[0].get_ylim()[1]) or path)
    plots.plot_n_star(build_report(out).rows, tmp_path / "p.png")
    assert tops and tops[0] <= 500 * 1.1


# ------------------------------------------------------------------- 5. the estimate charges the search
def test_the_estimate_charges_a_learning_run_its_whole_search():
    from formal_rope.atlas.estimate import (
        Calibration,
        Estimate,
        _NeverWrong,
        _searched_length_seconds,
        duration_text,
    )
    from formal_rope.atlas.plan import atlas_request, calibration_config
    from formal_rope.evaluation.engine import SearchSettings, search
    from formal_rope.evaluation.models import PackScorer, sampled_start_sets
    from formal_rope.training.resolve import resolve_dfa, resolve_periods
    from formal_rope.training.setup import build_model

    template = calibration_config(atlas_request(["rope"]).recipe).with_(n_per_length=4)
    dfa = resolve_dfa(template)
    model = build_model(template, dfa.n_symbols, resolve_periods(template, dfa))
    settings = SearchSettings(budget=8)
    (found,) = search(_NeverWrong(PackScorer(model, "cpu", lambda: 1), dfa), dfa,
                      list(sampled_start_sets(dfa, (41, 300), 4, 0)), settings=settings)
    assert found.failure is None and len(found.per_length) == 2  # searched at every length, as a learned run
    assert _searched_length_seconds(template, settings, (41, 42)) > 0
    calibration = Calibration(1.0, 0.01, 0.02, "(ab)*", 5.0, per_searched_length_s=0.1)
    lengths = len(template.tested_lengths())
    assert calibration.run_seconds(template, learned=True) - calibration.run_seconds(template) == \
        pytest.approx(0.1 * lengths)
    estimate = Estimate(10, 2.0, calibration, seconds_per_learned_run=9.0)
    assert estimate.core_hours == pytest.approx(10 * 9 / 3600) and estimate.core_hours_if_none_learns < \
        estimate.core_hours
    assert duration_text(10 * 2 / 3600) == "20 s" and duration_text(0.5) == "30 min" and duration_text(3) == "3.0 h"


def test_a_run_whose_automaton_is_nowhere_is_refused_not_left_out(tmp_path, monkeypatch):
    from formal_rope.atlas.agreement import read_agreement

    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "mine" / "x.att"
    mine.parent.mkdir()
    mine.write_bytes(MLREGTEST[0].read_bytes())
    out = tmp_path / "atlas"
    write_run(out, *_run("mine/x.att", 0, 6))
    assert read_agreement(out).languages == 1
    monkeypatch.chdir(tmp_path / "mine")  # elsewhere, mine/x.att names nothing: no class-less answer
    with pytest.raises(FormalRopeError, match="cannot read the language of a run: automaton file 'mine/x.att' not"):
        read_agreement(out)


# ------------------------------------------------------------------ 7. a DFA drawn without Graphviz
def test_dfa_svg_draws_without_graphviz(tmp_path, capsys):
    import xml.dom.minidom

    path = tmp_path / "dfa.svg"
    code, printed, _ = run_main(capsys, ["dfa", "Σ*abΣ*", "--svg", str(path), "--json"])
    assert code == 0 and json.loads(printed)["n_states"] == 3  # the other output stays as asked
    drawing = xml.dom.minidom.parse(str(path))  # a standalone document, its style inside
    assert drawing.getElementsByTagName("style") and len(drawing.getElementsByTagName("circle")) == 3 + 1
    code, _, errors = run_main(capsys, ["dfa", "a{30}", "--svg", str(tmp_path / "big.svg")])
    assert code == 2 and "at most 24" in errors and not (tmp_path / "big.svg").exists()
    code, _, errors = run_main(capsys, ["dfa", "ab", "--svg", "/proc/x.svg"])
    assert code == 2 and "cannot write the DFA drawing" in errors
