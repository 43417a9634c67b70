"""The atlas's constructed models: the compiled model of each expressible language, measured like a run."""

from __future__ import annotations

import json

import pandas as pd

from formal_rope.atlas.constructed import (
    CACHE_FILE,
    constructed_models,
    expressible_languages,
    read_constructed,
)
from formal_rope.run_config.config import RunConfig


def _runs(rows):
    return pd.DataFrame([
        {"predicted": predicted, "pe": pe,
         "config": json.dumps(RunConfig(language=language, pe=pe, seed=seed, test_min_length=41, test_max_length=44,
                                        n_per_length=4).to_dict())}
        for language, pe, predicted, seed in rows])


def test_only_expressible_nope_and_rope_p_languages_are_constructed():
    runs = _runs([("ltl:P(b & P(a))", "nope", "expressible", 0), ("ltl:P(b & P(a))", "nope", "expressible", 1),
                  ("ltl:P(b & P(a))", "rope_p", "expressible", 0), ("(aa)*", "nope", "not_expressible", 0),
                  ("ltl:P(a) & MOD_2^0", "rope", "expressible", 0)])
    assert [language for language, _, _ in expressible_languages(runs)] == ["ltl:P(b & P(a))"]


def test_constructed_models_are_right_at_every_tested_length_and_cached(tmp_path):
    runs = _runs([("ltl:P(b & P(a))", "nope", "expressible", 0), ("re:(ab)*", "rope_p", "expressible", 0)])
    seen = []
    models = constructed_models(tmp_path, runs, budget=8, on_language=seen.append)
    assert [model.status for model in models] == ["ok", "ok"]
    assert [model.method for model in models] == ["given", "search"]
    for model in models:
        assert model.n_star == model.n_star_worst == model.longest == 44
        assert model.failure is None and model.strings_tried >= 4 * 4
        assert model.layers >= 1 and model.d_model > len(model.alphabet)
    assert (tmp_path / CACHE_FILE).is_file() and len(read_constructed(tmp_path)) == 2
    again = constructed_models(tmp_path, runs, budget=8, compute=False)
    assert again == models  # read back from the cache, not recomputed


def _folder(tmp_path):
    from formal_rope.sweeps.results import write_run
    from tests.test_atlas_new_user import _run

    out = tmp_path / "atlas"
    write_run(out, *_run("ltl:P(b & P(a))", 0, 6))
    write_run(out, *_run("ltl:P(b & P(a))", 1, 4))  # the second seed failed beyond 4: not learned
    write_run(out, *_run("(a|b)*aa(a|b)*", 0, 6))  # not expressible: never constructed
    return out


def test_the_atlas_report_builds_caches_and_shows_the_constructed_column(tmp_path, capsys):
    from tests.cli_support import run_main

    out = _folder(tmp_path)
    code, printed, _ = run_main(capsys, ["atlas", "--report-only", str(out)])
    assert code == 0 and "Constructed models" not in printed and not (out / CACHE_FILE).exists()
    code, printed, errors = run_main(capsys, ["atlas", "--report-only", str(out), "--constructed",
                                              "--worst-case-budget", "8"])
    assert code == 0, errors
    assert "constructed ltl:P(b & P(a)): ok, N* 6/6 of 6" in errors
    row = next(line for line in printed.splitlines() if line.startswith("| `ltl:P(b & P(a))`"))
    assert "3 layers" in row and "6/6 of 6" in row and "6 (1/2 learned)" in row
    assert "for 1 of the 1 languages predicted expressible" in printed
    assert [model.language for model in read_constructed(out).values()] == ["ltl:P(b & P(a))"]
    # without --constructed the cached models are shown, nothing recomputed; --json carries them
    code, printed, errors = run_main(capsys, ["atlas", "--report-only", str(out), "--json", "--worst-case-budget",
                                              "8", "--constructed"])
    payload = json.loads(printed)
    assert code == 0 and "constructed ltl" not in errors
    assert payload["constructed_summary"]["right"] == 1 and payload["constructed"][0]["n_star_worst"] == 6
    assert payload["constructed"][0]["budget"] == 8
    # a model searched at another budget still answers (it says its budget): nothing is rebuilt
    code, printed, errors = run_main(capsys, ["atlas", "--report-only", str(out), "--constructed"])
    assert code == 0 and "constructed ltl" not in errors and "(budget 8)" in printed


def test_constructed_is_refused_where_nothing_is_built(tmp_path, capsys):
    from tests.cli_support import run_main

    out = _folder(tmp_path)
    code, _, errors = run_main(capsys, ["atlas", "--report-only", str(out), "--worst-case-budget", "8"])
    assert code == 2 and "--worst-case-budget has no effect with --report-only" in errors
    code, _, errors = run_main(capsys, ["atlas", "--dry-run", "--constructed", "--no-estimate", "--out", str(out)])
    assert code == 2 and "--constructed has no effect with --dry-run" in errors
    code, _, errors = run_main(capsys, ["atlas", "--follow-up", "--constructed", "--out", str(out)])
    assert code == 2 and "--constructed has no effect with --follow-up" in errors


def test_the_atlas_page_shows_the_cached_constructed_models(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    from formal_rope.atlas.plan import DEFAULT_BUDGET
    from formal_rope.sweeps.results import read_results

    out = _folder(tmp_path)
    spec = importlib.util.spec_from_file_location("make_atlas", Path(__file__).parent.parent / "docs" / "make_atlas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = ("<!-- atlas verdict -->\n<!-- end atlas verdict -->\n<!-- atlas results -->\n<!-- end atlas results -->\n"
            "<!-- atlas constructed -->\n<!-- end atlas constructed -->\n")
    before = module.regenerate(page, out, None)
    assert "No constructed models measured yet" in before and "Constructed:" not in before
    constructed_models(out, read_results(out).runs, DEFAULT_BUDGET)  # what --constructed caches
    after = module.regenerate(page, out, None)
    assert "Constructed: for 1 of the 1 languages predicted expressible" in after
    assert "| `ltl:P(b & P(a))` | given, 5 nodes: 3 layers" in after
    assert module.regenerate(after, out, None) == after


def test_a_large_model_can_be_measured_at_every_kth_length_and_says_so():
    import pytest

    from formal_rope.atlas.constructed import construct_and_measure, measured_lengths
    from formal_rope.errors import FormalRopeError

    config = RunConfig(language="ltl:P(b & P(a))", pe="nope", test_min_length=41, test_max_length=44, n_per_length=4)
    assert measured_lengths(config, 1) == [41, 42, 43, 44]
    assert measured_lengths(config, 2) == [41, 43, 44]  # the longest is always measured
    with pytest.raises(FormalRopeError, match="stride"):
        measured_lengths(config, 0)
    model = construct_and_measure(config.language, (), config, budget=2, stride=2)
    assert (model.lengths_measured, model.lengths_tested, model.budget) == (3, 4, 2)
    assert model.n_star == model.n_star_worst == 44 and model.strings_tried >= 3 * 4


def test_the_results_page_shows_the_constructed_models_of_an_atlas(tmp_path):
    from formal_rope.atlas.plan import DEFAULT_BUDGET
    from formal_rope.atlas.render import agreement_cells_of_runs, constructed_cells_of_folder
    from formal_rope.sweeps.results import ATLAS_LANGUAGES_FILE, read_results
    from formal_rope.sweeps.results_page import write_results_page

    out = _folder(tmp_path)
    (out / ATLAS_LANGUAGES_FILE).write_text("[]\n")  # what marks the folder as an atlas's
    page = write_results_page(out, tmp_path / "page.html", atlas_table=agreement_cells_of_runs,
                              constructed_table=constructed_cells_of_folder)
    assert 'id="constructed"' not in page.read_text()  # nothing measured yet: no section
    constructed_models(out, read_results(out).runs, DEFAULT_BUDGET)
    text = write_results_page(out, tmp_path / "page.html", atlas_table=agreement_cells_of_runs,
                              constructed_table=constructed_cells_of_folder).read_text()
    assert 'id="constructed"' in text and "constructed-table" in text
    assert "ltl:P(b &amp; P(a))" in text and "6/6 of 6" in text and "6 (1/2 learned)" in text
