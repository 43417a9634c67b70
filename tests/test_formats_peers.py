"""The peers' file conventions, run on files their own generators wrote (issue 22).

tests/data/flare/ holds FLaRe folders written by FLaRe's generator, tests/data/mlregtest/ files
written by MLRegTest's (their READMEs name the commits, licences and commands). Our readers read
them, our writers reproduce their bytes for the same strings, and transcriptions of the peers'
readers read what we write. Also the regressions of issue 22's data-format items: FLaRe's
sampling distribution and log-probabilities, ASCII escapes, whole language folders, the
next-symbols warning, and MLRegTest lines its reader cannot read."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from formal_rope.automata import accepts, language_dfa, load_att
from formal_rope.lang.source import resolve_language
from formal_rope.sampling import decode, test_sets
from formal_rope.sampling.formats import (
    check_labels,
    flare_log_probabilities,
    load_dataset,
    read_flare_split,
    read_mlregtest_file,
    write_flare_split,
    write_mlregtest_file,
)
from tests.cli_support import run_main

DATA = Path(__file__).resolve().parent / "data"
FLARE = DATA / "flare"
LANGUAGES = {"repeat-01": ("(01)*", "01"), "sigma-ab": ("re:σ(a|b)*", "a,b,σ")}
# FLaRe's splits and their length ranges (string_sampling/sample_dataset.py, main).
SPLITS = {".": (0, 40), "datasets/validation-short": (0, 40), "datasets/validation-long": (0, 80),
          "datasets/test": (0, 500)}


def _dfa(spec, alphabet=None):
    return language_dfa(resolve_language(spec, alphabet))


def _floats(path: Path) -> np.ndarray:
    return np.array([float(line) for line in path.read_text().split()])


# ------------------------------------------------------------------------------ FLaRe (its files)
@pytest.mark.parametrize("language", LANGUAGES)
def test_flare_generator_folders_read_here(language):
    dfa = _dfa(*LANGUAGES[language])
    data = load_dataset(FLARE / language, dfa.alphabet)
    assert data.format == "flare" and len(data.train) == 40 and len(data.tests[0]) == 12
    for split in SPLITS:
        strings = read_flare_split(FLARE / language / split, dfa.alphabet)
        check_labels(strings, dfa)  # raises at the first label that disagrees with the language
        assert set(strings.labels.tolist()) == {True, False}


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("split", SPLITS)
def test_our_flare_writer_reproduces_flare_bytes(tmp_path, language, split):
    """The same strings in the same order: main.tok, labels.txt and next-symbols.jsonl byte for byte
    (ASCII escapes in the JSON), FLaRe's log-probabilities (distribution flare) as its float64 run
    writes them, and its float16 run's (FLaRe's default) to within its own rounding."""
    dfa = _dfa(*LANGUAGES[language])
    source = FLARE / language / split
    strings = read_flare_split(source, dfa.alphabet)
    low, high = SPLITS[split]
    write_flare_split(tmp_path, strings.runs(), dfa, distribution="flare", split_lengths=range(low, high + 1))
    for name in ("main.tok", "labels.txt", "next-symbols.jsonl"):
        assert (tmp_path / name).read_bytes() == (source / name).read_bytes(), name
    ours = _floats(tmp_path / "log-probabilities.txt")
    assert len(ours) == int(strings.labels.sum())
    np.testing.assert_allclose(ours, _floats(FLARE / "float64" / language / split / "log-probabilities.txt"),
                               rtol=1e-13, atol=0)
    rounding = 0.05 if high == 500 else 0.005  # FLaRe's float16 sums over up to 500 steps
    np.testing.assert_allclose(ours, _floats(source / "log-probabilities.txt"), rtol=rounding, atol=0)
    theirs = (source / "num-edits.txt").read_text().split("\n")[:-1]
    assert len(theirs) == len((tmp_path / "num-edits.txt").read_text().split("\n")[:-1]) == int((~strings.labels).sum())
    assert all(edits == "" or int(edits) >= 1 for edits in theirs)


def test_flare_next_symbols_escape_non_ascii_symbols(tmp_path):
    dfa = _dfa("re:σ(a|b)*", "a,b,σ")
    write_flare_split(tmp_path, test_sets(dfa, [1, 2], n_per_length=2), dfa)
    text = (tmp_path / "next-symbols.jsonl").read_bytes()
    assert text.isascii() and b'"s":"\\u03c3"' in text
    assert json.loads(text.splitlines()[0])[0] == {"s": "σ", "e": False}
    assert "σ" in (tmp_path / "main.tok").read_text(encoding="utf-8")  # main.tok stays UTF-8 text, as FLaRe's


def _flare_probabilities(dfa, length):
    """P(w | |w| = length) under FLaRe's sampler by brute force over Σ^length: a path's weight is
    the product over the states it visits of 1/(moves), moves = transitions into states from which
    acceptance is reachable, plus stopping in an accepting state (prepare_sampler.py)."""
    live = {state for state in range(dfa.n_states)
            if any(accepts(dfa, ["".join(w)])[0] for k in range(dfa.n_states + 1)
                   for w in itertools.product(dfa.alphabet, repeat=k)
                   if _run(dfa, state, w) is not None and dfa.accepting[_run(dfa, state, w)])}
    moves = [sum(int(dfa.transitions[q, a]) in live for a in range(dfa.n_symbols)) + int(dfa.accepting[q])
             for q in range(dfa.n_states)]
    weights = {}
    for word in itertools.product(dfa.alphabet, repeat=length):
        if accepts(dfa, ["".join(word)])[0]:
            state, weight = dfa.start, 1.0
            for symbol in word:
                weight /= moves[state]
                state = int(dfa.transitions[state, dfa.alphabet.index(symbol)])
            weights["".join(word)] = weight / moves[state]
    total = sum(weights.values())
    return {word: weight / total for word, weight in weights.items()}


def _run(dfa, state, word):
    for symbol in word:
        state = int(dfa.transitions[state, dfa.alphabet.index(symbol)])
    return state


def test_flare_distribution_draws_members_as_flares_sampler():
    """a*b* over {a, b}: FLaRe's sampler weighs a^i b^(n-i) by (1/3)^(i+1) (1/2)^(n-i) (state a*
    has three moves, state b* two), far from uniform; the draws follow it, the negatives do not change."""
    dfa = _dfa("re:a*b*", "ab")
    expected = _flare_probabilities(dfa, 4)
    assert max(expected.values()) / min(expected.values()) > 3
    flare = test_sets(dfa, [4], n_per_length=8000, seed=5, near_miss_fraction=0.0, distribution="flare")[0]
    uniform = test_sets(dfa, [4], n_per_length=8000, seed=5, near_miss_fraction=0.0)[0]
    drawn = Counter(decode(flare.symbols[flare.labels], dfa.alphabet))
    n = int(flare.labels.sum())
    for word, probability in expected.items():
        sigma = math.sqrt(probability * (1 - probability) / n)
        assert abs(drawn[word] / n - probability) < 4 * sigma, (word, drawn[word] / n, probability)
    uniform_counts = Counter(decode(uniform.symbols[uniform.labels], dfa.alphabet))
    assert abs(uniform_counts["bbbb"] / n - 1 / 5) < 0.02 and abs(drawn["bbbb"] / n - expected["bbbb"]) < 0.02
    assert np.array_equal(flare.symbols[~flare.labels], uniform.symbols[~uniform.labels])


def test_flare_log_probability_of_0_1_is_what_flare_writes():
    """Issue 22's example, from FLaRe's code (finite_automaton_weight_pushing.py): for (01)* over
    lengths 0..40, "0 1" gets log(1/2) + β(q1, 1) + log(1/1) + β(q0, 0) + log(1/2) - log 21 - β(q0, 2)
    with β(q1, 1) = β(q0, 0) = log(1/2), β(q0, 2) = log(1/4): -2 log 2 - log 21 = -4.43, where its
    probability is 1/21 (-3.04)."""
    dfa = _dfa("(01)*", "01")
    value = flare_log_probabilities(dfa, np.array([[0, 1]]), 21)[0]
    assert value == pytest.approx(-2 * math.log(2) - math.log(21), abs=1e-12)
    assert round(value, 2) == -4.43


# --------------------------------------------------------------------------- FLaRe (its readers)
def _flare_prepare(split: Path):
    """A transcription of what FLaRe's prepare_data.py --use-next-symbols reads (rau's
    prepare_file: whitespace-split tokens; prepare_labels_file: int(line.strip()) in {0, 1};
    prepare_valid_symbols_file: json.loads per line, pos['s'].split(), pos['e'])."""
    tokens = [line.split() for line in (split / "main.tok").open()]
    labels = [int(line.strip()) for line in (split / "labels.txt").open()]
    assert set(labels) <= {0, 1} and len(labels) == len(tokens)
    with (split / "next-symbols.jsonl").open() as handle:  # FileNotFoundError without it, as FLaRe's
        next_symbols = [[(pos["s"].split(), pos["e"]) for pos in json.loads(line)] for line in handle]
    return tokens, labels, next_symbols


def test_sample_writes_a_whole_flare_language_folder_flare_prepares(tmp_path, capsys):
    out = tmp_path / "lang"
    code, stdout, err = run_main(capsys, ["sample", "re:σ(a|b)*", "-a", "a,b,σ", "--format", "flare",
                                          "--language-folder", "--out", str(out), "--split", "training=:200",
                                          "--split", "test=0..60:61", "--json", "--quiet"])
    assert code == 0, err
    summary = json.loads(stdout)
    assert [s["name"] for s in summary["splits"]] == ["training", "validation-short", "validation-long", "test"]
    assert [s["strings"] for s in summary["splits"]] == [200, 1000, 1000, 61]  # FLaRe's sizes where not changed
    assert [s["lengths"] for s in summary["splits"]] == ["0..40", "0..40", "0..80", "0..60"]
    for split, (name, (low, high)) in zip(summary["splits"], zip(SPLITS, [(0, 40), (0, 40), (0, 80), (0, 60)])):
        folder = out / name
        tokens, labels, next_symbols = _flare_prepare(folder)
        assert {len(t) for t in tokens} == set(range(low, high + 1)) and len(tokens) == split["strings"]
        assert len(next_symbols) == sum(labels) and all(len(n) == len(t) + 1 for n, t in
                                                        zip(next_symbols, [t for t, y in zip(tokens, labels) if y]))
        assert {s for line in next_symbols for pos, _ in line for s in pos} <= {"a", "b", "σ"}
    assert load_dataset(out).format == "flare"  # and train --data reads it


def test_the_default_language_folder_has_flares_sizes(tmp_path, capsys):
    code, stdout, _ = run_main(capsys, ["sample", "(ab)*", "--format", "flare", "--language-folder", "--out",
                                        str(tmp_path / "ab"), "--json", "--quiet"])
    splits = json.loads(stdout)["splits"]
    assert code == 0 and [(s["lengths"], s["strings"]) for s in splits] == [
        ("0..40", 10_000), ("0..40", 1_000), ("0..80", 1_000), ("0..500", 5_010)]
    lengths = Counter(len(line.split()) for line in (tmp_path / "ab" / "datasets" / "test" / "main.tok").open())
    assert set(lengths.values()) == {10}  # FLaRe's 10 strings per test length


@pytest.mark.parametrize("argv, message", [
    (["--language-folder", "--format", "mlregtest", "--out", "x_Train.txt"], "--language-folder"),
    (["--language-folder", "--out", "x.parquet"], "--language-folder"),
    (["--language-folder", "--format", "flare", "--out", "f", "--lengths", "3"], "--lengths and --n do not apply"),
    (["--format", "flare", "--out", "f", "--split", "test=0..5:3"], "give --language-folder"),
    (["--language-folder", "--format", "flare", "--out", "f", "--split", "exam=0..5:3"], "the splits training"),
    (["--language-folder", "--format", "flare", "--out", "f", "--split", "test=5"], "--split 'test=5'"),
    (["--distribution", "exact"], "unknown distribution 'exact'"),
])
def test_language_folder_and_distribution_options_are_checked(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, ["sample", "(ab)*", *argv])
    assert code == 2 and message in err and err.count("error: ") == 1, err


def test_no_next_symbols_warns_that_flare_refuses_the_split(tmp_path, capsys):
    for quiet in ([], ["--quiet"]):
        code, _, err = run_main(capsys, ["sample", "(ab)*", "--lengths", "2", "--n", "2", "--format", "flare",
                                         "--out", str(tmp_path / "f"), "--no-next-symbols", "--json", *quiet])
        assert code == 0 and "warning: without next-symbols.jsonl FLaRe's preparation refuses the split" in err
    with pytest.raises(FileNotFoundError):
        _flare_prepare(tmp_path / "f")


# -------------------------------------------------------------------------------- MLRegTest
MLREGTEST = DATA / "mlregtest"


def _mlregtest_parse_dataset(path: Path):
    """A transcription of MLRegTest's reader (src/neural_net/tensorflow/data.py, parse_dataset)."""
    rows = []
    with open(path) as handle:
        for line in handle.readlines():
            x, y = line.strip().split("\t")
            rows.append((list(x), y == "TRUE"))
    return rows


def _mlregtest_dfa():
    return load_att(DATA.parent.parent / "data" / "mlregtest" / "04.04.SL.2.1.0.att")


@pytest.mark.parametrize("split", ["Train", "TestSA", "TestLR"])
def test_mlregtest_generator_files_read_here_and_our_writer_reproduces_them(tmp_path, split):
    dfa = _mlregtest_dfa()
    source = MLREGTEST / f"04.04.SL.2.1.0_{split}.txt"
    strings = read_mlregtest_file(source, dfa.alphabet)
    check_labels(strings, dfa)
    assert len(strings) == 1000 and set(strings.labels.tolist()) == {True, False}
    written = write_mlregtest_file(tmp_path / source.name, strings.runs(), dfa.alphabet)
    assert written.read_bytes() == source.read_bytes()
    assert _mlregtest_parse_dataset(written) == _mlregtest_parse_dataset(source)


def test_mlregtest_language_folder_trains_here():
    data = load_dataset(MLREGTEST / "04.04.SL.2.1.0", _mlregtest_dfa().alphabet)
    assert data.format == "mlregtest" and len(data.train) == 1000
    # TestSA's adversarial pairs are one edit apart, insertions and deletions included, so they
    # reach lengths 19 and 30 around its nominal 20..29; TestLR holds 31..50.
    assert [s.length for s in data.test_sets()] == list(range(19, 51))


def test_mlregtests_reader_reads_what_we_write(tmp_path, capsys):
    out = tmp_path / "sab_TestLR.txt"
    code, _, err = run_main(capsys, ["sample", "Σ*abΣ*", "--lengths", "1..6", "--n", "8", "--format", "mlregtest",
                                     "--out", str(out), "--json", "--quiet"])
    assert code == 0, err
    rows = _mlregtest_parse_dataset(out)
    assert len(rows) == 48 and all(label == ("ab" in "".join(x)) for x, label in rows)


def test_mlregtest_refuses_what_its_reader_cannot_read(tmp_path, capsys):
    """The empty string's line "\\tTRUE" stops MLRegTest's reader (strip() takes the tab); a
    whitespace symbol would be stripped off a string's ends. Both are refused before sampling, by
    the CLI and by the writer; other formats keep them."""
    empty = tmp_path / "empty_Train.txt"
    empty.write_text("\tTRUE\n")
    with pytest.raises(ValueError):
        _mlregtest_parse_dataset(empty)
    code, _, err = run_main(capsys, ["sample", "(ab)*", "--lengths", "0..4", "--n", "2", "--format", "mlregtest",
                                     "--out", str(tmp_path / "x_Train.txt")])
    assert code == 2 and "cannot hold the empty string" in err and not (tmp_path / "x_Train.txt").exists()
    dfa = _dfa("(ab)*")
    with pytest.raises(Exception, match="empty string"):
        write_mlregtest_file(tmp_path / "y_Train.txt", test_sets(dfa, [0, 2], n_per_length=2), dfa.alphabet)
    code, _, err = run_main(capsys, ["sample", "re:(' ' a)*", "--lengths", "2", "--n", "2",
                                     "--format", "mlregtest", "--out", str(tmp_path / "z_Train.txt")])
    assert code == 2 and "is whitespace" in err, err
    code, _, err = run_main(capsys, ["sample", "(ab)*", "--lengths", "0..2", "--n", "2", "--format", "flare",
                                     "--out", str(tmp_path / "f"), "--quiet"])
    assert code == 0 and (tmp_path / "f" / "main.tok").read_text().startswith("\n")  # FLaRe holds it
