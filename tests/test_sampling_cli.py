"""`formalrope sample`: JSON lines, Parquet output, length syntax, user errors, no torch import."""

from __future__ import annotations

import json
import re

import pytest

from cli_support import torch_free_stdout
from formal_rope.cli import main
from formal_rope.commands.sample import parse_lengths
from formal_rope.errors import FormalRopeError


def _run(capsys, *argv):
    main(list(argv))
    return capsys.readouterr()


def test_parse_lengths_syntax():
    assert parse_lengths("41..45") == [41, 42, 43, 44, 45]
    assert parse_lengths("10,20,30") == [10, 20, 30]
    assert parse_lengths("5") == [5]
    assert parse_lengths("1..3, 10") == [1, 2, 3, 10]
    for bad in ("", "3..x", "9..2", "-1", "a"):
        with pytest.raises(FormalRopeError):
            parse_lengths(bad)


def test_json_lines_are_labelled_correctly(capsys):
    captured = _run(capsys, "sample", "re:[abc]*ab[abc]*", "--lengths", "6,9", "--n", "10", "--seed", "3")
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert len(rows) == 20
    assert {row["length"] for row in rows} == {6, 9}
    for row in rows:
        assert set(row) == {"string", "label", "length", "near_miss"}
        assert len(row["string"]) == row["length"]
        assert row["label"] == ("ab" in row["string"])
        assert not (row["near_miss"] and row["label"])
    assert sum(row["label"] for row in rows) == 10
    assert sum(row["near_miss"] for row in rows) == 6  # 5 negatives per length, 5 * 0.5 rounds up to 3
    assert "read as a regular expression" not in captured.err  # re: prefix: nothing was guessed


def test_json_lines_are_reproducible_and_notes_go_to_stderr(capsys):
    first = _run(capsys, "sample", "(aa)*", "--lengths", "3..4", "--n", "4")
    second = _run(capsys, "sample", "(aa)*", "--lengths", "3..4", "--n", "4")
    assert first.out == second.out
    rows = [json.loads(line) for line in first.out.splitlines()]
    assert [(row["string"], row["label"]) for row in rows] == [("aaa", False)] * 4 + [("aaaa", True)] * 4
    assert "only negative strings exist at length 3" in first.err
    assert "only positive strings exist at length 4" in first.err


def test_parquet_output_and_json_summary(tmp_path, capsys):
    pandas = pytest.importorskip("pandas")
    out = tmp_path / "nested" / "set.parquet"
    captured = _run(capsys, "sample", "(ab)*", "--lengths", "41..44", "--n", "16", "--out", str(out), "--json")
    summary = json.loads(captured.out)
    frame = pandas.read_parquet(out)
    assert list(frame.columns) == ["string", "label", "length", "near_miss"]
    assert len(frame) == summary["strings"] == 64
    assert summary["one_class_lengths"] == 2 and summary["lengths"] == [41, 42, 43, 44]
    even = frame[frame.length % 2 == 0]
    assert even.label.sum() == 16 and even.near_miss.sum() == 8
    assert all((re.fullmatch("(ab)*", s) is not None) == label for s, label in zip(frame.string, frame.label))
    assert not (tmp_path / "nested" / "set.parquet.tmp").exists()


def test_rich_summary_mentions_the_file(tmp_path, capsys):
    out = tmp_path / "s.parquet"
    captured = _run(capsys, "sample", "parity", "--lengths", "5", "--n", "8", "--out", str(out))
    assert "8 (4 positive, 4 negative)" in captured.out and "near-misses" in captured.out
    assert out.exists() and "written" in captured.out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sample", "(ab", "--lengths", "3"], "never closed"),
        (["sample", "(ab)*", "--lengths", "3..x"], "is not a length"),
        (["sample", "(ab)*", "--near-miss", "2"], "near-miss"),
        # Refused before any work (these used to end in MemoryError after minutes, or a
        # 10^10-element list while --lengths was expanded).
        (["sample", "(ab)*", "--lengths", "0..20000", "--n", "8"], "1,600,080,000 symbols"),
        (["sample", "(ab)*", "--lengths", "0..10000000000"], "more than 1,000,000 lengths"),
    ],
)
def test_user_errors_exit_2_without_traceback(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_sample_command_does_not_import_torch():
    stdout = torch_free_stdout(
        "import typer\n"
        "from formal_rope.commands import sample\n"
        "app = typer.Typer(); app.command('sample')(sample.sample_command)\n"
        "@app.command()\n"
        "def other() -> None: pass\n"
        "run = lambda: app(['sample', 'ab_star', '--lengths', '4', '--n', '2'], standalone_mode=False)\n"
    )
    assert stdout.count('"length": 4') == 2


def test_negative_seed_is_a_user_error_and_dash_a_sets_the_alphabet(capsys):
    """--seed -1 used to end in numpy's SeedSequence traceback; -a was missing on `sample` only."""
    with pytest.raises(SystemExit) as exit_info:
        main(["sample", "(ab)*", "--seed", "-1", "--lengths", "2"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--seed" in err and "Traceback" not in err
    with pytest.raises(FormalRopeError, match="seed"):
        from formal_rope.automata import language_dfa
        from formal_rope.lang.source import resolve_language
        from formal_rope.sampling import test_set

        test_set(language_dfa(resolve_language("(ab)*")), 4, seed=-1)
    out = _run(capsys, "sample", "re:a*", "-a", "ab", "--lengths", "3", "--n", "4", "--quiet").out
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["label"] for row in rows] == [True, True, False, False]
    assert all(re.fullmatch("a*", row["string"]) for row in rows[:2]) and all("b" in row["string"] for row in rows[2:])


def test_repeated_lengths_are_sampled_once_with_a_note(capsys):
    from formal_rope.commands.sample import distinct_lengths

    assert distinct_lengths([3, 2, 3, 4, 2]) == ([3, 2, 4], [3, 2])
    captured = _run(capsys, "sample", "(ab)*", "--lengths", "3,2..4,2", "--n", "2")
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [row["length"] for row in rows] == [3, 3, 2, 2, 4, 4]
    assert len({(row["string"], row["length"]) for row in rows}) == len(rows)
    assert "--lengths lists 3, 2 more than once" in captured.err
    quiet = _run(capsys, "sample", "(ab)*", "--lengths", "3,3", "--n", "2", "--quiet")
    assert len(quiet.out.splitlines()) == 2 and quiet.err == ""


def test_summary_reports_the_lengths_actually_sampled(tmp_path, capsys):
    # Issue 9: `--lengths 1,3,7,20 --json` reported "lengths": [1, 20] and the table "1..20 (4 lengths)".
    out = tmp_path / "s.parquet"
    summary = json.loads(_run(capsys, "sample", "(ab)*", "--lengths", "1,3,7,20", "--n", "4", "--out", str(out),
                              "--json").out)
    assert summary["lengths"] == [1, 3, 7, 20] and summary["n_lengths"] == 4
    table = _run(capsys, "sample", "(ab)*", "--lengths", "1,3,7,20..22", "--n", "4", "--out", str(out)).out
    assert "1, 3, 7, 20..22 (6 lengths)" in table


def test_out_onto_a_directory_is_a_user_error_and_leaves_nothing_behind(tmp_path, capsys):
    # Issue 9: `sample ... --out DIR` raised IsADirectoryError from the rename and left DIR.tmp.
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(SystemExit) as exit_info:
        main(["sample", "(ab)*", "--lengths", "4", "--n", "2", "--out", str(folder)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("error: ") and "is a directory" in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["folder"]
