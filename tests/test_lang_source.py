"""resolve_language: prefixes, registry names and expressions, bare-expression detection, alphabets,
.att files; and the registry's formulas agree with the registry's regexes on every short string."""

from __future__ import annotations

import itertools

import pytest

from formal_rope.errors import ExpressionError, FormalRopeError
from formal_rope.lang import Language, parse_alphabet, parse_regex, registry_entries, resolve_language
from formal_rope.lang.ast import And, Atom, Mod, Past, Symbol
from formal_rope.lang.registry import lookup, lookup_ast
from formal_rope.lang.source import READ_AS_LTL, READ_AS_REGEX, att_alphabet


@pytest.mark.parametrize("text", ["P(a)", "Y(a)", "a S b", "H(a) | b", "Y^2(a)", "!P(a)", "a & MOD_3^1"])
def test_bare_expressions_with_temporal_operators_or_mod_read_as_ltl(text):
    language = resolve_language(text, "ab")
    assert language.kind == "ltl"
    assert language.detected.startswith(READ_AS_LTL) or language.detected.startswith("registry")


def test_bare_mod_alone_is_ltl_given_an_alphabet():
    language = resolve_language("MOD_2^0", "a")
    assert language.kind == "ltl" and language.ast == Mod(2, 0) and language.detected == READ_AS_LTL


@pytest.mark.parametrize("text", ["a", "a|b", "ab", "a&b", "(ba)*", "[ab]+", "ba+b"])
def test_bare_expressions_without_temporal_operators_read_as_regex(text):
    language = resolve_language(text)
    assert language.kind == "regex"
    assert language.detected.startswith(READ_AS_REGEX)


@pytest.mark.parametrize("text", ["Pa|b", "HI", "Pa", "Ya", "P a", "Hb|a"])
def test_texts_that_parse_as_formulas_only_through_the_p_phi_spelling_are_regexes(text):
    # SPEC §2: only a temporal application (P(, Y(, Y^k(, H(, binary S, MOD_) makes a bare
    # expression a formula. `Pa|b` was read as P(a) | b, so `accepts` disagreed with Python's re.
    import re

    from formal_rope.automata import accepts, language_dfa

    language = resolve_language(text)
    assert language.kind == "regex" and "write ltl:" in language.detected
    dfa = language_dfa(language)
    words = ["".join(w) for n in range(4) for w in itertools.product(language.alphabet, repeat=n)]
    pattern = re.compile(text.replace(" ", ""))
    assert list(accepts(dfa, words)) == [pattern.fullmatch(word) is not None for word in words]
    assert resolve_language("ltl:" + text, language.alphabet).kind == "ltl"


def test_registry_expression_text_gets_the_registry_alphabet():
    assert resolve_language("(aa)*").alphabet == ("a",)
    assert resolve_language("(ab)*").alphabet == ("a", "b")
    assert resolve_language("aΣ*").alphabet == ("a", "b")
    assert resolve_language("Σ*a").alphabet == ("a", "b")
    assert resolve_language("Σ*abΣ*").alphabet == ("a", "b", "c")
    assert resolve_language("Σ*abΣ*").name == "contains_ab"


def test_registry_names_resolve_with_kind_ast_and_alphabet():
    parity = resolve_language("parity")
    assert parity.kind == "regex" and parity.alphabet == ("0", "1") and parity.name == "parity"
    formula = resolve_language("has_a_odd_length")
    assert formula.kind == "ltl" and formula.ast == And(Past(Atom("a")), Mod(2, 0))
    assert formula.expression == "P(a) & MOD_2^0"


def test_registry_ast_match_names_other_spellings_over_the_same_alphabet():
    # a.* over {a, b} *is* a_sigma_star: named, and the note says so; it brings no alphabet itself.
    language = resolve_language("a.*", "ab")
    assert language.name == "a_sigma_star" and language.alphabet == ("a", "b")
    assert "same as registry language a_sigma_star" in language.detected
    assert lookup_ast("regex", parse_regex("(a a)*"), "a").name == "aa_star"
    assert lookup_ast("regex", parse_regex("(a a)*"), "ab") is None
    assert lookup("nonexistent") is None


@pytest.mark.parametrize(
    "text, alphabet",
    [("P(b & Y(a))", ("a", "b")), ("P(Y(a) & b)", ("a", "b")), ("ltl:a S b", ("a", "b")), ("a S b", ("a", "b")),
     ("Y(a)", ("a",)), ("(0*10*1)*0*", ("0", "1")), (".*ab.*", ("a", "b"))],
)
def test_an_expression_is_over_its_own_symbols_even_when_it_spells_a_registry_formula(text, alphabet):
    """SPEC §2 (issue 9): only a named entry or one of the paper's five languages verbatim brings a
    registry alphabet; P(b & Y(a)) used to be over {a, b, c} (as contains_ab_ltl) and P(Y(a) & b)
    over {a, b}, the same formula over two alphabets."""
    language = resolve_language(text)
    assert language.alphabet == alphabet
    assert language.detected is None or "registry's alphabet" not in language.detected


@pytest.mark.parametrize(
    "text, name, alphabet",
    [("(aa)*", "aa_star", ("a",)), ("(ab)*", "ab_star", ("a", "b")), ("aΣ*", "a_sigma_star", ("a", "b")),
     ("Σ*a", "sigma_star_a", ("a", "b")), ("Σ*abΣ*", "contains_ab", ("a", "b", "c")),
     ("Σ* ab Σ*", "contains_ab", ("a", "b", "c")), ("re:Σ*abΣ*", "contains_ab", ("a", "b", "c")),
     ("contains_ab_ltl", "contains_ab_ltl", ("a", "b", "c")), ("a_since_b", "a_since_b", ("a", "b", "c"))],
)
def test_a_registry_alphabet_applies_to_named_entries_and_verbatim_paper_languages_with_a_note(text, name, alphabet):
    language = resolve_language(text)
    assert (language.name, language.alphabet) == (name, alphabet)
    assert f"registry language {name}" in language.detected and "{" + ", ".join(alphabet) + "}" in language.detected


def test_explicit_alphabet_overrides_registry_and_drops_the_name_when_different():
    # (contains_ab over {a,b} is contains_ab_binary: see the test of that case below.)
    language = resolve_language("aa_star", "ab")
    assert language.alphabet == ("a", "b") and language.name is None
    assert "given alphabet" in language.detected
    same = resolve_language("contains_ab", "abc")
    assert same.name == "contains_ab"


def test_prefixes_force_the_reading():
    assert resolve_language("ltl:a&b").kind == "ltl"
    assert resolve_language("re:P").ast == Symbol("P")
    assert resolve_language("regex:(aa)*").name == "aa_star"
    assert resolve_language("ltl:a&b").detected is None
    with pytest.raises(ExpressionError):
        resolve_language("ltl:(aa)*")


def test_force_kind_ltl_for_compile():
    assert resolve_language("P(a)", force_kind="ltl").kind == "ltl"
    assert resolve_language("a & b", force_kind="ltl").ast == And(Atom("a"), Atom("b"))
    assert resolve_language("ltl:P(a)", force_kind="ltl").ast == Past(Atom("a"))
    assert resolve_language("ab_star_ltl", force_kind="ltl").name == "ab_star_ltl"
    with pytest.raises(FormalRopeError, match="registry language aa_star"):
        resolve_language("aa_star", force_kind="ltl")
    with pytest.raises(ExpressionError):  # the regex text is not a formula
        resolve_language("(aa)*", force_kind="ltl")
    with pytest.raises(FormalRopeError):
        resolve_language("re:a", force_kind="ltl")


def test_default_alphabet_is_the_sorted_mentioned_symbols():
    assert resolve_language("ltl:P(z) & Y(b)").alphabet == ("b", "z")
    assert resolve_language("c(ab)*").alphabet == ("a", "b", "c")


def test_explicit_alphabet_required_when_meaning_depends_on_unmentioned_symbols():
    for text in ("a.*", "Σ*", "[^a]*", "~(aa)*", ".a"):
        with pytest.raises(ExpressionError, match="alphabet cannot be inferred"):
            resolve_language(text)
    with pytest.raises(ExpressionError, match="mentions no symbols"):
        resolve_language("MOD_2^0")
    with pytest.raises(ExpressionError, match="alphabet cannot be inferred"):
        resolve_language("ltl:P(!a)")
    assert resolve_language("ltl:P(!a)", "ab").alphabet == ("a", "b")
    assert resolve_language("[^a]b*", "abc").alphabet == ("a", "b", "c")


def test_explicit_alphabet_must_cover_mentioned_symbols_with_caret():
    with pytest.raises(ExpressionError) as info:
        resolve_language("ab*c", "ab")
    assert info.value.column == 4 and "'c'" in info.value.message


def test_neither_reading_parses_reports_the_more_plausible_error():
    with pytest.raises(ExpressionError) as info:
        resolve_language("P(a")
    assert "never closed" in info.value.message and info.value.column == 2
    with pytest.raises(ExpressionError) as info:
        resolve_language("P(a) & MOD_0^1")  # only the formula reading gets past MOD
    assert "modulus" in info.value.message and info.value.column == 12
    with pytest.raises(ExpressionError) as info:
        resolve_language("!a")  # a Boolean formula: read as a regex, which has no '!'
    assert "ltl:!a" in info.value.message


@pytest.mark.parametrize(
    "text, alphabet",
    [("ab", ("a", "b")), ("a,b", ("a", "b")), ("a, b , c", ("a", "b", "c")), ("x y", ("x", "y")), ("aab", ("a", "b")),
     ("'long name',b", ("long name", "b")), ("01", ("0", "1")), (["b", "a"], ("b", "a"))],
)
def test_parse_alphabet_forms(text, alphabet):
    assert parse_alphabet(text) == alphabet


@pytest.mark.parametrize("text", ["", "  ", ",", []])
def test_empty_alphabet_is_a_user_error(text):
    with pytest.raises(FormalRopeError, match="empty"):
        parse_alphabet(text)


def test_att_file_source(tmp_path):
    path = tmp_path / "tiny.att"
    path.write_text("0\t1\tb\tb\n1\t0\ta\ta\n0\n", encoding="utf-8")
    language = resolve_language(str(path))
    assert language.kind == "att" and language.ast is None
    assert language.alphabet == ("a", "b") and language.path == str(path) and language.label == "tiny"
    assert resolve_language(str(path), "abc").alphabet == ("a", "b", "c")
    with pytest.raises(FormalRopeError, match="does not contain"):
        resolve_language(str(path), "a")
    with pytest.raises(FormalRopeError, match="not found"):
        resolve_language(str(tmp_path / "missing.att"))


def test_att_alphabet_of_mlregtest_files(mlregtest_dir):
    path = next(iter(sorted(mlregtest_dir.glob("04.*.att"))))
    assert set(att_alphabet(path)) <= {"a", "b", "c", "d"}
    sixteen = next(iter(sorted(mlregtest_dir.glob("16.*.att"))))
    assert len(att_alphabet(sixteen)) <= 16


def test_language_is_frozen_and_labelled():
    language = resolve_language("aa_star")
    assert isinstance(language, Language) and language.label == "aa_star"
    with pytest.raises(AttributeError):
        language.kind = "ltl"  # type: ignore[misc]
    assert resolve_language("re:ab").label == "ab"


def test_registry_holds_the_papers_languages_with_fixed_alphabets():
    entries = {entry.name: entry for entry in registry_entries()}
    expected = {
        "aa_star": ("(aa)*", ("a",)),
        "ab_star": ("(ab)*", ("a", "b")),
        "a_sigma_star": ("aΣ*", ("a", "b")),
        "sigma_star_a": ("Σ*a", ("a", "b")),
        "contains_ab": ("Σ*abΣ*", ("a", "b", "c")),
        "parity": ("(0*10*1)*0*", ("0", "1")),
    }
    for name, (expression, alphabet) in expected.items():
        assert (entries[name].expression, entries[name].alphabet) == (expression, alphabet)
    assert len(set(entries)) == len(registry_entries())
    for entry in registry_entries():  # every expression parses over its own alphabet
        assert entry.ast is not None


def _words(alphabet, max_length):
    for length in range(max_length + 1):
        for letters in itertools.product(alphabet, repeat=length):
            yield letters


def _ltl_holds(formula, word, position):
    """Direct evaluation of the SPEC semantics at `position` (1-based; len(word)+1 is the readout)."""
    kind = type(formula).__name__
    if kind == "Atom":
        return 1 <= position <= len(word) and word[position - 1] == formula.symbol
    if kind == "Const":
        return formula.value
    if kind == "Mod":
        return position % formula.m == formula.r
    if kind == "Not":
        return not _ltl_holds(formula.child, word, position)
    if kind == "And":
        return _ltl_holds(formula.left, word, position) and _ltl_holds(formula.right, word, position)
    if kind == "Or":
        return _ltl_holds(formula.left, word, position) or _ltl_holds(formula.right, word, position)
    if kind == "Past":
        return any(_ltl_holds(formula.child, word, j) for j in range(1, position))
    if kind == "Yesterday":
        return position > formula.k and _ltl_holds(formula.child, word, position - formula.k)
    if kind == "Since":
        return any(
            _ltl_holds(formula.right, word, j)
            and all(_ltl_holds(formula.left, word, between) for between in range(j + 1, position))
            for j in range(1, position)
        )
    raise TypeError(kind)


@pytest.mark.parametrize(
    "formula_name, regex_name",
    [("aa_star_ltl", "aa_star"), ("ab_star_ltl", "ab_star"), ("a_sigma_star_ltl", "a_sigma_star"),
     ("sigma_star_a_ltl", "sigma_star_a"), ("contains_ab_ltl", "contains_ab")],
)
def test_registry_formulas_define_the_registry_regexes(formula_name, regex_name):
    """Independent of the automata stage: SPEC semantics evaluated directly vs Python's re."""
    import re

    formula, regex = resolve_language(formula_name), resolve_language(regex_name)
    assert formula.alphabet == regex.alphabet
    sigma = "[" + "".join(regex.alphabet) + "]"
    python = re.compile(regex.expression.replace("Σ", sigma))
    for word in _words(regex.alphabet, 6):
        text = "".join(word)
        assert _ltl_holds(formula.ast, word, len(word) + 1) == bool(python.fullmatch(text)), (formula_name, text)


def test_future_operators_and_registry_typos_get_hints():
    assert "future-time" in resolve_language("F(a)").detected
    assert "did you mean parity?" in resolve_language("parityy").detected
    with pytest.raises(FormalRopeError, match="did you mean aa_star"):
        resolve_language("aa_sta")
    assert resolve_language("abba").detected == READ_AS_REGEX


@pytest.mark.parametrize("spec", ["Σ*abΣ*", "re:Σ*abΣ*", ".*ab.*"])
@pytest.mark.parametrize("alphabet", ["ab", "ba"])
def test_registry_expression_over_another_entrys_alphabet_is_named_after_that_entry(spec, alphabet):
    # Σ*abΣ* is contains_ab over {a,b,c} and contains_ab_binary over {a,b}: the name must follow the
    # alphabet (the order of the symbols does not change the language). Typed verbatim, the paper's
    # Σ*abΣ* is over {a,b,c}; the ASCII .*ab.* is not the paper's text, so it is over its own {a,b}.
    language = resolve_language(spec, alphabet)
    assert language.name == "contains_ab_binary"
    assert resolve_language(spec).name == ("contains_ab_binary" if spec == ".*ab.*" else "contains_ab")
    assert resolve_language(spec, "abc").name == "contains_ab"
    assert resolve_language(spec, "abcd").name is None


def test_registry_name_with_another_entrys_alphabet_says_which_entry_it_is():
    language = resolve_language("contains_ab", "ab")
    assert language.name == "contains_ab_binary"
    assert "which is registry language contains_ab_binary" in language.detected
    assert resolve_language("contains_ab_ltl", "ab").name is None  # no registry formula over {a,b}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("'a,b',c", ("a,b", "c")),
        ("'a,b' c", ("a,b", "c")),
        ("'long name' c", ("long name", "c")),
        ("'long name',b", ("long name", "b")),
        ("it's,b", ("it's", "b")),
        ("\"it's\" b", ("it's", "b")),
        ("a b", ("a", "b")),
        ("ab", ("a", "b")),
    ],
)
def test_alphabet_quotes_keep_commas_and_blanks_inside_a_symbol(text, expected):
    assert parse_alphabet(text) == expected


def test_aa_star_has_a_unary_and_a_binary_reading():
    """(aa)* verbatim stays the unary registry language (run ids unchanged); aa_star_ab is the paper's
    Table 1 reading over {a, b}: every string of even length, not the literal regex's a's only."""
    from formal_rope.automata import language_dfa
    from formal_rope.run_config.config import RunConfig

    unary = resolve_language("(aa)*")
    assert (unary.name, unary.alphabet, unary.expression) == ("aa_star", ("a",), "(aa)*")
    assert RunConfig("(aa)*").id_fields() == {"language": "(aa)*"}
    binary = resolve_language("aa_star_ab")
    (entry,) = [e for e in registry_entries() if e.name == "aa_star_ab"]
    assert binary.alphabet == ("a", "b") and "even length" in entry.description and "unary" in entry.description
    dfa = language_dfa(binary)

    def accepts(automaton, word: str) -> bool:
        return bool(automaton.accepting[automaton.run([automaton.alphabet.index(c) for c in word])])

    for length in range(7):
        for word in itertools.product("ab", repeat=length):
            assert accepts(dfa, "".join(word)) == (length % 2 == 0)
    literal = language_dfa(resolve_language("aa_star", "ab"))  # the literal regex over {a, b}
    assert accepts(literal, "aa") and not accepts(literal, "ab") and accepts(dfa, "ab")
