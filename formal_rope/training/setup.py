"""Everything that turns RunConfigs into the pieces of a run, before the first training step.

The checks of what a config alone cannot say (`check_device`, `check_pack`, `check_trainable`:
every user error is a FormalRopeError raised before any work, so the CLI can report it; a config
checks its own fields when built), resolution of the
config's symbolic parts (`resolve_dfa`, `resolve_periods`; a pack's `pack_ingredients`), and the
factories for a pack's model and optimizer (`build_pack`, `build_model`, `make_optimizer`). The
training loop (`training.train`), the checkpoint loader and the sweeps' grid validation all take
their ingredients from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from formal_rope.auto_periods import auto_periods
from formal_rope.automata import language_dfa
from formal_rope.classes import classify
from formal_rope.errors import FormalRopeError
from formal_rope.kernels import resolve_impl
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.objective import auxiliary_heads
from formal_rope.sampling import training_batch
from formal_rope.training.data import is_data_language, run_data
from formal_rope.training.encodings.builders import PositionalSpec, build_positional
from formal_rope.training.model import Classifier
from formal_rope.training.optim import PackedAdamW
from formal_rope.training.packing import check_packable, language_key
from formal_rope.training.workload import check_workload

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


def resolve_dfa(config: RunConfig):
    """The language's DFA (over config.alphabet when given); None for a run on data files without a
    language (language `data:PATH`: the labels are all there is)."""
    if config.data is not None and is_data_language(config.language):
        return None
    return language_dfa(resolve_language(config.language, config.alphabet))


def check_trainable(config: RunConfig, dfa) -> None:
    """FormalRopeError when balanced training batches cannot exist: the language (e.g. Σ* or ∅) has
    no positive or no negative string of any training length. (Runs on data files: the files' own
    check, in `training.data.file_data`.)"""
    if config.data is not None:
        return
    try:
        training_batch(dfa, np.random.default_rng(0), 2, config.train_min_length, config.train_max_length)
    except FormalRopeError as error:
        raise FormalRopeError(f"cannot train on {config.language!r}: {error}") from None


def resolve_periods(config: RunConfig, dfa) -> tuple[int, ...] | None:
    """Explicit periods, or for periodic encodings with periods=None ("auto"): the least k such that
    the k-automaton A_k is partially ordered (classify(dfa).mod_k, the modulus LTL[P,MOD] needs),
    but at least 2 (`theory.auto_periods`): for an LTL[P] language (k = 1) a period-1 rope_p/sipe_p
    rotates nothing and would repeat NoPE, so auto takes period 2 (L is in LTL[P,MOD_2] too).

    Outside LTL[P,MOD] there is no such k, so "auto" is a FormalRopeError that names the language's
    stability period as a candidate for explicit periods (the periodic construction is not
    guaranteed to express such a language with any period)."""
    periodic = config.periodic_encoding()
    if periodic is None:
        return None  # other encodings have no periods; never report ones given by mistake as used
    if config.periods is not None:
        return config.periods  # checked when the config was built
    if dfa is None:
        raise FormalRopeError(
            f"periods 'auto' come from the language's class, and {config.language!r} names none; "
            "give periods (--periods / periods=, e.g. 2,3) or, with the data, a language (--lang / language=)"
        )
    classification = classify(dfa)
    if classification.mod_k is None:
        period = classification.stability_period
        hint = (
            f"--periods {period} (its length structure repeats with period {period})" if period > 1
            else "--periods 2 (its length structure has period 1, so nothing suggests a period)"
        )
        raise FormalRopeError(
            f"periods auto: {config.language!r} is not in LTL[P,MOD] (no k-automaton A_k is partially "
            f"ordered), so the periodic construction has no least period for {periodic}; give the periods "
            f"explicitly, e.g. {hint}"
        )
    return auto_periods(classification.mod_k)


def check_pack(configs, device: str | torch.device) -> None:
    """Raise FormalRopeError for any run of a pack that cannot run here: one that cannot finish or
    fit (`workload.check_workload`), a device or attention implementation this machine lacks
    (`check_device`), runs that cannot share a pack (`packing.check_packable`). Each config checked
    its own fields when it was built (`run_config.config.check_config`)."""
    for config in configs:
        check_workload(config)
        check_device(config, device)
    check_packable(configs)


@dataclass(frozen=True, eq=False)
class PackIngredients:
    """What a pack's runs are built and trained from, resolved from their configs before any work.

    Runs of one language share one DFA object (their training walks then run as one,
    `data.training_batches`); a mixed-language pack (`packing.group_packs` with `+languages`)
    has one per language."""

    dfas: list  # per run: its language's DFA; None for runs on data files without a language
    periods: list  # per run: its resolved periods (`resolve_periods`; None for other encodings)
    data: list  # per run: its RunData (`training.data.run_data`)

    @property
    def dfa(self):
        """The first run's DFA (every run's, in a pack of one language)."""
        return self.dfas[0]

    @property
    def alphabets(self) -> list[tuple[str, ...]]:
        """Per run: the symbols it reads."""
        return [tuple(data.alphabet) for data in self.data]

    @property
    def alphabet(self) -> tuple[str, ...]:
        """The symbols the first run reads (every run's, in a pack of one language)."""
        return tuple(self.data[0].alphabet)

    @property
    def symbol_counts(self) -> list[int]:
        """Per run: the size of its alphabet (`Classifier`'s per-run vocabularies)."""
        return [len(alphabet) for alphabet in self.alphabets]


def pack_ingredients(configs, dfa=None) -> PackIngredients:
    """Each run's DFA (`dfa` for every run when given, else resolved once per language), periods
    and data; a FormalRopeError when a language has no balanced training batches
    (`check_trainable`), its periods cannot be resolved, or its data files cannot be read."""
    resolved: dict = {}
    for config in configs:
        key = language_key(config)
        if key not in resolved:
            resolved[key] = resolve_dfa(config) if dfa is None else dfa
            check_trainable(config, resolved[key])
    dfas = [resolved[language_key(config)] for config in configs]
    periods = [resolve_periods(config, run_dfa) for config, run_dfa in zip(configs, dfas)]
    return PackIngredients(dfas, periods, [run_data(config, run_dfa) for config, run_dfa in zip(configs, dfas)])


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
    ignore them. The configs must share the architecture (`packing.check_packable`).
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
