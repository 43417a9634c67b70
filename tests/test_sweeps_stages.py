"""Staged recipes in sweep files (issue 21): a [[variants]] stage continues from an earlier variant's
run at the same grid point (RunConfig.init_from = its id), and the runner trains it after its
source, keeping the source's checkpoint in OUT/models; paper 000 E.6's preset (`reproduce e6`)."""

from __future__ import annotations

import pytest

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.grid import expand_grid, load_sweep_file, paper_sweep_path
from formal_rope.sweeps.units import stage_waves

TWO_STAGES = """
name = "two-stage"
languages = ["(ab)*"]
pes = ["rope"]
scale = "quick"

[quick]
layers = 2
d_model = 16
heads = 2
steps = 20
batch_size = 16
warmup_steps = 0
n_per_length = 4
test_min_length = 41
test_max_length = 42
seeds = 1
window = [3, -1]

[[variants]]
name = "fixed"
layer_pe = ["jof_fixed", "nope"]

[[variants]]
name = "projected"
continue_from = "fixed"
layer_pe = ["jof_projected", "nope"]
steps_scale = 0.5
lr_scale = 0.1
"""


@pytest.fixture
def two_stages(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text(TWO_STAGES)
    spec, _ = load_sweep_file(path)
    return spec, expand_grid(spec)


def test_a_stage_continues_from_its_source_variant(two_stages):
    spec, (fixed, projected) = two_stages
    assert fixed.layer_pe == ("jof_fixed", "nope") and fixed.init_from is None and fixed.steps == 20
    assert projected.init_from == fixed.run_id() and projected.steps == 10
    assert projected.lr == pytest.approx(fixed.lr * 0.1) and projected.layer_pe == ("jof_projected", "nope")
    assert [[c.run_id() for c in wave] for wave in stage_waves([projected, fixed])] == [
        [fixed.run_id()], [projected.run_id()]]
    # Three stages: three waves; runs without stages: one wave, order kept.
    third = RunConfig("(ab)*", init_from=projected.run_id())
    assert [len(wave) for wave in stage_waves([third, projected, fixed])] == [1, 1, 1]
    plain = [RunConfig("(ab)*", seed=s) for s in range(3)]
    assert stage_waves(plain) == [plain]


def test_the_runner_trains_a_stage_after_its_source(two_stages, tmp_path):
    from formal_rope.sweeps.report import label_variants
    from formal_rope.sweeps.results import read_results
    from formal_rope.sweeps.runner import run_sweep

    spec, (fixed, projected) = two_stages
    out = tmp_path / "out"
    started = []
    summary = run_sweep([projected, fixed], out, workers=1,  # the stage first: the runner reorders
                        on_event=lambda kind, config, _result: started.append(config.run_id()) if kind == "start"
                        else None)
    assert summary.completed == 2 and summary.statuses == {"ok": 2}
    assert started == [fixed.run_id(), projected.run_id()]
    assert (out / "models" / f"{fixed.run_id()}.zip").is_file()  # the source's checkpoint, for its stage
    assert not (out / "models" / f"{projected.run_id()}.zip").exists()  # no run continues from this one
    runs = read_results(out).runs
    continued = runs[runs["run_id"] == projected.run_id()].iloc[0]
    assert continued["init_from"] == fixed.run_id() and "init_from" in continued["warnings"]
    labelled = label_variants(runs, spec.variants, spec.overrides)
    assert dict(zip(labelled["run_id"], labelled["variant"])) == {fixed.run_id(): "fixed",
                                                                  projected.run_id(): "projected"}
    # A rerun skips both; a stage whose source is neither pending nor kept is refused before anything runs.
    assert run_sweep([projected, fixed], out, workers=1).skipped == 2
    with pytest.raises(FormalRopeError, match=f"continues from run {fixed.run_id()}"):
        run_sweep([projected], tmp_path / "other", workers=1)


def test_the_e6_preset_is_paper_000s_hybrid_with_the_staged_recipe():
    spec, _ = load_sweep_file(paper_sweep_path("e6"), "quick")
    configs = expand_grid(spec)
    assert len(configs) == 5 * 2 * 6  # 5 languages x 2 seeds x 6 variants (3 stages)
    assert {c.language for c in configs} == {"(aa)*", "(ab)*", "Σ*a", "aΣ*", "Σ*abΣ*"}
    for config in configs:
        assert config.layers == 6 and config.layer_windows() == (32,) * 5 + (None,)
        assert config.layer_encodings()[-1] == "nope" and config.test_max_length == 500
    by_id = {c.run_id(): c for c in configs}
    final = [c for c in configs if c.pe == "jof_projected"]
    assert len(final) == 10
    for config in final:
        second = by_id[config.init_from]
        first = by_id[second.init_from]
        assert second.pe == first.pe == "jof_fixed" and first.init_from is None
        assert (first.steps, second.steps, config.steps) == (667, 333, 333)
        assert (first.lr, second.lr, config.lr) == pytest.approx((5e-3, 2e-3, 5e-4))
        assert (first.language, first.seed) == (config.language, config.seed)
    paper, _ = load_sweep_file(paper_sweep_path("e6"), "paper")
    steps = sorted({c.steps for c in expand_grid(paper)})
    assert steps == [49995, 100005, 150000]  # stages 1 + 2: 150,000 steps, as the other encodings train
