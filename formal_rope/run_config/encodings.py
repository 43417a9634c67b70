"""The positional-encoding registry: one row per encoding of SPEC §8, carrying everything the rest
of the code asks about it.

The rest of the code asks these rows instead of listing encodings by name: RunConfig's canonical
fields (which encodings take a base, periods, a rotated fraction), validation, the factory
(`encodings.builders`), the exporters (`export/trained.py` writes the row's `export_kind`, which the
standalone `model.py` computes), report labels and order, the memory estimate, and the CLI's `--pe`
choices and help. Every tuple of encoding names below is derived from the rows.

This module imports nothing but the standard library and `formal_rope.errors`: the CLI reads it at
start-up (`--help`) and the torch-free config stage derives its tuples from it. So a row does not
hold its builder (a torch module): `encodings.builders.BUILDERS` maps each row's name to it, and a
test checks the two tables name the same encodings (docs/training.md, "How to extend").
"""

from __future__ import annotations

from dataclasses import dataclass

from formal_rope.errors import FormalRopeError

# How the exporters write an encoding (config.json "positional.kind"); the standalone
# export/standalone/trained.py computes each of these kinds with torch alone.
EXPORT_KINDS = (
    "none",
    "additive_fixed",
    "additive_periodic",
    "rotary_fixed",
    "rotary_periodic",
    "rotary_learned",
    "rotary_projected",
)


@dataclass(frozen=True)
class Encoding:
    """One positional encoding: what it is called, what it takes, how it is built and exported.

    Its builder, `function(specs, n_pairs) -> PositionalEncoding`, is the row's entry in
    `encodings.builders.BUILDERS` (it imports torch; this module must not).
    """

    name: str  # the --pe value and RunConfig.pe
    label: str  # what reports and tables call it (the core paper's names: RoPE_P, SiPE_NP, ...)
    help: str  # one line: what it computes (docs/training.md's table of encodings lists it)
    export_kind: str  # how the exporters write it: one of EXPORT_KINDS
    report_rank: int  # its rows' place in report tables (the core paper's order)
    takes_base: bool = False  # forms phases theta*i from a base beta: base and phase_precision apply
    periodic: bool = False  # looks rotations up in tables T_d(i mod m_d): periods apply (given or auto)
    takes_rope_fraction: bool = False  # rotates a fraction of its pairs: rope_fraction applies
    additive: bool = False  # adds a sin/cos table to the embeddings (pairs span d_model, not one head)
    content_angles: bool = False  # its angles also depend on the hidden state (per-layer projector weights)
    # Fixed tables, no value transport: its runs can share a pack with runs of other mixable encodings
    # (`composites.MixedPositional`: zeros added, 1 + 0i rotations, both exact).
    mixable: bool = False

    def __post_init__(self) -> None:
        problems = []
        if not (self.name[:1].isalpha() and self.name.isidentifier() and self.name.islower()):
            problems.append("name must be lower-case letters, digits and underscores")
        if not self.label.strip() or not self.help.strip():
            problems.append("label and help must say something")
        if self.export_kind not in EXPORT_KINDS:
            problems.append(f"export_kind {self.export_kind!r} is not one of {', '.join(EXPORT_KINDS)}")
        elif self.additive != self.export_kind.startswith("additive_"):
            problems.append(f"additive={self.additive} contradicts export_kind {self.export_kind!r}")
        elif self.periodic != self.export_kind.endswith("_periodic"):
            problems.append(f"periodic={self.periodic} contradicts export_kind {self.export_kind!r}")
        if problems:
            raise ValueError(f"positional encoding {self.name!r}: {'; '.join(problems)}")


# In the order `--help` and error messages list them.
ENCODINGS: dict[str, Encoding] = {
    encoding.name: encoding
    for encoding in (
        Encoding(
            "nope", label="NoPE", help="nothing (identity rotation)",
            export_kind="none", report_rank=0, mixable=True,
        ),
        Encoding(
            "sipe", label="SiPE_NP", help="additive sin/cos, θ_p = β^(−2p/d_model)",
            export_kind="additive_fixed", report_rank=3, takes_base=True, additive=True, mixable=True,
        ),
        Encoding(
            "sipe_p", label="SiPE_P", help="additive sin/cos looked up from periodic tables",
            export_kind="additive_periodic", report_rank=4, periodic=True, additive=True, mixable=True,
        ),
        Encoding(
            "rope", label="RoPE_NP", help="θ_d = β^(−2(d−1)/D), D = head dim, any β (1e-12 … 1e12)",
            export_kind="rotary_fixed", report_rank=1, takes_base=True, mixable=True,
        ),
        Encoding(
            "rope_p", label="RoPE_P", help="R_d(i) = T_d(i mod m_d), a table of m_d rotations",
            export_kind="rotary_periodic", report_rank=2, periodic=True, mixable=True,
        ),
        Encoding(
            "partial_rope", label="partial RoPE",
            help="first ⌊fraction·D/2 + ½⌋ pairs rotated (rounded half up; RoPE spacing over the rotated dims), "
            "rest unrotated",
            export_kind="rotary_fixed", report_rank=5, takes_base=True, takes_rope_fraction=True, mixable=True,
        ),
        Encoding(
            "jof_fixed", label="JoFormer (fixed)",
            help="RoPE on q, k; values rotated by R_j and the output by R_iᵀ (`rotate_values=True`)",
            export_kind="rotary_fixed", report_rank=6, takes_base=True,
        ),
        Encoding(
            "jof_learned", label="JoFormer (learned)",
            help="as jof_fixed with learned frequencies per layer and head (d_model/2 per layer, float64, "
            "initialised to RoPE's)",
            export_kind="rotary_learned", report_rank=7, takes_base=True,
        ),
        Encoding(
            "jof_projected", label="JoFormer (projected)",
            help="fixed RoPE angles + θ(x) = W₂·GELU(W₁·LN(x)) per layer and head, W₂ and its bias "
            "zero-initialised (so it equals jof_fixed at init)",
            export_kind="rotary_projected", report_rank=8, takes_base=True, content_angles=True,
        ),
        # New encodings: add a row above this line, and its builder to `builders.BUILDERS` (docs/training.md,
        # "How to extend").
    )
}


def encoding(pe: str) -> Encoding:
    """The registry row of `pe`; FormalRopeError naming the known encodings otherwise."""
    row = ENCODINGS.get(pe)
    if row is None:
        raise FormalRopeError(f"unknown positional encoding {pe!r}; expected one of {', '.join(ENCODINGS)}")
    return row


def is_periodic(pe: str) -> bool:
    """Whether `pe` is a periodic encoding (rope_p, sipe_p: periods apply to it); False for a name
    that is no encoding (validation reports those)."""
    row = ENCODINGS.get(pe)
    return row is not None and row.periodic


def in_report_order() -> list[Encoding]:
    """The rows in the order report tables list encodings (`report_rank`, then table order)."""
    return sorted(ENCODINGS.values(), key=lambda row: row.report_rank)


def report_labels() -> dict[str, str]:
    """name -> label, in report order (`sweeps.report.PE_LABELS`)."""
    return {row.name: row.label for row in in_report_order()}


def encoding_names(separator: str = ", ") -> str:
    """Every encoding's name, in table order, joined by `separator`: the `--pe` help lists."""
    return separator.join(ENCODINGS)


def primary_encoding(layer_pe) -> str:
    """The encoding a hybrid's `pe` names (RunConfig.layer_pe): the one most layers use, the
    earliest on a tie."""
    layer_pe = tuple(layer_pe)
    return max(layer_pe, key=lambda pe: (layer_pe.count(pe), -layer_pe.index(pe)))


def _layer_list(layers) -> str:
    """0-based layer indices as 1-based ranges: [0, 1, 2, 4] -> 'L1-3,5'."""
    parts, layers = [], sorted(layers)
    start = previous = layers[0]
    for layer in [*layers[1:], None]:
        if layer is not None and layer == previous + 1:
            previous = layer
            continue
        parts.append(f"{start + 1}" if start == previous else f"{start + 1}-{previous + 1}")
        if layer is not None:
            start = previous = layer
    return "L" + ",".join(parts)


def hybrid_label(pe: str, layer_pe=None, window=None) -> str:
    """What reports call a run's encoding: the label of `pe`, and for a hybrid the encodings of the
    other layers and the sliding windows, 1-based layers: 'RoPE_NP+NoPE(L3)', 'RoPE_NP w32',
    'RoPE_NP+NoPE(L6) w32(L1-5)' (paper 000 appendix E.6's model). window: an int (every layer)
    or one per layer (-1: global)."""
    names = {name: row.label for name, row in ENCODINGS.items()}
    if layer_pe:
        layer_pe = tuple(layer_pe)
        primary = primary_encoding(layer_pe)
        text = names.get(primary, primary) + "".join(
            f"+{names.get(other, other)}({_layer_list(i for i, pe in enumerate(layer_pe) if pe == other)})"
            for other in dict.fromkeys(layer_pe) if other != primary
        )
    else:
        text = names.get(pe, pe)
    if isinstance(window, int):
        text += f" w{window}"
    elif window:
        window = tuple(window)
        text += "".join(
            f" w{width}({_layer_list(i for i, w in enumerate(window) if w == width)})"
            for width in dict.fromkeys(window) if width >= 1
        )
    return text


POSITIONAL_ENCODINGS = tuple(ENCODINGS)
# Encodings that form phases theta*i from a base beta (the others have no base and no phase precision).
BASE_ENCODINGS = tuple(name for name, row in ENCODINGS.items() if row.takes_base)
# In report order (rope_p before sipe_p), as messages have always named them.
PERIODIC_ENCODINGS = tuple(row.name for row in in_report_order() if row.periodic)
MIXABLE_ENCODINGS = tuple(name for name, row in ENCODINGS.items() if row.mixable)
ROPE_FRACTION_ENCODINGS = tuple(name for name, row in ENCODINGS.items() if row.takes_rope_fraction)
# Encodings a hybrid's layers may use (RunConfig.layer_pe): those without an additive table. Additive
# encodings (sipe, sipe_p) act once, at the embedding, not per layer. jof_learned / jof_projected
# layers keep their trainable per-layer state in their module, indexed by
# `LayeredPositional.local_layer` (checkpoints hold it; `formalrope export` writes each layer's own
# part under its prefix).
HYBRID_ENCODINGS = tuple(name for name, row in ENCODINGS.items() if not row.additive)
