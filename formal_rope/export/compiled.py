"""Compiled models (TransformerIR) -> tensors and config for standalone/compiled.py.

The standalone network must reproduce `formal_rope.model.evaluate`'s native mode number for number,
so every dtype-dependent value is prepared here with the evaluator's own rules: weights are cast
float64 -> dtype with torch (as the native evaluator does), RoPE angles are rounded into the format
exactly as `precision.rotary.realized_angle_rotation` rounds them, and periodic tables are the
correctly rounded entries of `precision.rotary.periodic_rotation_entries`.
"""

from __future__ import annotations

import math

import numpy as np

from formal_rope import precision
from formal_rope.errors import FormalRopeError
from formal_rope.model.forward import check_parameters_fit
from formal_rope.model.ir import BOS, EOS, TransformerIR
from formal_rope.precision import FloatFormat, native_row, parse_format

_HEAD_ARRAYS = ("w_query", "b_query", "w_key", "b_key", "w_value", "b_value", "w_out")
_FFN_ARRAYS = ("w_in", "b_in", "w_out", "b_out")


def _json_value(value):
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_value(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_value(value.tolist())
    if isinstance(value, (np.floating, float)):
        number = float(value)
        return number if math.isfinite(number) else str(number)
    if isinstance(value, np.integer):
        return int(value)
    return value


def compiled_export(model: TransformerIR, dtype: FloatFormat | str | None = None) -> tuple[dict, dict]:
    """(tensors, config) of a compiled model computing natively in `dtype` (default: its format)."""
    import torch  # the export alone needs torch: the export package imports without it

    fmt = parse_format(dtype or str(model.metadata.get("format", "fp32")))
    native = native_row(fmt)
    if native is None:
        raise FormalRopeError(
            f"{fmt.name} has no torch dtype; export with dtype (--dtype / dtype=) fp32, "
            "fp64, bf16 or fp16 (the exported module computes natively in that dtype)"
        )
    torch_dtype = native.torch_dtype()
    check_parameters_fit(model, fmt)
    arith = precision.Native(torch_dtype)

    def cast(array) -> torch.Tensor:  # exactly model.forward.NativeForward.tensor
        return torch.as_tensor(np.array(array, dtype=np.float64)).to(torch_dtype)

    tensors: dict[str, torch.Tensor] = {"embedding": cast(model.embedding)}
    layers = []
    for number, layer in enumerate(model.layers):
        heads = []
        for index, head in enumerate(layer.heads):
            prefix = f"layers.{number}.heads.{index}"
            for name in _HEAD_ARRAYS:
                tensors[f"{prefix}.{name}"] = cast(getattr(head, name))
            if head.score_scale != 1.0:
                tensors[f"{prefix}.score_scale"] = cast(np.array(head.score_scale))
            for pair_index, pair in enumerate(head.rotary):
                if pair.kind == "angle":
                    tensors[f"{prefix}.rotary.{pair_index}.angle"] = arith.asarray(float(pair.angle))
                elif pair.kind == "periodic":
                    cos, sin = precision.periodic_rotation_entries(int(pair.period), fmt)
                    tensors[f"{prefix}.rotary.{pair_index}.cos"] = arith.asarray(torch.from_numpy(cos.copy()))
                    tensors[f"{prefix}.rotary.{pair_index}.sin"] = arith.asarray(torch.from_numpy(sin.copy()))
            heads.append({
                "name": head.name,
                "d_head": head.d_head,
                "d_value": head.d_value,
                "score_scale": float(head.score_scale),
                "rotary": [{"kind": p.kind, "angle": p.angle, "period": p.period} for p in head.rotary],
                "description": head.description,
            })
        if layer.feed_forward is not None:
            for name in _FFN_ARRAYS:
                tensors[f"layers.{number}.feed_forward.{name}"] = cast(getattr(layer.feed_forward, name))
        layers.append({"heads": heads, "feed_forward": layer.feed_forward is not None})
    readout = model.readout
    if readout.kind == "linear":
        tensors["readout.weights"] = torch.from_numpy(np.array(readout.weights, dtype=np.float64))
    config = {
        "kind": "compiled",
        "producer": "formal-rope export",
        "dtype": native.torch,
        "format": fmt.name,
        "vocabulary": list(model.vocabulary),
        "alphabet": list(model.alphabet),
        "bos": BOS,
        "eos": EOS,
        "coordinates": list(model.coordinates),
        "layers": layers,
        "readout": {
            "kind": readout.kind,
            "coordinate": readout.coordinate,
            "coordinate_name": None if readout.coordinate is None else model.coordinates[readout.coordinate],
            "threshold": float(readout.threshold),
            "bias": float(readout.bias),
        },
        "source": _json_value({k: v for k, v in model.metadata.items() if k != "kind"}),
        "notes": [
            f"computes natively in {fmt.name} as `formalrope run --mode native --format {fmt.name}` does; "
            "`formalrope run`'s default mode emulates the format with a rounding after every operation, which "
            "can differ in the last bits (verdicts agree within the model's margins)",
        ],
    }
    return tensors, config
