"""The .att loader on the MLRegTest automata: every file loads, and membership agrees with a
direct walk over the file's partial transition relation."""

from __future__ import annotations

import random

import numpy as np
import pytest

from formal_rope.automata import accepts, equivalent, load_att, minimize

automata_lib = pytest.importorskip("automata.fa.dfa", reason="automata-lib is a test dependency")


def read_partial(path):
    """An independent reading of the file: arcs dict, final-state set and the initial state (the
    first line's state, as OpenFst reads the format)."""
    arcs, finals, initial = {}, set(), None
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields and initial is None:
            initial = int(fields[0])
        if len(fields) == 4:
            arcs[(int(fields[0]), fields[2])] = int(fields[1])
        elif len(fields) == 1:
            finals.add(int(fields[0]))
    return arcs, finals, initial


def walk(arcs, finals, initial, string) -> bool:
    state = initial
    for symbol in string:
        if (state, symbol) not in arcs:
            return False
        state = arcs[(state, symbol)]
    return state in finals


def test_every_file_loads(mlregtest_dir):
    files = sorted(mlregtest_dir.glob("*.att"))
    assert len(files) >= 900
    for path in files:
        dfa = load_att(path)
        sigma = int(path.name.split(".")[0])
        assert len(dfa.alphabet) == sigma, path.name
        assert dfa.transitions.shape == (dfa.n_states, sigma)


def test_membership_matches_partial_walk(mlregtest_dir):
    rng = random.Random(7)
    files = sorted(mlregtest_dir.glob("*.att"))
    # the sample and every file whose first line does not start at state 0
    starts_elsewhere = [path for path in files if read_partial(path)[2] != 0]
    assert len(starts_elsewhere) == 18
    for path in rng.sample(files, 40) + starts_elsewhere:
        arcs, finals, initial = read_partial(path)
        dfa = load_att(path)
        minimal = minimize(dfa)
        strings = ["".join(rng.choice(dfa.alphabet) for _ in range(rng.randint(0, 30))) for _ in range(300)]
        expected = [walk(arcs, finals, initial, s) for s in strings]
        assert accepts(dfa, strings).tolist() == expected, path.name
        assert accepts(minimal, strings).tolist() == expected, path.name
        assert equivalent(dfa, minimal).equivalent


def test_minimal_sizes_match_automata_lib(mlregtest_dir):
    rng = random.Random(3)
    files = sorted(p for p in mlregtest_dir.glob("04.*.att"))
    for path in rng.sample(files, 15):
        dfa = load_att(path)
        theirs = automata_lib.DFA(
            states=set(range(dfa.n_states)),
            input_symbols=set(dfa.alphabet),
            transitions={q: dict(zip(dfa.alphabet, map(int, dfa.transitions[q]))) for q in range(dfa.n_states)},
            initial_state=0,
            final_states={int(q) for q in np.flatnonzero(dfa.accepting)},
        ).minify()
        assert minimize(dfa).n_states == len(theirs.states), path.name


def test_explicit_alphabet_adds_rejecting_symbols(mlregtest_dir):
    path = sorted(mlregtest_dir.glob("04.*.att"))[0]
    dfa = load_att(path)
    wider = load_att(path, alphabet=(*dfa.alphabet, "z"))
    strings = ["", "a", "ab", "abcd", "dcba"]
    assert accepts(wider, strings).tolist() == accepts(dfa, strings).tolist()
    assert not accepts(wider, ["z", "az"]).any()


# ---------------------------------------------------------------- acceptance-pass regressions
def _att_cli(capsys, *argv):
    from cli_support import run_main

    return run_main(capsys, list(argv))


def test_sparse_state_numbers_need_no_dense_table(tmp_path, capsys):
    """State ids are labels: naming state 10^11 used to allocate a 745 GiB table."""
    path = tmp_path / "sparse.att"
    path.write_text("0\t7\ta\ta\n7\t99999999999\tb\tb\n99999999999\n")
    dfa = load_att(path)
    assert dfa.n_states == 4  # 0, 7, 99999999999 and the sink
    assert accepts(dfa, ["ab", "a", "b", ""]).tolist() == [True, False, False, False]
    nondeterministic = tmp_path / "nondet.att"
    nondeterministic.write_text("0\t3\ta\ta\n0\t5\ta\ta\n3\n")
    code, _, err = _att_cli(capsys, "dfa", str(nondeterministic))
    assert code == 2 and "state 0 already goes to 3 on 'a'" in err  # file numbers, not rows


def test_unreadable_and_transitionless_files(tmp_path, capsys):
    binary = tmp_path / "binary.att"
    binary.write_bytes(b"\xff\xfe\n")
    code, _, err = _att_cli(capsys, "dfa", str(binary))
    assert code == 2 and "cannot read automaton file" in err and "Traceback" not in err
    code, _, err = _att_cli(capsys, "dfa", str(tmp_path))  # a directory, not found
    assert code == 2 and "Traceback" not in err
    folder = tmp_path / "folder.att"
    folder.mkdir()
    code, _, err = _att_cli(capsys, "dfa", str(folder))
    assert code == 2 and "is not a file" in err
    # Only a final state: the language {ε}. The error asks for --alphabet, which must then work.
    only_final = tmp_path / "epsilon.att"
    only_final.write_text("0\n")
    code, _, err = _att_cli(capsys, "dfa", str(only_final))
    assert code == 2 and "--alphabet" in err
    code, out, _ = _att_cli(capsys, "accepts", str(only_final), "--alphabet", "ab", "--json", "", "a")
    assert code == 0 and out.strip() == "[true, false]"


def test_weight_inf_is_the_semiring_zero_not_a_present_arc(tmp_path):
    # OpenFst's tropical weight inf is zero: `1 inf` is not a final state and an arc weighted inf
    # does not exist. They were read as present, so 'a' was accepted by an automaton rejecting it.
    from formal_rope.errors import FormalRopeError

    path = tmp_path / "zero.att"
    path.write_text("0 1 a a inf\n0 2 b b 0.5\n1\n2 inf\n3 -2.5\n0 3 c\n", encoding="utf-8")
    dfa = load_att(path, ("a", "b", "c"))
    assert accepts(dfa, ["a", "b", "c", ""]).tolist() == [False, False, True, False]
    bad = tmp_path / "nan.att"
    bad.write_text("0 1 a\n1 nan\n", encoding="utf-8")
    with pytest.raises(FormalRopeError, match="not a tropical weight"):
        load_att(bad)
