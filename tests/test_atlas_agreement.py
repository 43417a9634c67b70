"""The atlas's agreement table, its report and figure, and the prediction columns of every sweep run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from formal_rope.atlas.agreement import LEARNED, NOT_LEARNED, agreement_of, read_agreement
from formal_rope.atlas.figure import figure_cells, write_figure
from formal_rope.atlas.plan import atlas_configs, atlas_request, encoding_label, parse_encoding, planned_runs
from formal_rope.atlas.render import agreement_markdown
from formal_rope.automata import language_dfa
from formal_rope.classes import classify
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.results import RUNS, read_results, write_run
from formal_rope.theory import EXPRESSIBLE, NOT_EXPRESSIBLE, PREDICTION_COLUMNS, predict_run
from formal_rope.theory.runs import formula_in_ltl_p_y, mlregtest_class_of, run_prediction
from formal_rope.training.run_result import RunResult

REPO = Path(__file__).resolve().parent.parent
AB = ("a", "b")
# language -> (rope_p periods, N* worst per seed for nope, for rope_p); 500 = learned (longest tested length)
SYNTHETIC = {
    "aΣ*": ((1,), (500, 500), (41, 41)),  # LTL[P]: expressible by both; RoPE_P learns nothing -> disagreement
    "Σ*a": ((2,), (500, 500), (0, 0)),  # not LTL[P,MOD]: not expressible; NoPE learns it -> disagreement
    "(aa)*": ((2,), (41, 41), (500, 0)),  # (ΣΣ)* over {a, b}: MOD k=2; NoPE: no, RoPE_P: yes
}


def _config(language: str, pe: str, seed: int, periods=None) -> RunConfig:
    return RunConfig(language=language, alphabet=AB, pe=pe, seed=seed, periods=periods, steps=2)


def _result(config: RunConfig, worst, status: str = "ok") -> RunResult:
    return RunResult(run_id=config.run_id(), config=config, status=status,
                     n_star=None if status == "failed" else max(worst, 41), accuracy=0.9,
                     n_star_worst=None if status == "failed" else worst, resolved_periods=config.periods,
                     worst_failure=None if worst == 500 else "ab" * 30)


def _synthetic_folder(out: Path) -> Path:
    for language, (periods, nope, rope_p) in SYNTHETIC.items():
        for pe, values, pe_periods in (("nope", nope, None), ("rope_p", rope_p, periods)):
            for seed, worst in enumerate(values):
                config = _config(language, pe, seed, pe_periods)
                write_run(out, config, _result(config, worst))
    failed = _config("(aa)*", "nope", 2)
    write_run(out, failed, _result(failed, 0, status="failed"))
    return out


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    return _synthetic_folder(tmp_path_factory.mktemp("atlas") / "results")


def _row(agreement, encoding, predicted):
    (row,) = [row for row in agreement.rows if row.encoding == encoding and row.predicted == predicted]
    return row


def test_agreement_counts_known_outcomes(synthetic):
    agreement = read_agreement(synthetic)
    assert agreement.encodings == ("nope", "rope_p") and agreement.languages == 3 and agreement.runs == 13
    assert agreement.searched
    nope_yes, nope_no = _row(agreement, "nope", EXPRESSIBLE), _row(agreement, "nope", NOT_EXPRESSIBLE)
    assert (nope_yes.runs, nope_yes.learned_runs, nope_yes.languages) == (2, 2, 1)
    assert (nope_no.runs, nope_no.learned_runs, nope_no.failed_runs) == (4, 2, 1)
    assert (nope_no.languages, nope_no.languages_all_seeds, nope_no.languages_no_seed) == (2, 1, 1)
    assert nope_no.run_rate == 0.5 and nope_no.language_rate == 0.5
    rope_yes, rope_no = _row(agreement, "rope_p", EXPRESSIBLE), _row(agreement, "rope_p", NOT_EXPRESSIBLE)
    assert (rope_yes.runs, rope_yes.learned_runs, rope_yes.languages) == (4, 1, 2)
    assert rope_yes.language_rate == pytest.approx(0.25)  # (aa)*: 1 of 2 seeds, aΣ*: 0 of 2
    assert rope_yes.run_interval["method"] == "clopper-pearson" and rope_yes.run_interval["n"] == 4
    assert (rope_no.runs, rope_no.learned_runs) == (2, 0)
    # 0 of 2 learned: the exact interval is 0–84.2%, never the bootstrap's zero-width 0–0
    assert rope_no.run_interval["low"] == 0 and rope_no.run_interval["high"] == pytest.approx(1 - 0.025 ** 0.5)
    kinds = {(item.kind, item.encoding, item.language) for item in agreement.disagreements}
    assert kinds == {(LEARNED, "nope", "Σ*a"), (NOT_LEARNED, "rope_p", "aΣ*")}
    (learned,) = [item for item in agreement.disagreements if item.kind == LEARNED]
    assert [run["n_star_worst"] for run in learned.runs] == [500, 500] and "Li & Cotterell" in learned.predicted_by


def test_agreement_per_class(synthetic):
    agreement = read_agreement(synthetic)
    cells = {(row.kind, row.language_class, row.encoding): row for row in agreement.classes}
    ltl_p = cells[("logic", "LTL[P]", "nope")]
    assert (ltl_p.languages, ltl_p.runs, ltl_p.learned_runs, ltl_p.predicted) == (1, 2, 2, {EXPRESSIBLE: 1})
    modular = cells[("logic", "LTL[P,MOD] \\ LTL[P]", "rope_p")]
    assert (modular.runs, modular.learned_runs, modular.rate) == (2, 1, 0.5)
    assert not any(row.kind == "MLRegTest" for row in agreement.classes)  # no MLRegTest file among them


def test_report_and_figure(synthetic, tmp_path):
    agreement = read_agreement(synthetic)
    text = agreement_markdown(agreement)
    assert "| nope | not_expressible | 2 | 2/4 (1 failed) | – | 50% |" in text  # 2 refuted, 2 learned
    assert f"**{LEARNED}**: 1" in text and "`Σ*a`" in text
    labels, rates, texts = figure_cells(agreement)
    assert labels[:1] and rates[labels.index("LTL[P]")][0] == 1.0 and texts[labels.index("LTL[P]")][0].startswith("yes")
    png = write_figure(agreement, tmp_path / "figure" / "atlas.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    payload = agreement.to_json()
    assert json.loads(json.dumps(payload))["runs"] == 13


def test_old_folder_without_prediction_columns_reads(synthetic, tmp_path):
    """Run files written before the prediction columns existed read with null predictions, and the
    agreement table computes the same predictions from their configs."""
    old = tmp_path / "old"
    for folder in (RUNS, "evals"):
        (old / folder).mkdir(parents=True)
        for path in (synthetic / folder).glob("*.parquet"):
            table = pq.read_table(path)
            table = table.drop([name for name in PREDICTION_COLUMNS if name in table.column_names])
            pq.write_table(table, old / folder / path.name)
    runs = read_results(old).runs
    assert runs["predicted"].isna().all() and len(runs) == 13
    assert agreement_of(read_results(old)).to_json() == read_agreement(synthetic).to_json()


def test_sweep_runs_carry_the_prediction(tmp_path):
    """A tiny real sweep: every run's predicted columns equal predict_run on the decider's verdicts."""
    from formal_rope.sweeps.runner import run_sweep

    configs = [RunConfig(language="(ab)*", pe=pe, seed=0, steps=2, layers=1, d_model=8, heads=2, batch_size=4,
                         n_per_length=2, nnch_samples=0, test_lengths=(41, 42), test_min_length=41,
                         test_max_length=42) for pe in ("nope", "rope_p")]
    run_sweep(configs, tmp_path / "sweep")
    runs = read_results(tmp_path / "sweep").runs.set_index("pe")
    classification = classify(language_dfa(resolve_language("(ab)*")))
    for config in configs:
        periods = runs.loc[config.pe, "periods"]
        expected = predict_run(classification, config, (int(periods),) if isinstance(periods, str) else None)
        assert {name: runs.loc[config.pe, name] for name in PREDICTION_COLUMNS} == expected.columns()
    assert runs.loc["nope", "predicted"] == NOT_EXPRESSIBLE and runs.loc["rope_p", "predicted"] == EXPRESSIBLE
    # `report` shows each row's verdict (a column of its own, in the terminal table and --json)
    from formal_rope.sweeps.report import build_report

    rows = {row.pe: row for row in build_report(tmp_path / "sweep").rows}
    assert rows["nope"].statistic("predicted") == NOT_EXPRESSIBLE
    assert rows["rope_p"].to_dict()["predicted"] == EXPRESSIBLE


def test_prediction_reads_the_language_text():
    assert mlregtest_class_of("data/mlregtest/04.04.SL.2.1.0.att") == "SL" and mlregtest_class_of("(ab)*") is None
    assert formula_in_ltl_p_y(resolve_language("ltl:P(b & Y(a))", ("a", "b", "c")).ast)
    assert not formula_in_ltl_p_y(resolve_language("ltl:P(a) & MOD_2^0", AB).ast)
    hybrid = RunConfig(language="ltl:P(b & Y(a))", alphabet=("a", "b", "c"), pe="rope", layers=2,
                       layer_pe=("rope", "nope"), window=(8, -1))
    assert run_prediction(hybrid).verdict == EXPRESSIBLE  # windowed RoPE_NP + global NoPE on LTL[P,Y]
    data = RunConfig(language="data:somewhere", pe="nope", data="somewhere", data_hash="0" * 64)
    assert run_prediction(data).verdict == "no_prediction"


def test_atlas_plan():
    assert parse_encoding("rope_w8+nope").window == 8 and parse_encoding("nope").window is None
    with pytest.raises(Exception, match="unknown atlas encoding"):
        parse_encoding("rope_w8")
    from formal_rope.atlas.languages import build_language_set

    languages = build_language_set("registry")
    request = atlas_request(["nope", "rope_p", "rope_w8+nope"], seeds=2)
    configs = atlas_configs(languages, request.encodings, request.recipe)
    assert len(configs) == planned_runs(len(languages), request.encodings, 2)
    labels = {encoding_label(config) for config in configs}
    assert labels == {"nope", "rope_p", "rope_w8+nope"}
    assert all(config.train_near_miss_fraction == 1.0 for config in configs)
    periods = {config.language: config.periods for config in configs if config.pe == "rope_p"}
    assert periods["ab_star"] == (2,) and periods["parity"] == (2,)  # parity: outside LTL[P,MOD], the fallback
    # Issue 43.4: no periodic run rotates nothing; an LTL[P] language (least period 1) gets period 2.
    ltl_p = [entry.language for entry in languages if entry.ltl_p]
    assert ltl_p and all(periods[language] == (2,) for language in ltl_p)
    with_sipe = atlas_configs(languages, atlas_request(["rope_p", "sipe_p"], seeds=1).encodings, request.recipe)
    assert all(config.periods != (1,) and min(config.periods) >= 2 for config in with_sipe)


def test_atlas_dry_run_prints_the_run_count(capsys):
    from tests.cli_support import run_main

    code, out, _ = run_main(capsys, ["atlas", "--dry-run", "--no-estimate", "--set", "registry", "--seeds", "3"])
    assert code == 0 and "27 languages, 4 encodings, 3 seeds: 324 runs" in out


def test_the_dry_run_is_the_plan_the_run_runs(capsys, monkeypatch, tmp_path):
    """The dry run builds the plan the real run builds: the same languages (a repeated one left out,
    and said so), the same runs; it refuses what the build refuses."""
    from formal_rope.atlas.plan import atlas_request, plan_atlas
    from formal_rope.commands import atlas as atlas_command
    from tests.cli_support import run_main

    listed = tmp_path / "tiny.txt"
    listed.write_text("(ab)*\naa_star\n(ab)*\n")
    spec = f"registry+file:{listed}"
    argv = ["atlas", "--set", spec, "--pe", "nope,rope", "--seeds", "1", "--out", str(tmp_path / "out")]
    code, out, _ = run_main(capsys, argv + ["--dry-run", "--no-estimate", "--json"])
    dry = json.loads(out)
    plan = plan_atlas(spec, 0, atlas_request(["nope", "rope"], seeds=1))
    assert code == 0 and dry["dropped"] == [entry.id for entry in plan.dropped] and "user/tiny/2" in dry["dropped"]
    assert dry["languages"] == len(plan.languages) == 27 + 3 - len(plan.dropped)
    assert dry["runs"] == len(plan.configs) == dry["languages"] * 2

    planned = []

    def stop(configs, out, console, **options):
        planned.append(len(configs))
        raise KeyboardInterrupt

    monkeypatch.setattr(atlas_command, "run_with_progress", stop)
    code, _, errors = run_main(capsys, argv)
    said = f"{dry['languages']} languages, 2 encodings, 1 seeds: {dry['runs']} runs"
    assert code == 130 and planned == [dry["runs"]] and said in errors
    for bad, message in (("generated:family=counting,count=200", "only"),
                         ("generated:family=ltl_p_mod,period=2/2,count=1", "period 2 is given twice"),
                         ("generated:family=ltl_p,count=1,alphabets=a", "at least 2"),
                         ("generated:family=ltl_p,count=1+generated:family=ltl_p,count=1", "twice"),
                         (f"file:{tmp_path / 'missing.txt'}", "cannot read language list")):
        code, _, errors = run_main(capsys, ["atlas", "--set", bad, "--dry-run", "--no-estimate"])
        assert code == 2 and message in errors, (bad, errors)
    code, _, errors = run_main(capsys, ["atlas", "--seeds", "1000000000", "--dry-run"])
    assert code == 2 and "100,000" in errors


def test_make_atlas_regenerates_the_page(synthetic, tmp_path):
    spec = importlib.util.spec_from_file_location("make_atlas", REPO / "docs" / "make_atlas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = ("# The atlas\n\n<!-- atlas verdict -->\nnot run yet\n<!-- end atlas verdict -->\n\n## Results\n\n"
            "<!-- atlas results -->\n<!-- end atlas results -->\n")
    text = module.regenerate(page, synthetic, tmp_path / "atlas.png")
    assert "NoPE = LTL[P] (Li & Cotterell 2025): of 2 languages predicted not expressible, a failure was found on 1 " \
        "(refuted, as the theory says) and not found on 1 (`Σ*a`" in text
    assert "does not hold" not in text
    assert "### Agreement per encoding" in text and "![Success rate" in text and (tmp_path / "atlas.png").is_file()
    assert module.regenerate(text, synthetic, None) == text  # stable: --check sees no change
    assert (REPO / "docs" / "atlas.md").read_text().count("<!-- atlas results -->") == 1


def test_atlas_trains_languages_together_unless_told_otherwise(capsys, monkeypatch, tmp_path):
    # The atlas is hundreds of small runs: its `--pack auto` (the default) mixes languages
    # (auto/languages); a size without /languages keeps them apart. The sweep itself is replaced
    # here: what matters is the pack it is asked for.
    from formal_rope.commands import atlas as atlas_command
    from formal_rope.scheduling.packs import parse_pack
    from tests.cli_support import run_main

    asked = []

    def stop(configs, out, console, **options):
        asked.append(options["pack"])
        raise KeyboardInterrupt

    monkeypatch.setattr(atlas_command, "run_with_progress", stop)
    listed = tmp_path / "languages.txt"
    listed.write_text("(ab)*\n(aa)*\n")
    argv = ["atlas", "--set", f"file:{listed}", "--pe", "nope", "--seeds", "1", "--out", str(tmp_path / "out")]
    for extra in ([], ["--pack", "auto"], ["--pack", "4"]):
        code, _, _ = run_main(capsys, argv + extra)
        assert code == 130
    assert asked == [parse_pack("auto/languages")] * 2 + [parse_pack("4")]
