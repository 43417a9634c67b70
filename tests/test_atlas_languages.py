"""Atlas language sets: generated languages lie exactly in their intended class and are pairwise
inequivalent, every entry's text resolves (as the CLI resolves --lang/--alphabet) to the DFA its
verdicts describe, sets are reproducible under a seed, and MLRegTest samples cover every cell."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.atlas.generate import (
    FAMILIES,
    TEST_LENGTHS,
    TRAIN_LENGTHS,
    both_classes_nonempty,
    counting_regex,
    dfa_key,
    generate_family,
    in_family_class,
    random_formula,
)
from formal_rope.atlas.languages import (
    DEFAULT_SPEC,
    LOGIC_CLASSES,
    LanguageEntry,
    LanguageSet,
    build_language_set,
    entry_dfa,
    mlregtest_files,
    stratified_sample,
)
from formal_rope.automata import accepts, equivalent, language_dfa, load_att, ltl_accepts, minimize
from formal_rope.classes import classify
from formal_rope.errors import FormalRopeError
from formal_rope.lang import format_ltl, parse_ltl, resolve_language
from formal_rope.sampling.counts import count_strings

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def default_set() -> LanguageSet:
    return build_language_set("default", seed=0)


def _generated(language_set: LanguageSet, family: str | None = None) -> list[LanguageEntry]:
    return [e for e in language_set if e.source == "generated" and (family is None or e.family == family)]


def _words(alphabet, max_length):
    for length in range(max_length + 1):
        yield from ("".join(word) for word in itertools.product(alphabet, repeat=length))


def test_the_default_set_has_every_part_the_atlas_needs(default_set):
    assert len(default_set) >= 48
    assert default_set.spec == "default" and DEFAULT_SPEC.startswith("mlregtest:per_cell=")
    # MLRegTest: every (alphabet size, class) cell of data/mlregtest, both alphabets.
    cells = {(f.alphabet_size, f.language_class) for f in mlregtest_files()}
    sampled = Counter((e.alphabet_size, e.mlregtest_class) for e in default_set if e.source == "mlregtest")
    assert set(sampled) == cells and {size for size, _ in cells} == {4, 16} and set(sampled.values()) == {1}
    # Generated: LTL[P,MOD] \ LTL[P] of each period 2..5, LTL[P,Y] and LTL[P] languages, a counting control.
    periods = Counter(e.mod_k for e in _generated(default_set, "ltl_p_mod"))
    assert set(periods) == {2, 3, 4, 5} and min(periods.values()) >= 1
    for family in FAMILIES:
        assert _generated(default_set, family), family
    assert set(default_set.counts("logic_class")) == set(LOGIC_CLASSES)


def test_generated_languages_lie_exactly_in_their_intended_class(default_set):
    for entry in _generated(default_set):
        verdict = classify(entry_dfa(entry))  # re-decided from the text, not read from the entry
        if entry.family == "ltl_p":
            assert verdict.ltl_p, entry
        elif entry.family == "ltl_p_mod":
            assert not verdict.ltl_p and verdict.ltl_p_mod and verdict.mod_k == entry.period, entry
            assert verdict.witness["ltl_p"]["criterion"] == "PODFA"
        elif entry.family == "ltl_p_y":
            assert not verdict.ltl_p and not verdict.ltl_p_mod and verdict.star_free, entry
        else:
            assert not verdict.ltl_p_mod and not verdict.star_free, entry
        assert in_family_class(entry.family, verdict, entry.period)


def test_generated_languages_are_pairwise_inequivalent(default_set):
    generated = [(entry, entry_dfa(entry)) for entry in _generated(default_set)]
    assert len({dfa_key(dfa) for _, dfa in generated}) == len(generated)
    for (first, a), (second, b) in itertools.combinations(generated, 2):
        if set(first.alphabet) == set(second.alphabet):
            result = equivalent(a, b)
            assert not result.equivalent, (first.language, second.language)
            # The counterexample separates them: exactly one accepts it.
            word = "".join(result.counterexample)
            assert accepts(a, [word])[0] != accepts(b, [word])[0]


def test_every_entry_resolves_like_the_cli_to_the_dfa_its_verdicts_describe(default_set, monkeypatch):
    monkeypatch.chdir(REPO)  # .att entries name their files relative to the repository root
    for entry in default_set:
        resolved = resolve_language(entry.language, entry.alphabet)
        assert set(resolved.alphabet) == set(entry.alphabet) and len(resolved.alphabet) == entry.alphabet_size
        verdict = classify(language_dfa(resolved))
        assert (verdict.ltl_p, verdict.ltl_p_mod, verdict.star_free, verdict.mod_k, verdict.states) == (
            entry.ltl_p, entry.ltl_p_mod, entry.star_free, entry.mod_k, entry.states), entry.id
        assert set(verdict.witness) == set(entry.witness)
        # Self-contained: the text alone gives the same alphabet, so a sweep needs no --alphabet per language.
        assert resolve_language(entry.language).alphabet == entry.alphabet
        if entry.source == "mlregtest":  # the .att loader read directly agrees with the resolver
            assert equivalent(minimize(load_att(REPO / entry.language)), language_dfa(resolved)).equivalent


def test_generated_formulas_agree_with_the_direct_ltl_evaluator(default_set):
    formulas = [e for e in _generated(default_set) if e.language.startswith("ltl:")]
    assert len(formulas) >= 15
    for entry in formulas[::2]:
        formula = parse_ltl(entry.language.removeprefix("ltl:"))
        words = list(_words(entry.alphabet, 6 if entry.alphabet_size == 2 else 4))
        expected = [ltl_accepts(formula, list(word)) for word in words]
        assert list(accepts(entry_dfa(entry), words)) == expected, entry.language


def test_printed_formulas_reparse_to_the_same_formula(default_set):
    for entry in _generated(default_set):
        if entry.language.startswith("ltl:"):
            text = entry.language.removeprefix("ltl:")
            assert format_ltl(parse_ltl(text)) == text


@given(seed=st.integers(0, 10**6), family=st.sampled_from(["ltl_p", "ltl_p_mod", "ltl_p_y"]),
       depth=st.integers(0, 4), period=st.integers(2, 5))
def test_random_formulas_print_and_reparse_to_themselves(seed, family, depth, period):
    formula = random_formula(random.Random(seed), family, ("a", "b", "c"), depth, period)
    assert parse_ltl(format_ltl(formula)) == formula
    assert parse_ltl(format_ltl(formula, "unicode")) == formula


@pytest.mark.parametrize(("symbol", "alphabet", "modulus", "residue"),
                         [("a", ("a", "b"), 2, 0), ("b", ("a", "b"), 3, 1), ("c", ("a", "b", "c"), 3, 2),
                          ("a", ("a", "b", "c"), 4, 3)])
def test_counting_regexes_count_the_symbol(symbol, alphabet, modulus, residue):
    dfa = language_dfa(resolve_language("re:" + counting_regex(symbol, alphabet, modulus, residue)))
    assert dfa.alphabet == alphabet
    words = list(_words(alphabet, 6 if len(alphabet) == 2 else 5))
    assert list(accepts(dfa, words)) == [word.count(symbol) % modulus == residue for word in words]
    verdict = classify(dfa)
    assert in_family_class("counting", verdict, None) and not in_family_class("ltl_p_mod", verdict, modulus)


def test_family_classes_on_known_languages():
    def verdict(text, alphabet=None):
        return classify(language_dfa(resolve_language(text, alphabet)))

    assert in_family_class("ltl_p_mod", verdict("(aa)*"), 2)
    assert not in_family_class("ltl_p_mod", verdict("(aa)*"), 4)  # least k is 2, not a multiple
    assert not in_family_class("ltl_p_mod", verdict("P(a) & P(b)"), 1)  # in LTL[P]: a smaller class
    assert in_family_class("ltl_p", verdict("P(a) & P(b)"), None)
    assert in_family_class("ltl_p_y", verdict("Y(a)", "ab"), None)
    assert not in_family_class("ltl_p_y", verdict("P(a)", "ab"), None)
    assert in_family_class("counting", verdict("parity"), None)
    assert not in_family_class("counting", verdict("(ab)*"), None)
    with pytest.raises(FormalRopeError, match="unknown language family"):
        in_family_class("nope", verdict("parity"), None)


def test_both_classes_nonempty_matches_exact_counts(default_set):
    for entry in _generated(default_set)[::3] + [e for e in default_set if e.source == "mlregtest"][:3]:
        dfa = entry_dfa(entry)
        flags = both_classes_nonempty(dfa, (41, 55))
        exact = [count_strings(dfa, n, True) > 0 and count_strings(dfa, n, False) > 0 for n in range(41, 56)]
        assert list(flags) == exact, entry.id
        if entry.source == "generated":
            assert entry.balanced_fraction >= 0.2
            assert both_classes_nonempty(dfa, TRAIN_LENGTHS).mean() >= 0.2


def test_length_ranges_are_the_training_defaults():
    from formal_rope.run_config.config import RunConfig

    defaults = RunConfig(language="parity")
    assert TRAIN_LENGTHS[1] == defaults.train_max_length
    assert TEST_LENGTHS == (defaults.test_min_length, defaults.test_max_length)


def test_the_same_spec_and_seed_give_the_same_set_and_another_seed_another():
    spec = "generated:family=ltl_p_mod,period=3,count=3+mlregtest:per_cell=1,sizes=4+generated:family=ltl_p_y,count=2"
    first, again, other = (build_language_set(spec, seed) for seed in (0, 0, 1))
    assert first.entries == again.entries and [e.witness for e in first] == [e.witness for e in again]
    assert [e.language for e in first] != [e.language for e in other]
    assert {e.language for e in _generated(first)} != {e.language for e in _generated(other)}
    assert len(first) == 3 + 13 + 2


def test_generation_keeps_languages_new_across_calls():
    known: set = set()
    first = generate_family("ltl_p", 4, 0, known=known)
    second = generate_family("ltl_p", 4, 0, known=known)  # the same draws, all taken: different languages
    keys = [dfa_key(language.dfa) for language in first + second]
    assert len(set(keys)) == 8 and set(keys) == known


def test_stratified_sample_covers_every_cell_and_depends_on_the_seed():
    files = mlregtest_files()
    assert len(files) == 930
    cells = Counter((f.alphabet_size, f.language_class) for f in files)
    assert len(cells) == 26
    for per_cell in (1, 2, 12):
        sample = stratified_sample(files, per_cell, seed=0)
        counted = Counter((f.alphabet_size, f.language_class) for f in sample)
        assert counted == {cell: min(per_cell, size) for cell, size in cells.items()}
        assert stratified_sample(files, per_cell, seed=0) == sample
    assert stratified_sample(files, 2, seed=0) != stratified_sample(files, 2, seed=1)
    assert stratified_sample(files, None, seed=5) == tuple(sorted(files, key=lambda f: (f.alphabet_size,
                                                                                          f.language_class, f.name)))


def test_mlregtest_entries_carry_class_size_and_decider_verdicts():
    language_set = build_language_set("mlregtest:per_cell=2,sizes=16,classes=SP/SL/Zp", seed=3)
    assert Counter(e.mlregtest_class for e in language_set) == {"SP": 2, "SL": 2, "Zp": 2}
    for entry in language_set:
        assert entry.alphabet_size == 16 and entry.language.startswith("data/mlregtest/16.")
        assert entry.ltl_p == (entry.mlregtest_class == "SP")  # SP is piecewise testable; SL, Zp are not
        assert entry.star_free == (entry.mlregtest_class != "Zp")


def test_rows_round_trip_through_json_and_parquet(default_set, tmp_path):
    back = LanguageSet.from_json(json.loads(json.dumps(default_set.to_json())))
    assert back == default_set and [e.witness for e in back] == [e.witness for e in default_set]
    path = tmp_path / "languages.parquet"
    pd.DataFrame(default_set.to_rows()).to_parquet(path)
    rows = pd.read_parquet(path).to_dict("records")
    assert tuple(LanguageEntry.from_row(row) for row in rows) == default_set.entries
    assert rows[0]["alphabet_size"] == len(rows[0]["alphabet"].split(","))


def test_registry_and_user_lists(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    registry = build_language_set("registry")
    assert {e.id.removeprefix("registry/") for e in registry} >= {"aa_star", "parity", "contains_ab"}
    by_name = {e.language: e for e in registry}
    assert by_name["parity"].logic_class == LOGIC_CLASSES[3] and by_name["aa_star"].mod_k == 2
    listing = tmp_path / "mine.txt"
    listing.write_text("# my languages\nP(a) & MOD_2^0\n\n(ab)*\ndata/mlregtest/04.04.SP.2.1.0.att\nP(!a)\tab\n")
    user = build_language_set(f"file:{listing}")
    assert [e.id for e in user] == [f"user/mine/{i}" for i in range(4)]
    assert [e.alphabet for e in user] == [("a",), ("a", "b"), ("a", "b", "c", "d"), ("a", "b")]
    assert user.entries[0].logic_class == LOGIC_CLASSES[1] and user.entries[2].ltl_p
    for entry in user:
        assert equivalent(entry_dfa(entry), language_dfa(resolve_language(entry.language, entry.alphabet))).equivalent


@pytest.mark.parametrize(("spec", "message"), [
    ("nonsense", "unknown language set"),
    ("", "empty language set"),
    ("mlregtest:per_cell=0", "per_cell must be an integer of at least 1"),
    ("mlregtest:per_row=2", "unknown option"),
    ("generated:family=ltl_q,count=2", "family must be one of"),
    ("generated:family=ltl_p_mod,period=1,count=1", "period must be an integer of at least 2"),
    ("registry+registry", "twice"),
    ("mlregtest:sizes=7", "no MLRegTest automaton matches"),
])
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(FormalRopeError, match=message):
        build_language_set(spec)


def test_the_classify_command_reads_each_entry_text_as_the_set_does(default_set, capsys, monkeypatch):
    from cli_support import run_main

    monkeypatch.chdir(REPO)
    chosen = [_generated(default_set, family)[0] for family in FAMILIES]
    chosen += [e for e in default_set if e.source == "mlregtest"][:2]
    for entry in chosen:
        code, out, err = run_main(capsys, ["classify", entry.language, "--alphabet", entry.to_row()["alphabet"],
                                           "--json"])
        assert code == 0, err
        data = json.loads(out)
        assert (data["ltl_p"], data["ltl_p_mod"], data["star_free"], data["mod_k"], data["states"]) == (
            entry.ltl_p, entry.ltl_p_mod, entry.star_free, entry.mod_k, entry.states), entry.id
        assert data["witness"] == entry.witness


def test_depth_grows_when_a_family_runs_out_of_formulas():
    # Depth 1 over {a, b} has too few LTL[P] languages of 3+ states for 3 of them.
    with pytest.raises(FormalRopeError, match="only .* of 3 ltl_p languages"):
        generate_family("ltl_p", 3, 0, depth=1, alphabets=(("a", "b"),), max_draws=400, max_extra_depth=0)
    grown = generate_family("ltl_p", 3, 0, depth=1, alphabets=(("a", "b"),), max_draws=400, stall_draws=50)
    assert len(grown) == 3 and all(language.classification.ltl_p for language in grown)
