"""The .att reader against OpenFst itself: every MLRegTest file whose first line does not start at
state 0, and a seeded sample of the others, must read as `fstcompile` reads it.

The independent reader is Debian's libfst-tools (`fstcompile`, `fstprint`, `fstequivalent`;
installed by .ci/run). Two checks per file: (1) our DFA, written back as an acceptor with its start
on the first line, is `fstequivalent` to the original file compiled by `fstcompile`; (2) our DFA's
answers equal a walk over `fstprint`'s listing of the compiled file (start state 0, as fstcompile
renumbers it) on every string up to a length and on random longer strings.
"""

from __future__ import annotations

import itertools
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from formal_rope.automata import accepts, load_att, minimize
from formal_rope.errors import FormalRopeError

TOOLS = ("fstcompile", "fstprint", "fstequivalent")
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
needs_openfst = pytest.mark.skipif(
    bool(MISSING), reason=f"OpenFst tools {MISSING} not installed (Debian: apt-get install libfst-tools)"
)
SAMPLE_OF_OTHERS = 12


def first_state(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.split():
            return int(line.split()[0])
    raise AssertionError(f"{path} has no lines")


def mlregtest_split(mlregtest_dir: Path) -> tuple[list[Path], list[Path]]:
    files = sorted(mlregtest_dir.glob("*.att"))
    elsewhere = [path for path in files if first_state(path) != 0]
    rng = random.Random(43)
    others = rng.sample([path for path in files if first_state(path) == 0], SAMPLE_OF_OTHERS)
    return elsewhere, others


def test_eighteen_files_start_elsewhere(mlregtest_dir):
    elsewhere, _ = mlregtest_split(mlregtest_dir)
    names = {path.name for path in elsewhere}
    assert len(elsewhere) == 18
    assert {"04.04.Zp.3.1.6.att", "16.16.Zp.2.1.1.att", "16.16.SF.0.0.2.att", "16.16.SF.0.0.4.att"} <= names
    assert first_state(mlregtest_dir / "16.16.SF.0.0.4.att") == 34


def symbol_table(alphabet, folder: Path) -> Path:
    path = folder / "symbols.txt"
    path.write_text("<eps> 0\n" + "".join(f"{symbol} {index}\n" for index, symbol in enumerate(alphabet, 1)))
    return path


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)


def compiled(att: Path, symbols: Path, out: Path, acceptor: bool) -> Path:
    flags = ["--acceptor", f"--isymbols={symbols}"] if acceptor else [f"--isymbols={symbols}", f"--osymbols={symbols}"]
    result = run("fstcompile", *flags, str(att), str(out))
    assert result.returncode == 0, result.stderr
    return out


def printed_walker(fst: Path, symbols: Path):
    """A membership test read from `fstprint`'s listing alone: arcs by (state, label), final states;
    the start is 0 (fstcompile numbers the first line's state 0, and fstprint lists it first)."""
    listing = run("fstprint", f"--isymbols={symbols}", f"--osymbols={symbols}", str(fst))
    assert listing.returncode == 0, listing.stderr
    arcs, finals, first = {}, set(), None
    for line in listing.stdout.splitlines():
        fields = line.split()
        first = int(fields[0]) if first is None else first
        if len(fields) >= 4:
            if len(fields) == 5 and fields[4] in ("Infinity", "inf"):
                continue
            arcs[(int(fields[0]), fields[2])] = int(fields[1])
        elif len(fields) == 1 or fields[1] not in ("Infinity", "inf"):
            finals.add(int(fields[0]))
    assert first == 0, "fstcompile renumbers the initial state 0"

    def accepted(string: str) -> bool:
        state = 0
        for symbol in string:
            state = arcs.get((state, symbol))
            if state is None:
                return False
        return state in finals

    return accepted


def written_back(dfa, path: Path) -> Path:
    """Our DFA as an AT&T acceptor, start state first (so fstcompile takes it as initial)."""
    order = [dfa.start, *[q for q in range(dfa.n_states) if q != dfa.start]]
    lines = [f"{q} {int(dfa.transitions[q, column])} {symbol}"
             for q in order for column, symbol in enumerate(dfa.alphabet)]
    lines += [str(q) for q in order if dfa.accepting[q]]
    path.write_text("\n".join(lines) + "\n")
    return path


def strings_to_check(alphabet, rng: random.Random) -> list[str]:
    longest = 7 if len(alphabet) <= 4 else 3
    every = ["".join(word) for n in range(longest + 1) for word in itertools.product(alphabet, repeat=n)]
    longer = ["".join(rng.choice(alphabet) for _ in range(rng.randint(longest + 1, 40))) for _ in range(2000)]
    return every + longer


@needs_openfst
def test_reads_as_fstcompile_reads(mlregtest_dir, tmp_path):
    elsewhere, others = mlregtest_split(mlregtest_dir)
    rng = random.Random(7)
    for path in elsewhere + others:
        ours = load_att(path)
        folder = tmp_path / path.stem
        folder.mkdir()
        symbols = symbol_table(ours.alphabet, folder)
        theirs = compiled(path, symbols, folder / "theirs.fst", acceptor=False)
        mine = compiled(written_back(ours, folder / "ours.att"), symbols, folder / "ours.fst", acceptor=True)
        verdict = run("fstequivalent", str(theirs), str(mine))
        assert verdict.returncode == 0, f"{path.name}: fstequivalent says the readings differ {verdict.stderr}"
        accepted = printed_walker(theirs, symbols)
        strings = strings_to_check(ours.alphabet, rng)
        expected = np.array([accepted(string) for string in strings])
        assert (accepts(ours, strings) == expected).all(), path.name
        assert (accepts(minimize(ours), strings) == expected).all(), path.name


@needs_openfst
def test_fstequivalent_tells_a_state_0_reading_apart(mlregtest_dir, tmp_path):
    """The check above has teeth: reading 04.04.Zp.3.1.6 from state 0 (the old reading) gives a
    language fstequivalent rejects."""
    path = mlregtest_dir / "04.04.Zp.3.1.6.att"
    ours = load_att(path)
    lines = path.read_text().splitlines()
    start_zero = tmp_path / "zero.att"
    start_zero.write_text("\n".join([next(line for line in lines if line.split()[0] == "0"), *lines]) + "\n")
    symbols = symbol_table(ours.alphabet, tmp_path)
    theirs = compiled(path, symbols, tmp_path / "theirs.fst", acceptor=False)
    old = compiled(written_back(load_att(start_zero), tmp_path / "old.att"), symbols, tmp_path / "old.fst", True)
    assert run("fstequivalent", str(theirs), str(old)).returncode != 0


def test_first_line_state_is_initial(tmp_path):
    path = tmp_path / "x.att"
    path.write_text("2\t0\ta\ta\n0\t2\tb\tb\n0\n")  # start 2: the language is a(ba)*
    dfa = load_att(path)
    assert dfa.start == 0 and dfa.n_states == 3
    assert accepts(dfa, ["a", "aba", "", "b", "ab", "ababa"]).tolist() == [True, True, False, False, False, True]


def test_first_line_may_be_a_final_state_line(tmp_path):
    """fstcompile takes the state of a first final-state line as initial (`3\\n3 1 a\\n1` accepts
    ε and a); an absent (inf) first arc still names the initial state."""
    path = tmp_path / "x.att"
    path.write_text("3\n3 1 a a\n1\n")
    assert accepts(load_att(path), ["", "a", "aa"]).tolist() == [True, True, False]
    absent = tmp_path / "y.att"
    absent.write_text("3 1 a a inf\n3 2 b b\n2\n1 3 a a\n")
    assert accepts(load_att(absent), ["", "a", "b", "bb"]).tolist() == [False, False, True, False]


def test_empty_and_final_only_files(tmp_path):
    empty = tmp_path / "empty.att"
    empty.write_text("\n\n")
    with pytest.raises(FormalRopeError, match="no initial state"):
        load_att(empty)
    finals_only = tmp_path / "finals.att"
    finals_only.write_text("3\n1\n")
    with pytest.raises(FormalRopeError, match="give the alphabet"):
        load_att(finals_only)
    # as fstcompile reads it: state 3 is initial and final, so the language is {ε}
    assert accepts(load_att(finals_only, alphabet=("a", "b")), ["", "a", "ab"]).tolist() == [True, False, False]
