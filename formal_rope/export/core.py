"""Export dispatch: read a model file's kind, build its tensors and config, write the folder."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from formal_rope.errors import FormalRopeError
from formal_rope.export.compiled import compiled_export
from formal_rope.files import atomic_folder
from formal_rope.model.io import load_model, read_metadata

EXPORT_FORMATS = ("safetensors", "transformer-lens")
WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
MODULE_NAME = "model.py"
_STANDALONE = Path(__file__).resolve().parent / "standalone"

# Why TransformerLens's HookedTransformer cannot hold each kind of model exactly. Its attention
# mask is causal *with* the diagonal (position i sees j <= i, so <bos> attends to itself); every
# formal-rope model is strict-causal (i sees j < i, <bos> sees nothing and outputs zero).
_STRICT_MASK = (
    "attention here is strict-causal (position i attends to keys j < i; <bos> attends to nothing and its head "
    "output is zero), while HookedTransformer's mask always lets a position attend to itself"
)
_OBSTACLES = {
    "compiled": (
        _STRICT_MASK,
        "each rotary pair has its own schedule (unrotated, RoPE at the compiled angle with the phase formed in the "
        "model's format, or a periodic table T_m(i mod m)); HookedTransformer's rotary uses one base-derived "
        "frequency ladder for every head and recomputes the phases",
        "the residual stream has no LayerNorm and the verdict is a threshold on one coordinate at <eos>, not an "
        "unembedding",
    ),
    "trained": (
        _STRICT_MASK,
        "periodic schedules (rope_p, sipe_p) are lookup tables T_d(i mod m_d), and JoFormer (jof_*) also rotates "
        "values and rotates outputs back; HookedTransformer has neither",
        "the classifier reads two logits at each string's <eos> through a final LayerNorm and a 2-way linear head, "
        "not an unembedding over the vocabulary",
    ),
}


@dataclass(frozen=True)
class ExportResult:
    """What `export_model` wrote."""

    kind: str  # compiled | trained
    out: str
    files: tuple[str, ...]
    dtype: str
    tensors: int
    parameters: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def transformer_lens_obstacles(kind: str) -> tuple[str, ...]:
    """Why a model of `kind` (compiled or trained) cannot be an exact HookedTransformer."""
    return _OBSTACLES[kind]


def _save_safetensors(tensors: dict, path: Path, metadata: dict[str, str]) -> None:
    try:
        from safetensors.torch import save  # torch: only when writing, never on the package import
    except ImportError:
        raise FormalRopeError(
            "exporting needs the safetensors package: pip install 'formal-rope[export]' (or pip install safetensors)"
        ) from None
    # The bytes, written by us: safetensors' save_file creates its file through a temporary of mode
    # 0600 whatever the umask, while every other file formal-rope writes gets 0666 minus the umask.
    # (`path` lies in the export's temporary folder, renamed whole once every file is written.)
    path.write_bytes(save({name: tensor.contiguous() for name, tensor in tensors.items()}, metadata=metadata))


# What an export folder holds from this writer (replaced whole at each export; other files stay).
_EXPORTED = (WEIGHTS_NAME, CONFIG_NAME, MODULE_NAME, "__pycache__")


def _write(out: Path, kind: str, tensors: dict, config: dict) -> list[Path]:
    # The three files are written into a temporary folder that replaces the export at once, so a
    # folder never pairs the weights of one export with the config of another.
    try:
        with atomic_folder(out, "the export folder", _EXPORTED) as folder:
            _save_safetensors(tensors, folder / WEIGHTS_NAME, {"format": "pt", "kind": kind})
            (folder / CONFIG_NAME).write_text(
                json.dumps(config, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
            )
            module = (_STANDALONE / f"{kind}.py").read_text(encoding="utf-8")
            (folder / MODULE_NAME).write_text(module, encoding="utf-8")
    except OSError as error:
        raise FormalRopeError(f"cannot write the export into {str(out)!r}: {error.strerror or error}") from None
    return [out / WEIGHTS_NAME, out / CONFIG_NAME, out / MODULE_NAME]


def export_model(
    model_path: str | Path, out: str | Path, *, fmt: str = "safetensors", dtype: str | None = None
) -> ExportResult:
    """Write the model saved at `model_path` (`formalrope compile --out` or `formalrope train --out`)
    into the folder `out`: model.safetensors, config.json and model.py (its `load(out)` rebuilds the
    model with torch alone; `.classify(strings)` gives `formalrope run`'s verdicts).

    dtype (compiled models): fp64, fp32, bf16 or fp16; default the format the model was compiled
    for. The exported network then computes in that dtype as `formalrope run --mode native` does.
    Trained models are exported in fp32 (their training precision). fmt "transformer-lens" raises
    FormalRopeError saying why no exact HookedTransformer exists."""
    if fmt not in EXPORT_FORMATS:
        raise FormalRopeError(f"unknown export format {fmt!r}; expected safetensors")
    metadata = read_metadata(model_path)
    kind = metadata["kind"]
    if kind not in _OBSTACLES:
        raise FormalRopeError(f"{model_path}: unknown model kind {kind!r} (expected compiled or trained)")
    if fmt == "transformer-lens":
        reasons = "; ".join(f"({i}) {reason}" for i, reason in enumerate(_OBSTACLES[kind], start=1))
        raise FormalRopeError(
            f"no exact TransformerLens export exists for this {kind} model, and an approximation is not "
            f"offered: {reasons}. Use --format safetensors: its model.py is a plain "
            "torch.nn.Module with the same verdicts."
        )
    if kind == "compiled":
        tensors, config = compiled_export(load_model(model_path), dtype)
    else:
        from formal_rope.export.trained import trained_export  # imports torch: off the torch-free package import

        if dtype not in (None, "fp32"):
            raise FormalRopeError(f"trained models are exported in fp32 (their training precision), not {dtype}")
        tensors, config = trained_export(model_path)
    out = Path(out)
    paths = _write(out, kind, tensors, config)
    return ExportResult(
        kind=kind,
        out=str(out),
        files=tuple(str(p) for p in paths),
        dtype=config["dtype"],
        tensors=len(tensors),
        parameters=int(sum(t.numel() for t in tensors.values())),
        notes=tuple(config.get("notes", ())),
    )


def load_exported(out: str | Path):
    """Import the exported folder's model.py as a fresh module (no formal_rope import inside) and
    return `module.load(out)`."""
    out = Path(out)
    name = f"formal_rope_exported_{abs(hash(str(out.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, out / MODULE_NAME)
    if spec is None or spec.loader is None:
        raise FormalRopeError(f"{out / MODULE_NAME} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.load(out)
