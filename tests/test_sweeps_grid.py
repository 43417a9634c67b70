"""Sweeps, the grid: expansion, run ids, sweep (TOML) files and their validation, known deviations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.grid import expand_grid, load_sweep_file
from sweeps_support import REPO, spec


def test_grid_expansion_counts_and_base_free_pes():
    configs = expand_grid(spec())
    # per language: nope and rope_p ignore the base (2 seeds x 2 lrs each), rope has 2 bases x 4.
    assert len(configs) == 2 * (4 + 4 + 8)
    assert len({c.run_id() for c in configs}) == len(configs)
    assert {c.base for c in configs if c.pe == "rope"} == {1.0, 1e4}
    assert all(c.steps == 3 for c in configs)
    assert {c.seed for c in configs} == {0, 1}


def test_run_id_is_a_hash_of_the_full_config():
    config = RunConfig(language="(ab)*", pe="rope", steps=10)
    assert config.run_id() == RunConfig(language="(ab)*", pe="rope", steps=10).run_id()
    assert config.run_id() != config.with_(steps=11).run_id()
    assert RunConfig.from_dict(config.to_dict()) == config


def test_bad_grid_values_are_user_errors():
    with pytest.raises(FormalRopeError, match="unknown positional encoding 'ropee'"):
        spec(pes=["ropee"])
    with pytest.raises(FormalRopeError, match="base must be > 0"):
        spec(bases=[0.0])
    with pytest.raises(FormalRopeError, match="periods must be positive"):
        spec(periods=[2, 0])


def test_toml_unknown_key_is_named_with_its_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nlanguages = ["(ab)*"]\npes = ["rope"]\n\n[quick]\nsteps = 5\nstepz = 6\n')
    with pytest.raises(FormalRopeError) as error:
        load_sweep_file(path)
    assert "stepz" in str(error.value) and f"{path}:7" in str(error.value)
    path.write_text('name = "x"\nlanguage = ["(ab)*"]\n')
    with pytest.raises(FormalRopeError, match=r"bad.toml:2: unknown key 'language'"):
        load_sweep_file(path)


@pytest.mark.parametrize("experiment", ["ablation", "ablation45", "stability", "joformer", "test_sets", "recipes",
                                        "e6", "hybrids"])
def test_experiment_files_expand_and_quote_the_papers_tables_exactly(experiment):
    # Our experiments' [reference] rows must be the paper's own rows (copied from the table files),
    # and every grid cell a variant labels must exist at quick and medium scale.
    from formal_rope.sweeps.grid import paper_sweep_path

    paper_rows = {}
    for table in ("table2", "table4", "table5"):
        for row in load_sweep_file(paper_sweep_path(table))[0].reference["rows"]:
            paper_rows.setdefault((row[0], row[1], row[2]), row)
    for scale in ("quick", "medium"):
        spec_, _ = load_sweep_file(paper_sweep_path(experiment), scale)
        configs = expand_grid(spec_)
        assert configs and len({c.run_id() for c in configs}) == len(configs)
        if spec_.variants and experiment != "hybrids":
            # at quick scale every variant changes the recipe; at medium some coincide
            cells = len(spec_.variants) * len(expand_grid(dataclasses.replace(spec_, variants=())))
            assert len(configs) == cells if scale == "quick" else len(configs) <= cells
        for row in (spec_.reference or {}).get("rows", []):
            assert str(paper_rows[(row[0], row[1], row[2])][3:]) == str(row[3:]), row


def test_the_hybrids_experiment_pairs_each_hybrid_with_its_pure_controls():
    from formal_rope.run_config.encodings import hybrid_label
    from formal_rope.sweeps.grid import paper_sweep_path

    spec_, _ = load_sweep_file(paper_sweep_path("hybrids"), "quick")
    configs = expand_grid(spec_)
    # 5 languages x 2 seeds x (NoPE, RoPE_P, RoPE_P+NoPE: no base) + (RoPE_NP, +NoPE, windowed: 2 bases each)
    assert len(configs) == 5 * 2 * (3 + 3 * 2)
    cells = {(hybrid_label(c.pe, c.layer_pe, c.window), c.base if c.applies("base") else None) for c in configs}
    assert cells == {("NoPE", None), ("RoPE_P", None), ("RoPE_P+NoPE(L2)", None),
                     *((label, base) for label in ("RoPE_NP", "RoPE_NP+NoPE(L2)", "RoPE_NP+NoPE(L2) w8(L1)")
                       for base in (100.0, 10000.0))}
    for config in configs:
        assert config.layers == 2 and config.steps == 1000 and config.layer_encodings()[1] in ("nope", config.pe)
        if config.is_hybrid():  # every hybrid's second layer is a global NoPE layer
            assert config.layer_encodings()[1] == "nope" and config.layer_windows()[1] is None
    # The pure controls are the quick recipe's own runs: the RoPE_NP control at 1e4 is Table 4/5's run.
    table5 = {c.run_id() for c in expand_grid(load_sweep_file(paper_sweep_path("table5"), "quick")[0])}
    assert {c.run_id() for c in configs if c.language == "Σ*a" and not c.is_hybrid()
            and c.pe == "rope" and c.base == 1e4} <= table5


@pytest.mark.parametrize("name", ["table2", "table4", "table5"])
def test_paper_sweep_files_load_at_both_scales(name):
    quick, _ = load_sweep_file(REPO / "sweeps" / f"{name}.toml", "quick")
    paper, _ = load_sweep_file(REPO / "sweeps" / f"{name}.toml", "paper")
    assert paper.overrides["layers"] == 5 and paper.overrides["d_model"] == 64 and paper.overrides["heads"] == 8
    assert paper.overrides["steps"] == 1_000_000 and paper.overrides["n_per_length"] == 512
    assert len(paper.seeds) == 5 and paper.lrs == (1e-4, 3e-4, 5e-4)
    for spec_ in (quick, paper):
        configs = expand_grid(spec_)
        assert all(c.test_min_length == 41 and c.test_max_length == 500 for c in configs)
    assert len(expand_grid(quick)) < len(expand_grid(paper))
    from formal_rope.training.scales import SCALES

    # Grid axes the file leaves out come from the scale preset.
    assert quick.lrs == tuple(SCALES["quick"]["lrs"])
    assert quick.seeds == tuple(SCALES["quick"]["seeds"])
    assert quick.reference["rows"]


@pytest.mark.parametrize(
    "body, message",
    [
        ('[quick]\nsteps = "many"\n', r"x.toml:4: 'steps' in \[quick\] must be an integer"),
        ("[quick]\nlr = 1e-3\n", r"'lr' in \[quick\] is a grid axis; set 'lrs'"),
        ('[quick]\nseeds = [0, "x"]\n', "'seeds' must be a count"),
        ('bases = ["big"]\n', "'bases' must hold numbers"),
        ("periods = [2.5]\n", "'periods' must be"),
        ("[reference]\nrows = [[1, 2]]\n", "every \\[reference\\] row must be"),
        # Stages of a staged recipe ([[variants]] continue_from / steps_scale / lr_scale).
        ('[[variants]]\nname = "b"\ncontinue_from = "a"\n', "earlier variant"),
        ('[[variants]]\nname = "a"\n[[variants]]\nname = "b"\ncontinue_from = "a"\nsteps = 5\nsteps_scale = 0.5\n',
         "both steps and steps_scale"),
        ('[[variants]]\nname = "a"\nlr_scale = 0\n', "lr_scale must be a number > 0"),
    ],
)
def test_toml_values_of_the_wrong_type_are_user_errors(tmp_path, body, message):
    # Regression: these raised ValueError tracebacks or were silently accepted (lr ignored).
    path = tmp_path / "x.toml"
    path.write_text('name = "x"\nlanguages = ["(ab)*"]\n' + body)
    with pytest.raises(FormalRopeError, match=message):
        load_sweep_file(path)


def test_toml_alphabet_string_is_split_into_symbols(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text('languages = ["(ab)*"]\nalphabet = "ab"\n')
    assert load_sweep_file(path)[0].alphabet == ("a", "b")


def test_sweep_file_axes_table(tmp_path):
    path = tmp_path / "ablation.toml"
    path.write_text(
        'languages = ["(ab)*"]\npes = ["rope_p", "nope"]\n[quick]\nseeds = [0]\n'
        '[axes]\ntrain_near_miss_fraction = [0.0, 0.5]\nlayers = [2, 5]\nperiods = [[2], "auto"]\n'
    )
    spec_, _ = load_sweep_file(path)
    configs = expand_grid(spec_)
    assert dict(spec_.axes)["layers"] == (2, 5)
    assert len(configs) == 2 * 2 * 2 + 2 * 2  # rope_p: x periods; nope has no periods
    for body, message in [
        ("[axes]\nlayerz = [1]\n", r"x.toml:4: unknown key 'layerz' in \[axes\]"),
        ('[axes]\nlayers = ["two"]\n', r"x.toml:4: 'layers' in \[axes\] must be an integer"),
        ("[axes]\nlayers = 2\n", "must be a non-empty list"),
        ("[axes]\npe = [\"rope\"]\n", "has its own grid key; use 'pes'"),
        ("[quick]\nlayers = 2\n[axes]\nlayers = [1, 2]\n", "both an \\[axes\\] entry and fixed"),
    ]:
        bad = tmp_path / "x.toml"
        bad.write_text('languages = ["(ab)*"]\npes = ["rope"]\n' + body)
        with pytest.raises(FormalRopeError, match=message):
            load_sweep_file(bad)


def test_every_known_deviation_points_to_an_existing_findings_section():
    # Issue 12.3: `reproduce` prints one line per known deviation pointing to its findings section.
    import re as regex

    from formal_rope.sweeps.deviations import DEVIATIONS, FINDINGS, deviation_lines

    findings = (Path(__file__).resolve().parent.parent / FINDINGS).read_text()
    anchors = {
        regex.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in regex.findall(r"^#+ (.+)$", findings, flags=regex.MULTILINE)
    }
    lines = [line for entries in DEVIATIONS.values() for line in entries]
    assert lines and deviation_lines("table2", "quick")
    for line in lines:
        anchor = regex.search(rf"{regex.escape(FINDINGS)}#([\w\-]+)", line)
        assert anchor and anchor.group(1) in anchors, (line, sorted(anchors))
    assert deviation_lines("table2", "paper") == []


def test_variants_are_known_by_run_id_even_where_they_collapse_to_plain_runs():
    """`variant_run_ids` names every run of the grid by its variant; `label_variants` uses it, so a
    variant whose layer_pe names one encoding in every layer (a plain NoPE or RoPE_P run, whose
    columns no longer show the variant's settings) is labelled too."""
    from collections import Counter

    import pandas as pd

    from formal_rope.sweeps.grid import paper_sweep_path, variant_run_ids
    from formal_rope.sweeps.report import label_variants

    spec_, _ = load_sweep_file(paper_sweep_path("hybrids"), "quick")
    names = variant_run_ids(spec_)
    configs = expand_grid(spec_)
    assert set(names) == {c.run_id() for c in configs}
    assert Counter(names.values()) == {"NoPE (control)": 10, "RoPE_NP (control)": 20, "RoPE_P (control)": 10,
                                       "RoPE_NP + NoPE": 20, "windowed RoPE_NP + global NoPE": 20,
                                       "RoPE_P + NoPE": 10}
    plain = [c for c in configs if c.pe in ("nope", "rope_p") and not c.is_hybrid()]
    frame = pd.DataFrame([{**c.to_dict(), "run_id": c.run_id()} for c in plain])
    by_settings = label_variants(frame, spec_.variants, spec_.overrides)
    by_id = label_variants(frame, spec_.variants, spec_.overrides, names)
    assert by_settings["variant"].isna().all()  # the collapsed variants' settings are not in the columns
    assert sorted(set(by_id["variant"])) == ["NoPE (control)", "RoPE_P (control)"]
    assert all(by_id["variant"] == [names[c.run_id()] for c in plain])
    # A staged recipe: each stage is its own variant by id (E.6's jof_projected stages).
    e6, _ = load_sweep_file(paper_sweep_path("e6"), "quick")
    assert Counter(variant_run_ids(e6).values())["jof_projected stage 3 (projected)"] == 10
