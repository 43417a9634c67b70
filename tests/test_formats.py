"""Datasets in and out: FLaRe split folders, MLRegTest string files, Parquet (formal_rope.sampling.formats).

Round trips check that every string, label and length comes back (multi-character symbols
included); the FLaRe extras are checked against independent computations (brute-force string
counts, a per-prefix DFA walk); malformed files must name the file and the line."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from formal_rope.automata import accepts, language_dfa
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.sampling import decode, test_sets
from formal_rope.sampling.formats import (
    DataFormatError,
    check_labels,
    load_dataset,
    locate_dataset,
    read_flare_split,
    read_mlregtest_file,
    read_parquet_strings,
    write_flare_split,
    write_mlregtest_file,
    write_parquet_file,
)
from tests.cli_support import main_call, run_main, torch_free_stdout


def _dfa(spec, alphabet=None):
    return language_dfa(resolve_language(spec, alphabet))


def _rows(sets, alphabet):
    """(text, label) of every row, in order: what a round trip must give back."""
    rows = []
    for labeled in sets:
        rows.extend(zip(decode(labeled.symbols, alphabet), labeled.labels.tolist()))
    return rows


def _file_rows(strings):
    symbols, lengths = strings.padded()
    return list(zip(decode(symbols, strings.alphabet, lengths), strings.labels.tolist()))


@pytest.mark.parametrize("spec", ["(ab)*", "re:('open' 'close')*", "Σ*abΣ*"])
def test_flare_round_trip(tmp_path, spec):
    dfa = _dfa(spec)
    sets = test_sets(dfa, [0, 1, 2, 5, 8], n_per_length=6, seed=3)
    written = write_flare_split(tmp_path / "split", sets, dfa)
    assert [p.name for p in written] == [
        "main.tok", "labels.txt", "num-edits.txt", "log-probabilities.txt", "next-symbols.jsonl"
    ]
    back = read_flare_split(tmp_path / "split", dfa.alphabet)
    assert _file_rows(back) == _rows(sets, dfa.alphabet)
    assert back.lines.tolist() == list(range(1, len(back) + 1))
    # Grouping by length gives back the sets themselves.
    for original, regrouped in zip(sets, back.by_length()):
        assert regrouped.length == original.length
        assert np.array_equal(regrouped.symbols, original.symbols) and np.array_equal(regrouped.labels, original.labels)
    # FLaRe's encoding: symbols separated by single spaces, labels 0/1, the empty string an empty line.
    lines = (tmp_path / "split" / "main.tok").read_text().split("\n")[:-1]
    assert lines[: sum(len(s) for s in sets if s.length == 0)] == [""] * sum(len(s) for s in sets if s.length == 0)
    assert all(line.split(" ") == line.split() for line in lines if line)
    assert set((tmp_path / "split" / "labels.txt").read_text().split()) <= {"0", "1"}


def test_flare_inferred_alphabet_is_the_sorted_token_set(tmp_path):
    dfa = _dfa("re:('open' 'close')*")
    write_flare_split(tmp_path, test_sets(dfa, [2, 4], n_per_length=4), dfa)
    back = read_flare_split(tmp_path)
    assert back.alphabet == ("close", "open")  # FLaRe sorts its vocabulary
    assert len(back) == 8


def test_flare_extras_match_independent_computations(tmp_path):
    """num-edits: one line per negative ("1" near-miss, "" uniform); log-probabilities: one per positive,
    -log(#lengths with positives) - log(#members of that length) by brute force; next-symbols: one JSON
    array per positive with len+1 entries, checked by extending each prefix by brute force."""
    import itertools

    dfa = _dfa("Σ*abΣ*")  # over {a, b, c}
    lengths = [2, 3, 4]
    sets = test_sets(dfa, lengths, n_per_length=8, seed=1)
    write_flare_split(tmp_path, sets, dfa)
    labels = [int(x) for x in (tmp_path / "labels.txt").read_text().split()]
    edits = (tmp_path / "num-edits.txt").read_text().split("\n")[:-1]
    near = [flag for s in sets for flag, label in zip(s.near_miss.tolist(), s.labels.tolist()) if not label]
    assert len(edits) == labels.count(0) and edits == ["1" if flag else "" for flag in near]
    members = {n: sum(bool(accepts(dfa, ["".join(w)])[0]) for w in itertools.product("abc", repeat=n)) for n in lengths}
    logs = [float(x) for x in (tmp_path / "log-probabilities.txt").read_text().split()]
    expected = [-math.log(3) - math.log(members[s.length]) for s in sets for label in s.labels.tolist() if label]
    assert np.allclose(logs, expected, rtol=0, atol=1e-12)
    strings = [line.split() for line in (tmp_path / "main.tok").read_text().split("\n")[:-1]]
    entries = [json.loads(line) for line in (tmp_path / "next-symbols.jsonl").read_text().split("\n")[:-1]]
    positives = [s for s, label in zip(strings, labels) if label]
    assert len(entries) == len(positives)

    def extendable(prefix):  # some completion of length <= 3 is a member (enough for Σ*abΣ*)
        return any(accepts(dfa, [prefix + "".join(t)])[0] for k in range(3) for t in itertools.product("abc", repeat=k))

    for symbols, entry in zip(positives, entries):
        assert len(entry) == len(symbols) + 1
        for position, item in enumerate(entry):
            prefix = "".join(symbols[:position])
            assert item["e"] == bool(accepts(dfa, [prefix])[0])
            assert item["s"] == " ".join(c for c in "abc" if extendable(prefix + c))


def test_flare_without_next_symbols(tmp_path):
    dfa = _dfa("(ab)*")
    written = write_flare_split(tmp_path, test_sets(dfa, [2], n_per_length=2), dfa, next_symbols=False)
    assert "next-symbols.jsonl" not in [p.name for p in written] and not (tmp_path / "next-symbols.jsonl").exists()


def test_flare_refuses_symbols_with_blanks(tmp_path):
    dfa = _dfa("re:('long name' b)*")
    with pytest.raises(FormalRopeError, match="whitespace"):
        write_flare_split(tmp_path, test_sets(dfa, [2], n_per_length=2), dfa)


@pytest.mark.parametrize("spec", ["(ab)*", "re:('open' 'close')*", "re:('long name' \"it's\")*"])
def test_mlregtest_round_trip(tmp_path, spec):
    dfa = _dfa(spec)
    # Length 0 is left out: MLRegTest files cannot hold the empty string (issue 22; test_formats_peers.py).
    sets = test_sets(dfa, [1, 3, 4, 6], n_per_length=6, seed=2)
    path = write_mlregtest_file(tmp_path / "x_TestLR.txt", sets, dfa.alphabet)
    text = path.read_text()
    assert all(re.fullmatch(r"[^\t]*\t(TRUE|FALSE)", line) for line in text.split("\n")[:-1])
    for alphabet in (dfa.alphabet, None):  # given, or learnt from the file
        back = read_mlregtest_file(path, alphabet)
        assert set(back.alphabet) <= set(dfa.alphabet)
        assert _file_rows(back) == _rows(sets, back.alphabet if alphabet is None else dfa.alphabet)


def test_mlregtest_reads_the_benchmark_layout(tmp_path):
    """MLRegTest's own files: concatenated single-character strings, TRUE/FALSE; one language per
    <id>_Train.txt with its _Test*.txt files beside it (several languages share a folder)."""
    for language, strings in (("04.04.SL.2.1.0", ["abcd", "dd"]), ("04.04.SL.2.1.1", ["a"])):
        (tmp_path / f"{language}_Train.txt").write_text("".join(f"{s}\tTRUE\n" for s in strings) + "bb\tFALSE\n")
        (tmp_path / f"{language}_TestLR.txt").write_text("abcdabcd\tTRUE\n")
        (tmp_path / f"{language}_TestSA.txt").write_text("ab\tFALSE\nabc\tTRUE\n")
    data = load_dataset(tmp_path / "04.04.SL.2.1.0")
    assert data.format == "mlregtest" and data.alphabet == ("a", "b", "c", "d")
    assert _file_rows(data.train) == [("abcd", True), ("dd", True), ("bb", False)]
    assert [(s.length, s.labels.tolist()) for s in data.test_sets()] == [(2, [False]), (3, [True]), (8, [True])]
    with pytest.raises(FormalRopeError, match="2 \\*_Train.txt"):
        locate_dataset(tmp_path)


def test_parquet_round_trip(tmp_path):
    dfa = _dfa("re:('long name' b)*")
    sets = test_sets(dfa, [1, 2, 4], n_per_length=4)
    path = write_parquet_file(tmp_path / "s.parquet", sets, dfa.alphabet)
    back = read_parquet_strings(path, dfa.alphabet)
    assert _file_rows(back) == _rows(sets, dfa.alphabet)


def test_flare_language_folder_and_content_hash(tmp_path):
    dfa = _dfa("(ab)*")
    write_flare_split(tmp_path / "ab", test_sets(dfa, range(0, 5), n_per_length=4), dfa)
    with pytest.raises(FormalRopeError, match="no test split"):
        load_dataset(tmp_path / "ab")
    write_flare_split(tmp_path / "ab" / "datasets" / "test", test_sets(dfa, [6, 8], n_per_length=4), dfa)
    data = load_dataset(tmp_path / "ab")
    assert data.format == "flare" and data.alphabet == ("a", "b")
    assert [s.length for s in data.test_sets()] == [6, 8] and len(data.train) == 20
    first = data.content_hash
    assert load_dataset(tmp_path / "ab").content_hash == first  # a pure function of the bytes
    labels = tmp_path / "ab" / "datasets" / "test" / "labels.txt"
    flipped = labels.read_text().replace("1", "x", 1).replace("0", "1", 1).replace("x", "0", 1)
    labels.write_text(flipped)
    assert load_dataset(tmp_path / "ab").content_hash != first


def test_check_labels_names_the_first_wrong_line(tmp_path):
    dfa = _dfa("(ab)*")
    (tmp_path / "x_Train.txt").write_text("ab\tTRUE\nba\tFALSE\nabab\tFALSE\naba\tFALSE\nb\tTRUE\n")
    strings = read_mlregtest_file(tmp_path / "x_Train.txt", dfa.alphabet)
    with pytest.raises(DataFormatError) as caught:
        check_labels(strings, dfa)
    assert caught.value.line == 3 and "x_Train.txt:3:" in str(caught.value) and "'abab'" in str(caught.value)
    assert "2 of 5 labels" in str(caught.value)


@pytest.mark.parametrize(
    "files, fragment",
    [
        ({"main.tok": "a b\nb\n", "labels.txt": "1\n2\n"}, "labels.txt:2: expected a label 0 or 1, got '2'"),
        ({"main.tok": "a b\nb\na\n", "labels.txt": "1\n0\n"}, "labels.txt: has 2 lines but main.tok has 3"),
        ({"main.tok": "a b\nb z\n", "labels.txt": "1\n0\n"}, "main.tok:2: symbol 'z' is not in the alphabet"),
    ],
)
def test_malformed_flare_names_file_and_line(tmp_path, files, fragment):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(DataFormatError, match=re.escape(fragment)):
        read_flare_split(tmp_path, ("a", "b"))


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("ab\tTRUE\nab TRUE\n", "x.txt:2: expected string<TAB>TRUE or string<TAB>FALSE"),
        ("ab\tTRUE\nab\tyes\n", "x.txt:2: expected the label TRUE or FALSE"),
        ("ab\tTRUE\n\n", "x.txt:2: expected string<TAB>"),
        ("ab\tTRUE\nac\tFALSE\n", "x.txt:2: symbol 'c' is not in the alphabet"),
    ],
)
def test_malformed_mlregtest_names_file_and_line(tmp_path, text, fragment):
    (tmp_path / "x.txt").write_text(text)
    with pytest.raises(DataFormatError, match=re.escape(fragment)):
        read_mlregtest_file(tmp_path / "x.txt", ("a", "b"))


def test_sample_formats_cli(tmp_path, capsys):
    code, out, _ = run_main(capsys, ["sample", "re:('open' 'close')*", "--lengths", "0..4", "--n", "4",
                                     "--format", "flare", "--out", str(tmp_path / "f"), "--json", "--quiet"])
    summary = json.loads(out)
    assert code == 0 and summary["format"] == "flare" and len(summary["files"]) == 5
    assert len(read_flare_split(tmp_path / "f")) == 20
    code, out, _ = run_main(capsys, ["sample", "(ab)*", "--lengths", "2,4", "--n", "2", "--format", "mlregtest",
                                     "--out", str(tmp_path / "ab_TestLR.txt"), "--json", "--quiet"])
    assert code == 0 and (tmp_path / "ab_TestLR.txt").read_text().count("\n") == 4
    code, _, err = run_main(capsys, ["sample", "(ab)*", "--format", "flare"])
    assert code == 2 and "without --out" in err
    code, _, err = run_main(capsys, ["sample", "(ab)*", "--format", "csv", "--out", str(tmp_path / "x")])
    assert code == 2 and "flare, mlregtest or parquet" in err


def test_sample_flare_is_torch_free(tmp_path):
    out = tmp_path / "f"
    torch_free_stdout(main_call(["sample", "(ab)*", "--lengths", "1..3", "--n", "2", "--format", "flare",
                                 "--out", str(out), "--quiet", "--json"]))
    assert (out / "main.tok").exists()


def test_training_batches_from_a_file_are_balanced_rows_of_the_file(tmp_path):
    dfa = _dfa("(ab)*")
    write_flare_split(tmp_path / "ab", test_sets(dfa, range(0, 9), n_per_length=6, seed=4), dfa)
    write_flare_split(tmp_path / "ab" / "datasets" / "test", test_sets(dfa, [10], n_per_length=2), dfa)
    data = load_dataset(tmp_path / "ab", dfa.alphabet)
    rows = set(_file_rows(data.train))
    batch = data.training_batch(np.random.default_rng(0), 9)
    assert batch.labels.sum() == 5 and len(batch) == 9
    texts = decode(batch.symbols, dfa.alphabet, batch.lengths)
    assert all((text, label) in rows for text, label in zip(texts, batch.labels.tolist()))
    again = data.training_batch(np.random.default_rng(0), 9)
    assert np.array_equal(again.symbols, batch.symbols) and np.array_equal(again.labels, batch.labels)
    (tmp_path / "ab" / "labels.txt").write_text("1\n" * len(data.train))
    with pytest.raises(FormalRopeError, match="no negative string"):
        load_dataset(tmp_path / "ab", dfa.alphabet).training_batch(np.random.default_rng(0), 4)
