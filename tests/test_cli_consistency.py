"""Issue 9, item 11: every command reports errors the same way, help shows no value type for flags,
piped tables keep their width, and no error message carries its own `error:` prefix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli_support import run_main
from formal_rope.cli import app

PACKAGE = Path(__file__).resolve().parent.parent / "formal_rope"


@pytest.mark.parametrize(
    "argv",
    [
        ["parse", "P(a"],
        ["parse", "ab", "--kind", "other"],
        ["classify", "(ab"],
        ["dfa", "(ab)*", "--dot", "--json"],
        ["accepts", "re:(ab)*", "abc"],
        ["equiv", "(ab)*", "P(a"],
        ["sample", "(ab)*", "--lengths", "x"],
        ["certify", "--scale", "-1"],
        ["compile", "a S b"],
        ["run", "missing.zip", "a"],
        ["phases", "missing.zip", "a"],
        ["compile", "P(a)", "--bogus"],  # Click usage errors too
        ["certify", "--scale", "abc"],
        ["classify"],
        ["train", "--lang", "(ab)*", "--bogus"],
    ],
)
def test_every_error_is_one_paragraph_starting_with_error(capsys, argv):
    code, out, err = run_main(capsys, argv)
    assert code == 2 and out == ""
    lines = err.rstrip("\n").splitlines()
    first = next(index for index, line in enumerate(lines) if line.startswith("error: "))
    assert all(line.startswith("note: ") for line in lines[:first]), err  # notes may come first
    assert all(line.startswith("  ") for line in lines[first + 1 :]), err  # one paragraph, no blank line
    assert err.count("error: ") == 1 and "Traceback" not in err and "╭" not in err


def test_no_error_message_in_the_package_carries_its_own_prefix():
    """FormalRopeError.render adds `error: `; a message written with it printed `error: error: …`."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        # Any exception built with a message that starts with the prefix (the message may start on
        # the next line), e.g. FormalRopeError(f"error: …") or EmptyClassError("error: …").
        for match in re.finditer(r"""\w*Error\(\s*f?["']error:""", text):
            offenders.append(f"{path.relative_to(PACKAGE)}:{text.count(chr(10), 0, match.start()) + 1}")
    assert offenders == []


def _commands():
    import typer.main

    group = typer.main.get_command(app)
    return group, sorted(group.commands)


@pytest.mark.parametrize("name", [None, *_commands()[1]])
def test_help_shows_no_value_type_for_flags(capsys, name):
    # Typer printed `--json <bool>` as if the flag took a value.
    code, out, err = run_main(capsys, ["--help"] if name is None else [name, "--help"])
    assert code == 0 and "<bool>" not in out and "--help" in out


@pytest.mark.parametrize("name", _commands()[1])
def test_bracketed_words_in_option_help_survive_rich_markup(capsys, monkeypatch, name):
    # Rich read `pip install -e ".[ray]"` in --backend's help as a markup tag and printed `".`.
    monkeypatch.setenv("COLUMNS", "400")
    command = _commands()[0].commands[name]
    code, out, _ = run_main(capsys, [name, "--help"])
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split())
    for param in command.params:
        for word in re.findall(r"\[[^\]\s]*\]", (param.help or "").replace("\\[", "[")):
            assert word in flat, (name, param.name, word)
    assert code == 0


def test_piped_tables_keep_their_natural_width(capsys, monkeypatch):
    # Piped output used Rich's 80 columns: descriptions and expressions were folded mid-word.
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run_main(capsys, ["languages", "--no-classes"])
    long_row = next(line for line in out.splitlines() if "ab_star_ltl" in line)
    assert code == 0 and "MOD_2^1 & !P(a & MOD_2^0) & !P(b & MOD_2^1)" in long_row
    assert "(ab)* as a formula: N even, a at odd and b at even positions" in long_row
    code, out, _ = run_main(capsys, ["classify", "Σ*abΣ*"])
    assert any(len(line) > 80 for line in out.splitlines()) and "MxM = MyM ⇒ x = y" in out
