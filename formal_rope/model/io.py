"""Model files: one zip archive holding ``metadata.json`` (readable) and ``weights.npz``.

``metadata.json`` always has ``"kind"``: ``"compiled"`` (a TransformerIR written here) or
``"trained"`` (a trainer checkpoint, `formal_rope.storage.checkpoints`; any model file is loaded by
`formal_rope.evaluation.loading.load_runnable`, which dispatches on it). For compiled
models it also holds the coordinate names, vocabulary, layer/head descriptions (rotary schedules,
shapes), the readout and whatever the compiler recorded (formula, alphabet, format, margins,
certified lengths). Weights are stored under ``embedding``, ``L{l}.H{h}.{w_query,…}``,
``L{l}.ffn.{w_in,…}``, ``readout.weights``.
"""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_file, read_zip_member
from formal_rope.model.certificate import BeyondCertifiedLengthWarning, construct_subformula
from formal_rope.model.evaluate import evaluate
from formal_rope.model.ir import AttentionHead, FeedForward, Layer, Readout, RotaryPair, TransformerIR
from formal_rope.precision import parse_format

FORMAT_VERSION = 1
METADATA_NAME = "metadata.json"
WEIGHTS_NAME = "weights.npz"
_HEAD_ARRAYS = ("w_query", "b_query", "w_key", "b_key", "w_value", "b_value", "w_out")
_FFN_ARRAYS = ("w_in", "b_in", "w_out", "b_out")


def _json_default(value: Any):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (tuple, set)):
        return list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def describe_layers(model: TransformerIR) -> list[dict[str, Any]]:
    layers = []
    for number, layer in enumerate(model.layers, start=1):
        layers.append(
            {
                "layer": number,
                "heads": [
                    {
                        "name": head.name,
                        "d_head": head.d_head,
                        "d_value": head.d_value,
                        "score_scale": head.score_scale,
                        "rotary": [pair.to_json() for pair in head.rotary],
                        "description": head.description,
                    }
                    for head in layer.heads
                ],
                "ffn_hidden": 0 if layer.feed_forward is None else layer.feed_forward.d_hidden,
            }
        )
    return layers


def save_model(model: TransformerIR, path: str | Path) -> Path:
    """Write ``model`` as one zip file (atomically: a temporary file renamed into place), creating
    missing parent folders."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {"embedding": model.embedding}
    for layer_index, layer in enumerate(model.layers):
        for h, head in enumerate(layer.heads):
            for name in _HEAD_ARRAYS:
                arrays[f"L{layer_index}.H{h}.{name}"] = getattr(head, name)
        if layer.feed_forward is not None:
            for name in _FFN_ARRAYS:
                arrays[f"L{layer_index}.ffn.{name}"] = getattr(layer.feed_forward, name)
    if model.readout.kind == "linear":
        arrays["readout.weights"] = model.readout.weights
    metadata = {
        "kind": "compiled", **{key: value for key, value in model.metadata.items() if key != "kind"},
        "format_version": FORMAT_VERSION, "coordinates": list(model.coordinates), "vocabulary": list(model.vocabulary),
        "d_model": model.d_model, "n_layers": len(model.layers), "n_heads": model.n_heads,
        "layers": describe_layers(model),
        "readout": {
            "kind": model.readout.kind, "coordinate": model.readout.coordinate,
            "coordinate_name": None
            if model.readout.coordinate is None
            else model.coordinates[model.readout.coordinate],
            "threshold": model.readout.threshold, "bias": model.readout.bias,
        },
    }
    if path.is_dir():
        raise FormalRopeError(
            f"cannot write model file {path}: it is a directory (give a file name, e.g. {path / 'model.zip'})"
        )
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    try:
        # A temporary file renamed over the output (a symlink's target; never a FIFO or device),
        # missing parent folders created as every --out does.
        with atomic_file(path, "model file") as temporary:
            with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                archive.writestr(
                    METADATA_NAME, json.dumps(metadata, indent=2, ensure_ascii=False, default=_json_default)
                )
                archive.writestr(WEIGHTS_NAME, buffer.getvalue())
    except OSError as error:
        raise FormalRopeError(f"cannot write model file {path}: {error}") from None
    return path


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The ``metadata.json`` of a model file; FormalRopeError when missing/corrupt."""
    path = Path(path)
    if not path.is_file():
        raise FormalRopeError(
            f"model file {path} "
            + ("is a directory, not a file" if path.is_dir() else
               "is not a regular file" if path.exists() else "does not exist")
        )
    try:
        with zipfile.ZipFile(path) as archive:
            metadata = json.loads(read_zip_member(archive, METADATA_NAME, "MAX_METADATA_BYTES", "the model's metadata"))
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, json.JSONDecodeError, OSError) as error:
        raise FormalRopeError(f"{path} is not a formal-rope model file (a zip with metadata.json): {error}") from None
    if not isinstance(metadata, dict) or "kind" not in metadata:
        raise FormalRopeError(f"{path}: metadata.json has no \"kind\" field")
    return metadata


def load_model(path: str | Path) -> TransformerIR:
    """Load a compiled model written by ``save_model``."""
    path = Path(path)
    metadata = read_metadata(path)
    if metadata["kind"] != "compiled":
        raise FormalRopeError(f"{path} holds a {metadata['kind']!r} model, not a compiled one")
    try:
        with zipfile.ZipFile(path) as archive:
            weights = read_zip_member(archive, WEIGHTS_NAME, "MAX_WEIGHTS_BYTES", "the model's weights")
            with np.load(io.BytesIO(weights), allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
        layers = []
        for layer_index, described in enumerate(metadata["layers"]):
            heads = []
            for h, head in enumerate(described["heads"]):
                heads.append(
                    AttentionHead(
                        name=head["name"],
                        **{name: arrays[f"L{layer_index}.H{h}.{name}"] for name in _HEAD_ARRAYS},
                        rotary=tuple(RotaryPair.from_json(pair) for pair in head["rotary"]),
                        score_scale=float(head.get("score_scale", 1.0)),
                        description=head.get("description", ""),
                    )
                )
            feed_forward = None
            if f"L{layer_index}.ffn.w_in" in arrays:
                feed_forward = FeedForward(**{name: arrays[f"L{layer_index}.ffn.{name}"] for name in _FFN_ARRAYS})
            layers.append(Layer(heads=tuple(heads), feed_forward=feed_forward))
        readout_data = metadata["readout"]
        readout = Readout(
            kind=readout_data["kind"],
            coordinate=readout_data.get("coordinate"),
            threshold=float(readout_data.get("threshold", 0.5)),
            weights=arrays.get("readout.weights"),
            bias=float(readout_data.get("bias", 0.0)),
        )
        _check_certificate_records(metadata)
        skip = {"coordinates", "vocabulary", "layers", "readout", "d_model", "n_layers", "n_heads", "format_version"}
        return TransformerIR(
            coordinates=tuple(metadata["coordinates"]),
            vocabulary=tuple(metadata["vocabulary"]),
            embedding=arrays["embedding"],
            layers=tuple(layers),
            readout=readout,
            metadata={key: value for key, value in metadata.items() if key not in skip},
        )
    # EOFError: empty weights.npz
    except (KeyError, ValueError, TypeError, zipfile.BadZipFile, OSError, EOFError) as error:
        raise FormalRopeError(f"{path}: corrupt compiled model ({type(error).__name__}: {error})") from None
    except FormalRopeError as error:  # e.g. a construct's formula that no longer parses
        first_line = str(error).splitlines()[0]
        raise FormalRopeError(f"{path}: corrupt compiled model ({first_line})") from None


def _check_certificate_records(metadata: dict[str, Any]) -> None:
    """The compiler's records that certificates are recomputed from (formal_rope.model.certificate):
    raise ValueError/TypeError when present but unusable, so a damaged file is reported on loading."""
    constructs = metadata.get("constructs")
    if constructs is None:
        return  # a hand-built model: no certificate
    if not isinstance(constructs, list) or not all(isinstance(c, dict) for c in constructs):
        raise TypeError("metadata 'constructs' must be a list of objects")
    for construct in constructs:
        if construct.get("construct") in ("Y", "MOD", "P"):
            construct_subformula(str(construct["formula"]))
            str(construct["head"])
            if construct.get("certified_length") is not None:
                int(construct["certified_length"])
    for key in ("freq", "y_scale"):
        if metadata.get(key) is not None:
            float(metadata[key])
    if metadata.get("certified_length") is not None:
        int(metadata["certified_length"])
    parse_format(metadata.get("format", "fp32"))


class CompiledRunnable:
    """A loaded compiled model with the trainer-checkpoint ``classify`` interface
    (`formal_rope.evaluation.loading.Runnable`)."""

    kind = "compiled"

    def __init__(self, model: TransformerIR, mode: str = "emulated") -> None:
        self.model = model
        self.mode = mode
        self.alphabet = model.alphabet
        self.default_format = str(model.metadata.get("format", "fp32"))

    def classify(self, strings: Sequence[str], fmt: str | None = None) -> list[bool]:
        """Verdicts in input order; a BeyondCertifiedLengthWarning when some input is longer than the
        model's certified length in this format and mode (`evaluate` gives the per-string flags)."""
        result = evaluate(self.model, strings, fmt=fmt or self.default_format, mode=self.mode)
        if result.n_beyond_certified:
            warnings.warn(
                f"{result.n_beyond_certified} of {len(strings)} strings are longer than the model's certified length "
                f"{result.certificate.describe()}; verdicts there are not guaranteed",
                BeyondCertifiedLengthWarning,
                stacklevel=2,
            )
        return result.to_list()
