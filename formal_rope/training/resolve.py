"""Each run resolved once: configs -> `ResolvedRun`s (config, DFA, periods, data, notes).

A config names its language as text and its periods as "auto"; before a run trains, the text
becomes a DFA (`resolve_dfa`), the language is checked to have balanced training batches
(`check_trainable`), the periods are resolved (`resolve_periods`), the strings are set up
(`training.data.run_data`: sampled, or read and checked from files), a checkpoint named by
`init_from` is checked to be usable (`training.init_from.check_init_source`), and the notes on
settings without effect on the language are written (`training.context.context_notes`).
`resolve_runs` does all of it, once per run, and every caller takes its result: `train` (the CLI),
the sweep's grid check (`sweeps.checks.check_grid`, whose runs the sweep's packs then train), the
atlas (which hands over the DFAs its language set built) and `runs.run_pack` (given configs, it
resolves them itself). Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formal_rope.auto_periods import auto_periods
from formal_rope.automata import language_dfa
from formal_rope.classes import classify
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.sampling import training_batch
from formal_rope.scheduling.workload import check_workload
from formal_rope.training.context import context_notes, language_note
from formal_rope.training.data import RunData, is_data_language, run_data
from formal_rope.training.init_from import check_init_source, is_run_id


@dataclass(frozen=True, eq=False)
class ResolvedRun:
    """One run ready to build: its config, its language's DFA (None for data files without a
    language; runs of one language share one DFA object, so a pack's training walks run as one),
    its resolved periods (None for encodings without periods), its strings (`RunData`), the notes
    on its settings for the command that resolved it, and the checkpoint its `init_from` names,
    checked (None: no init_from, or a run id of a sweep whose source trains first: checked when
    its pack starts, `pending_init`)."""

    config: RunConfig
    dfa: object
    periods: tuple[int, ...] | None
    data: RunData
    notes: tuple[str, ...] = ()
    init_source: Path | None = None

    @property
    def pending_init(self) -> bool:
        """Whether the run continues from a checkpoint that was not there to check when it was
        resolved (a sweep's run id, written by an earlier wave)."""
        return self.config.init_from is not None and self.init_source is None

    @property
    def alphabet(self) -> tuple[str, ...]:
        """The symbols the run reads."""
        return tuple(self.data.alphabet)


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


def _language_key(config: RunConfig) -> tuple:
    # What decides a run's DFA and strings (`packing.language_key`, which this module cannot import:
    # packing reads the workload, above it).
    return (config.language, config.alphabet, config.data)


def resolve_runs(configs: Sequence[RunConfig], *, dfas: Mapping | None = None, command: str | None = "train",
                 init_dir: str | Path | None = None, check_fit: bool = True) -> list[ResolvedRun]:
    """Each config resolved once, in order: FormalRopeError (before any work) for a run that does not
    fit (`workload.check_workload`, when `check_fit`), a language without balanced training batches,
    periods "auto" that cannot be resolved, data files that cannot be read, a checkpoint that
    `init_from` names and that cannot be used.

    dfas: DFAs already built, by (language, alphabet) (the atlas's language set): used instead of
    resolving the text again. command: the one whose options the notes suggest (`context_notes`;
    None: no notes). init_dir: where a run id in `init_from` is looked up (train: checkpoints/;
    None: a sweep's run id, whose checkpoint an earlier wave writes, is checked when its pack starts).
    Runs of one language share one DFA object; each note on a language's reading comes once."""
    known = dict(dfas or {})
    by_language: dict = {}
    notes_seen: set = set()
    checked: set = set()
    context: dict = {}
    resolved = []
    for config in configs:
        if check_fit:
            check_workload(config)  # each config checked its own fields when built; whether it fits, here
        key = _language_key(config)
        fresh = key not in by_language
        if fresh:
            dfa = known[key[:2]] if key[:2] in known and config.data is None else resolve_dfa(config)
            by_language[key] = dfa
        dfa = by_language[key]
        notes: list[str] = []
        if fresh and command is not None:
            read_as = language_note(config)
            if read_as:
                notes.append(read_as)
        trainable = (key, config.train_min_length, config.train_max_length)
        if trainable not in checked:  # runs of one language and training range share one check
            check_trainable(config, dfa)
            checked.add(trainable)
        periods = resolve_periods(config, dfa)
        data = run_data(config, dfa)
        source = None
        if config.init_from is not None and not (is_run_id(config.init_from) and init_dir is None):
            source = check_init_source(config.init_from, init_dir, tuple(data.alphabet))
        if command is not None:
            # (with everything `run_warnings` reads: a note for one base, window or layer count is no other's)
            noted = (key, config.pe, config.periods, config.train_min_length, config.train_max_length,
                     config.train_near_miss_fraction, config.base, config.phase_precision, config.window,
                     config.layers, config.d_model, config.heads, config.rope_fraction, config.test_max_length,
                     config.steps, config.warmup_steps, config.layer_pe)
            if noted not in context:
                context[noted] = context_notes(config, dfa, periods, command)
            notes.extend(context[noted])
        unseen = tuple(note for note in dict.fromkeys(notes) if note not in notes_seen)
        notes_seen.update(unseen)
        resolved.append(ResolvedRun(config, dfa, periods, data, unseen, source))
    return resolved


def as_resolved(runs, *, init_dir: str | Path | None = None) -> list[ResolvedRun]:
    """`runs` as ResolvedRuns: taken as they are, or (configs) resolved together, without notes or the
    workload check (`run_pack` checks the workload with the device, `setup.check_pack`)."""
    runs = list(runs)
    if all(isinstance(run, ResolvedRun) for run in runs):
        return runs
    if any(isinstance(run, ResolvedRun) for run in runs):
        raise TypeError("give every run of a pack as a RunConfig or every run as a ResolvedRun")
    return resolve_runs(runs, command=None, init_dir=init_dir, check_fit=False)


@dataclass(frozen=True, eq=False)
class PackIngredients:
    """What a pack's runs are built and trained from: its runs, each resolved once
    (`training.resolve.resolve_runs`) before any work, and the checkpoint each continues from.

    Runs of one language share one DFA object (their training walks then run as one,
    `data.training_batches`); a mixed-language pack (`packing.group_packs` with `+languages`)
    has one per language."""

    runs: list  # per run: its ResolvedRun
    init_sources: list  # per run: the checked checkpoint its init_from names (None: no init_from)

    @property
    def dfas(self) -> list:
        """Per run: its language's DFA (None for runs on data files without a language)."""
        return [run.dfa for run in self.runs]

    @property
    def periods(self) -> list:
        """Per run: its resolved periods (`resolve_periods`; None for other encodings)."""
        return [run.periods for run in self.runs]

    @property
    def data(self) -> list:
        """Per run: its RunData (`training.data.run_data`)."""
        return [run.data for run in self.runs]

    @property
    def dfa(self):
        """The first run's DFA (every run's, in a pack of one language)."""
        return self.runs[0].dfa

    @property
    def alphabets(self) -> list[tuple[str, ...]]:
        """Per run: the symbols it reads."""
        return [run.alphabet for run in self.runs]

    @property
    def alphabet(self) -> tuple[str, ...]:
        """The symbols the first run reads (every run's, in a pack of one language)."""
        return self.runs[0].alphabet

    @property
    def symbol_counts(self) -> list[int]:
        """Per run: the size of its alphabet (`Classifier`'s per-run vocabularies)."""
        return [len(alphabet) for alphabet in self.alphabets]


def pack_ingredients(runs, init_dir: str | Path | None = None) -> PackIngredients:
    """The ingredients of a pack of `runs`: ResolvedRuns (taken as they are), or configs, resolved
    here (`resolve.resolve_runs`: a FormalRopeError when a language has no balanced training
    batches, its periods cannot be resolved, or its data files cannot be read). A checkpoint an
    init_from names that was not checked when its run was resolved (a sweep's run id, written by an
    earlier wave, looked up in `init_dir`) is checked now, once."""
    runs = as_resolved(runs, init_dir=init_dir)
    sources = [check_init_source(run.config.init_from, init_dir, run.alphabet) if run.pending_init else run.init_source
               for run in runs]
    return PackIngredients(runs, sources)


def all_notes(runs: Sequence[ResolvedRun]) -> list[str]:
    """The notes of `runs`, each once, in order."""
    return list(dict.fromkeys(note for run in runs for note in run.notes))
