"""The dataset-format registry (formal_rope.sampling.formats.registry): every row complete and
true to its module, the CLI reading its choices from it, and a new format added as one module plus
one row (this test module is the toy format's module: docs/formats.md, "How to extend")."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import formal_rope.sampling.formats.registry as registry
from formal_rope.automata import language_dfa
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.sampling import decode, test_sets
from formal_rope.sampling.formats import DataFiles, load_dataset
from formal_rope.sampling.formats.strings import encode_inferred, read_lines, text_words, write_lines
from tests.cli_support import run_main


# ------------------------------------------------------------------ the toy format: "string,label" lines
def check_request(alphabet, lengths):
    if any("," in symbol for symbol in alphabet):
        raise FormalRopeError("a csv-toy line cannot hold a symbol with a comma")


def write(out, sets, dfa, options):
    write_lines(out, [f"{word},{int(label)}" for labeled in sets
                      for word, label in zip(decode(labeled.symbols, dfa.alphabet), labeled.labels.tolist())])
    return [out]


def read_words(path, alphabet):
    rows = [line.rsplit(",", 1) for line in read_lines(path)]
    labels = np.array([label == "1" for _, label in rows], dtype=bool)
    return text_words(path, [word for word, _ in rows], labels, np.arange(1, len(rows) + 1), alphabet)


def read(path, alphabet):
    return encode_inferred(read_words(path, alphabet), alphabet)


def locate(path):
    train, test = Path(path) / "train.csv", Path(path) / "test.csv"
    if not train.is_file():
        return None
    return DataFiles("csv-toy", str(path), train, (test,), files=(train, test), files_root=Path(path))


TOY = registry.DatasetFormat(
    name="csv-toy", help="one string,label file", writes="file", files=("FILE.csv",), module=__name__,
    training_source=True, folder_hint="a csv-toy folder (no train.csv)", path_hint="a csv-toy folder with train.csv",
)


@pytest.fixture
def with_toy(monkeypatch):
    # The module must be importable under its own name (pytest may import it as tests.… or bare).
    monkeypatch.setitem(sys.modules, __name__, sys.modules[__name__])
    monkeypatch.setattr(registry, "DATASET_FORMATS", registry.DATASET_FORMATS + (TOY,))


# -------------------------------------------------------------------------------- completeness
def _rows():
    return list(registry.DATASET_FORMATS)


def _incomplete(row) -> list[str]:
    """What a row leaves out of what the rest of the code asks about its format."""
    problems = [field for field in ("name", "help", "module") if not str(getattr(row, field)).strip()]
    if row.writes not in ("file", "folder"):
        problems.append("writes")
    if not row.files or not all(row.files):
        problems.append("files")
    module = importlib.import_module(row.module)
    for name in registry.PROTOCOL + (registry.TRAINING_PROTOCOL if row.training_source else ()):
        if not callable(getattr(module, name, None)):
            problems.append(f"{row.module}.{name}()")
    if row.training_source and not (row.folder_hint and row.path_hint):
        problems.append("folder_hint/path_hint")
    if bool(row.next_symbols) != bool(row.no_next_symbols_warning):
        problems.append("no_next_symbols_warning")
    for split in row.folder_splits:
        if not (split.name and split.path and 0 <= split.min_length <= split.max_length and split.strings > 0):
            problems.append(f"folder split {split}")
    return problems


@pytest.mark.parametrize("row", _rows() + [TOY], ids=lambda row: row.name)
def test_every_registry_row_is_complete(row, with_toy):
    assert _incomplete(row) == []
    assert len({r.name for r in registry.DATASET_FORMATS}) == len(registry.DATASET_FORMATS)


def test_an_incomplete_row_is_caught(with_toy, monkeypatch):
    assert _incomplete(dataclasses.replace(TOY, help=" ")) == ["help"]
    assert _incomplete(dataclasses.replace(TOY, next_symbols=True)) == ["no_next_symbols_warning"]
    monkeypatch.delitem(globals(), "read_words")
    assert _incomplete(TOY) == [f"{__name__}.read_words()"]


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row.name)
def test_each_format_writes_its_files_and_reads_them_back(tmp_path, row):
    dfa = language_dfa(resolve_language("(ab)*"))
    sets = test_sets(dfa, [1, 2, 4], n_per_length=4, seed=1)
    out = tmp_path / ("split" if row.writes == "folder" else "x_Train.txt")
    written = row.write(out, sets, dfa, registry.WriteOptions())
    if row.writes == "folder":
        assert [path.name for path in written] == list(row.files)
    back = row.read(out, dfa.alphabet)
    assert back.labels.tolist() == [label for s in sets for label in s.labels.tolist()]


def test_the_cli_reads_format_choices_and_help_from_the_registry(capsys, monkeypatch, with_toy):
    assert "csv-toy (one string,label file)" in registry.format_help()
    code, _, err = run_main(capsys, ["sample", "(ab)*", "--format", "csv", "--out", "x"])
    assert code == 2 and "flare, mlregtest, parquet or csv-toy" in err


# ------------------------------------------------------------------- a new format, end to end
def test_a_toy_format_round_trips_through_sample_and_its_reader(tmp_path, capsys, with_toy):
    for name, lengths in (("train.csv", "0..6"), ("test.csv", "7..9")):
        code, out, err = run_main(capsys, ["sample", "(ab)*", "--lengths", lengths, "--n", "4", "--format", "csv-toy",
                                           "--out", str(tmp_path / name), "--json", "--quiet"])
        assert code == 0, err
        assert json.loads(out)["format"] == "csv-toy"
    strings = registry.dataset_format("csv-toy").read(tmp_path / "train.csv", ("a", "b"))
    assert len(strings) == 28 and strings.labels.sum() == 4 + 3 * 2  # length 0 all positive; 2, 4, 6 half
    data = load_dataset(tmp_path, ("a", "b"))  # what `train --data DIR` reads
    assert data.format == "csv-toy" and [s.length for s in data.test_sets()] == [7, 8, 9]
    code, _, err = run_main(capsys, ["sample", "re:('x,y' a)*", "--lengths", "2", "--format", "csv-toy",
                                     "--out", str(tmp_path / "bad.csv")])
    assert code == 2 and "comma" in err  # the row's check_request runs before sampling


def test_no_format_recognises_a_folder_message_names_every_source(tmp_path, with_toy):
    with pytest.raises(FormalRopeError, match="nor a csv-toy folder \\(no train.csv\\)"):
        load_dataset(tmp_path)


def test_the_registry_keeps_numpy_off_the_cli_start_up():
    """`sample --help` lists the formats and distributions from the registry at start-up, which
    must not import numpy or the format modules (every command's start-up registers `sample`)."""
    import subprocess

    script = ("import sys\nfrom formal_rope.cli import main\ntry:\n    main(['sample', '--help'])\nexcept SystemExit:\n"
              "    pass\nassert 'numpy' not in sys.modules, 'numpy was imported'\n"
              "assert 'formal_rope.sampling.formats.flare' not in sys.modules\nprint('light')\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "light" in result.stdout and "csv-toy" not in result.stdout, result.stderr
    assert "--distribution" in result.stdout and "--language-folder" in result.stdout
