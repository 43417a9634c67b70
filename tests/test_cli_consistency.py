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


def _help_words(text: str) -> list[str]:
    """The words of a help text as Rich prints them (markup escapes undone)."""
    return text.replace("\\[", "[").split()


@pytest.mark.parametrize("name", [None, *_commands()[1]])
def test_no_help_text_is_cut_at_80_columns(capsys, monkeypatch, name):
    # Rich wraps only at blanks and crops a longer word with "…": sweep's --pe list (names joined by
    # commas without blanks) read `…,part…` at 80 columns, and so did sample's --next-symbols and
    # --language-folder. Every word of every option's help (and of every command's description in
    # the command list) must come out whole.
    monkeypatch.setenv("COLUMNS", "80")
    group = _commands()[0]
    command = group if name is None else group.commands[name]
    code, out, _ = run_main(capsys, ["--help"] if name is None else [name, "--help"])
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80
    flat = " " + " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split()) + " "
    texts = [(param.name, param.help or "") for param in command.params]
    if name is None:
        texts += [(sub, (group.commands[sub].help or "").split("\n\n")[0]) for sub in group.commands]
    cut = [(owner, word) for owner, text in texts for word in _help_words(text) if word not in flat]
    assert cut == [], cut
    # Nor anything else (a default value, a type): every "…" printed is one the texts hold.
    assert out.count("…") <= sum(text.count("…") for _, text in texts) + (command.help or "").count("…")


def test_piped_tables_keep_their_natural_width(capsys, monkeypatch):
    # Piped output used Rich's 80 columns: descriptions and expressions were folded mid-word.
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run_main(capsys, ["languages", "--no-classes"])
    long_row = next(line for line in out.splitlines() if "ab_star_ltl" in line)
    assert code == 0 and "MOD_2^1 & !P(a & MOD_2^0) & !P(b & MOD_2^1)" in long_row
    assert "(ab)* as a formula: N even, a at odd and b at even positions" in long_row
    code, out, _ = run_main(capsys, ["classify", "Σ*abΣ*"])
    assert any(len(line) > 80 for line in out.splitlines()) and "MxM = MyM ⇒ x = y" in out


# ---- second probe pass (issue 9: the same classes of failure, found by trying every command again)

@pytest.mark.parametrize(
    "argv, message",
    [
        # A dry run checks the run options a real run checks (it listed the grid and exited 0).
        (["sweep", "--lang", "(ab)*", "--dry-run", "--pack", "foo"], "--pack"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--pack", "0"], "--pack"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--backend", "foo"], "--backend"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--max-retries", "-1"], "--max-retries"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--cpus-per-run", "0"], "--cpus-per-run"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--gpus-per-run", "1"], "--gpus-per-run"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--address", "1.2.3.4:5"], "--address"),
        # Empty lists fell back to the defaults ('' lrs -> 5e-3), empty items were dropped.
        (["sweep", "--lang", "(ab)*", "--dry-run", "--lrs", ""], "--lrs"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--lrs", ","], "--lrs"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--pe", ""], "--pe"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--base", "1,,2"], "--base"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--pe", "rope_p", "--periods", ""], "--periods"),
        (["sweep", "--lang", "(ab)*", "--dry-run", "--alphabet", ""], "alphabet"),
        # compile: a negative seed was a numpy traceback; --per-length 0 silently sampled nothing.
        (["compile", "P(a)", "-a", "ab", "--seed", "-1"], "--seed"),
        (["compile", "P(a)", "-a", "ab", "--per-length", "0", "--verify-to", "50"], "--per-length 0"),
    ],
)
def test_options_that_cannot_work_are_refused_up_front(capsys, argv, message):
    code, out, err = run_main(capsys, argv)
    assert code == 2 and err.count("error: ") == 1 and message in err and "Traceback" not in err, err


def test_report_grouping_must_name_columns_once(capsys, tmp_path):
    (tmp_path / "runs").mkdir()
    for by in ("pe,pe", "", ","):
        code, _, err = run_main(capsys, ["report", str(tmp_path), "--by", by])
        assert code == 2 and "--by" in err, (by, err)


def test_a_flare_split_is_never_written_onto_a_file(capsys, tmp_path):
    # Was FileExistsError / NotADirectoryError from the writer, exit 1.
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out, named in ((afile, "it is a file"), (afile / "sub", f"{afile} is a file")):
        code, _, err = run_main(capsys, ["sample", "(ab)*", "--lengths", "2", "--n", "2", "--format", "flare",
                                         "--out", str(out)])
        assert code == 2 and named in err and "Traceback" not in err, err
    code, _, err = run_main(capsys, ["compile", "P(a)", "-a", "ab", "--out", str(afile / "m.zip")])
    assert code == 2 and f"{afile} is a file, not a folder" in err
    assert afile.read_text() == "x"


def test_next_symbols_without_flare_is_noted(capsys, tmp_path):
    code, out, err = run_main(capsys, ["sample", "(ab)*", "--lengths", "2", "--n", "2", "--no-next-symbols"])
    assert code == 0 and "--no-next-symbols concerns FLaRe" in err and out.count("\n") == 2


def test_an_empty_weights_file_and_any_eof_are_user_errors(capsys, tmp_path, monkeypatch):
    # A compiled model whose weights.npz is empty printed `error: aborted`, exit 1 (Click turns an
    # EOFError into Abort), without naming the file.
    import zipfile

    good = tmp_path / "m.zip"
    assert run_main(capsys, ["compile", "P(a)", "-a", "ab", "--out", str(good)])[0] == 0
    bad = tmp_path / "empty_weights.zip"
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(bad, "w") as target:
        target.writestr("metadata.json", source.read("metadata.json"))
        target.writestr("weights.npz", b"")
    for command in (["run", str(bad), "a"], ["run", str(bad), "--trace", "a"], ["phases", str(bad), "a"],
                    ["export", str(bad), "--out", str(tmp_path / "x")]):
        code, _, err = run_main(capsys, command)
        assert code == 2 and str(bad) in err and "corrupt compiled model" in err, (command, err)
    # Any other EOFError that reaches the command line is a truncated input, exit 2.
    import formal_rope.commands.parse as parse

    def truncated(*args, **kwargs):
        raise EOFError("no data left")

    monkeypatch.setattr(parse, "resolve_language", truncated)
    code, _, err = run_main(capsys, ["parse", "ab"])
    assert code == 2 and "an input ended early" in err, err


def test_messages_name_what_is_wrong(capsys):
    code, _, err = run_main(capsys, ["run", "/dev/null", "a"])
    assert code == 2 and "is not a regular file" in err
    code, _, err = run_main(capsys, ["compile", "P(a)", "-a", "ab", "-F", "e2m1"])
    assert code == 2 and "wider exponent range" in err and "compile it again with --format e2m1" not in err
    code, _, err = run_main(capsys, ["accepts", "ltl:P(a) & true", "a"])
    assert code == 2 and "true" in err and "Σ" not in err
