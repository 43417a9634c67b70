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
