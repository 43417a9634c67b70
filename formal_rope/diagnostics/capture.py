"""Capture per-head pre-rotation queries/keys, realized rotation angles and actual scores from models.

Trained classifiers (`formal_rope.training.model.Classifier`) are read without touching their code:
forward pre-hooks record each block's input x and its attention output; q, k, v are recomputed
from the block's own modules (attention_norm, qkv) and the rotation tables from the model's own
`positional.rotation(layer, T, x)` (the tables `Block.attend` looks its tokens' rotations up in). The actual scores are
computed as the reference kernel does (rotate q and k with `apply_rotary`, fp32 dot, 1/√d). As a
guard against drift from the model code, the layer's attention output is recomputed with the
reference kernel from those q, k, v, tables and compared with what the model produced
(`HeadInputs.recompute_error`).

Compiled models (`TransformerIR`) are run by the evaluator's native forward pass
(`formal_rope.model.forward.NativeForward`: the same parameter casts, realized rotary tables and
operation order), in fp64, fp32, bf16 or fp16. The emulated mode (rounding after every scalar
operation) is not reproduced here; its scores differ from native ones only by rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from formal_rope.automata.membership import split_symbols
from formal_rope.diagnostics.phases import HeadInputs, check_phases_memory
from formal_rope.errors import FormalRopeError
from formal_rope.kernels.reference import apply_rotary, rotary_attention_reference
from formal_rope.model.certificate import model_certificate
from formal_rope.model.forward import NativeForward, check_parameters_fit, rotary_cos_sin
from formal_rope.model.io import load_model, read_metadata
from formal_rope.model.ir import BOS, EOS, TransformerIR
from formal_rope.precision import FloatFormat, native_format_names, native_row, parse_format, round_once
from formal_rope.training.encodings import composites, joformer, rotary
from formal_rope.training.encodings.periods import assign_periods
from formal_rope.training.layout import special_tokens
from formal_rope.training.trained_classifier import load_checkpoint

TWO_PI = 2.0 * math.pi


@dataclass(frozen=True)
class CapturedHeads:
    """The heads of one model on one input string."""

    model_kind: str  # "trained" or "compiled"
    string: str
    positions: tuple[str, ...]  # token at each position: <bos>, w1 … wN, <eos>
    heads: tuple[HeadInputs, ...]
    layout: tuple[tuple[str, ...], ...]  # head names per layer (every head of the model)
    dtype: str
    description: str  # e.g. the PE or formula, for titles
    # Compiled models: the certificate in the dtype the scores were computed in (native arithmetic;
    # formal_rope.model.certificate) and whether the string is longer than its certified length,
    # i.e. whether the heads' selections shown are not guaranteed. None for trained models.
    certificate: Any = None
    beyond_certified_length: bool | None = None

    @property
    def length(self) -> int:
        return len(self.positions)

    @property
    def readout(self) -> int:
        """The readout (eos) position, N + 1."""
        return len(self.positions) - 1


# ------------------------------------------------------------------------------------ helpers
def _symbols(string: str, alphabet: Sequence[str]) -> list[str]:
    return split_symbols(string, tuple(alphabet))


def _select_heads(
    layout: Sequence[Sequence[str]], heads: Sequence[tuple[int, int]] | None, rotary: dict[tuple[int, int], bool]
) -> list[tuple[int, int]]:
    """Validated (layer, head) pairs, 0-based; None means every head with a rotated pair."""
    if heads is None:
        chosen = [(layer_index, h) for layer_index, names in enumerate(layout) for h in range(len(names))
                  if rotary[(layer_index, h)]]
        if not chosen:
            raise FormalRopeError(
                "the model has no rotary head (no attention head rotates any query/key pair); "
                "choose a head explicitly to decompose an unrotated one"
            )
        return chosen
    chosen = []
    for layer, head in heads:
        if not 0 <= layer < len(layout):
            raise FormalRopeError(f"layer {layer + 1} does not exist: the model has layers 1..{len(layout)}")
        if not 0 <= head < len(layout[layer]):
            raise FormalRopeError(
                f"head {head + 1} does not exist in layer {layer + 1}: it has heads 1..{len(layout[layer])}"
            )
        chosen.append((int(layer), int(head)))
    return chosen


def _angles(cos, sin) -> np.ndarray:

    return torch.atan2(sin.to(torch.float64), cos.to(torch.float64)).cpu().numpy()


# ------------------------------------------------------------------------------------ trained
def _trained_pair_kinds(positional, layer: int, n_pairs: int) -> tuple[tuple, np.ndarray]:
    """(description, nominal θ_p) per pair for the trainer's positional encodings; per head
    ((H, P) frequencies, a description tuple per head) for jof_learned. A hybrid's layer is read
    from its own encoding's module, at that layer's index among the module's layers."""
    # function-local: the encodings' modules import torch (trained models only)

    if isinstance(positional, composites.LayeredPositional):
        return _trained_pair_kinds(positional.layer_module(layer), positional.local_layer(layer), n_pairs)

    nan = np.full(n_pairs, np.nan)
    # A trained model is a pack of one run: its per-run schedules are entry 0.
    if isinstance(positional, joformer.ProjectedRotary):
        fixed = np.asarray(positional.frequencies[0], dtype=np.float64)
        return tuple(f"projected (θ={f:.4g} + content)" for f in fixed), nan
    if isinstance(positional, rotary.FixedRotary):
        frequencies = np.asarray(positional.frequencies[0], dtype=np.float64)
        return tuple(f"rope θ={f:.4g}" if f != 0 else "unrotated" for f in frequencies), frequencies
    if isinstance(positional, rotary.PeriodicRotary):
        periods, numerators = assign_periods(positional.periods[0], positional.n_pairs)
        angles = TWO_PI * numerators / periods
        kinds = tuple(
            f"periodic T_{m}(i mod {m}), a={a}" if m > 1 else "unrotated" for m, a in zip(periods, numerators)
        )
        return kinds, angles.astype(np.float64)
    if isinstance(positional, joformer.LearnedRotary):
        # Each head has its own learned frequencies: (H, P), picked per head by the caller.
        per_head = positional.frequencies[0, layer].detach().double().cpu().numpy()
        return tuple(tuple(f"learned θ={f:.4g}" for f in row) for row in per_head), per_head
    return ("unrotated",) * n_pairs, np.zeros(n_pairs)


def _forward_with_hooks(model, tokens, length: int) -> tuple[dict[int, Any], dict[int, Any]]:
    """One forward pass of `model` in eval mode over `tokens` (1, T), capturing each block's input and
    its attention output (before the output projection): (block_inputs, attention_outputs) by layer."""

    blocks = list(model.blocks)
    device = next(model.parameters()).device
    block_inputs: dict[int, Any] = {}
    attention_outputs: dict[int, Any] = {}
    handles = []
    for index, block in enumerate(blocks):
        handles.append(
            block.register_forward_pre_hook(lambda module, args, i=index: block_inputs.__setitem__(i, args[0]))
        )
        handles.append(
            block.attention_out.register_forward_pre_hook(
                lambda module, args, i=index: attention_outputs.__setitem__(i, args[0])
            )
        )
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(tokens.to(device), torch.tensor([length - 1], device=device))
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return block_inputs, attention_outputs


def _trained_layer(model, layer: int, length: int, block_inputs: dict, attention_outputs: dict, windows) -> dict:
    """Layer `layer`'s q, k, angles and actual scores (every head), recomputed from its captured input
    through the model's own score path, with the error of that recomputation against the captured
    attention output."""


    blocks = list(model.blocks)
    positional = model.positional
    block = blocks[layer]
    x = block_inputs[layer][:, None]  # run-major (1 run, T, d_model) -> (1 run, 1 string, T, d_model)
    d_model = x.shape[-1]
    head_dim = d_model // block.heads
    n_pairs = head_dim // 2
    with torch.no_grad():
        normed = block.attention_norm(x)
        q, k, v = (t[0] for t in block.project_qkv(normed))  # (1 string, H, T, head_dim)
        rotation = positional.rotation(layer, length, x)
        if rotation is None:
            cos = torch.ones(length, n_pairs, dtype=x.dtype, device=x.device)
            sin = torch.zeros_like(cos)
        else:
            cos, sin = rotation
            # Run 0's tables: (T, P) shared, or (1 string, H, T, P) from content.
            cos, sin = cos[0], sin[0]
        # Per-head tables (H, T, P), so shared and content-dependent schedules look alike.
        if cos.dim() == 4:
            cos_h, sin_h = cos[0], sin[0]
        else:
            cos_h = cos.expand(block.heads, length, n_pairs)
            sin_h = sin.expand(block.heads, length, n_pairs)
        scale = 1.0 / math.sqrt(head_dim)
        # The model's score path (reference kernel): tables cast to q's dtype, rotate, fp32 dot, scale.
        q_heads = q[0][:, None]  # (H, 1, T, d): heads as the batch, one table per head
        k_heads = k[0][:, None]
        q_rot = apply_rotary(q_heads, cos_h.to(q.dtype), sin_h.to(q.dtype))
        k_rot = apply_rotary(k_heads, cos_h.to(q.dtype), sin_h.to(q.dtype))
        actual = (torch.matmul(q_rot.float(), k_rot.float().transpose(-1, -2)) * scale)[:, 0]
        recomputed = rotary_attention_reference(
            q_heads, k_heads, v[0][:, None], cos_h, sin_h,
            rotate_values=positional.layer_rotates_values(layer), window=windows[layer],
        )[:, 0]  # (H, T, d)
        raw = attention_outputs[layer][0]  # run 0: (T, d_model), or (1 string, d_model) at the readout
        if layer == len(blocks) - 1:
            # The last block projects only its readout row (the eos, the last position here).
            captured = raw.view(-1, block.heads, head_dim).transpose(0, 1)
            recomputed = recomputed[:, -captured.shape[1]:]
        else:
            captured = raw.view(length, block.heads, head_dim).transpose(0, 1)
        recompute_error = float((recomputed.float() - captured.float()).abs().max()) if length else 0.0
    kinds, frequencies = _trained_pair_kinds(positional, layer, n_pairs)
    angles = _angles(cos_h, sin_h)  # (H, T, P)
    return {
        "q": q[0].double().cpu().numpy().reshape(block.heads, length, n_pairs, 2),
        "k": k[0].double().cpu().numpy().reshape(block.heads, length, n_pairs, 2),
        "angles": angles,
        "actual": actual.double().cpu().numpy(),
        "scale": scale,
        "kinds": kinds,
        "frequencies": frequencies,
        "recompute_error": recompute_error,
        "dtype": str(q.dtype).replace("torch.", ""),
    }



def capture_trained(
    model,
    tokens,
    *,
    heads: Sequence[tuple[int, int]] | None = None,
    positions: Sequence[str] | None = None,
    string: str = "",
    description: str = "",
) -> CapturedHeads:
    """Per-head inputs of a trainer `Classifier` on one token sequence (T,) (bos … eos)."""

    if getattr(model, "runs", 1) != 1:
        raise FormalRopeError(
            f"phase capture reads one run; this model packs {model.runs} (use model.select_runs([r]))"
        )
    tokens = torch.as_tensor(tokens, dtype=torch.int64).reshape(1, -1)
    length = tokens.shape[1]
    blocks = list(model.blocks)
    # Before the forward pass: every head of a layer is captured, each with d_head / 2 pairs.
    # (Out-of-range layers are reported by the head selection below.)
    wanted = (sorted({layer for layer, _ in heads if 0 <= layer < len(blocks)}) if heads is not None
              else range(len(blocks)))
    pairs = [blocks[layer].attention_norm.features // blocks[layer].heads // 2 for layer in wanted
             for _ in range(blocks[layer].heads)]
    check_phases_memory(length, pairs)
    layout = tuple(tuple(f"L{layer_index + 1}.H{h + 1}" for h in range(block.heads))
                   for layer_index, block in enumerate(blocks))
    block_inputs, attention_outputs = _forward_with_hooks(model, tokens, length)
    windows = tuple(getattr(model, "windows", None) or (None,) * len(blocks))  # a hybrid's sliding windows
    per_layer: dict[int, dict] = {}

    def layer_data(layer: int) -> dict:
        if layer not in per_layer:
            per_layer[layer] = _trained_layer(model, layer, length, block_inputs, attention_outputs, windows)
        return per_layer[layer]

    def rotated(layer: int, head: int) -> np.ndarray:
        return np.any(layer_data(layer)["angles"][head] != 0, axis=0)

    if heads is None:
        rotary = {(layer_index, h): bool(rotated(layer_index, h).any())
                  for layer_index in range(len(blocks)) for h in range(blocks[layer_index].heads)}
    else:
        rotary = {}
    chosen = _select_heads(layout, heads, rotary)
    captured_heads = []
    for layer, head in chosen:
        data = layer_data(layer)
        captured_heads.append(
            HeadInputs(
                layer=layer,
                head=head,
                name=layout[layer][head],
                scale=data["scale"],
                query=data["q"][head],
                key=data["k"][head],
                angles=data["angles"][head],
                actual=data["actual"][head],
                pair_kinds=data["kinds"][head] if data["frequencies"].ndim == 2 else data["kinds"],
                frequencies=data["frequencies"][head] if data["frequencies"].ndim == 2 else data["frequencies"],
                rotated=rotated(layer, head),
                dtype=data["dtype"],
                recompute_error=data["recompute_error"],
                window=windows[layer],
            )
        )
    labels = tuple(positions) if positions is not None else tuple(str(t) for t in tokens[0].tolist())
    return CapturedHeads(
        model_kind="trained",
        string=string,
        positions=labels,
        heads=tuple(captured_heads),
        layout=layout,
        dtype=captured_heads[0].dtype if captured_heads else "float32",
        description=description,
    )


# ------------------------------------------------------------------------------------ compiled
def _torch_dtype(fmt: FloatFormat):
    row = native_row(fmt)
    if row is None:
        raise FormalRopeError(
            f"phase diagnostics run compiled models natively; format {fmt.name!r} is not one of "
            f"{', '.join(native_format_names())}"
        )
    return row.torch_dtype()


def _native_format(model: TransformerIR, fmt: FloatFormat | str | None) -> FloatFormat:
    """The format to diagnose a compiled model in: `fmt`, else its compile format where that has a
    torch dtype, else fp64."""
    if fmt is not None:
        return parse_format(fmt)
    compiled = parse_format(str(model.metadata.get("format", "fp32")))
    return compiled if native_row(compiled) is not None else parse_format("fp64")


def _ir_tables(head, length: int, fmt: FloatFormat, dtype):
    """(cos, sin) (T, P) in `dtype` as the native evaluator realizes them; identity for 'none' pairs."""

    cos = torch.ones(length, len(head.rotary), dtype=dtype)
    sin = torch.zeros(length, len(head.rotary), dtype=dtype)
    for index, pair in enumerate(head.rotary):
        if pair.kind == "none":
            continue
        pair_cos, pair_sin = rotary_cos_sin(pair, length, fmt, "native")
        cos[:, index] = round_once(torch.as_tensor(np.array(pair_cos, dtype=np.float64)), dtype)
        sin[:, index] = round_once(torch.as_tensor(np.array(pair_sin, dtype=np.float64)), dtype)
    return cos, sin


def _ir_nominal(pair) -> tuple[str, float]:
    if pair.kind == "angle":
        return pair.describe(), float(pair.angle)
    if pair.kind == "periodic":
        return pair.describe(), TWO_PI / int(pair.period)
    return pair.describe(), 0.0


def compiled_forward(model, tokens: np.ndarray, fmt: FloatFormat | str = "fp32"):
    """(per-layer residual inputs, final residual) of a TransformerIR in a native torch dtype.

    The native evaluator's own forward pass (`formal_rope.model.forward.NativeForward`); returns the
    residual stream entering each layer (T, d_model) and the final one, as tensors in the dtype.
    """
    fmt = parse_format(fmt)
    _torch_dtype(fmt)  # the diagnostics' own message for formats without a torch dtype
    layer_inputs: list = []
    final = NativeForward(model, fmt).forward(np.asarray(tokens)[None], layer_inputs=layer_inputs)
    return [x[0] for x in layer_inputs], final[0]


def capture_compiled(
    model, string: str, *, heads: Sequence[tuple[int, int]] | None = None, fmt: FloatFormat | str | None = None
) -> CapturedHeads:
    """Per-head inputs of a compiled TransformerIR on `string`, computed natively in `fmt`.

    `fmt` defaults to the model's compile format when it has a torch dtype, else fp64.
    """

    fmt = _native_format(model, fmt)
    dtype = _torch_dtype(fmt)
    check_parameters_fit(model, fmt)  # an overflowed weight would make every score NaN
    symbols = model.read(string)  # read as `accepts` reads it
    tokens = model.encode(symbols)
    certificate = model_certificate(model, fmt, "native", up_to=len(symbols))
    layout = tuple(tuple(head.name for head in layer.heads) for layer in model.layers)
    rotary = {
        (layer_index, h): any(pair.kind != "none" for pair in head.rotary)
        for layer_index, layer in enumerate(model.layers)
        for h, head in enumerate(layer.heads)
    }
    chosen = _select_heads(layout, heads, rotary)
    check_phases_memory(len(tokens), [len(model.layers[layer].heads[h].rotary) for layer, h in chosen])
    runner = NativeForward(model, fmt)
    layer_inputs: list = []
    runner.forward(tokens[None], layer_inputs=layer_inputs)
    length = len(tokens)
    tensor = runner.tensor

    captured = []
    with torch.no_grad():
        for layer, index in chosen:
            head = model.layers[layer].heads[index]
            x = layer_inputs[layer]
            cos, sin = _ir_tables(head, length, fmt, dtype)
            query = x @ tensor(head.w_query).T + tensor(head.b_query)  # before the rotation
            key = x @ tensor(head.w_key).T + tensor(head.b_key)
            scores = runner.scores(x, head)
            n_pairs = len(head.rotary)
            kinds, nominal = zip(*(_ir_nominal(pair) for pair in head.rotary))
            captured.append(
                HeadInputs(
                    layer=layer,
                    head=index,
                    name=head.name,
                    # The scale the model multiplies by, as stored in its dtype.
                    scale=float(tensor(np.array(head.score_scale)).double()),
                    query=query[0].double().numpy().reshape(length, n_pairs, 2),
                    key=key[0].double().numpy().reshape(length, n_pairs, 2),
                    angles=_angles(cos, sin),
                    actual=scores[0].double().numpy(),
                    pair_kinds=tuple(kinds),
                    frequencies=np.array(nominal, dtype=np.float64),
                    rotated=np.array([pair.kind != "none" for pair in head.rotary]),
                    dtype=fmt.name,
                )
            )
    return CapturedHeads(
        model_kind="compiled",
        string=string,
        positions=(BOS, *symbols, EOS),
        heads=tuple(captured),
        layout=layout,
        dtype=fmt.name,
        description=str(model.metadata.get("formula", "compiled model")),
        certificate=certificate,
        beyond_certified_length=bool(certificate.beyond([len(symbols)])[0]),
    )


# ------------------------------------------------------------------------------------ dispatch
def capture_heads(
    model,
    string: str,
    *,
    heads: Sequence[tuple[int, int]] | None = None,
    fmt: FloatFormat | str | None = None,
    alphabet: Sequence[str] | None = None,
) -> CapturedHeads:
    """Per-head inputs of any model on one string.

    `model`: a model file path (compiled or trained), a `TransformerIR`, a loaded trained
    checkpoint (`TrainedClassifier`) or a bare trainer `Classifier` (then `alphabet` is required).
    `heads`: 0-based (layer, head) pairs; None = every head that rotates some pair.
    `fmt`: compiled models only (native fp64/fp32/bf16/fp16); trained models run in their dtype.
    """
    if isinstance(model, (str, Path)):
        model = load_model_any(model)
    if isinstance(model, TransformerIR):
        return capture_compiled(model, string, heads=heads, fmt=fmt)
    classifier = getattr(model, "model", model)
    alphabet = tuple(alphabet) if alphabet is not None else tuple(getattr(model, "alphabet", ()) or ())
    if not hasattr(classifier, "blocks") or not hasattr(classifier, "positional"):
        raise FormalRopeError(
            f"phase diagnostics cannot read a {type(model).__name__}: expected a compiled or trained model"
        )
    if not alphabet:
        raise FormalRopeError("a bare trained Classifier needs its alphabet to encode the string")
    fmt_name = None if fmt is None else parse_format(fmt).name
    if fmt_name not in (None, "fp32"):
        raise FormalRopeError(f"trained models are diagnosed in fp32 (their parameter dtype), not {fmt_name!r}")
    if len(alphabet) != classifier.n_symbols:
        raise FormalRopeError(f"the alphabet has {len(alphabet)} symbols but the model reads {classifier.n_symbols}")

    symbols = _symbols(string, alphabet)
    index = {symbol: position for position, symbol in enumerate(alphabet)}
    bos, eos, _ = special_tokens(len(alphabet))
    tokens = np.array([bos, *(index[s] for s in symbols), eos], dtype=np.int64)
    config = getattr(model, "config", None)
    description = f"trained {config.pe} on {config.language}" if config is not None else "trained classifier"
    return capture_trained(
        classifier, tokens, heads=heads, positions=("<bos>", *symbols, "<eos>"), string=string, description=description
    )


def load_model_any(path: str | Path):
    """A compiled TransformerIR or a TrainedClassifier from a model file (dispatch on its kind)."""
    metadata = read_metadata(path)
    if metadata["kind"] == "compiled":
        return load_model(path)
    if metadata["kind"] == "trained":

        return load_checkpoint(path)
    raise FormalRopeError(f"{path}: unknown model kind {metadata['kind']!r} (expected 'compiled' or 'trained')")


def model_layout(model) -> tuple[tuple[str, ...], ...]:
    """Head names per layer of a compiled IR, a trained checkpoint or a bare Classifier."""
    if isinstance(model, TransformerIR):
        return tuple(tuple(head.name for head in layer.heads) for layer in model.layers)
    classifier = getattr(model, "model", model)
    return tuple(tuple(f"L{layer_index + 1}.H{h + 1}" for h in range(block.heads))
                 for layer_index, block in enumerate(classifier.blocks))
