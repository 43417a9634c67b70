"""Regression tests for issue 24: what a hostile or careless input could do before.

One test (or a small group) per class: a training state that would run code, outputs that are not
regular files, a zip bomb, long `run` inputs (row-blocked attention), stdout write errors, counts
checked before any work, and Ctrl-C / parent death of a real sweep.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from cli_support import run_main
from formal_rope.compiler import compile_formula
from formal_rope.model import evaluate
from formal_rope.model import forward as forward_module
from formal_rope.run_config.config import RunConfig
from formal_rope.runs import run_pack
from formal_rope.scheduling.packs import pack_key
from formal_rope.storage.training_state import StateOptions, TrainingStateError, open_state_store

REPO = Path(__file__).resolve().parents[1]


def _cli(*argv: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "formal_rope.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, **kwargs)


# ------------------------------------------------------------------------------ training states
class _RunsCode:
    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_state_that_would_run_code_is_refused_without_running_it(tmp_path):
    import torch

    config = RunConfig(language="(ab)*", pe="nope", layers=1, d_model=16, heads=2, steps=20, batch_size=8,
                       test_min_length=41, test_max_length=42, n_per_length=4)
    marker = tmp_path / "ran"
    payload = io.BytesIO()
    hostile = _RunsCode()
    hostile.marker = marker
    torch.save({"model": hostile}, payload)  # what an earlier version's pickled state looked like
    state = StateOptions(str(tmp_path / "state"), every=5)
    open_state_store(state.uri).save(pack_key([config]), payload.getvalue())
    with pytest.raises(TrainingStateError) as error:
        run_pack([config], progress=False, state=state)
    assert not marker.exists()
    message = str(error.value)
    assert "\n" not in message and pack_key([config]) in message and "pickle" in message


def test_a_damaged_state_is_one_line_naming_the_file(tmp_path):
    config = RunConfig(language="(ab)*", pe="nope", layers=1, d_model=16, heads=2, steps=20, batch_size=8,
                       test_min_length=41, test_max_length=42, n_per_length=4)
    state = StateOptions(str(tmp_path / "state"), every=5)
    open_state_store(state.uri).save(pack_key([config]), b"not a state at all, just bytes")
    with pytest.raises(TrainingStateError) as error:
        run_pack([config], progress=False, state=state)
    assert "\n" not in str(error.value) and pack_key([config]) in str(error.value)


def test_run_on_a_diverged_checkpoint_warns(tmp_path):
    import json

    import torch

    from formal_rope.runs import run_training
    from formal_rope.storage.checkpoints import save_checkpoint
    from formal_rope.training.trained_classifier import UnhealthyCheckpointWarning, load_checkpoint

    torch.set_num_threads(1)
    config = RunConfig(language="(ab)*", pe="nope", layers=1, d_model=16, heads=2, steps=20, batch_size=8, lr=1e30,
                       test_min_length=41, test_max_length=42, n_per_length=4)
    path = tmp_path / "diverged.zip"
    result, model = run_training(config, progress=False, checkpoint_path=path)
    assert result.status == "diverged"  # lr 1e30 sends the loss to NaN at once; the frozen weights are saved
    loaded = load_checkpoint(path)
    with pytest.warns(UnhealthyCheckpointWarning, match="diverged"):
        loaded.classify(["ab", "abab"])
    done = _cli("run", str(path), "ab", "aba", "--json")
    assert done.returncode == 0
    assert done.stderr.count("warning:") == 1 and "diverged" in done.stderr
    assert "diverged" in json.loads(done.stdout)["warning"]

    # Weights that are not finite are flagged even when the recorded run looks fine.
    healthy = result.__class__.from_dict({**result.to_dict(), "status": "ok"})
    with torch.no_grad():
        next(iter(model.parameters())).fill_(float("nan"))
    save_checkpoint(tmp_path / "nan.zip", model, config, healthy)
    assert "NaN or infinite" in load_checkpoint(tmp_path / "nan.zip").health

    fine = RunConfig(**{**config.to_dict(), "lr": 1e-3, "steps": 5})
    run_training(fine, progress=False, checkpoint_path=tmp_path / "fine.zip")
    assert load_checkpoint(tmp_path / "fine.zip").health is None
    done = _cli("run", str(tmp_path / "fine.zip"), "ab", "--json")
    assert "warning:" not in done.stderr and json.loads(done.stdout)["warning"] is None


# ------------------------------------------------------------------------------------- outputs
@pytest.mark.parametrize("fmt, target", [("parquet", "s.parquet"), ("flare", "split")])
def test_two_writers_of_one_output_both_succeed_or_one_is_told_it_is_in_use(tmp_path, fmt, target):
    import pandas as pd

    out = tmp_path / target
    argv = [sys.executable, "-m", "formal_rope.cli", "sample", "(ab)*", "--lengths", "20..60", "--n", "200",
            "--format", fmt, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [subprocess.Popen([*argv, "--seed", str(seed)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env) for seed in (1, 2)]
    outcomes = [(writer.wait(timeout=120), writer.stderr.read()) for writer in writers]
    for code, stderr in outcomes:
        assert code == 0 or (code == 2 and "in use" in stderr and "Traceback" not in stderr), stderr
    assert any(code == 0 for code, _ in outcomes)
    if fmt == "parquet":
        assert len(pd.read_parquet(out)) == 41 * 200  # one writer's whole file, never a mixture
    else:  # one sampling's files, all of them: the same number of strings in each
        lines = {name: len((out / name).read_text().splitlines()) for name in ("main.tok", "labels.txt")}
        assert lines["main.tok"] == lines["labels.txt"] == 41 * 200
    assert not [p for p in tmp_path.iterdir() if p.name != target]  # no temporary left behind


def test_an_output_that_is_a_fifo_or_a_device_is_refused(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/null")):
        code, _, err = run_main(capsys, ["sample", "(ab)*", "--lengths", "4", "--n", "2", "--out", str(target)])
        assert code == 2 and "error:" in err, err
    assert fifo.exists() and not fifo.is_file()  # left as it was, not replaced by a regular file
    assert Path("/dev/null").is_char_device()


def test_an_output_that_is_a_symlink_writes_its_target(tmp_path, capsys):
    target = tmp_path / "real.parquet"
    link = tmp_path / "link.parquet"
    link.symlink_to(target)
    code, _, err = run_main(capsys, ["sample", "(ab)*", "--lengths", "4", "--n", "2", "--out", str(link)])
    assert code == 0, err
    assert link.is_symlink() and target.is_file() and target.stat().st_size > 0


# ------------------------------------------------------------------------------------- zip bomb
def test_a_zip_bomb_metadata_is_refused_without_reading_it_whole(tmp_path, capsys):
    bomb = tmp_path / "bomb.zip"
    huge = 200 * 2**20  # 200 MiB of one byte: compresses to about 200 KiB
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("metadata.json", "w", force_zip64=True) as member:
            block = b" " * 2**20
            for _ in range(huge // len(block)):
                member.write(block)
    assert bomb.stat().st_size < 2**20
    code, _, err = run_main(capsys, ["run", str(bomb), "ab"])
    assert code == 2 and "MAX_METADATA_BYTES" in err, err


# ------------------------------------------------------------------------------ long run inputs
@pytest.mark.parametrize("mode", ["emulated", "native"])
def test_row_blocked_attention_equals_the_whole_matrix(monkeypatch, mode):
    """Blocks of a few rows give the verdicts and residual values of one block covering everything,
    bit for bit, so memory can stay linear in the length without changing an answer."""
    compiled = compile_formula("P(a) & MOD_2^0", ("a", "b"))
    rng = np.random.default_rng(0)
    strings = ["".join(rng.choice(["a", "b"], size=n)) for n in (1, 7, 60, 61)]
    whole = evaluate(compiled.ir, strings, mode=mode, trace=True)
    monkeypatch.setattr(forward_module, "BLOCK_ELEMENTS", 64)  # a few rows per block
    blocked = evaluate(compiled.ir, strings, mode=mode, trace=True)
    assert list(whole.accepted) == list(blocked.accepted)
    for a, b in zip(whole.residuals, blocked.residuals):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_row_blocks_are_bounded_and_cover_every_row():
    blocks = forward_module.row_blocks(batch=1, length=100_000, width=8)
    assert blocks[0][0] == 0 and blocks[-1][1] == 100_000
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
    assert all((stop - start) * 100_000 * 8 <= forward_module.BLOCK_ELEMENTS for start, stop in blocks)


def test_phases_on_a_long_string_refuses_with_the_estimate(tmp_path, capsys):
    model = tmp_path / "m.zip"
    assert run_main(capsys, ["compile", "P(a) & MOD_2^0", "-a", "ab", "--out", str(model)])[0] == 0
    code, _, err = run_main(capsys, ["phases", str(model), "ab" * 30_000])
    assert code == 2 and "MAX_SCORE_BYTES" in err and "needs about" in err, err


# ------------------------------------------------------------------------------- stdout errors
@pytest.mark.parametrize("argv", [["classify", "(ab)*", "--json"], ["languages"], ["dfa", "(ab)*", "--dot"]])
def test_a_stdout_write_error_is_one_error_line(argv):
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "formal_rope.cli", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "standard output" in errors[0], done.stderr  # notes before it are fine


# ------------------------------------------------------------------------- counts, before work
@pytest.mark.parametrize("argv, message", [
    (["classify", "a{99999999999999999999}"], "states"),
    (["classify", "a{1000000}"], "states"),
    (["classify", "Y^20000(a)"], "MAX_TEMPORAL_DEPTH"),
    (["sample", "(ab)*", "--lengths", "100000000", "--n", "2"], "MAX_SAMPLE_LENGTH"),
    (["sample", "(ab)*", "--lengths", "１２", "--n", "2"], "not a length"),
])
def test_huge_or_foreign_counts_are_refused_at_once(capsys, argv, message):
    start = time.perf_counter()
    code, _, err = run_main(capsys, argv)
    assert code == 2 and message in err, err
    # not a timing assertion on the machine: the refusal happens before the work (seconds, not minutes)
    assert time.perf_counter() - start < 60


def test_a_sweep_config_that_never_ends_is_refused(capsys):
    code, _, err = run_main(capsys, ["sweep", "--config", "/dev/zero", "--dry-run"])
    assert code == 2 and "MAX_CONFIG_BYTES" in err, err


# --------------------------------------------------------------------- Ctrl-C and parent death
def _sweep_process(out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "formal_rope.cli", "sweep", "--lang", "(ab)*", "--pe", "nope,rope", "--seeds", "2",
            "--steps", "100000", "--layers", "1", "--d-model", "16", "--workers", "2", "--pack", "1",
            "--out", str(out)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=default_sigint)


def default_sigint() -> None:
    """In the child before exec: SIGINT back to its default, so that Python installs its Ctrl-C
    handler even where this suite runs with SIGINT ignored (a background job of a non-interactive
    shell, `nohup`), which the child would otherwise inherit and never see the interrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _wait_for_workers(process: subprocess.Popen, timeout: float = 90) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = _children(process.pid)
        if len(workers) >= 2:
            time.sleep(3)  # let them import torch and start training
            return workers
        time.sleep(0.5)
    raise AssertionError("the sweep started no workers")


def test_ctrl_c_on_a_sweep_is_one_interrupted_line_and_exit_130(tmp_path):
    process = _sweep_process(tmp_path / "out")
    try:
        _wait_for_workers(process)
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
        _, err = process.communicate(timeout=60)
    finally:  # a sweep that ignored the interrupt must not train on (100,000 steps) through the rest of the suite
        _kill_group(process)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "interrupted" in err


def test_workers_end_when_the_sweep_process_is_killed(tmp_path):
    process = _sweep_process(tmp_path / "out")
    workers = _wait_for_workers(process)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_running(pid) for pid in workers):
        time.sleep(0.2)
    alive = [pid for pid in workers if _running(pid)]
    assert not alive, f"workers still running after their parent died: {alive}"


def _kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the sweep's whole process group (driver and workers) if any of it is still there."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie waiting for its dead parent's reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_certify_refuses_an_infinite_scale_before_any_note(capsys):
    code, out, err = run_main(capsys, ["certify", "--offset", "1", "--freq", "1", "--scale", "inf", "--format", "fp32"])
    assert code == 2 and "positive finite" in err and "note:" not in err and not out
