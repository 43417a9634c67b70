"""Output off a terminal (a redirected or CI log): plain, complete progress lines as work is done,
never a bar frame squeezed into 80 columns; and counts and lengths shown as they are (issue 35.10)."""

from __future__ import annotations

import io
import re

from rich.console import Console
from rich.progress import Progress

from cli_support import run_main
from formal_rope.progress import LineProgress, progress_display
from sweeps_support import fake_runner

TINY = ["--layers", "1", "--d-model", "16", "--heads", "2", "--batch-size", "16", "--steps", "20",
        "--test-lengths", "41..50", "--n-per-length", "4", "--seed", "1"]
BAR_CHARACTERS = ("━", "…")  # a Rich bar, or a column Rich cut to fit


def test_a_log_gets_one_complete_line_per_tenth_of_a_task():
    log = io.StringIO()
    console = Console(file=log, width=40)  # a narrow, non-terminal console: lines must not be cut to it
    display = progress_display(console=console, label="work")
    assert isinstance(display, LineProgress)
    info = "a long description of what the work is doing, wider than forty columns"
    with display:
        task = display.add_task("", total=50, info=info)
        for done in range(1, 51):
            display.update(task, completed=done)
    lines = log.getvalue().splitlines()
    assert len(lines) == 10
    assert [re.match(r"work: (\d+)/50 \(\d+%\)", line)[1] for line in lines] == [str(5 * k) for k in range(1, 11)]
    assert all(info in line and "elapsed" in line for line in lines)
    assert "left" in lines[0] and "left" not in lines[-1]
    assert not any(character in log.getvalue() for character in BAR_CHARACTERS)
    # A task without a total yet, and a caller that prints its own lines, print nothing.
    silent = io.StringIO()
    quiet = progress_display(console=Console(file=silent), label="x", lines=0)
    quiet.advance(quiet.add_task("", total=3), 3)
    unknown = progress_display(console=Console(file=silent), label="x")
    unknown.advance(unknown.add_task("", total=None), 3)
    assert silent.getvalue() == ""
    # On a terminal: the live bar.
    assert isinstance(progress_display(console=Console(file=io.StringIO(), force_terminal=True), label="x"), Progress)


def test_redirected_training_logs_each_stage_in_plain_lines(capsys):
    # Regression: `train` with stderr redirected printed only the bars' last frames, cut to 80 columns
    # ('100/… 0:00… eta 0:00:…').
    code, _, err = run_main(capsys, ["train", "--lang", "(ab)*", "--pe", "nope", *TINY, "--no-save"])
    assert code == 0, err
    train = [line for line in err.splitlines() if re.match(r"nope \(ab\)\* train: \d+/20 ", line)]
    evaluation = [line for line in err.splitlines() if re.match(r"nope \(ab\)\* eval: \d+/10 ", line)]
    assert train and train[-1].startswith("nope (ab)* train: 20/20 (100%) loss ")
    assert len(evaluation) == 10 and evaluation[-1].startswith("nope (ab)* eval: 10/10 (100%) len 50 acc ")
    assert not any(character in err for character in BAR_CHARACTERS)


def test_redirected_sweep_logs_each_run_as_it_starts_and_finishes(tmp_path, capsys, monkeypatch):
    # Regression: `reproduce` with its output redirected printed nothing until the first pack had
    # finished (232 s), and a cut bar at its end.
    import formal_rope.sweeps.runner as runner_module

    real_run_sweep = runner_module.run_sweep
    monkeypatch.setattr(runner_module, "run_sweep", lambda *a, **k: real_run_sweep(*a, **{**k, "runner": fake_runner}))
    code, out, err = run_main(capsys, ["sweep", "--lang", "(ab)*", "--pe", "nope,rope", "--base", "1e4", "--seeds", "1",
                                       "--out", str(tmp_path)])
    assert code == 0, err
    lines = out.splitlines()
    started = [index for index, line in enumerate(lines) if line.startswith("started  (ab)* ")]
    finished = [index for index, line in enumerate(lines) if line.startswith("ok       (ab)* ")]
    assert len(started) == len(finished) == 2 and started[0] < finished[0]
    progress = out.split("run(s) finished")[0]  # what the sweep printed before its table
    assert not any(character in progress for character in BAR_CHARACTERS)


def test_attack_shows_listed_lengths_as_given_and_logs_its_lengths(tmp_path, capsys):
    # Regression: `attack --lengths 41,43,45` showed "41..45 (3 lengths)".
    model = tmp_path / "y.zip"
    code, _, err = run_main(capsys, ["compile", "Y(a)", "-a", "ab", "--freq", "0.8985979", "--scale", "1024",
                                     "--verify-to", "0", "--exhaustive", "2", "--out", str(model)])
    assert code == 0, err
    code, out, err = run_main(capsys, ["attack", str(model), "--lengths", "3,5,7", "--budget", "16", "--all-lengths"])
    assert code == 0 and "3, 5, 7 (3 lengths)" in out and "3..7" not in out
    assert re.search(r"^attack: 3/3 \(100%\) len 7 worst-case N\* so far", err, re.MULTILINE)
    code, out, _ = run_main(capsys, ["attack", str(model), "--lengths", "3..7", "--budget", "16"])
    assert code == 0 and "3..7 (5 lengths)" in out
