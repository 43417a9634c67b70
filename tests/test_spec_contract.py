"""The exact, machine-checked parts of the SPEC that external checks rely on: defaults, names and
conventions, each test naming its SPEC section. Behaviour is tested in the stage test files; these
tests pin the values a contract checker reads (CLI defaults, config defaults, names, spellings)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import typer

from formal_rope.automata import accepts, language_dfa
from formal_rope.cli import app
from formal_rope.evaluation.length_generalization import n_star
from formal_rope.lang import parse_ltl
from formal_rope.lang.source import resolve_language
from formal_rope.precision.formats import f_large, parse_format
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import POSITIONAL_ENCODINGS
from formal_rope.run_config.fields import RUN_FIELDS
from formal_rope.sampling import test_set as build_test_set


def _option_defaults(command: str) -> dict:
    """{--option: default} of one CLI command, read from the real Typer app."""
    click_command = typer.main.get_command(app).commands[command]
    return {p.opts[0]: p.default for p in click_command.params if p.opts and p.opts[0].startswith("--")}


def test_spec_1_mod_counts_positions_from_one_and_atoms_are_false_at_the_readout():
    """SPEC §1: readout at N+1; MOD₂⁰ at the readout means N odd; every atom is false at N+1."""
    words = ["", "a", "ab", "aba", "abab"]
    assert list(accepts(language_dfa(resolve_language("ltl:MOD_2^0", "ab")), words)) == [
        False, True, False, True, False
    ]
    assert not any(accepts(language_dfa(resolve_language("ltl:a", "ab")), ["a", "ba", "aa"]))


@pytest.mark.parametrize(
    "spelling, ascii_form",
    [
        ("¬a ∧ b", "!a & b"), ("~a & b", "!a & b"), ("a ∨ b", "a | b"), ("a → b", "a -> b"),
        ("a ↔ b", "a <-> b"), ("⊤ & a", "true & a"), ("⊥ | a", "false | a"), ("P a", "P(a)"),
        ("Y^{3}(a)", "Y^3(a)"), ("MOD_{3}^{1} & a", "MOD(3,1) & a"),
    ],
)
def test_spec_2_every_listed_spelling_parses_to_the_ascii_form(spelling, ascii_form):
    """SPEC §2 table: all spellings of a construct are accepted and mean the same."""
    assert parse_ltl(spelling) == parse_ltl(ascii_form)


def test_spec_2_precedence_unary_since_and_or_implies_iff():
    """SPEC §2: unary operators > S > ∧ > ∨ > → > ↔."""
    assert parse_ltl("!a S b & c | d -> e <-> f") == parse_ltl("((((((!a) S b) & c) | d) -> e) <-> f)")


def test_spec_4_sampling_defaults():
    """SPEC §4: 512 strings per length, half of the negatives near-misses, test lengths 41..500,
    balanced halves when both classes exist at the length."""
    defaults = _option_defaults("sample")
    assert (defaults["--n"], defaults["--near-miss"], defaults["--lengths"]) == (512, 0.5, "41..500")
    labelled = build_test_set(language_dfa(resolve_language("contains_ab")), 41)
    assert len(labelled) == 512 and int(labelled.labels.sum()) == 256
    assert labelled.n_near_miss == 128 and not labelled.labels[labelled.near_miss].any()


@pytest.mark.parametrize(
    "name, bits, value",
    [("fp32", (8, 23), None), ("bf16", (8, 7), 93.0), ("fp16", (5, 10), 17.34375), ("fp8e4m3", (4, 3), None),
     ("fp8e5m2", (5, 2), None), ("e6m9", (6, 9), None)],
)
def test_spec_5_format_names_bits_and_f_large(name, bits, value):
    """SPEC §5: the named formats' (E, M) and f_large; eXmY for any other format."""
    fmt = parse_format(name)
    assert (fmt.exponent_bits, fmt.mantissa_bits) == bits
    if value is not None:
        assert f_large(name) == value
    if name == "fp32":
        assert f_large(name) == float(np.nextafter(np.float32(150 * np.log(2)), np.float32(np.inf)))


def test_spec_6_compile_verifies_to_2000_by_default_and_reads_a_formula():
    """SPEC §6: sampled verification up to --verify-to (default 2000)."""
    assert _option_defaults("compile")["--verify-to"] == 2000


def test_spec_8_run_config_defaults_are_the_core_papers():
    """SPEC §8: 5 layers, d_model 64, 8 heads, FFN 4×, lr in {1e-4, 3e-4, 5e-4}, batch 128,
    grad-norm clip 1, training lengths 0..40, test lengths 41..500, 512 strings per length."""
    config = RunConfig(language="(ab)*")
    assert (config.layers, config.d_model, config.heads, config.ffn_mult) == (5, 64, 8, 4)
    assert config.lr in (1e-4, 3e-4, 5e-4) and config.batch_size == 128 and config.grad_clip == 1.0
    assert (config.train_min_length, config.train_max_length) == (0, 40)
    assert (config.test_min_length, config.test_max_length, config.n_per_length) == (41, 500, 512)


def test_spec_8_positional_encoding_names():
    """SPEC §8: the encoding names accepted by --pe."""
    assert set(POSITIONAL_ENCODINGS) == {
        "nope", "sipe", "sipe_p", "rope", "rope_p", "partial_rope", "jof_fixed", "jof_learned", "jof_projected",
    }


# A field -> an encoding it applies to, and a value other than its default.
_APPLIES_WITH = {"periods": "rope_p", "rope_fraction": "partial_rope"}
_OTHER_VALUE = {
    "alphabet": ("a", "b", "c"), "periods": (2,), "pe": "nope", "attention": "torch", "phase_precision": "fp32",
    "lr_schedule": "cosine", "eval_mode": "nstar", "language": "(aa)*", "test_lengths": (41, 45, 50),
    "data": "flare/ab", "data_hash": "0123456789abcdef",
    "layer_pe": ("rope", "rope", "rope", "rope", "nope"), "window": 32, "init_from": "0123456789abcdef",
    "sampling": "coverage", "objective": "next-set",
    # Other values a run can use (a RunConfig refuses the others when built): heads must split d_model
    # into heads of even dimension, the fractions lie in [0, 1].
    "d_model": 128, "heads": 4, "rope_fraction": 0.75, "test_near_miss_fraction": 0.25,
}


def test_spec_8_run_id_is_a_hash_of_every_config_field_that_applies():
    """SPEC §8 (documented reading in docs/sweeps.md): a run is fully described by its config and its
    id is a hash of it, so changing any field that applies to the run changes the id and equal
    configs share it; a field that does not apply to the run's encoding (NoPE's base, RoPE's
    periods, ...) is not part of the config (reset to its default, null in to_dict) nor of the id."""
    assert RunConfig(language="(ab)*").run_id() == RunConfig(language="(ab)*").run_id()
    for field in RUN_FIELDS:
        config = RunConfig(language="(ab)*", pe=_APPLIES_WITH.get(field.name, "rope"))
        old = getattr(config, field.name)
        new = _OTHER_VALUE.get(field.name, old + 1 if isinstance(old, (int, float)) else None)
        assert config.with_(**{field.name: new}).run_id() != config.run_id(), field.name
    for pe in ("nope", "rope_p", "sipe_p"):
        at_one, at_five = RunConfig("(ab)*", pe=pe, base=1.0), RunConfig("(ab)*", pe=pe, base=5.0)
        assert at_one == at_five and at_one.run_id() == at_five.run_id() and at_one.to_dict()["base"] is None
    assert RunConfig("(ab)*", pe="rope", periods=(2,)) == RunConfig("(ab)*", pe="rope")
    assert RunConfig("(ab)*", pe="rope", rope_fraction=0.1) == RunConfig("(ab)*", pe="rope")
    assert RunConfig("(ab)*", pe="nope", phase_precision="fp32") == RunConfig("(ab)*", pe="nope")


def test_spec_8_run_ids_are_pinned_and_a_new_field_at_its_neutral_value_keeps_them(monkeypatch):
    """SPEC §8 (documented reading in docs/sweeps.md): the id hashes only the fields that apply and
    differ from their id-neutral value, so ids never change when a field is added (at the value that
    reproduces the old behaviour); these ids are pinned so results on disk stay recognised."""
    from formal_rope.run_config import config as config_module
    from formal_rope.run_config import fields as fields_module
    from formal_rope.run_config import sections
    from formal_rope.training.scales import apply_scale

    assert RunConfig("(ab)*").run_id() == "45d988f98a189371"
    # The quick scale of the previous version (half near-miss training negatives), written out.
    previous_quick = dict(layers=2, d_model=32, heads=4, steps=1000, batch_size=64, n_per_length=16, lr=5e-3,
                          lr_schedule="cosine", warmup_steps=50, train_near_miss_fraction=0.5)
    assert RunConfig("(aa)*", pe="rope_p", seed=1, **previous_quick).run_id() == "b404bd517e6d120e"
    assert apply_scale(RunConfig("(aa)*", pe="rope_p", seed=1), "quick").run_id() == "a7eac3da460c1197"
    assert RunConfig("Σ*a", pe="nope", base=1.0, test_lengths=(41, 45, 50)).run_id() == "bbbab77d4cc87bcd"
    # Every field has a neutral value, today equal to its default (changing either one is a new id scheme).
    assert fields_module.ID_NEUTRAL == {spec.name: spec.default for spec in RUN_FIELDS if spec.name != "language"}

    # A field added later: a section gains it, the flat order ends with it, its neutral value is its default.
    extended = dataclasses.make_dataclass(
        "Extended", [("new_knob", int, dataclasses.field(default=0))], bases=(sections.OptimisationSettings,),
        frozen=True,
    )
    knob = fields_module.FieldSpec("new_knob", "optimisation", "int", 0)
    monkeypatch.setitem(sections.SECTIONS, "optimisation", extended)
    monkeypatch.setattr(config_module, "FIELD_NAMES", (*fields_module.FIELD_NAMES, "new_knob"))
    monkeypatch.setattr(config_module, "RUN_FIELDS", (*fields_module.RUN_FIELDS, knob))
    monkeypatch.setitem(fields_module.FIELDS_BY_NAME, "new_knob", knob)
    monkeypatch.setitem(fields_module.ID_NEUTRAL, "new_knob", 0)
    monkeypatch.setattr(RunConfig, "new_knob", property(lambda config: config.optimisation.new_knob), raising=False)
    extended = RunConfig
    old = RunConfig("(aa)*", pe="rope_p", seed=1, steps=300)
    assert extended("(aa)*", pe="rope_p", seed=1, steps=300).run_id() == old.run_id()
    assert extended("(aa)*", pe="rope_p", seed=1, steps=300, new_knob=2).run_id() != old.run_id()


def test_spec_8_n_star_is_a_tested_length():
    """SPEC §8 (documented reading in docs/training.md): N* is the last tested length of the
    leading perfect run of lengths, so with sparse test lengths it never extends past a tested
    length; 0 when the first tested length is imperfect."""
    assert n_star([41, 45, 50], [1.0, 1.0, 0.5]) == 45
    assert n_star([41, 45, 50], [1.0, 1.0, 1.0]) == 50
    assert n_star([41, 45, 50], [0.99, 1.0, 1.0]) == 0


def test_spec_9_report_groups_by_language_pe_base_with_sample_std():
    """SPEC §9 (documented reading in docs/sweeps.md): max/mean/std of accuracy and N* per
    (language, PE, base); std is the sample std (ddof 1), and 0 for a single-run row; base-free
    encodings (nope) group without a base."""
    import pandas as pd

    from formal_rope.sweeps import aggregate

    runs = pd.DataFrame(
        {
            "language": ["(aa)*"] * 4, "pe": ["rope", "rope", "rope", "nope"], "base": [1.0, 1.0, 1e4, 1e4],
            "accuracy": [1.0, 0.5, 0.75, 0.5], "n_star": [500, 41, 60, 0], "status": ["ok"] * 4,
        }
    )
    rows = {(r.pe, r.base): r for r in aggregate(runs)}
    assert set(rows) == {("rope", 1.0), ("rope", 1e4), ("nope", None)}
    pair = rows[("rope", 1.0)]
    assert (pair.runs, pair.accuracy_max, pair.accuracy_mean, pair.n_star_max) == (2, 1.0, 0.75, 500.0)
    assert pair.accuracy_std == pytest.approx(np.std([1.0, 0.5], ddof=1))
    assert pair.n_star_std == pytest.approx(np.std([500, 41], ddof=1))
    assert rows[("rope", 1e4)].n_star_std == 0.0 and rows[("rope", 1e4)].accuracy_std == 0.0


def test_spec_8_sweep_paper_scale_is_the_papers_grid_and_plain_sweeps_are_quick(capsys):
    """SPEC §8/§9 (documented reading in docs/sweeps.md): `sweep --scale paper` runs the core paper's
    model and learning rates {1e-4, 3e-4, 5e-4}; a sweep without --scale runs at quick scale."""
    import json

    from cli_support import run_main

    code, out, _ = run_main(
        capsys, ["sweep", "--lang", "aa_star", "--pe", "nope", "--scale", "paper", "--dry-run", "--json"]
    )
    paper = json.loads(out)
    assert code == 0 and {run["lr"] for run in paper} == {1e-4, 3e-4, 5e-4} and len(paper) == 15
    assert {(r["layers"], r["d_model"], r["heads"], r["ffn_mult"], r["batch_size"], r["grad_clip"]) for r in paper} == {
        (5, 64, 8, 4, 128, 1.0)
    }
    code, out, _ = run_main(capsys, ["sweep", "--lang", "aa_star", "--pe", "nope", "--dry-run", "--json"])
    quick = json.loads(out)
    assert code == 0 and {run["layers"] for run in quick} == {2} and {run["d_model"] for run in quick} == {32}


@pytest.mark.parametrize(
    "spec, alphabet",
    [
        ("Σ*abΣ*", ("a", "b", "c")), ("re:Σ*abΣ*", ("a", "b", "c")), ("aΣ*", ("a", "b")),
        ("contains_ab_ltl", ("a", "b", "c")), ("ltl:a S b", ("a", "b")), ("P(b & Y(a))", ("a", "b")),
        (".*ab.*", ("a", "b")), ("(aa)*", ("a",)), ("c(ab)*", ("a", "b", "c")), ("ltl:P(a) & b", ("a", "b")),
    ],
)
def test_spec_2_default_alphabet_is_the_expressions_own_symbols_unless_a_registry_entry_is_named_or_typed(
    spec, alphabet
):
    """SPEC §2: an expression's alphabet is its own symbols; a registry alphabet applies only when
    the user names the entry or types one of the paper's five languages verbatim (then a note says
    which); --alphabet overrides both."""
    language = resolve_language(spec)
    assert tuple(language.alphabet) == alphabet
    registry_applied = language.name is not None and "registry's alphabet" in (language.detected or "")
    assert registry_applied == (spec in ("Σ*abΣ*", "re:Σ*abΣ*", "aΣ*", "contains_ab_ltl", "(aa)*"))
    assert tuple(resolve_language(spec, "abcd").alphabet) == ("a", "b", "c", "d")


@pytest.mark.parametrize("spec", ["P(a) S", "P(a) & Q(b)", "Y^2(a", "MOD_2^0 &", "a S !"])
def test_spec_2_a_bare_expression_with_a_temporal_application_is_a_formula_or_a_parse_error(spec):
    """SPEC §2: `P(a) S` used to be read as the regex PaS over {P, S, a}."""
    from formal_rope.errors import ExpressionError

    with pytest.raises(ExpressionError) as error:
        resolve_language(spec)
    assert error.value.column is not None and "re:" in error.value.message


def test_spec_3_classify_reports_every_class_the_spec_names(capsys):
    """SPEC §3: LTL[P], LTL[P,MOD] with its least k, star-free, L-/J-trivial, syntactic monoid
    size, and a witness for each failed class; (ab)* is LTL[P,MOD] with k = 2 and star-free."""
    import json

    from cli_support import run_main

    code, out, _ = run_main(capsys, ["classify", "ab_star", "--json"])
    result = json.loads(out)
    assert code == 0
    assert (result["ltl_p"], result["ltl_p_mod"], result["mod_k"], result["star_free"]) == (False, True, 2, True)
    assert (result["l_trivial"], result["j_trivial"], result["monoid_size"]) == (False, False, 6)
    assert {"ltl_p", "l_trivial", "j_trivial"} <= set(result["witness"])


def test_spec_7_certify_reports_n_max_and_the_papers_sufficient_bound(capsys):
    """SPEC §7: N_max^(k)(g, C, F) (ideal mode by default) next to the paper's bound C·δ_L(g) ≥ f_large.
    g = 2, C = 1e9: the competitor 355 positions back (2·355 ≈ 113·2π) first comes within f_large."""
    import json

    from cli_support import run_main

    code, out, _ = run_main(capsys, ["certify", "-g", "2", "-C", "1e9", "--json"])
    result = json.loads(out)
    assert code == 0 and result["mode"] == "ideal" and result["offset"] == 1 and result["format"] == "fp32"
    assert result["n_max"] == 354 and result["paper_sufficient_bound"] <= result["n_max"]
    assert result["f_large"] == f_large("fp32")


def test_spec_6_compile_json_reports_mode_certified_length_and_first_disagreement(capsys):
    """SPEC §5/§6: the compile report says which mode produced the result, the certified length of the
    Y^k heads, and the first disagreement (None when the model agrees with the DFA)."""
    import json

    from cli_support import run_main

    code, out, _ = run_main(
        capsys, ["compile", "P(a) & MOD_2^0", "-a", "ab", "--verify-to", "20", "--exhaustive", "4", "--json"]
    )
    result = json.loads(out)
    assert code == 0 and result["ok"] and result["mode"] == "emulated" and result["format"] == "fp32"
    assert result["first_disagreement"] is None and result["disagreements"] == 0
    assert result["certified_length"] is None  # no Y^k heads: exact at every length
