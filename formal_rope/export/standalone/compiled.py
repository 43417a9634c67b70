"""A compiled formal-rope transformer as plain PyTorch (this file needs torch and the standard library only).

Written next to `config.json` and `model.safetensors` by `formalrope export MODEL --format safetensors`.

    import model                                   # this file
    net = model.load("exported/")                  # the folder holding the three files
    net.classify(["abba", "ab"])                   # [False, True]: what `formalrope run --mode native` prints
    net(tokens)                                    # final residual stream (batch, T, d_model) for token ids

The network (the IR of formal_rope.model.ir): token embedding into named residual coordinates, then
layers of strict-causal attention heads (position i attends to keys j < i; position 0, <bos>, sees
nothing and its head output is zero) summed into the residual, each followed by an optional ReLU
feed-forward block; the verdict reads the residual at <eos>. Each 2-d pair of a head's query/key
space has its own rotation: none, an angle g (rotation by g*i, the phase formed in the model's dtype
exactly as formal-rope's native mode does) or a period m (a stored table T_m looked up at i mod m;
g*i is never formed). Arithmetic runs in the dtype the weights were exported in (config "dtype").
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import torch

_DTYPES = {"F64": torch.float64, "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I64": torch.int64}
# A token of a blank-separated string: a quoted symbol, a bare run of non-blanks, or a stray quote.
_TOKEN = re.compile(r"""(?P<quoted>'[^'\n]+'(?=\s|$)|"[^"\n]+"(?=\s|$))|(?P<bare>[^\s'"]\S*)|(?P<bad>['"]\S*)""")
_SCORE_BUDGET = 8_000_000  # batch * T * T score entries per forward pass (as formal-rope's evaluator)


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
    if not isinstance(string, str):
        symbols = list(string)
    elif all(len(symbol) == 1 for symbol in alphabet):
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


class CompiledTransformer(torch.nn.Module):
    """The exported network; `forward(tokens)` gives the final residual stream, `classify` verdicts."""

    def __init__(self, config: dict, tensors: dict) -> None:
        super().__init__()
        self.config = config
        self.vocabulary = list(config["vocabulary"])
        self.alphabet = list(config["alphabet"])
        self.coordinates = list(config["coordinates"])
        self.dtype = getattr(torch, config["dtype"])
        self.bos, self.eos = self.vocabulary.index(config["bos"]), self.vocabulary.index(config["eos"])
        for name, tensor in tensors.items():
            self.register_buffer(name.replace(".", "__"), tensor, persistent=False)

    def weight(self, name: str) -> torch.Tensor:
        return getattr(self, name.replace(".", "__"))

    def rotation_tables(self, prefix: str, pairs: list, length: int):
        """(cos, sin) of shape (length, pairs), dtype: angle pairs form phase = i * g in the dtype;
        periodic pairs look up the stored table at i mod m; unrotated pairs are None."""
        positions = torch.arange(length, dtype=torch.float64).to(torch.float32).to(self.dtype)
        tables = []
        for index, pair in enumerate(pairs):
            if pair["kind"] == "angle":
                phase = positions * self.weight(f"{prefix}.rotary.{index}.angle")
                tables.append((torch.cos(phase), torch.sin(phase)))
            elif pair["kind"] == "periodic":
                residues = torch.remainder(torch.arange(length), int(pair["period"]))
                tables.append((self.weight(f"{prefix}.rotary.{index}.cos")[residues],
                               self.weight(f"{prefix}.rotary.{index}.sin")[residues]))
            else:
                tables.append(None)
        return tables

    @staticmethod
    def rotate(vectors: torch.Tensor, tables: list) -> torch.Tensor:
        out = vectors.clone()
        for index, table in enumerate(tables):
            if table is None:
                continue
            cos, sin = table[0][None], table[1][None]
            a, b = vectors[..., 2 * index], vectors[..., 2 * index + 1]
            out[..., 2 * index] = cos * a - sin * b
            out[..., 2 * index + 1] = sin * a + cos * b
        return out

    def attention(self, x: torch.Tensor, prefix: str, head: dict) -> torch.Tensor:
        length = x.shape[1]
        tables = self.rotation_tables(prefix, head["rotary"], length)
        w = self.weight
        query = self.rotate(x @ w(f"{prefix}.w_query").T + w(f"{prefix}.b_query"), tables)
        key = self.rotate(x @ w(f"{prefix}.w_key").T + w(f"{prefix}.b_key"), tables)
        value = x @ w(f"{prefix}.w_value").T + w(f"{prefix}.b_value")
        scores = query @ key.transpose(1, 2)
        if head["score_scale"] != 1.0:
            scores = scores * w(f"{prefix}.score_scale")
        visible = torch.ones(length, length, dtype=torch.bool).tril(-1)  # key j < query i
        scores = scores.masked_fill(~visible, float("-inf"))
        rows = torch.softmax(scores[:, 1:, :], dim=-1) @ value
        return torch.cat((torch.zeros_like(rows[:, :1, :]), rows), dim=1)  # <bos> sees nothing

    @torch.no_grad()
    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Final residual stream (batch, T, d_model) in the model's dtype for token ids (batch, T),
        each row `<bos> w1 .. wN <eos>` (ids index config["vocabulary"])."""
        x = self.weight("embedding")[tokens]
        for number, layer in enumerate(self.config["layers"]):
            if layer["heads"]:
                total = None
                for index, head in enumerate(layer["heads"]):
                    prefix = f"layers.{number}.heads.{index}"
                    projected = self.attention(x, prefix, head) @ self.weight(f"{prefix}.w_out").T
                    total = projected if total is None else total + projected
                x = x + total
            if layer["feed_forward"]:
                prefix = f"layers.{number}.feed_forward"
                hidden = torch.relu(x @ self.weight(f"{prefix}.w_in").T + self.weight(f"{prefix}.b_in"))
                x = x + (hidden @ self.weight(f"{prefix}.w_out").T + self.weight(f"{prefix}.b_out"))
        return x

    def encode(self, string) -> list:
        """Token ids of `<bos> string <eos>`."""
        return [self.bos, *(self.vocabulary.index(s) for s in split_string(string, self.alphabet)), self.eos]

    def readout(self, final_eos: torch.Tensor) -> torch.Tensor:
        """The float64 number compared at <eos>: one coordinate, or weights . x + bias."""
        readout = self.config["readout"]
        x = final_eos.to(torch.float64)
        if readout["kind"] == "coordinate":
            return x[:, int(readout["coordinate"])]
        return x @ self.weight("readout.weights") + float(readout["bias"])

    def scores(self, strings) -> list:
        """The readout value of each string (input order); accepted when above config threshold."""
        encoded = [self.encode(string) for string in strings]
        values = [0.0] * len(encoded)
        for length in sorted({len(tokens) for tokens in encoded}):
            indices = [i for i, tokens in enumerate(encoded) if len(tokens) == length]
            chunk = max(1, _SCORE_BUDGET // (length * length))
            for start in range(0, len(indices), chunk):
                batch = indices[start : start + chunk]
                final = self.forward(torch.tensor([encoded[i] for i in batch], dtype=torch.int64))
                for i, value in zip(batch, self.readout(final[:, -1, :]).tolist()):
                    values[i] = value
        return values

    def classify(self, strings) -> list:
        """Accept (True) or reject each string."""
        readout = self.config["readout"]
        threshold = float(readout["threshold"]) if readout["kind"] == "coordinate" else 0.0
        return [value > threshold for value in self.scores(strings)]


def load(directory=".") -> CompiledTransformer:
    """The model exported in `directory` (config.json + model.safetensors)."""
    directory = Path(directory)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    return CompiledTransformer(config, read_safetensors(directory / "model.safetensors"))
