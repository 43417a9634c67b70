"""Each run resolved once (`training.resolve`): on the train, sweep and atlas paths, a run's
language is checked for balanced batches, its periods resolved and its init_from checkpoint
checked at most once, counted by wrapping the functions that do it; the atlas trains on the DFAs
its language set built (no language is resolved from its text again)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from cli_support import run_main
from formal_rope.atlas.languages import parse_set_spec
from formal_rope.atlas.plan import ATLAS_RECIPE, AtlasRecipe, AtlasRequest, parse_encoding, plan_atlas
from formal_rope.run_config import RunConfig
from formal_rope.runs import run_training
from formal_rope.sweeps.checks import resolve_grid
from formal_rope.sweeps.plan import GridRequest, plan_sweep
from formal_rope.sweeps.results import read_results
from formal_rope.sweeps.runner import run_sweep
from formal_rope.training import init_from, resolve

TINY = dict(layers=1, d_model=8, heads=2, steps=2, batch_size=8, test_min_length=41, test_max_length=42,
            n_per_length=4, nnch_samples=0)


@pytest.fixture
def counted(monkeypatch):
    """Calls of the once-per-run steps, by run id (and of resolving a language from its text)."""
    calls: dict[str, Counter] = {name: Counter() for name in
                                 ("check_trainable", "resolve_periods", "check_init_source", "resolve_dfa")}

    def counting(module, name, key):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name][key(*args)] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counting(resolve, "check_trainable", lambda config, dfa: config.run_id())
    counting(resolve, "resolve_periods", lambda config, dfa: config.run_id())
    counting(resolve, "resolve_dfa", lambda config: (config.language, config.alphabet))
    for module in (resolve, init_from):  # resolution's own, and load_init_weights' when given no checked source
        counting(module, "check_init_source", lambda value, folder, alphabet=None: value)
    torch.set_num_threads(1)
    return calls


def _source_checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "source.zip"
    run_training(RunConfig("(ab)*", pe="rope_p", periods=(2,), **TINY), progress=False, checkpoint_path=path)
    return path


def test_train_resolves_its_run_once(tmp_path, capsys, monkeypatch, counted):
    source = _source_checkpoint(tmp_path)
    monkeypatch.chdir(tmp_path)
    for counter in counted.values():
        counter.clear()
    settings = [f"--set={name}={value}" for name, value in TINY.items()]
    code, _, stderr = run_main(capsys, ["train", "--lang", "(ab)*", "--pe", "rope_p", "--init-from", str(source),
                                        "--out", str(tmp_path / "continued.zip"), "--quiet", *settings])
    assert code == 0, stderr
    (run_id,) = counted["resolve_periods"]
    assert counted["resolve_periods"][run_id] == counted["check_trainable"][run_id] == 1
    assert counted["check_init_source"] == Counter({str(source): 1})  # not once by train and again by the pack
    assert sum(counted["resolve_dfa"].values()) == 1


def test_a_sweep_resolves_each_run_once_in_its_check_and_trains_it_as_resolved(tmp_path, counted):
    plan = plan_sweep(GridRequest(languages=("(ab)*", "(aa)*"), pes=("rope_p", "nope"), seeds=2, settings=dict(TINY)))
    ids = {config.run_id() for config in plan.configs}
    assert len(ids) == 8 and len(plan.runs) == 8
    summary = run_sweep(list(plan.configs), tmp_path / "out", resolved=plan.runs)
    assert summary.completed == 8
    assert set(counted["resolve_periods"]) == ids and set(counted["resolve_periods"].values()) == {1}
    # one check per language and training range: at most once per run
    assert max(counted["check_trainable"].values()) == 1 and len(counted["check_trainable"]) == 2
    assert counted["resolve_dfa"] == Counter({("(ab)*", None): 1, ("(aa)*", None): 1})
    # The periods the runs trained with are those resolved in the check.
    runs = read_results(tmp_path / "out").runs
    assert sorted(runs.loc[runs.pe == "rope_p", "periods"]) == ["2"] * 4


def test_a_sweep_given_configs_resolves_them_in_their_packs_once(tmp_path, counted):
    configs = list(plan_sweep(GridRequest(languages=("(ab)*",), pes=("rope_p",), seeds=2,
                                          settings=dict(TINY))).configs)
    for counter in counted.values():
        counter.clear()
    run_sweep(configs, tmp_path / "out")  # no resolved runs: each pack resolves its own, once
    assert set(counted["resolve_periods"].values()) == {1} and len(counted["resolve_periods"]) == 2


def test_the_atlas_resolves_each_run_once_on_the_dfas_its_set_built(tmp_path, counted):
    listing = tmp_path / "languages.txt"
    listing.write_text("(ab)*\n(aa)*\tab\n")
    spec = parse_set_spec(f"file:{listing}")
    recipe = AtlasRecipe(seeds=1, settings={**ATLAS_RECIPE, **TINY})
    request = AtlasRequest((parse_encoding("nope"), parse_encoding("rope_p")), recipe, None)
    plan = plan_atlas(spec, 0, request)
    assert len(plan.configs) == 4 and len(plan.languages.dfas) == 2
    resolved = resolve_grid(list(plan.configs), "atlas", dfas=plan.dfas)
    assert sum(counted["resolve_dfa"].values()) == 0  # the set's DFAs, not the text again
    for run, entry_dfa in zip(resolved.runs, [dfa for dfa in plan.languages.dfas for _ in range(2)]):
        assert run.dfa is entry_dfa
    summary = run_sweep(list(plan.configs), tmp_path / "out", resolved=resolved.runs)
    assert summary.completed == 4
    assert set(counted["resolve_periods"].values()) == {1} and len(counted["resolve_periods"]) == 4
    assert max(counted["check_trainable"].values()) == 1
    assert sum(counted["resolve_dfa"].values()) == 0


def test_the_sets_dfas_are_those_the_runs_would_resolve_from_text():
    # What makes handing them over safe: the same tables, state for state (so the same strings are drawn).
    listing_spec = parse_set_spec("registry")
    languages = listing_spec.build(0)
    for entry, dfa in list(zip(languages.entries, languages.dfas))[:8]:
        text_dfa = resolve.resolve_dfa(RunConfig(entry.language, alphabet=entry.alphabet))
        assert dfa.alphabet == text_dfa.alphabet and dfa.start == text_dfa.start
        assert np.array_equal(dfa.transitions, text_dfa.transitions)
        assert np.array_equal(dfa.accepting, text_dfa.accepting)


def test_a_set_spec_is_parsed_once_into_its_size_per_cell_draw_and_build():
    spec = parse_set_spec("mlregtest:sizes=4,classes=SL+registry")
    drawn = spec.with_per_cell(1)
    assert drawn.text == "mlregtest:per_cell=1,sizes=4,classes=SL+registry"
    languages = drawn.build(0)
    assert languages.spec == drawn.text and len(languages.dfas) == len(languages.entries)
    assert drawn.size(0) >= len(languages)
    assert parse_set_spec(drawn) is drawn
