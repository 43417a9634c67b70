"""Sweeps, the report: aggregation, tables, notes, failure lines, plots beside the paper, Markdown."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from formal_rope.run_config.fields import FIELD_NAMES
from formal_rope.sweeps.grid import expand_grid
from formal_rope.sweeps.report import aggregate, plot_n_star
from formal_rope.sweeps.results import load_results
from formal_rope.sweeps.runner import run_sweep
from sweeps_support import REPO, fake_runner, spec
from sweeps_support import cli as _cli


def _captured_figure(monkeypatch):
    import formal_rope.sweeps.report.plots as report_module

    captured = []
    monkeypatch.setattr(report_module, "_save_figure", lambda fig, path: captured.append(fig) or Path(path))
    return captured


def _hollow_points(fig) -> set[tuple[float, float]]:
    """(x, y) of every marker drawn without a face colour (hollow) in the figure."""
    points = set()
    for ax in fig.axes:
        for collection in ax.collections:
            if len(collection.get_offsets()) and len(collection.get_facecolors()) == 0:
                points.update((round(float(x), 6), round(float(y), 6)) for x, y in collection.get_offsets())
    return points


def test_aggregate_matches_pandas_statistics_and_plot(tmp_path):
    configs = expand_grid(
        spec(languages=["(aa)*"], pes=["nope", "rope_p", "rope"], bases=[1.0, 1e4], seeds=3, lrs=[1e-4])
    )
    run_sweep(configs, tmp_path, runner=fake_runner)
    runs, _ = load_results(tmp_path)
    rows = {(r.pe, r.base): r for r in aggregate(runs)}
    nope = rows[("nope", None)]
    assert nope.runs == 3 and nope.n_star_max == 61 and math.isclose(nope.n_star_mean, 51.0)
    assert math.isclose(nope.n_star_std, pd.Series([41.0, 51.0, 61.0]).std())
    assert rows[("rope_p", None)].n_star_mean == 500
    assert set(rows) == {("nope", None), ("rope_p", None), ("rope", 1.0), ("rope", 1e4)}
    png = plot_n_star(list(rows.values()), tmp_path / "fig.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_table_is_not_squeezed_and_bad_plot_path_is_a_user_error(tmp_path, capsys):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope"], bases=[1e4], seeds=2, lrs=[1e-4]))
    run_sweep(configs, tmp_path, runner=fake_runner)
    reference = REPO / "sweeps" / "table4.toml"
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--reference", str(reference)])
    # Off a terminal Rich assumes 80 columns; the 9-column table with the paper column was cut.
    assert code == 0 and "language" in stdout and "paper: acc max / N* max (mean)" in stdout and "…" not in stdout
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--json"])
    assert code == 0 and set(json.loads(stdout)) == {
        "results", "by", "runs", "evals", "statuses", "rows", "notes", "plot", "level", "intervals", "comparisons"
    }
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--plot", str(blocker / "fig.png")])
    assert code == 2 and "cannot write the plot" in stderr and "Traceback" not in stderr


def test_report_notes_rows_that_mix_settings_beyond_seeds_and_lrs(tmp_path, capsys):
    # A results folder reused with other --steps used to be averaged together without a word.
    from formal_rope.sweeps.report import mixed_settings

    grid = dict(languages=["(ab)*"], pes=["rope"], bases=[1e4], seeds=2, lrs=[1e-4, 3e-4])
    run_sweep(expand_grid(spec(**grid)), tmp_path, runner=fake_runner)
    assert mixed_settings(load_results(tmp_path)[0]) == []  # seeds and lrs are what rows aggregate
    run_sweep(expand_grid(spec(**grid, overrides={"steps": 7})), tmp_path, runner=fake_runner)
    assert mixed_settings(load_results(tmp_path)[0]) == [("(ab)*", "rope", 1e4, {"steps": ["3", "7"]})]
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--by", "language,pe,base"])
    assert code == 0 and "aggregates runs with different settings (steps 3, 7)" in " ".join(stdout.split())
    # By default (issue 35.8) the differing setting is a row key instead: a row per steps, no note.
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--json"])
    payload = json.loads(stdout)
    assert payload["by"] == ["language", "pe", "base", "steps"] and payload["notes"] == []
    assert [(row["steps"], row["runs"]) for row in payload["rows"]] == [(3, 4), (7, 4)]


def test_report_names_base_and_lr_in_failure_lines_and_shows_no_nan_for_diverged_rows(tmp_path, capsys):
    # Regression (issue 9.9): two identical-looking failure lines (β missing), and `nan±0.000` with
    # std 0.0 in JSON for a row whose only run diverged.
    from dataclasses import replace

    def runner(config):
        result = replace(fake_runner(config), first_failure="ab" * 21)
        return replace(result, status="diverged", accuracy=float("nan")) if config.pe == "sipe" else result

    grid = spec(languages=["(ab)*"], pes=["rope", "sipe"], bases=[1.0, 1e4], seeds=1, lrs=[1e-4, 3e-4])
    run_sweep([c for c in expand_grid(grid) if not (c.pe == "sipe" and c.lr > 2e-4)], tmp_path, runner=runner)
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path)])
    text = " ".join(stdout.split())
    assert code == 0 and "nan" not in text
    assert "RoPE_NP β=1 seed=0 lr=0.0001" in text and "RoPE_NP β=1e4 seed=0 lr=0.0003" in text
    failure_lines = [line for line in stdout.splitlines() if "N*=" in line]
    assert len(failure_lines) == len(set(failure_lines)) == 6
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--json"])
    rows = {(r["pe"], r["base"]): r for r in json.loads(stdout)["rows"]}
    assert rows[("sipe", 1.0)]["accuracy_mean"] is None and rows[("sipe", 1.0)]["accuracy_std"] is None
    assert rows[("rope", 1.0)]["accuracy_std"] is not None


def test_report_reference_takes_a_paper_table_name(tmp_path, capsys):
    # Regression (issue 9.11): `--reference table2` was read as a (missing) file path.
    configs = expand_grid(spec(languages=["(aa)*"], pes=["nope", "rope_p"], bases=[1e4], seeds=1, lrs=[1e-4]))
    run_sweep(configs, tmp_path, runner=fake_runner)
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--reference", "table2"])
    assert code == 0 and "0.500 / 41" in stdout and "1.000 / 500" in stdout
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--reference", "table9"])
    assert code == 2 and "neither a paper table" in stderr


def test_every_config_field_is_a_column_and_report_groups_by_any_columns(tmp_path, capsys):

    grid = spec(languages=["(ab)*"], pes=["rope", "nope"], bases=[1e4], seeds=2, lrs=[1e-4],
                axes={"train_near_miss_fraction": [0.0, 0.5]})
    run_sweep(expand_grid(grid), tmp_path, runner=fake_runner)
    runs = pd.read_parquet(tmp_path / "runs")
    assert set(FIELD_NAMES) <= set(runs.columns)
    assert sorted(runs["train_near_miss_fraction"].unique()) == [0.0, 0.5]
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--by", "pe,train_near_miss_fraction", "--json"])
    payload = json.loads(stdout)
    assert code == 0 and payload["by"] == ["pe", "train_near_miss_fraction"]
    assert [(r["pe"], r["train_near_miss_fraction"], r["runs"]) for r in payload["rows"]] == [
        ("nope", 0.0, 2), ("nope", 0.5, 2), ("rope", 0.0, 2), ("rope", 0.5, 2)]
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--by", "language,pe,base"])
    assert code == 0 and "aggregates runs with different settings (train_near_miss_fraction 0.0, 0.5)" in " ".join(
        stdout.split()
    )
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--by", "pe,colour"])
    assert code == 2 and "cannot group by colour" in stderr


def test_plots_draw_the_papers_values_hollow_and_name_the_scale(tmp_path, capsys, monkeypatch):
    # Issue 12.6: the paper's reference values beside ours, and the scale in the title.
    configs = expand_grid(spec(languages=["(aa)*", "(ab)*"], pes=["nope", "rope_p", "sipe_p"], bases=[1e4], seeds=2,
                               lrs=[5e-3], overrides={}))
    run_sweep(configs, tmp_path / "t2", runner=fake_runner)
    figures = _captured_figure(monkeypatch)
    code, _, _ = _cli(
        capsys, ["report", str(tmp_path / "t2"), "--plot", str(tmp_path / "f.png"), "--reference", "table2"]
    )
    assert code == 0
    ys = {y for _, y in _hollow_points(figures[0])}
    assert {41.0, 500.0, 96.0, 44.0} <= ys  # Table 2's N* max: NoPE/SiPE_P 41 on (aa)*, 96 / 44 on (ab)*
    title = " ".join(figures[0]._suptitle.get_text().split())
    assert "quick scale" in title and "hollow markers: the paper" in title

    configs = expand_grid(spec(languages=["(aa)*"], pes=["rope", "nope"], bases=[1e-4, 1.0], seeds=2, lrs=[1e-4],
                               overrides={"steps": 3}))
    run_sweep(configs, tmp_path / "t4", runner=fake_runner)
    code, _, _ = _cli(
        capsys, ["report", str(tmp_path / "t4"), "--plot", str(tmp_path / "g.png"), "--reference", "table4"]
    )
    assert code == 0
    from formal_rope.sweeps.grid import load_sweep_file as load
    from formal_rope.sweeps.grid import paper_sweep_path

    paper = {(row[0], row[1], row[2]): row[6] for row in load(paper_sweep_path("table4"))[0].reference["rows"]}
    hollow = _hollow_points(figures[1])
    assert (1e-4, round(paper[("(aa)*", "rope", 1e-4)], 6)) in hollow and (
        1.0, round(paper[("(aa)*", "rope", 1.0)], 6)
    ) in hollow
    assert "custom settings" in figures[1]._suptitle.get_text()


def test_markdown_table_lists_every_run_and_the_papers_value(tmp_path):
    # docs/findings.md's tables: one row per group, each run's N*, and the paper's numbers beside ours.
    from formal_rope.sweeps.report import markdown_table
    from formal_rope.sweeps.results import read_results

    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope"], bases=[1e4], seeds=2, lrs=[1e-4]))
    run_sweep(configs, tmp_path, runner=fake_runner)
    by = ("language", "pe", "base")
    rows = aggregate(read_results(tmp_path).runs, by)
    expected = {row.pe: ", ".join(str(n) for n in row.n_stars) for row in rows}
    reference = {"rows": [["(ab)*", "rope", 1e4, 0.74, 0.56, 96.0, 66.0]]}
    lines = markdown_table(rows, by, reference).splitlines()
    assert lines[0].endswith("| N* of each run | reached max | paper: acc max / N* max (mean) |") and len(lines) == 4
    rope = next(line for line in lines if "RoPE_NP" in line)
    nope = next(line for line in lines if "NoPE" in line)
    successes = {row.pe: f"{row.successes}/{len(row.n_stars)}" for row in rows}
    assert rope.endswith(f"| {expected['rope']} | {successes['rope']} | 0.74 / 96 (66.0) |") and "| 1e4 |" in rope
    assert nope.endswith(f"| {expected['nope']} | {successes['nope']} | – |") and len(expected["nope"].split(", ")) == 2
    assert "worst-case" not in lines[0]  # no run was searched
    # Without a reference (or without language and pe in the grouping) there is no paper column.
    assert "paper" not in markdown_table(rows, by) and "paper" not in markdown_table(
        aggregate(read_results(tmp_path).runs, ("pe",)), ("pe",), reference)


def test_failed_runs_have_no_n_star_in_reports_tables_plots_and_json(tmp_path, capsys, monkeypatch):
    # Regression: a failed run counted as N* 0: `2 (1 not ok) … N* max 41, mean 20.5±29.0`, JSON
    # n_stars [41, 0], and a row whose only run failed showed `N* 0, 0.0±0.0`.
    from formal_rope.sweeps.report import markdown_table
    from formal_rope.sweeps.results import read_results

    def runner(config):
        if config.seed == 1 or config.pe == "rope_p":
            raise RuntimeError("boom")
        return fake_runner(config)

    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope_p"], bases=[1e4], seeds=2, lrs=[1e-4]))
    run_sweep([c for c in configs if c.pe == "nope" or c.seed == 0], tmp_path, runner=runner)
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--json"])
    rows = {row["pe"]: row for row in json.loads(stdout)["rows"]}
    assert code == 0 and (rows["nope"]["runs"], rows["nope"]["ok_runs"]) == (2, 1)
    assert rows["nope"]["n_stars"] == [41] and rows["nope"]["n_star_max"] == 41
    assert rows["nope"]["n_star_mean"] == 41 and rows["nope"]["n_star_std"] == 0
    assert (rows["rope_p"]["runs"], rows["rope_p"]["ok_runs"], rows["rope_p"]["n_stars"]) == (1, 0, [])
    assert all(rows["rope_p"][key] is None for key in ("n_star_max", "n_star_mean", "n_star_std", "accuracy_max"))
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path)])
    table = {line.split("│")[2].strip(): [cell.strip() for cell in line.split("│")[4:9]]
             for line in stdout.splitlines() if line.count("│") > 8 and "(ab)*" in line}
    assert code == 0 and table["NoPE"] == ["2 (1 not ok)", "0.550", "0.550±0.000", "41", "41.0±0.0"]
    assert table["RoPE_P"] == ["1 (1 not ok)", "–", "–", "–", "–"] and "nan" not in stdout
    figures = _captured_figure(monkeypatch)
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--plot", str(tmp_path / "f.png")])
    assert code == 0 and "Traceback" not in stderr and len(figures) == 1
    runs = read_results(tmp_path).runs
    assert runs.loc[runs["status"] == "failed", "n_star"].isna().all()
    markdown = markdown_table(aggregate(runs), ("language", "pe", "base"))
    assert "| 41 | 41.0±0.0 | 41 | 0/1 |" in markdown and "| 1 (1 not ok) | – | – | – | – | – | – |" in markdown


def test_reproduce_tables_follow_the_sweep_files_language_order(tmp_path):
    # The table listed (ab)* before (aa)* when (ab)*'s runs were written first.
    from rich.console import Console

    from formal_rope.commands.sweep_display import QUIET, print_report
    from formal_rope.sweeps.report import ReportRequest

    for language in ("(ab)*", "(aa)*"):
        run_sweep(expand_grid(spec(languages=[language], pes=["nope"], bases=[1e4], seeds=1, lrs=[1e-4])),
                  tmp_path, runner=fake_runner)
    for order in (("(aa)*", "(ab)*"), ("(ab)*", "(aa)*")):
        payload = print_report(ReportRequest(out=tmp_path, languages=order), Console(), QUIET)
        assert [row["language"] for row in payload["rows"]] == list(order)


def test_test_near_miss_fraction_is_a_runs_column_and_a_sweep_axis(tmp_path):
    grid = spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=1, lrs=[1e-4],
                axes={"test_near_miss_fraction": [0.0, 0.5]})
    configs = expand_grid(grid)
    assert sorted(c.test_near_miss_fraction for c in configs) == [0.0, 0.5]
    run_sweep(configs, tmp_path, runner=fake_runner)
    runs = pd.read_parquet(tmp_path / "runs")
    assert sorted(runs["test_near_miss_fraction"].unique()) == [0.0, 0.5]


def _failing_runner(config):
    from dataclasses import replace

    return replace(fake_runner(config), first_failure="ab" * 21)


def test_every_swept_axis_is_a_row_key_and_a_label_by_default(tmp_path, capsys, monkeypatch):
    # Regression (issue 35.8): `sweep --set test_near_miss_fraction=0,0.5` printed one row mixing both
    # values (with a note), and its runs' lines did not say which fraction each run had.
    import formal_rope.sweeps.runner as runner_module

    real_run_sweep = runner_module.run_sweep
    monkeypatch.setattr(runner_module, "run_sweep",
                        lambda *a, **k: real_run_sweep(*a, **{**k, "runner": _failing_runner}))
    code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "rope,nope", "--base", "1e4", "--seeds", "1",
                                    "--set", "test_near_miss_fraction=0,0.5", "--out", str(tmp_path / "s"), "--json"])
    payload = json.loads(stdout)
    assert code == 0 and payload["by"] == ["language", "pe", "base", "test_near_miss_fraction"]
    assert sorted((r["pe"], r["test_near_miss_fraction"], r["runs"]) for r in payload["rows"]) == [
        ("nope", 0.0, 1), ("nope", 0.5, 1), ("rope", 0.0, 1), ("rope", 0.5, 1)]
    assert payload["notes"] == []
    # The sweep's own lines (stderr with --json) name the fraction of each run.
    code, stdout, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "rope", "--base", "1e4", "--seeds", "1",
                                         "--set", "test_near_miss_fraction=0,0.25", "--out", str(tmp_path / "t")])
    lines = [line for line in stdout.splitlines() if line.startswith("ok ")]
    assert code == 0 and len(lines) == 2
    assert any("test_near_miss_fraction=0 " in line for line in lines)
    assert any("test_near_miss_fraction=0.25 " in line for line in lines)
    # report: the table has the axis as a column, one row per value, and every failure line names it.
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path / "s")])
    text = " ".join(stdout.split())
    assert code == 0 and "test_near_miss_fraction" in stdout and "aggregates runs" not in text
    failure_lines = [line.strip() for line in stdout.splitlines() if "N*=" in line]
    assert len(failure_lines) == len(set(failure_lines)) == 4
    assert all("test_near_miss_fraction=" in line for line in failure_lines)
    # An explicit --by still pools what it leaves out, and says so.
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path / "s"), "--by", "language,pe,base"])
    assert "aggregates runs with different settings (test_near_miss_fraction 0.0, 0.5)" in " ".join(stdout.split())


def test_failure_lines_name_each_hybrid_by_its_label(tmp_path, capsys):
    # Regression (issue 35.8): report's "first failing strings" printed the hybrids of `reproduce
    # hybrids` as `(ab)* RoPE_NP β=1e4 seed=0 ...`, two of them identically (same layers, one windowed).
    from formal_rope.sweeps.plan import plan_reproduce

    configs = [c for c in plan_reproduce("hybrids", "quick", out=tmp_path)[0].configs
               if c.language == "(ab)*" and c.seed == 0]
    run_sweep(configs, tmp_path, runner=_failing_runner)
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path)])
    failure_lines = [line.strip() for line in stdout.splitlines() if "N*=" in line]
    assert code == 0 and len(failure_lines) == len(set(failure_lines)) == len(configs) == 9
    assert any(line.startswith("(ab)* RoPE_NP+NoPE(L2) w8(L1) β=1e4 seed=0") for line in failure_lines)
    assert any(line.startswith("(ab)* RoPE_NP+NoPE(L2) β=1e4 seed=0") for line in failure_lines)
    # Each line's label is a row of the table (the same hybrid label, the same β).
    rows = {(r["pe"], r["base"]) for r in json.loads(_cli(capsys, ["report", str(tmp_path), "--json"])[1])["rows"]}
    assert ("RoPE_NP+NoPE(L2) w8(L1)", 1e4) in rows and ("RoPE_NP+NoPE(L2)", 1e4) in rows


def test_runs_lines_name_every_field_a_variant_changes(capsys):
    # Issue 35.8's class: `reproduce ablation` listed runs of different variants (other negatives,
    # model sizes, schedules) with identical lines.
    from formal_rope.sweeps.plan import plan_reproduce, swept_fields

    configs = plan_reproduce("ablation", "quick")[0].configs
    swept = swept_fields(configs)
    assert "train_near_miss_fraction" in swept and "layers" in swept and "seed" not in swept
    code, stdout, _ = _cli(capsys, ["reproduce", "ablation", "--dry-run"])
    lines = [" ".join(line.split()[1:]) for line in stdout.splitlines() if " seed=" in line]
    assert code == 0 and len(lines) == len(set(lines)) == len({c.run_id() for c in configs})


def test_compare_messages_name_the_cause_and_a_way_out_that_works(tmp_path, capsys):
    # Regression (issue 35.9): a metric no run has, and a base axis that only one side has, both said
    # "no stratum has runs of both sides" without naming the metric or `base`.
    run_sweep(expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope"], bases=[1.0, 1e4], seeds=2, lrs=[1e-4])),
              tmp_path, runner=fake_runner)
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--compare", "pe=rope,base=1e4", "pe=nope",
                                    "--metric", "n_star_worst"])
    text = " ".join(stderr.split())
    assert code == 2 and "no run matching 'pe=rope,base=1e4' has n_star_worst" in text
    assert "never searched" in text and "--eval worst-case" in text and "no stratum" not in text
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--compare", "pe=rope", "pe=nope"])
    text = " ".join(stderr.split())
    assert code == 2 and "the grouping column base separates them" in text
    assert "base is 1, 1e4 for 'pe=rope' but none for 'pe=nope'" in text
    # Both ways out it names work when followed.
    import re

    suggested = re.search(r"--compare (pe=rope,base=(1|1e4)) pe=nope\)", text)
    assert suggested and "--by language,pe" in text
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--compare", suggested[1], "pe=nope", "--json"])
    assert code == 0 and [(c["n_a"], c["n_b"]) for c in json.loads(stdout)["comparisons"]] == [(2, 2)]
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--compare", "pe=rope", "pe=nope", "--by", "language,pe",
                                    "--json"])
    assert code == 0 and [(c["n_a"], c["n_b"]) for c in json.loads(stdout)["comparisons"]] == [(4, 2)]
    # The reverse order names NoPE's missing base in a form --compare reads back.
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--compare", "pe=nope", "pe=rope"])
    assert code == 2 and "--compare pe=nope,base=none pe=rope" in " ".join(stderr.split())
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--compare", "pe=nope,base=none", "pe=rope", "--json"])
    assert code == 0 and [(c["n_a"], c["n_b"]) for c in json.loads(stdout)["comparisons"]] == [(2, 4)]
    # A side that matches nothing says which values its column takes.
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--compare", "pe=rop", "pe=nope"])
    assert code == 2 and "no run matches 'pe=rop' (pe takes nope, rope)" in " ".join(stderr.split())


def test_a_column_is_one_entry_and_every_printer_shows_it(tmp_path, monkeypatch):
    # docs: adding a report column is one COLUMNS entry; its statistic reaches the Rich table, the
    # Markdown table and the JSON rows with no other edit.
    from formal_rope.sweeps.report import RICH, Column, ReportRequest, build_report, columns, markdown_table, number

    run_sweep(expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=2, lrs=[1e-4])), tmp_path,
              runner=fake_runner)
    column = Column("longest mean", lambda row, context: number(row.statistic("longest_mean"), 1),
                    statistic=("longest_mean", lambda runs: float(runs["test_max_length"].astype(float).mean())))
    monkeypatch.setattr(columns, "COLUMNS", (*columns.COLUMNS, column))
    report = build_report(ReportRequest(out=tmp_path))
    longest = float(report.runs["test_max_length"].astype(float).mean())
    assert report.payload["rows"][0]["longest_mean"] == longest
    assert report.table.headers(RICH)[-1] == "longest mean"
    assert report.table.cells(RICH)[0][-1] == f"{longest:.1f}"
    markdown = markdown_table(report.rows, report.by).splitlines()
    assert markdown[0].endswith("| longest mean |") and markdown[2].endswith(f"| {longest:.1f} |")
