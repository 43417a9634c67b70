"""`run` and `phases` on trained checkpoints: broken files are user errors naming the file and the
problem (exit 2, no traceback), and options that do not apply to a trained model are refused."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from cli_support import run_main


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny trained checkpoint of (aa)* (a few steps: only its file format matters here)."""
    from formal_rope.cli import main

    path = tmp_path_factory.mktemp("trained") / "t.zip"
    main(["train", "--lang", "aa_star", "--pe", "rope", "--steps", "2", "--layers", "1", "--d-model", "16",
          "--heads", "2", "--batch-size", "4", "--n-per-length", "2", "--test-lengths", "3..4", "--out", str(path),
          "--quiet", "--json"])
    return path


def _rewrite(source, target, *, metadata=None, state=None, drop=()):
    """Copy a checkpoint zip, replacing metadata.json / state_dict.pt or leaving members out."""
    with zipfile.ZipFile(source) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    if metadata is not None:
        members["metadata.json"] = json.dumps(metadata).encode()
    if state is not None:
        members["state_dict.pt"] = state
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in members.items():
            if name not in drop:
                archive.writestr(name, data)
    return target


def _metadata(path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("metadata.json"))


def test_run_on_a_good_checkpoint_reports_trained_json(checkpoint, capsys):
    code, out, err = run_main(capsys, ["run", str(checkpoint), "aa", "aaa", "--json"])
    report = json.loads(out)
    assert code == 0, err
    assert report["kind"] == "trained" and report["certified_length"] is None and report["mode"] == "native"
    assert [row["length"] for row in report["results"]] == [2, 3]


def test_run_mode_on_a_trained_model_is_an_error_not_ignored(checkpoint, capsys):
    # Issue 9 item 12: `run --mode native` on a trained checkpoint was silently ignored.
    code, out, err = run_main(capsys, ["run", str(checkpoint), "aa", "--mode", "native"])
    assert code == 2 and out == "" and err.startswith("error: --mode native applies to compiled models")


@pytest.mark.parametrize("command", [["run", "{path}", "aa"], ["phases", "{path}", "aa"]])
@pytest.mark.parametrize("damage, needle", [
    ("truncated_weights", "weights (state_dict.pt) cannot be read"),
    ("config_mismatch", "weights (state_dict.pt) do not match its config (metadata.json)"),
    ("no_config", "does not describe a model"),
    ("no_weights", "weights (state_dict.pt) cannot be read"),
    ("truncated_zip", "not a formal-rope"),
])
def test_broken_checkpoints_are_user_errors_naming_the_file(checkpoint, tmp_path, capsys, command, damage, needle):
    # Issue 9 item 3: a truncated weights file, a config that no longer matches the weights or a
    # missing config raised tracebacks (RuntimeError, KeyError, EOFError) from run and phases.
    target = tmp_path / f"{damage}.zip"
    if damage == "truncated_weights":
        with zipfile.ZipFile(checkpoint) as archive:
            state = archive.read("state_dict.pt")
        _rewrite(checkpoint, target, state=state[: len(state) // 2])
    elif damage == "config_mismatch":
        metadata = _metadata(checkpoint)
        metadata["config"]["d_model"] = 2 * metadata["config"]["d_model"]
        _rewrite(checkpoint, target, metadata=metadata)
    elif damage == "no_config":
        metadata = _metadata(checkpoint)
        del metadata["config"]
        _rewrite(checkpoint, target, metadata=metadata)
    elif damage == "no_weights":
        _rewrite(checkpoint, target, drop=("state_dict.pt",))
    else:
        data = checkpoint.read_bytes()
        target.write_bytes(data[: len(data) // 2])
    argv = [part.format(path=target) for part in command]
    code, out, err = run_main(capsys, argv)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("error: ") and str(target) in err and needle in err


def test_load_checkpoint_raises_formal_rope_error_for_a_foreign_state(checkpoint, tmp_path):
    import torch

    from formal_rope.errors import FormalRopeError
    from formal_rope.training.trained_classifier import load_checkpoint

    buffer = io.BytesIO()
    torch.save({"unrelated": torch.zeros(3)}, buffer)
    target = _rewrite(checkpoint, tmp_path / "foreign.zip", state=buffer.getvalue())
    with pytest.raises(FormalRopeError, match="do not match its config"):
        load_checkpoint(target)
