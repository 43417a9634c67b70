"""Classes of CLI defects a new user hit, each tested as a class rather than as its one case:
suggestions that fail when followed, counts without a cap, a file of the wrong kind taken late,
the float64 base convention, and regex readings that differ from Python's."""

from __future__ import annotations

import itertools
import json
import re
from decimal import Decimal
from fractions import Fraction

import pytest
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_support import run_main
from formal_rope.cli import app

SUGGESTED_OPTION = re.compile(r"(--[a-z][a-z-]*)(?: ([^\s)]+))?")


def command_options(name: str) -> set[str]:
    """The option names the CLI command `name` accepts (from the Typer app itself)."""
    command = typer.main.get_command(app).commands[name]
    return {option for param in command.params for option in param.opts}


def suggestions(note: str) -> list[tuple[str, str | None]]:
    """(option, value) for each option a note suggests after 'use', 'give' or 'e.g.'."""
    found = []
    for match in re.finditer(r"(?:use|give|e\.g\.) (--\S+(?: \S+)?)", note):
        option = SUGGESTED_OPTION.match(match.group(1))
        found.append((option.group(1), option.group(2)))
    return found


def tiny_config(**fields):
    from formal_rope.run_config.config import RunConfig

    base = dict(language="(ab)*", pe="rope", layers=2, d_model=16, heads=2, steps=1, train_max_length=8,
                test_min_length=0, test_max_length=40)
    return RunConfig(**{**base, **fields})


# ------------------------------------------------------------------ 5: suggestions that work when followed


@pytest.mark.parametrize("layers, window", [(1, 4), (2, 4), (3, 4), (5, 3), (3, (2, 3, 4))])
@pytest.mark.parametrize("command", ["train", "sweep"])
def test_the_all_windowed_note_suggests_a_window_list_that_validates_and_removes_the_note(command, layers, window):
    from formal_rope.run_config.config import check_config
    from formal_rope.run_config.fields import parse_field_text
    from formal_rope.training.context import run_warnings

    config = tiny_config(layers=layers, window=window)
    notes = [note for note in run_warnings(config, command) if "sliding window" in note]
    assert len(notes) == 1
    (option, value), = [found for found in suggestions(notes[0]) if found[0] == "--window"]
    assert option in command_options(command)
    followed = tiny_config(layers=layers, window=parse_field_text("window", value))
    check_config(followed)  # the suggestion's window list fits the layer count (it used to list 5 for 2)
    assert not [note for note in run_warnings(followed, command) if "sliding window" in note]


@pytest.mark.parametrize("command", ["train", "sweep", "reproduce", None])
def test_every_option_a_run_note_suggests_exists_in_the_command_that_prints_it(command):
    from formal_rope.training.context import context_notes

    config = tiny_config(base=1e-12, phase_precision="fp32", window=4)
    notes = context_notes(config, None, None, command)
    suggested = [found for note in notes for found in suggestions(note)]
    assert {option for option, _ in suggested} >= ({"--window"} if command else set())
    if command is None:
        assert not suggested  # recorded warnings name fields, not options: window=[4,global]
        assert any("phase_precision=fp64" in note for note in notes)
        return
    options = command_options(command)
    for option, _ in suggested:
        assert option in options, (command, option)


def test_following_the_sweep_note_on_fp32_phases_works(capsys, tmp_path):
    argv = ["sweep", "--lang", "(ab)*", "--pe", "rope", "--scale", "quick", "--steps", "2", "--base", "1e-12",
            "--test-lengths", "0..40", "--dry-run"]
    code, _, err = run_main(capsys, argv + ["--set", "phase_precision=fp32"])
    assert code == 0
    (note,) = [line for line in err.splitlines() if "phase_precision fp32" in line]
    (option, value), = suggestions(note)
    assert option == "--set"  # sweep has no --phase-precision: that suggestion exited 2 when followed
    code, _, err = run_main(capsys, argv + [option, value])
    assert code == 0 and "phase_precision fp32" not in err


def test_following_the_train_window_note_trains(capsys, tmp_path):
    argv = ["train", "--lang", "(ab)*", "--scale", "quick", "--steps", "1", "--layers", "2", "--d-model", "16",
            "--heads", "2", "--test-lengths", "0..20", "--n-per-length", "2", "--nnch-samples", "0", "--no-save",
            "--quiet", "--json"]
    code, _, err = run_main(capsys, argv + ["--window", "3"])
    assert code == 0
    (note,) = [line for line in err.splitlines() if "sliding window" in line]
    (option, value), = [found for found in suggestions(note) if found[0] == "--window"]
    assert value == "3,global"
    code, out, err = run_main(capsys, argv + [option, value])
    assert code == 0, err
    assert json.loads(out)["status"] == "ok" and "sliding window" not in err


def test_limit_errors_name_only_commands_that_take_the_option():
    from formal_rope.automata.ops import MAX_STATES_COMMANDS, TooManyStatesError

    message = str(TooManyStatesError(10))
    assert "--max-states" in message and all(name in message for name in MAX_STATES_COMMANDS)
    for name in MAX_STATES_COMMANDS:
        assert "--max-states" in command_options(name), name
    for name in ("train", "sample", "sweep"):  # they build automata too, with the default limit
        assert "--max-states" not in command_options(name)
    assert "--max-monoid-size" in command_options("classify")


def test_train_on_a_language_over_the_state_limit_does_not_suggest_an_option_train_lacks(capsys):
    code, _, err = run_main(capsys, ["train", "--lang", "(a|b)*a(a|b){30}", "--steps", "1", "--no-save"])
    assert code == 2
    error = err.strip().splitlines()[-1]
    assert "--max-states N of " in error and "compile" in error


# ------------------------------------------------------------------ 6: every count has a cap


def test_the_exhaustive_length_caps_symbols_for_every_alphabet_and_keeps_larger_alphabets_where_they_were():
    from formal_rope.compiler.verify import EXHAUSTIVE_BUDGET, EXHAUSTIVE_SYMBOL_BUDGET, exhaustive_length

    assert exhaustive_length(1, 3000) == 299  # was 3000: one string per length never reached the string cap
    for size in range(1, 9):
        n = exhaustive_length(size, 10_000)
        strings = sum(size**length for length in range(n + 1))
        symbols = sum(length * size**length for length in range(n + 1))
        assert strings <= EXHAUSTIVE_BUDGET and symbols <= EXHAUSTIVE_SYMBOL_BUDGET
        longer_strings = strings + size ** (n + 1)
        longer_symbols = symbols + (n + 1) * size ** (n + 1)
        assert longer_strings > EXHAUSTIVE_BUDGET or longer_symbols > EXHAUSTIVE_SYMBOL_BUDGET  # largest
        if size >= 2:  # the string count binds first: as before the symbol cap
            assert n == exhaustive_length(size, 10_000, symbol_budget=10**18)


def test_compile_exhaustive_3000_over_one_symbol_is_lowered_with_a_note(capsys):
    code, out, err = run_main(capsys, ["compile", "P(a)", "--exhaustive", "3000", "--verify-to", "0", "--json"])
    assert code == 0
    report = json.loads(out)
    assert report["exhaustive_up_to"] == 299 and report["verified_strings"] == 300
    assert "--exhaustive 3000 lowered to 299" in err


@pytest.mark.parametrize("extra, named", [(["--verify-to", "100000000"], "MAX_SAMPLE_LENGTH"),
                                          (["--verify-to", "20", "--per-length", "100000000"], "MAX_SAMPLED_SYMBOLS")])
def test_compile_refuses_sampled_counts_above_the_sampling_limits_before_compiling(capsys, extra, named):
    code, out, err = run_main(capsys, ["compile", "P(a)", "--alphabet", "ab", *extra])
    assert code == 2 and out == ""
    assert err.startswith("error:") and named in err


# ------------------------------------------------------------------ 7: a file of the wrong kind, refused up front


@pytest.fixture(scope="module")
def compiled_model_file(tmp_path_factory):
    from formal_rope.compiler import compile_formula
    from formal_rope.lang.parser import parse_ltl
    from formal_rope.model.io import save_model

    path = tmp_path_factory.mktemp("compiled") / "model.zip"
    save_model(compile_formula(parse_ltl("P(a)"), ("a", "b")).ir, path)
    return path


@pytest.mark.parametrize("kind", ["compiled", "not a zip", "missing"])
def test_train_init_from_a_file_that_is_no_trained_checkpoint_exits_2_and_writes_nothing(
    capsys, tmp_path, monkeypatch, compiled_model_file, kind
):
    monkeypatch.chdir(tmp_path)
    source = {"compiled": str(compiled_model_file), "not a zip": "notes.txt", "missing": "absent.zip"}[kind]
    (tmp_path / "notes.txt").write_text("hello")
    code, out, err = run_main(capsys, ["train", "--lang", "(ab)*", "--scale", "quick", "--steps", "2",
                                       "--test-lengths", "0..4", "--n-per-length", "2", "--init-from", source])
    assert code == 2 and out == ""
    assert err.strip().splitlines()[-1].startswith("error: init_from")
    assert not (tmp_path / "checkpoints").exists()  # a compiled source used to leave untrained weights there


def test_run_training_init_from_a_compiled_model_raises_instead_of_a_failed_run(compiled_model_file, tmp_path):
    from formal_rope.runs import run_training
    from formal_rope.training.init_from import InitFromError

    config = tiny_config(init_from=str(compiled_model_file), test_max_length=4, n_per_length=2)
    checkpoint = tmp_path / "out.zip"
    with pytest.raises(InitFromError, match="compiled model"):
        run_training(config, progress=False, checkpoint_path=checkpoint)
    assert not checkpoint.exists()


def test_sweep_init_from_a_compiled_model_is_refused_when_planned(capsys, compiled_model_file):
    code, _, err = run_main(capsys, ["sweep", "--lang", "(ab)*", "--pe", "rope", "--scale", "quick", "--dry-run",
                                     "--set", f"init_from={compiled_model_file}"])
    assert code == 2 and "not a trained checkpoint" in err


# ------------------------------------------------------------------ 11: the base is a float64


def test_decimal_base_deviation_matches_a_first_order_rational_computation():
    from formal_rope.training.encodings.phases import decimal_base_deviation

    for base, pairs, longest in [(1e-12, 16, 495), (1e-12, 32, 501), (1e-4, 16, 501), (3e-7, 8, 100)]:
        relative = (Fraction(base) - Fraction(repr(base))) / Fraction(repr(base))  # exact
        # theta_k = beta^(-k/P): d theta / theta = -(k/P) d beta / beta; the largest theta dominates
        expected = max(abs(float(relative)) * k / pairs * base ** (-k / pairs) * longest for k in range(pairs))
        assert decimal_base_deviation(base, pairs, longest) == pytest.approx(expected, rel=1e-6)
    assert decimal_base_deviation(1e-12, 16, 495) == pytest.approx(1.66e-3, rel=1e-2)  # the figure
    assert decimal_base_deviation(1e4, 16, 10**6) == 0.0  # exact in binary
    assert decimal_base_deviation(1e-12, 16, 495, decimal=str(Decimal(1e-12))) == 0.0  # the double's own decimal


def test_the_base_convention_is_noted_and_keeps_run_ids():
    from formal_rope.training.context import context_notes

    paper = tiny_config(base=1e-12, d_model=64, heads=2, test_max_length=500)
    (note,) = [note for note in context_notes(paper, None, None) if note.startswith("base ")]
    assert "9.9999999999999997989e-13" in note and "0.0017 rad by position 501" in note
    assert not [note for note in context_notes(tiny_config(base=1e4), None, None) if note.startswith("base ")]
    assert paper.run_id() == tiny_config(base=float("0.000000000001"), d_model=64, heads=2,
                                         test_max_length=500).run_id()


def test_base_help_states_the_convention():
    for name in ("train", "sweep"):
        command = typer.main.get_command(app).commands[name]
        (base,) = [param for param in command.params if "--base" in param.opts]
        assert "float64" in base.help


# ------------------------------------------------------------------ 12: '+' between operands is union


@pytest.mark.parametrize("expression, noted", [("a+b*", True), ("re:(ab)+a", True), ("a + b", True),
                                               ("a+", False), ("(a+)b*", False), ("a|b*", False), ("ab_star", False)])
def test_a_note_says_when_plus_is_union(capsys, expression, noted):
    code, _, err = run_main(capsys, ["classify", expression, "--alphabet", "ab"])
    assert code == 0
    assert ("'+' between operands is union here" in err) is noted


def test_accepts_notes_the_union_reading_that_rejects_aa(capsys):
    code, out, err = run_main(capsys, ["accepts", "a+b*", "aa", ""])
    assert code == 0 and out.splitlines() == ["reject\taa", "accept\tε"]
    assert "a+b* = a|b*" in err and len([line for line in err.splitlines() if line.startswith("note:")]) == 1


def _regexes():
    atoms = st.sampled_from(["a", "b"])

    def extend(inner):
        postfix = st.tuples(inner, st.sampled_from(["*", "+", ""])).map(
            lambda pair: f"({pair[0]}){pair[1]}" if pair[1] else pair[0])
        return postfix | st.tuples(inner, inner).map("".join) | st.tuples(inner, inner).map("|".join) | st.tuples(
            inner, inner).map(lambda pair: f"({pair[0]})+({pair[1]})")

    return st.recursive(atoms, extend, max_leaves=5)


@settings(max_examples=60, deadline=None)
@given(_regexes())
def test_without_the_note_an_expression_reads_as_pythons_re(expression):
    from formal_rope.automata import accepts
    from formal_rope.automata.language import language_dfa
    from formal_rope.lang.source import resolve_language

    language = resolve_language(f"re:{expression}", "ab")
    noted = "'+' between operands is union here" in (language.detected or "")
    words = ["".join(word) for length in range(6) for word in itertools.product("ab", repeat=length)]
    ours = accepts(language_dfa(language), [tuple(word) for word in words])
    python = [re.fullmatch(expression, word) is not None for word in words]
    if not noted:
        assert list(ours) == python, expression
    else:
        assert "+(" in expression.replace(" ", "") or re.search(r"\+[ab(]", expression)
