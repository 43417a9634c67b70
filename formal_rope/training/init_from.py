"""Continue from another run's checkpoint with changed settings (RunConfig.init_from).

`init_from` names a checkpoint: a path to a `.zip` written by `train --out` / `save_checkpoint`, or
a run id (16 hex digits) resolved in a folder of checkpoints named by run id (a sweep's
OUT/models/, `train`'s checkpoints/). The run is built and initialised as usual (its seed draws
every parameter), then every tensor that both models have, by name, is replaced by the
checkpoint's; shapes must agree (an `InitFromError`, exit 2, names the first that does not).
Tensors new in this run keep their own initialisation: continuing a jof_fixed run as jof_projected
keeps the projectors' zero-initialised output layer (W2 = 0), so the continued model starts as the
source computes (paper 000, appendix E.6's staged recipe). Tensors only the checkpoint has are
left out. The optimiser starts afresh (no moments, step 0, the run's own schedule).
"""

from __future__ import annotations

import re
from pathlib import Path

from formal_rope.errors import FormalRopeError

RUN_ID_PATTERN = re.compile(r"[0-9a-f]{16}")
# Where `train` writes a checkpoint by default (checkpoints/<run id>.zip) and so looks up a run id.
TRAIN_CHECKPOINT_DIR = Path("checkpoints")
# A sweep's checkpoints of the runs other runs continue from: OUT/models/<run id>.zip.
SWEEP_MODELS_DIR = "models"


class InitFromError(FormalRopeError):
    """init_from cannot be used: no checkpoint there, another alphabet, or a tensor whose shape differs."""


def is_run_id(value: str | None) -> bool:
    """Whether an init_from value names a run id (16 lowercase hex digits) rather than a path."""
    return value is not None and RUN_ID_PATTERN.fullmatch(value) is not None


def init_checkpoint_path(value: str, folder: str | Path | None) -> Path:
    """The checkpoint file `value` (an init_from) names: a path as given, or a run id as FOLDER/ID.zip.
    InitFromError when there is no file there."""
    if is_run_id(value):
        if folder is None:
            raise InitFromError(f"init_from {value!r} is a run id, and this run has no checkpoint folder to find "
                                "it in; give the checkpoint's path")
        path = Path(folder) / f"{value}.zip"
        what = f"run {value}'s checkpoint"
    else:
        path = Path(value)
        what = "the checkpoint"
    if not path.is_file():
        raise InitFromError(f"init_from: {what} {str(path)!r} does not exist"
                            + (" (a sweep writes it when the run it names has trained)" if is_run_id(value) else ""))
    return path


def check_init_source(value: str, folder: str | Path | None, alphabet=None) -> Path:
    """The checkpoint an init_from `value` names, read far enough to know it can be used (its
    metadata only): InitFromError, before any work, when there is no file there, when it is not a
    trained checkpoint (a compiled model, a training state, another file) or, given the run's
    `alphabet`, when it reads another alphabet."""
    from formal_rope.storage.checkpoints import CHECKPOINT_KIND, read_metadata  # function-local: torch

    path = init_checkpoint_path(value, folder)
    try:
        metadata = read_metadata(path)
    except FormalRopeError as error:
        raise InitFromError(f"init_from: {error}") from None
    kind = metadata.get("kind") if isinstance(metadata, dict) else None
    if kind != CHECKPOINT_KIND:
        what = ("a compiled model (built by compile, with no trained weights of this architecture)"
                if kind == "compiled" else f"a {kind!r} file" if kind else "no model kind")
        raise InitFromError(f"init_from: {str(path)!r} holds {what}, not a trained checkpoint; continue from a "
                            "checkpoint written by train (--out, or checkpoints/<run id>.zip) or by a sweep")
    saved = metadata.get("alphabet")
    if alphabet is not None and isinstance(saved, list) and tuple(saved) != tuple(alphabet):
        raise InitFromError(_alphabet_message(path, saved, alphabet))
    return path


def _alphabet_message(path: Path, saved, alphabet) -> str:
    return (f"init_from: the checkpoint {str(path)!r} reads the alphabet {{{', '.join(saved)}}}, this run "
            f"{{{', '.join(alphabet)}}}: token ids would mean other symbols")


def load_init_weights(model, configs, alphabet, folder: str | Path | None = None, *,
                      sources=None) -> list[list[str]]:
    """Copy each run's init_from checkpoint into its slot of the (packed) `model`, in place.

    Returns one list of notes per run (what was new in it and kept its initialisation, what the
    checkpoint held that this run has not); runs without init_from get []. InitFromError for a
    missing checkpoint, another alphabet, or a tensor whose shape differs (named). `alphabet`: the
    symbols every run reads, or one alphabet per run (a mixed-language pack: each run's checkpoint
    fills the first rows of its embedding table, its own vocabulary). sources: per run, the checkpoint
    its init_from names, already checked (`check_init_source`, when its run was resolved: not
    checked again); None: each is checked here, in `folder`.
    """
    import torch  # function-local: the sweeps runner reads this module's names without torch

    from formal_rope.training.trained_classifier import load_checkpoint

    notes: list[list[str]] = [[] for _ in configs]
    target = model.state_dict()
    alphabets = per_run_alphabets(alphabet, len(configs))
    for run, config in enumerate(configs):
        if config.init_from is None:
            continue
        alphabet = alphabets[run]
        path = sources[run] if sources is not None else check_init_source(config.init_from, folder, alphabet)
        try:
            loaded = load_checkpoint(path)
        except FormalRopeError as error:  # unreadable weights: the user's input, not a failed run
            raise InitFromError(f"init_from: {error}") from None
        if tuple(loaded.alphabet) != tuple(alphabet):
            raise InitFromError(_alphabet_message(path, loaded.alphabet, alphabet))
        source = loaded.model.state_dict()
        for name, tensor in source.items():
            if name not in target:
                continue
            have, want = tuple(tensor.shape[1:]), tuple(_own_slot(model, target, name, run).shape)  # no run axis
            if have != want:
                raise InitFromError(
                    f"init_from: parameter {name!r} has shape {have} in the checkpoint {str(path)!r} and {want} in "
                    f"this run (d_model {config.d_model}, {config.heads} heads, {config.layers} layers, ffn_mult "
                    f"{config.ffn_mult}); continue from a run of the same architecture"
                )
        with torch.no_grad():
            for name, tensor in source.items():
                if name in target:
                    _own_slot(model, target, name, run).copy_(tensor[0].to(target[name].device, target[name].dtype))
        new = [name for name in target if name not in source]
        dropped = [name for name in source if name not in target]
        if new:
            notes[run].append(f"init_from {config.init_from}: {len(new)} tensor(s) new in this run kept their own "
                              f"initialisation ({_listed(new)})")
        if dropped:
            notes[run].append(f"init_from {config.init_from}: {len(dropped)} tensor(s) of the checkpoint have no "
                              f"place in this run and were left out ({_listed(dropped)})")
    return notes


def per_run_alphabets(alphabet, runs: int) -> list[tuple[str, ...]]:
    """`alphabet` (the symbols every run reads) or one alphabet per run, as one per run."""
    alphabet = list(alphabet)
    if alphabet and not isinstance(alphabet[0], str):
        return [tuple(symbols) for symbols in alphabet]
    return [tuple(alphabet)] * runs


def _own_slot(model, target: dict, name: str, run: int):
    """Run `run`'s part of tensor `name`: its embedding rows are its own vocabulary's (a run of a
    mixed-language pack reads the first rows of the pack's table)."""
    slot = target[name][run]
    if name == "embedding.weight":
        return slot[: model.symbol_counts[run] + 3]
    return slot


def _listed(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f", … {len(names) - shown} more" if len(names) > shown else "")
