"""The positional encodings of SPEC §8, one module per job:

  phases       the exact phase arithmetic: frequencies, turn limbs, phases mod 2pi (numpy, mpmath)
  periods      periods -> pairs and the periodic lookup tables (numpy)
  base         `PositionalEncoding`, the tables cache, numpy tables -> torch
  nope, sinusoidal, rotary, joformer   one family of encodings each: its modules and builders
  composites   a hybrid's per-layer encodings and a mixed pack's encodings behind one module
  builders     the builder table (`BUILDERS`, one entry per row) and `build_positional`

The registry of the encodings (one row each: what the rest of the code asks about an encoding) is
the config's: `formal_rope.run_config.encodings`. Importing this package imports nothing; the
torch modules are imported by name where a model is built
(`from formal_rope.training.encodings.builders import build_positional`).
"""
