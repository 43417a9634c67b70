"""Everything that turns RunConfigs into the pieces of a run, before the first training step.

The checks of what a config alone cannot say about this machine (`check_device`:
every user error is a FormalRopeError raised before any work, so the CLI can report it; a config
checks its own fields when built, its language and periods are checked when it is resolved,
`training.resolve`), and the
factories for a pack's model and optimizer (`build_pack`, `build_model`, `make_optimizer`). The
training loop (`training.train`) and the checkpoint loader take their ingredients from here.
"""

from __future__ import annotations

import torch

from formal_rope.errors import FormalRopeError
from formal_rope.kernels import resolve_impl
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.objective import auxiliary_heads
from formal_rope.training.encodings.builders import PositionalSpec, build_positional
from formal_rope.training.model import Classifier
from formal_rope.training.optim import PackedAdamW

# ----------------------------------------------------------------------------------------------
# Checks and the config's symbolic parts


def check_device(config: RunConfig, device: str | torch.device) -> None:
    """Raise FormalRopeError when the torch device or the attention implementation cannot run here
    (checked before any work, so the CLI reports it as a user error rather than a failed run)."""
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise FormalRopeError(f"unknown torch device {str(device)!r}: {error}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise FormalRopeError(f"device {str(device)!r} was requested but torch sees no CUDA "
                              "device; use device cpu (--device / device=)")
    resolve_impl(config.attention, on_cuda=resolved.type == "cuda")




def positional_spec(config: RunConfig, periods: tuple[int, ...] | None) -> PositionalSpec:
    """What `positional.build_positional` needs of `config`, with its resolved `periods`."""
    return PositionalSpec(
        pe=config.pe,
        d_model=config.d_model,
        heads=config.heads,
        layers=config.layers,
        base=config.base,
        periods=periods,
        rope_fraction=config.rope_fraction,
        phase_precision=config.phase_precision,
        layer_pe=config.layer_pe,
        rows=tuple(config.row_of(name) for name in dict.fromkeys(config.layer_encodings())),
    )


def build_pack(configs, n_symbols, periods) -> Classifier:
    """A classifier holding one freshly initialised run per config (run r seeded with configs[r].seed).

    `n_symbols`: the alphabet size of every run, or one per run (`PackIngredients.symbol_counts`:
    each run's weights are then those it has alone, its table padded to the pack's largest).
    `periods[r]` are run r's resolved rope_p / sipe_p periods (`resolve_periods`); other encodings
    ignore them. The configs must share the architecture (`scheduling.packs.check_packable`).
    """
    configs = list(configs)
    first = configs[0]
    positional = build_positional([positional_spec(c, p) for c, p in zip(configs, periods)])
    model = Classifier(
        n_symbols,
        positional,
        d_model=first.d_model,
        heads=first.heads,
        layers=first.layers,
        ffn_mult=first.ffn_mult,
        attention=first.attention,
        windows=first.layer_windows(),
        auxiliary=auxiliary_heads(first.objective),
    )
    return model.initialize([c.seed for c in configs])


def build_model(config: RunConfig, n_symbols: int, periods: tuple[int, ...] | None) -> Classifier:
    """A freshly initialised single-run classifier for `config` over `n_symbols` symbols (a pack of one,
    its weights drawn from a generator seeded with config.seed).

    `periods` are the resolved rope_p / sipe_p periods (`resolve_periods`); other encodings ignore them.
    """
    return build_pack([config], n_symbols, [periods])


# ----------------------------------------------------------------------------------------------
# Optimisation


def make_optimizer(model: Classifier, configs) -> PackedAdamW:
    """AdamW for every run of `model` (configs[r] gives run r's weight decay; one config for a pack of
    one); weight decay only on weight matrices (not biases, norms, embeddings or frequencies). The
    model's parameters move into the optimizer's flat buffers (`optim.PackedAdamW`): build it once
    the model is on its device."""
    configs = [configs] if isinstance(configs, RunConfig) else list(configs)
    return PackedAdamW(model.named_parameters(), [c.weight_decay for c in configs])
