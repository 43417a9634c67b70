"""Trained checkpoints -> tensors and config for standalone/trained.py.

The standalone file names weights after the network's parts (embedding, blocks.L.qkv, ...), not
after the trainer's internal module layout, so exported folders do not change when the trainer does.
Periodic tables are copied from the trainer's own table code (bit-identical); fixed frequencies
are stored in float64 and the phases rebuilt from them.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.rules import period_pairs
from formal_rope.training.encodings.base import periodic_tables
from formal_rope.training.encodings.periods import assign_periods
from formal_rope.training.encodings.phases import float_turns
from formal_rope.training.trained_classifier import load_checkpoint

_BLOCK_PARTS = ("attention_norm", "qkv", "attention_out", "ffn_norm", "ffn_in", "ffn_out")


def _periodic_tables(periods, n_pairs: int):
    """(cos (P, longest), sin, pair periods (P,)) with the trainer's own table entries."""
    pair_periods, _ = assign_periods(periods, n_pairs)
    longest = int(pair_periods.max())
    # Positions 0..longest-1 visit every residue r < m_p of every pair: row r, column p is T_p(r).
    cos, sin = periodic_tables(periods, n_pairs, np.arange(longest, dtype=np.int64))
    return cos.T.contiguous(), sin.T.contiguous(), torch.from_numpy(pair_periods.astype(np.int64))


def _network_state(model) -> dict:
    """The classifier's weights under the standalone file's names, as CPU tensors without the run
    axis (a checkpoint is a pack of one run); learned frequencies stay float64."""
    if model.runs != 1:
        raise FormalRopeError(f"a checkpoint holds one run; this model packs {model.runs}")
    parameters = dict(model.named_parameters())
    state = {}

    def put(name: str, tensor) -> None:
        state[name] = tensor.detach()[0].to("cpu").clone()  # drop the run axis of the pack of one

    put("embedding.weight", parameters["embedding.weight"])
    for layer in range(len(model.blocks)):
        for part in _BLOCK_PARTS:
            for kind in ("weight", "bias"):
                put(f"blocks.{layer}.{part}.{kind}", parameters[f"blocks.{layer}.{part}.{kind}"])
    for part in ("final_norm", "readout"):
        for kind in ("weight", "bias"):
            put(f"{part}.{kind}", parameters[f"{part}.{kind}"])
    positional = model.positional
    if hasattr(positional, "projectors"):
        for layer, projector in enumerate(positional.projectors):
            for index, name in ((0, "norm"), (1, "in"), (3, "out")):
                put(f"positional.projectors.{layer}.{name}.weight", projector[index].weight)
                put(f"positional.projectors.{layer}.{name}.bias", projector[index].bias)
    if hasattr(positional, "encodings"):  # a hybrid (`LayeredPositional`): its layers' tables under their prefix
        for layer in range(len(positional.names)):
            module, local = positional.layer_module(layer), positional.local_layer(layer)
            prefix = f"positional.layers.{layer}"
            frequencies = getattr(module, "frequencies", None)
            if isinstance(frequencies, torch.nn.Parameter):  # jof_learned: this layer's (heads, pairs)
                learned = frequencies.detach()[0, local].to("cpu", torch.float64)
                state[f"{prefix}.learned_frequencies"] = learned.clone()
                state[f"{prefix}.learned_turns"] = torch.from_numpy(
                    np.ascontiguousarray(float_turns(learned.numpy())))
            elif frequencies is not None:
                state[f"{prefix}.frequencies"] = torch.from_numpy(np.array(frequencies[0], dtype=np.float64))
                state[f"{prefix}.turns"] = torch.from_numpy(np.array(module.turns[0], dtype=np.int64))
            if hasattr(module, "projectors"):  # jof_projected: this layer's projector
                projector = module.projectors[local]
                for index, name in ((0, "norm"), (1, "in"), (3, "out")):
                    put(f"{prefix}.projector.{name}.weight", projector[index].weight)
                    put(f"{prefix}.projector.{name}.bias", projector[index].bias)
        return state
    frequencies = getattr(positional, "frequencies", None)
    # Exact turn limbs (`training.encodings.phases.turn_phases`) go with the frequencies, so the exported
    # file forms the trainer's exact phases theta*i mod 2pi with int64 arithmetic alone.
    if isinstance(frequencies, torch.nn.Parameter):  # jof_learned: (runs, layers, heads, pairs)
        put("positional.learned_frequencies", frequencies.to(torch.float64))
        learned = frequencies.detach()[0].to("cpu", torch.float64).numpy()
        state["positional.learned_turns"] = torch.from_numpy(np.ascontiguousarray(float_turns(learned)))
    elif frequencies is not None:  # fixed schedules: numpy (runs, pairs)
        state["positional.frequencies"] = torch.from_numpy(np.array(frequencies[0], dtype=np.float64))
        state["positional.turns"] = torch.from_numpy(np.array(positional.turns[0], dtype=np.int64))
    return state


def trained_export(path) -> tuple[dict, dict]:
    """(tensors, config) of the trained checkpoint at `path`."""
    loaded = load_checkpoint(path)
    config = loaded.config
    model = loaded.model
    row = config.encoding_row
    tensors = _network_state(model)
    periods = loaded.metadata.get("periods")
    if row.periodic and config.layer_pe is None:
        cos, sin, pair_periods = _periodic_tables(periods, period_pairs(row, config.d_model, config.heads))
        tensors.update(
            {"positional.cos_table": cos, "positional.sin_table": sin, "positional.pair_periods": pair_periods}
        )
    rotate_values = bool(getattr(model.positional, "rotate_values", False))
    positional = {
        "kind": row.export_kind,
        "phase_precision": config.phase_precision,
        "rotate_values": rotate_values,
        "periods": list(periods) if periods is not None else None,
    }
    if config.layer_pe is not None:
        layers = []
        for layer, name in enumerate(config.layer_encodings()):
            prefix = f"positional.layers.{layer}"
            layer_row = config.row_of(name)
            if layer_row.periodic:
                pairs = period_pairs(layer_row, config.d_model, config.heads)
                cos, sin, pair_periods = _periodic_tables(periods, pairs)
                tensors.update({f"{prefix}.cos_table": cos, f"{prefix}.sin_table": sin,
                                f"{prefix}.pair_periods": pair_periods})
            layers.append({"pe": name, "kind": layer_row.export_kind, "prefix": prefix,
                           "rotate_values": model.positional.layer_rotates_values(layer)})
        positional.update(kind="layered", rotate_values=False, layers=layers)
    summary = loaded.result.to_dict() if loaded.result is not None else None
    export_config = {
        "kind": "trained",
        "producer": "formal-rope export",
        "dtype": "float32",
        "alphabet": list(loaded.alphabet),
        "vocabulary": [*loaded.alphabet, "<bos>", "<eos>", "<pad>"],
        "d_model": config.d_model,
        "heads": config.heads,
        "layers": config.layers,
        "ffn_mult": config.ffn_mult,
        "layer_norm_eps": float(model.final_norm.eps),
        "pe": config.pe,
        "positional": positional,
        **({"windows": list(model.windows)} if config.window is not None else {}),
        "run": {"run_id": loaded.metadata.get("run_id"), "config": config.to_dict(),
                "n_star": None if summary is None else summary.get("n_star"),
                "accuracy": None if summary is None else _finite(summary.get("accuracy"))},
        "notes": [
            "computes in fp32 with the readable strict-causal attention (formal_rope.kernels.reference); "
            "`formalrope run` uses the fused path, so logits can differ in the last bits (verdicts agree "
            "except on a string whose two logits tie within that noise)",
        ],
    }
    if config.objective != "final":
        export_config["notes"].append(
            f"trained with objective {config.objective}: the export holds the eos verdict (the readout every "
            "objective is scored by); the objective's other heads are training-only and left out"
        )
    return tensors, export_config


def _finite(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None
