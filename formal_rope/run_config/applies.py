"""Which settings apply to which run: the one rule, read by everything that acts on it.

A field applies to a run when it changes what the run computes. Some fields belong to a few
encodings only (the base of NoPE changes nothing), and some say how the sampler draws strings,
which a run on data files does not do. Four places act on the answer, all through this module:
`RunConfig` resets a field that does not apply to its default (so two configs that train the
same model are one config, one run id), `train` refuses an option that would change nothing
(`refusal`), `sweep` notes an option that changes none of its grid's runs (`grid_notes`), and the
notes before training (`training.context`) skip what does not apply. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable

from formal_rope.run_config.encodings import BASE_ENCODINGS, PERIODIC_ENCODINGS, ROPE_FRACTION_ENCODINGS

# field -> the encodings it applies to (from the registry's rows); every other field applies to every run.
FIELD_APPLIES_TO: dict[str, tuple[str, ...]] = {
    "base": BASE_ENCODINGS,
    "phase_precision": BASE_ENCODINGS,
    "periods": PERIODIC_ENCODINGS,
    "rope_fraction": ROPE_FRACTION_ENCODINGS,
}
# field -> what it does that files cannot take (`SampledData` reads it, `FileData` cannot): a run on
# data files (`data` set) draws its training batches from the training file and tests on the test
# files' strings, so these fields do not apply to it. Its training and test lengths do apply: they
# select which of the files' strings it trains and tests on (`training.data.fit_to_data`).
SAMPLING_FIELDS: dict[str, str] = {
    "n_per_length": "its test strings are every test-file string of each tested length, not a sample of n per length",
    "eval_seed": "its test strings are read from the test files, not sampled with a seed",
    "train_near_miss_fraction": "its training negatives are the training file's negatives, not sampled near-misses",
    "test_near_miss_fraction": "its test negatives are the test files' negatives, not sampled near-misses",
    "nnch_samples": "NNCH's score reads uniformly random strings labelled by a language's DFA, and the run tests on "
                    "the test files' strings",
    "sampling": "its strings are the files' strings, not drawn from the language's DFA",
}
# Fields some runs do not use: those of some encodings only, and those data files cannot use.
MAYBE_UNUSED = frozenset({*FIELD_APPLIES_TO, *SAMPLING_FIELDS})


def field_applies(name: str, encodings: Iterable[str], on_files: bool) -> bool:
    """Whether field `name` has any effect on a run whose layers use `encodings` (one for a plain
    run) and that reads its strings from files (`on_files`) or samples them. For a hybrid, a field
    applies when it applies to the encoding of any layer."""
    if name in SAMPLING_FIELDS and on_files:
        return False
    users = FIELD_APPLIES_TO.get(name)
    return users is None or any(pe in users for pe in encodings)


def refusal(config, given: dict[str, str]) -> str | None:
    """`train`'s one-line error for the options (option text -> the field it sets) that would change
    nothing in the run `config`, or None when every one applies."""
    useless = {option: name for option, name in given.items() if name in FIELD_APPLIES_TO and not config.applies(name)}
    if useless:
        reasons = "; ".join(
            f"{option} is used only by {', '.join(FIELD_APPLIES_TO[name])}" for option, name in useless.items()
        )
        verb = "has" if len(useless) == 1 else "have"
        return f"{', '.join(useless)} {verb} no effect with --pe {config.pe}: {reasons}"
    sampling = {option: name for option, name in given.items() if name in SAMPLING_FIELDS and not config.applies(name)}
    if sampling:
        reasons = "; ".join(f"{option}: {SAMPLING_FIELDS[name]}" for option, name in sampling.items())
        return (f"{', '.join(sampling)} {'has' if len(sampling) == 1 else 'have'} no effect on a run that reads its "
                f"strings from files (--data {config.data}): {reasons}; leave {'it' if len(sampling) == 1 else 'them'} "
                "out")
    return None


def grid_notes(configs, given: dict[str, str]) -> list[str]:
    """`sweep`'s notes for the options (option text -> field) that apply to none of the grid's runs
    (`--base` on a grid of nope/rope_p/sipe_p, `--set rope_fraction=...` without partial_rope,
    `--n-per-length` or `--set eval_seed=...` on runs that read data files): RunConfig resets such a
    field, so the grid has one run where the option's values would have made several."""
    notes = []
    for option, name in given.items():
        if configs and not any(config.applies(name) for config in configs):
            if name in SAMPLING_FIELDS and all(config.data is not None for config in configs):
                notes.append(
                    f"{option} has no effect on this grid: its runs read their strings from files "
                    f"({configs[0].data}), and {SAMPLING_FIELDS[name]}; runs that would differ only in it are one run"
                )
                continue
            pes = ", ".join(dict.fromkeys(config.pe for config in configs))
            users = ", ".join(FIELD_APPLIES_TO.get(name, ()))
            notes.append(f"{option} has no effect on this grid: its encodings ({pes}) do not use it (only {users} do)")
    return notes
