"""Trained-model checkpoints on disk: one zip archive holding metadata.json and the state dict.

metadata.json: {"kind": "trained", "format": 2, "config": RunConfig, "result": RunResult summary,
"alphabet": [...], "periods": [...], "versions": {...}}. state_dict.pt is torch.save of the model's
state dict: a pack of one run, so every tensor has a leading run axis of size 1 (format 2).
Format 1 (written before packed training) stored the same tensors without that axis; it is read by
adding it back (`read_weights`). This module knows the archive, not the model: the classifier is
rebuilt from it by `formal_rope.training.trained_classifier.load_checkpoint`, and `formalrope run
MODEL` dispatches on "kind" (`formal_rope.evaluation.loading.load_runnable`).
"""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from pathlib import Path

import torch

from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_file, probe_output, read_zip_member
from formal_rope.storage.provenance import software_versions

CHECKPOINT_KIND = "trained"
CHECKPOINT_FORMAT = 2
METADATA_NAME = "metadata.json"
STATE_NAME = "state_dict.pt"


def _unwritable(path: Path, error: OSError) -> FormalRopeError:
    return FormalRopeError(
        f"cannot write the checkpoint {str(path)!r}: {error.strerror or error}; choose another path "
        "(--out / checkpoint_path=) or write none (--no-save / checkpoint_path=None)"
    )


def check_checkpoint_path(path: str | Path) -> Path:
    """Create the checkpoint's folder and probe that a file can be written there (FormalRopeError if
    not), so a bad --out is reported before training rather than after it."""
    path = Path(path)
    if path.is_dir():
        raise FormalRopeError(
            f"the checkpoint path {str(path)!r} is a folder; give a file name such as {str(path / 'model.zip')!r}"
        )
    try:
        probe_output(path, "the checkpoint")
    except OSError as error:
        raise _unwritable(path, error) from None
    return path


def save_checkpoint(path: str | Path, model, config, result) -> Path:
    """Write the archive of a single-run `model` (a `training.model.Classifier`) with its RunConfig
    and RunResult, atomically (temporary file + rename). Returns the path."""
    if model.runs != 1:
        raise FormalRopeError(
            f"a checkpoint holds one run; this model packs {model.runs} (save model.select_runs([r]))"
        )
    path = check_checkpoint_path(path)
    summary = result.to_dict()
    metadata = {
        "kind": CHECKPOINT_KIND,
        "format": CHECKPOINT_FORMAT,
        "config": config.to_dict(),
        "run_id": config.run_id(),
        "alphabet": list(result.alphabet) if result.alphabet is not None else None,
        "periods": list(result.resolved_periods) if result.resolved_periods is not None else None,
        "result": summary,
        "versions": software_versions(),
    }
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    try:
        with atomic_file(path, "the checkpoint") as temporary:
            with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                archive.writestr(METADATA_NAME, json.dumps(metadata, indent=2, allow_nan=True))
                archive.writestr(STATE_NAME, buffer.getvalue())
    except OSError as error:  # e.g. the disk filled up during training
        raise _unwritable(path, error) from None
    return path


def read_metadata(path: str | Path) -> dict:
    """The archive's metadata.json (raises FormalRopeError if it is not a formal-rope checkpoint)."""
    try:
        with zipfile.ZipFile(path) as archive:
            text = read_zip_member(archive, METADATA_NAME, "MAX_METADATA_BYTES", "the checkpoint's metadata")
        return json.loads(text)
    except FileNotFoundError:
        raise FormalRopeError(f"checkpoint {str(path)!r} does not exist") from None
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, EOFError) as error:  # ValueError: bad JSON/UTF-8
        raise FormalRopeError(
            f"{str(path)!r} is not a formal-rope checkpoint ({type(error).__name__}: {error})"
        ) from None


@contextlib.contextmanager
def checkpoint_problem(path: str | Path, what: str):
    """Turn any failure inside the block (a missing key, a truncated or foreign file, a state dict
    whose tensors do not fit the model) into a FormalRopeError naming the checkpoint and `what`."""
    try:
        yield
    except FormalRopeError as error:
        raise FormalRopeError(f"checkpoint {str(path)!r}: {what}: {error}") from None
    except Exception as error:  # noqa: BLE001 - torch/zip/pickle raise many types for one bad file
        detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise FormalRopeError(f"checkpoint {str(path)!r}: {what} ({type(error).__name__}: {detail[:300]})") from None


def read_weights(path: str | Path, metadata: dict) -> dict:
    """The archive's state dict (on the CPU), every tensor with its leading run axis (added back for
    format 1); FormalRopeError when the weights are truncated or corrupt."""
    with checkpoint_problem(path, f"its weights ({STATE_NAME}) cannot be read (truncated or corrupt)"):
        with zipfile.ZipFile(path) as archive:
            weights = read_zip_member(archive, STATE_NAME, "MAX_WEIGHTS_BYTES", "the checkpoint's weights")
            state = torch.load(io.BytesIO(weights), map_location="cpu", weights_only=True)
        if metadata.get("format", 1) == 1:
            state = {name: tensor.unsqueeze(0) for name, tensor in state.items()}  # add the run axis
    return state
