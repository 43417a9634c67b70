"""A trained formal-rope classifier as plain PyTorch (this file needs torch and the standard library only).

Written next to `config.json` and `model.safetensors` by `formalrope export MODEL --format safetensors`.

    import model                                   # this file
    net = model.load("exported/")                  # the folder holding the three files
    net.classify(["abab", "abba"])                 # [True, False]: what `formalrope run` prints
    net(tokens, readout_index)                     # logits (batch, 2) = (reject, accept)

The network: input `<bos> w1 .. wN <eos>` (token ids: alphabet symbols 0..|S|-1, then <bos>, <eos>,
<pad>; bos is position 0, symbol i position i, eos position N+1); token embedding (plus an additive
sinusoidal table for sipe / sipe_p); pre-LayerNorm blocks of strict-causal multi-head attention
(query i attends to keys j < i, <bos> attends to nothing and outputs zero) with rotary pairs
(2p, 2p+1) of each head, and a GELU feed-forward; final LayerNorm and a 2-way linear readout at
each string's <eos>. Positional encodings (config "positional"):

  none              NoPE
  additive_fixed    sipe: coordinates (2p, 2p+1) += (sin, cos)(theta_p * i)
  additive_periodic sipe_p: the same from per-pair tables T_p(i mod m_p)
  rotary_fixed      rope, partial_rope (theta 0 = unrotated pair), jof_fixed
  rotary_periodic   rope_p: rotations looked up from T_p(i mod m_p); theta*i is never formed
  rotary_learned    jof_learned: frequencies per layer and head, (layers, heads, pairs) (float64)
  rotary_projected  jof_projected: fixed phases plus content angles W2 GELU(W1 LN(x)) per head
with "rotate_values" (JoFormer): values are rotated by R_j and the attention output by R_i^T.
A hybrid (kind "layered") gives each layer its own entry in "layers" ({kind, rotate_values, prefix}:
that layer's tensors are named prefix.frequencies, prefix.turns, prefix.cos_table, ...; a
jof_learned layer's prefix.learned_frequencies (heads, pairs) and prefix.learned_turns, a
jof_projected layer's fixed prefix.frequencies plus its projector prefix.projector.{norm,in,out}), and
"windows" (top level; absent: every layer global) a sliding window per layer: query i then attends
to keys j with i - w <= j < i only (null: every j < i).
Phases theta*i mod 2*pi are exact when "phase_precision" is fp64 (from each frequency's turn limbs,
positional.turns / positional.learned_turns: integer arithmetic, within ~1e-15 rad at any base), the
float32 product otherwise.
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

import torch
from torch.nn import functional as F

_DTYPES = {"F64": torch.float64, "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I64": torch.int64}
_TOKEN = re.compile(r"""(?P<quoted>'[^'\n]+'(?=\s|$)|"[^"\n]+"(?=\s|$))|(?P<bare>[^\s'"]\S*)|(?P<bad>['"]\S*)""")
TWO_PI = 2.0 * math.pi
_SCORE_BUDGET = 1 << 23  # batch * heads * T * T attention scores per forward pass


def read_safetensors(path) -> dict:
    """Tensors of a .safetensors file (8-byte little-endian header size, JSON header, raw data)."""
    data = Path(path).read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = memoryview(data)[8 + size :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        flat = torch.frombuffer(bytearray(body[start:end]), dtype=dtype) if end > start else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"])
    return tensors


def split_string(string, alphabet) -> list:
    """Symbols of a string: its characters over single-character alphabets, else blank-separated
    symbols ('quoted' when a symbol contains a blank). A list/tuple of symbols is taken as is."""
    if not isinstance(string, str) or all(len(symbol) == 1 for symbol in alphabet):
        symbols = list(string)
    else:
        symbols = []
        for match in _TOKEN.finditer(string):
            if match.group("bad") is not None:
                raise ValueError(f"unterminated quote at column {match.start() + 1} of {string!r}")
            quoted = match.group("quoted")
            symbols.append(quoted[1:-1] if quoted is not None else match.group("bare"))
    unknown = [symbol for symbol in symbols if symbol not in alphabet]
    if unknown:
        raise ValueError(f"symbol {unknown[0]!r} of {string!r} is not in the alphabet {alphabet}")
    return symbols


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate pairs (2p, 2p+1) of x (batch, heads, T, d) by cos/sin of shape (T, d/2) or (batch, heads, T, d/2)."""
    if cos.dim() == 2:
        cos, sin = cos[None, None], sin[None, None]
    if inverse:
        sin = -sin
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class TrainedClassifier(torch.nn.Module):
    """The exported classifier; `forward(tokens, readout_index)` gives logits, `classify` verdicts."""

    def __init__(self, config: dict, tensors: dict) -> None:
        super().__init__()
        self.config = config
        self.alphabet = list(config["alphabet"])
        self.positional = config["positional"]
        self.eps = float(config["layer_norm_eps"])
        for name, tensor in tensors.items():
            self.register_buffer(name.replace(".", "__"), tensor, persistent=False)

    def w(self, name: str) -> torch.Tensor:
        return getattr(self, name.replace(".", "__"))

    def linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w(f"{name}.weight"), self.w(f"{name}.bias"))

    def norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.w(f"{name}.weight"), self.w(f"{name}.bias"), self.eps)

    # ------------------------------------------------------------------ positional encodings
    def phases(self, frequencies: torch.Tensor, length: int, turns: torch.Tensor | None = None) -> torch.Tensor:
        """theta * i for positions 0..length-1 -> (T, P) (fp64: reduced modulo 2*pi).

        fp64 with `turns` (P, 3) int64: each theta as its fraction of a turn, frac(theta / 2pi) =
        (t0 * 2^52 + t1 * 2^26 + t2) / 2^78, so i * theta mod 2pi is exact integer arithmetic and only
        the final fraction is rounded (within ~1e-15 rad at any base). Without turns (files written
        before they were exported): the float64 product, reduced.
        """
        if self.positional["phase_precision"] == "fp64":
            if turns is not None:
                i = torch.arange(length, dtype=torch.int64)[:, None]
                mask = (1 << 26) - 1
                low = i * turns[None, :, 2]
                middle = i * turns[None, :, 1] + (low >> 26)
                high = (i * turns[None, :, 0] + (middle >> 26)) & mask
                fraction = (high.double() + (middle & mask).double() * 2.0**-26 + (low & mask).double() * 2.0**-52)
                phase = fraction * 2.0**-26 * TWO_PI
                return torch.minimum(phase, torch.tensor(math.nextafter(TWO_PI, 0.0), dtype=torch.float64))
            product = torch.arange(length, dtype=torch.float64)[:, None] * frequencies.to(torch.float64)[None, :]
            return torch.fmod(product, TWO_PI)  # positions and frequencies are >= 0: fmod is the exact mod
        return torch.arange(length, dtype=torch.float32)[:, None] * frequencies.to(torch.float32)[None, :]

    def turns(self, name: str):
        """The exported turn limbs `name`, or None (older files)."""
        return getattr(self, name.replace(".", "__"), None)

    def periodic(self, length: int, prefix: str = "positional") -> tuple[torch.Tensor, torch.Tensor]:
        residues = torch.remainder(torch.arange(length)[:, None], self.w(f"{prefix}.pair_periods")[None, :])
        pairs = torch.arange(residues.shape[1])[None, :]
        return self.w(f"{prefix}.cos_table")[pairs, residues], self.w(f"{prefix}.sin_table")[pairs, residues]

    def layer_positional(self, layer: int) -> tuple[dict, str]:
        """(the encoding of layer `layer`: kind and rotate_values, the prefix of its tensors)."""
        if self.positional["kind"] == "layered":
            entry = self.positional["layers"][layer]
            return entry, entry["prefix"]
        return self.positional, "positional"

    def window(self, layer: int):
        """Layer `layer`'s sliding window (None: global)."""
        windows = self.config.get("windows")
        return None if windows is None else windows[layer]

    def additive(self, length: int) -> torch.Tensor | None:
        kind = self.positional["kind"]
        if kind == "additive_fixed":
            phases = self.phases(self.w("positional.frequencies"), length, self.turns("positional.turns"))
            cos, sin = torch.cos(phases).to(torch.float32), torch.sin(phases).to(torch.float32)
        elif kind == "additive_periodic":
            cos, sin = self.periodic(length)
        else:
            return None
        return torch.stack((sin, cos), dim=-1).flatten(-2)

    def rotation(self, layer: int, length: int, hidden: torch.Tensor):
        spec, prefix = self.layer_positional(layer)
        kind = spec["kind"]
        if kind == "rotary_fixed":
            phases = self.phases(self.w(f"{prefix}.frequencies"), length, self.turns(f"{prefix}.turns"))
            return torch.cos(phases).to(torch.float32), torch.sin(phases).to(torch.float32)
        if kind == "rotary_periodic":
            return self.periodic(length, prefix)
        layered = self.positional["kind"] == "layered"  # a hybrid: each layer's own tensors under its prefix
        if kind == "rotary_learned":  # one table per head: (1, heads, T, pairs)
            if layered:
                per_head, turns = self.w(f"{prefix}.learned_frequencies"), self.turns(f"{prefix}.learned_turns")
            else:
                per_head = self.w("positional.learned_frequencies")[layer]  # (heads, pairs)
                turns = self.turns("positional.learned_turns")
                turns = None if turns is None else turns[layer]
            phases = torch.stack([
                self.phases(frequencies, length, None if turns is None else turns[head])
                for head, frequencies in enumerate(per_head)
            ])[None]
            return torch.cos(phases).to(torch.float32), torch.sin(phases).to(torch.float32)
        if kind == "rotary_projected":
            turns = self.turns(f"{prefix}.turns")
            fixed = self.phases(self.w(f"{prefix}.frequencies"), length, turns).to(torch.float32)
            prefix = f"{prefix}.projector" if layered else f"positional.projectors.{layer}"
            content = self.linear(
                F.gelu(self.linear(self.norm(hidden, f"{prefix}.norm"), f"{prefix}.in")), f"{prefix}.out"
            )
            heads, pairs = self.config["heads"], fixed.shape[1]
            angles = (fixed[None, :, None, :] + content.float().view(hidden.shape[0], length, heads, pairs)).permute(
                0, 2, 1, 3
            )
            return torch.cos(angles), torch.sin(angles)
        head_dim = self.config["d_model"] // self.config["heads"]
        return torch.ones(length, head_dim // 2), torch.zeros(length, head_dim // 2)

    # --------------------------------------------------------------------------- network
    def attend(self, x: torch.Tensor, layer: int, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, length, d_model = x.shape
        heads = self.config["heads"]
        head_dim = d_model // heads
        qkv = self.linear(x, f"blocks.{layer}.qkv").view(batch, length, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        rotate_values = bool(self.layer_positional(layer)[0]["rotate_values"])
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if rotate_values:
            v = apply_rotary(v, cos, sin)
        scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(head_dim)
        visible = torch.ones(length, length, dtype=torch.bool).tril(-1)  # key j < query i
        window = self.window(layer)
        if window is not None:  # and key j >= query i - window
            visible &= ~torch.ones(length, length, dtype=torch.bool).tril(-window - 1)
        scores = scores.masked_fill(~visible, float("-inf"))
        rows = torch.softmax(scores[..., 1:, :], dim=-1) @ v.float()
        out = torch.cat((rows.new_zeros(batch, heads, 1, head_dim), rows), dim=-2)  # <bos> sees nothing
        if rotate_values:
            out = apply_rotary(out, cos.float(), sin.float(), inverse=True)
        return out.to(x.dtype).transpose(1, 2).reshape(batch, length, d_model)

    @torch.no_grad()
    def forward(self, tokens: torch.Tensor, readout_index: torch.Tensor) -> torch.Tensor:
        """Logits (batch, 2) = (reject, accept) read at readout_index (each row's <eos> position)."""
        length = tokens.shape[1]
        x = self.w("embedding.weight")[tokens]
        table = self.additive(length)
        if table is not None:
            x = x + table.to(x.dtype)
        for layer in range(self.config["layers"]):
            cos, sin = self.rotation(layer, length, x)
            x = x + self.linear(self.attend(self.norm(x, f"blocks.{layer}.attention_norm"), layer, cos, sin),
                                f"blocks.{layer}.attention_out")
            hidden = F.gelu(self.linear(self.norm(x, f"blocks.{layer}.ffn_norm"), f"blocks.{layer}.ffn_in"))
            x = x + self.linear(hidden, f"blocks.{layer}.ffn_out")
        final = x[torch.arange(tokens.shape[0]), readout_index]
        return self.linear(self.norm(final, "final_norm"), "readout")

    def logits(self, strings) -> list:
        """(reject, accept) logits per string, input order."""
        n = len(self.alphabet)
        bos, eos = n, n + 1
        encoded = [[self.alphabet.index(s) for s in split_string(string, self.alphabet)] for string in strings]
        results = [None] * len(encoded)
        for length in sorted({len(symbols) for symbols in encoded}):
            indices = [i for i, symbols in enumerate(encoded) if len(symbols) == length]
            tokens = length + 2
            step = max(1, min(len(indices), _SCORE_BUDGET // max(1, self.config["heads"] * tokens * tokens)))
            for start in range(0, len(indices), step):
                batch = indices[start : start + step]
                ids = torch.tensor([[bos, *encoded[i], eos] for i in batch], dtype=torch.int64)
                out = self.forward(ids, torch.full((len(batch),), length + 1, dtype=torch.int64)).float()
                for i, row in zip(batch, out.tolist()):
                    results[i] = row
        return results

    def classify(self, strings) -> list:
        """Accept (True) when the accept logit is larger, for each string."""
        return [accept > reject for reject, accept in self.logits(strings)]


def load(directory=".") -> TrainedClassifier:
    """The model exported in `directory` (config.json + model.safetensors)."""
    directory = Path(directory)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    return TrainedClassifier(config, read_safetensors(directory / "model.safetensors"))
