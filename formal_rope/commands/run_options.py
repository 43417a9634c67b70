"""Options and parsers shared by the commands, declared once: annotated types (one line per option
in a command), the parsers of option texts (--periods, --set, --eval, ...), and option groups that a
command takes as one parameter (`with_option_groups`): `RunFlags` (where a sweep's runs execute,
their checkpoints) for `sweep` and `reproduce`, `TrainStateFlags` (checkpoints) for `train`.

An option group is a NamedTuple whose fields are annotated Typer options with defaults: immutable
like a frozen dataclass. No command module holds a parser another command uses: it lives here.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections import Counter
from pathlib import Path
from typing import Annotated, Callable, NamedTuple, Optional

import typer

from formal_rope.commands.terminal import check_output_place
from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.engine import DEFAULT_BUDGET, SearchSettings
from formal_rope.numbers import float_text, int_text
from formal_rope.run_config.fields import field_kind, parse_field_text
from formal_rope.run_config.text import lengths_fields
from formal_rope.scheduling.packs import pack_key, parse_pack
from formal_rope.storage.curves import CurveOptions
from formal_rope.storage.tensorboard_log import check_tensorboard
from formal_rope.storage.training_state import StateOptions, check_state_dir, open_state_store
from formal_rope.storage.training_state import checkpoint_every as interval
from formal_rope.sweeps.backends import BACKENDS, BackendOptions, backend_options, one_of

# `--mode` of `compile` and `run`.
MODE_HELP = (
    "emulated: round every elementary operation into the format, left-to-right sums (any format). "
    "native: torch arithmetic in the format's dtype (fp64/fp32/bf16/fp16)."
)


def _markup_escaped(text: str) -> str:
    """Help text with its brackets escaped: Rich reads `".[ray]"` as a markup tag and drops it."""
    return text.replace("[", "\\[")


Pack = Annotated[str, typer.Option(
    "--pack", help="Runs trained together in one computation: auto (compatible runs grouped into packs sized "
    "to the workers and the memory; the default) or N (packs of at most N compatible runs; 1 trains every "
    "run alone). Runs of NoPE, SiPE, SiPE_P, RoPE, RoPE_P and partial RoPE share packs; add /by-pe "
    "(auto/by-pe, 4/by-pe) to keep each encoding in its own packs, as before mixed packs (their results "
    "bit for bit); add /languages (auto/languages) to let runs of different languages and alphabets share "
    "packs (fewer packs for many small languages). docs/packing.md.")]
Backend = Annotated[str, typer.Option(
    "--backend", help=_markup_escaped(
        f"Where runs execute: {one_of(f'{name} ({row.help})' for name, row in BACKENDS.items())}."))]
Address = Annotated[Optional[str], typer.Option(
    "--address", help="Ray cluster to join (with --backend ray): HOST:PORT of its head node, or auto for the "
    "cluster `ray start` runs on this machine. Without it, a local Ray instance of --workers × --cpus-per-run CPUs.")]
CpusPerRun = Annotated[Optional[float], typer.Option(
    "--cpus-per-run", help="CPUs (torch threads) per task: a pack of runs, or one run. Default 1 on Ray; locally "
    "the machine's cores shared by the workers for packs, 1 for single runs.")]
GpusPerRun = Annotated[float, typer.Option(
    "--gpus-per-run", help="GPUs per task on Ray; fractions share a GPU (0.25: four tasks per GPU). Tasks that get "
    "a GPU train on cuda.")]
MaxRetries = Annotated[int, typer.Option(
    "--max-retries", help="Times a task is run again after its worker died (killed, out of memory, lost node) "
    "before its runs are recorded failed.")]
CheckpointEvery = Annotated[Optional[int], typer.Option(
    "--checkpoint-every", help="Save each run's whole training state every N steps so a killed run resumes "
    "(0: never). Default: every max(1000, steps/100) steps for runs of more than 10,000 steps, off for shorter ones.")]
StateDir = Annotated[Optional[str], typer.Option(
    "--state-dir", help="Folder or URI for training states: a path, file://, s3://, gs:// or hdfs:// (on a "
    "cluster, one every node reaches). Default OUT/state.")]
KeepState = Annotated[bool, typer.Option(
    "--keep-state", help="Keep the training states of finished runs (removed by default).")]
TrainStateDir = Annotated[Optional[str], typer.Option(
    "--state-dir", help="Folder or URI (path, file://, s3://, gs://, hdfs://) for the training state saved by "
    "--checkpoint-every. Default checkpoints/state.")]
Resume = Annotated[bool, typer.Option(
    "--resume", help="Continue from the training state this run saved in --state-dir (a killed run); without a "
    "saved state, start at step 0 (a note says where it looked).")]
LogEvery = Annotated[Optional[int], typer.Option(
    "--log-every", help="Log each run's training loss and accuracy every N steps (OUT/curves, the checkpoint, "
    "--tensorboard; 0: no curves). Default: steps/50, at most 1,000 (a quick run logs 50 points, a paper run "
    "1,000). Changes no run id and no result.")]
TensorBoard = Annotated[Optional[str], typer.Option(
    "--tensorboard", help="Also write TensorBoard event files into this folder as runs train, one sub-folder per "
    "run (label and run id); watch with `tensorboard --logdir DIR`. Needs the tensorboard package (pip install "
    "tensorboard; docs/training.md); on a cluster, a folder every node reaches.")]
EvalMode = Annotated[Optional[str], typer.Option(
    "--eval", help="full: every test length (the default); nstar: stop at the first imperfect length; worst-case: "
    "also search each run for misclassified strings (n_star_worst beside n_star; docs/evaluation.md). Combine as "
    "nstar,worst-case. worst-case changes no run id.")]
WorstCaseBudget = Annotated[Optional[int], typer.Option(
    "--worst-case-budget", help="Strings per test length the worst-case search scores beyond the sampled test set "
    "(with --eval worst-case; default 256).")]
# The model options `train` and `sweep` word alike.
BatchSize = Annotated[Optional[int], typer.Option("--batch-size", help="Training batch size.")]
Layers = Annotated[Optional[int], typer.Option("--layers", help="Transformer layers.")]
DModel = Annotated[Optional[int], typer.Option("--d-model", help="Model width.")]
NnchSamples = Annotated[Optional[int], typer.Option(
    "--nnch-samples", help="Uniformly random strings per test length for NNCH's score (Delétang et al.'s mean "
    "accuracy over the test lengths but the first: 42..500; NNCH draws 512). Default 2; 0: not measured. Runs on "
    "--data files have no NNCH score.")]

Objective = Annotated[Optional[str], typer.Option(
    "--objective", help="What the model is trained to predict (docs/training.md, \"Objectives\"): final (the "
    "string's label at eos, the default), prefix (every prefix's label), next-set (at every position the symbols "
    "that keep the prefix completable, and eos), lm (next symbol on positive strings; only beside another) or a "
    "weighted sum such as final+next-set:0.5. Every run is scored by its eos verdict.")]

# Hybrid models (docs/training.md, "Hybrid models: per-layer encodings and sliding windows").
LayerPe = Annotated[Optional[str], typer.Option(
    "--layer-pe", help="A hybrid: one positional encoding per layer, e.g. rope,rope,nope or rope*5,nope (nope, rope, "
    "rope_p, partial_rope, jof_fixed, jof_learned, jof_projected; 'pe' stands for the run's --pe: pe*5,nope; --pe "
    "is then the one most layers use). Default: --pe in every layer.")]
Window = Annotated[Optional[str], typer.Option(
    "--window", help="Sliding-window attention: query i sees the W keys i-W..i-1 only. W (every layer) or one per "
    "layer, global for a global layer: 32*5,global. Default: global attention.")]


def hybrid_fields(layer_pe: str | None, window: str | None) -> dict:
    """The RunConfig fields `--layer-pe` and `--window` give (FormalRopeError naming the field when
    one does not parse; values are checked by validation)."""
    fields = {}
    if layer_pe is not None:
        fields["layer_pe"] = parse_field_text("layer_pe", layer_pe)
    if window is not None:
        fields["window"] = parse_field_text("window", window)
    return fields


def parse_periods(text: str | None) -> tuple[int, ...] | None:
    """'auto' (or nothing) -> None; '2' or '2,3' -> (2,) / (2, 3); anything else is a user error."""
    if text is None or text.strip().lower() == "auto":
        return None
    try:
        periods = tuple(int_text(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise FormalRopeError(f"--periods must be 'auto' or positive integers like 2 or 2,3, got {text!r}") from None
    if not periods or min(periods) <= 0:
        raise FormalRopeError(f"--periods must be 'auto' or positive integers like 2 or 2,3, got {text!r}")
    return periods


def parse_length_range(text: str, option: str = "--test-lengths") -> tuple[int, int]:
    """'41..500' -> (41, 500); a single number n -> (n, n); a list is a user error here."""
    fields = lengths_fields(text, option, prefix="range")
    return fields["range_min_length"], fields["range_max_length"]


def parse_assignments(texts: list[str] | None, option: str = "--set") -> dict[str, list]:
    """['steps=100', 'lr_schedule=cosine,constant'] -> {'steps': [100], 'lr_schedule': ['cosine', 'constant']}.

    Values are split at commas outside brackets ('periods=[2,3],4' is (2, 3) and (4,)) and typed by
    the RunConfig field (`parse_field_text`); an unknown field, a repeated field or a value of the
    wrong type is a user error naming it."""
    assignments: dict[str, list] = {}
    for text in texts or ():
        name, equals, values = text.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or not name:
            raise FormalRopeError(f"{option} takes FIELD=VALUE[,VALUE...], got {text!r}")
        field_kind(name)  # unknown field -> error naming it
        if name in assignments:
            raise FormalRopeError(f"{option} {name} is given twice; list all its values in one {option} {name}=v1,v2")
        parts = split_outside_brackets(values)
        if not parts:
            raise FormalRopeError(f"{option} {name}= has no value")
        try:
            assignments[name] = [parse_field_text(name, part) for part in parts]
        except FormalRopeError as error:
            raise FormalRopeError(f"{option} {name}: {error}") from None
    return assignments


def split_outside_brackets(text: str) -> list[str]:
    """'a,[b,c],d' -> ['a', '[b,c]', 'd'] (empty parts dropped)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


def check_positive(**counts) -> None:
    """User error for a count option (given as --name=value) below 1."""
    for name, value in counts.items():
        if value is not None and value < 1:
            raise FormalRopeError(f"--{name.replace('_', '-')} must be at least 1, got {value}")


def split_list(text: str | None, option: str | None = None) -> list[str]:
    """'a, b' -> ['a', 'b']. With `option` (a list the user gave), an empty list or an empty item is
    an error rather than a silent fall-back to the default."""
    if text is None:
        return []
    parts = [part.strip() for part in text.split(",")]
    if option is not None and (not any(parts) or not all(parts)):
        raise FormalRopeError(f"{option} {text!r}: expected a comma-separated list without empty items")
    return [part for part in parts if part]


def float_list(text: str | None, option: str) -> list[float]:
    """'1e-4,3e-4' -> [0.0001, 0.0003] (FormalRopeError naming `option` for an item that is no number)."""
    values = []
    for part in split_list(text, option):
        try:
            values.append(float_text(part))
        except ValueError:
            raise FormalRopeError(
                f"{option}: {part!r} is not a number (expected a comma-separated list like 1e-4,3e-4)"
            ) from None
    return values


def given(**values) -> dict:
    """The options given (not None)."""
    return {key: value for key, value in values.items() if value is not None}


WORKERS_HELP = (
    "Parallel worker processes (at least 1; with --backend local at most 4 per CPU core, MAX_WORKERS_PER_CORE; "
    "never more are started than there are units of work)."
)


EVAL_WORDS = ("full", "nstar", "worst-case")


def parse_eval(text: str | None) -> tuple[str | None, bool]:
    """`--eval` -> (the sampled evaluation mode, a RunConfig field, or None for its default; whether
    to run the worst-case search too). 'worst-case' alone keeps the default mode (full)."""
    if text is None:
        return None, False
    words = [word.strip() for word in text.split(",") if word.strip()]
    unknown = [word for word in words if word not in EVAL_WORDS]
    if unknown or not words:
        raise FormalRopeError(f"unknown eval mode in --eval {text!r}: expected full, nstar or worst-case (or "
                              "nstar,worst-case)")
    modes = sorted({word for word in words if word != "worst-case"})
    if len(modes) > 1:
        raise FormalRopeError("--eval full and nstar exclude each other: full tests every length, nstar stops at the "
                              "first imperfect one")
    return (modes[0] if modes else None), "worst-case" in words


def worst_case_settings(search: bool, budget: int | None):
    """The worst-case search's settings for `--eval worst-case` (None: no search) with
    `--worst-case-budget`; a budget without the search is a user error."""
    if not search:
        if budget is not None:
            raise FormalRopeError("--worst-case-budget sets the worst-case search's strings per length; it needs "
                                  "--eval worst-case")
        return None
    if budget is not None and budget < 0:
        raise FormalRopeError(f"--worst-case-budget must be non-negative, got {budget}")
    return SearchSettings(budget=DEFAULT_BUDGET if budget is None else budget)


# ----------------------------------------------------------------------------------------------
# Option groups


def with_option_groups(command: Callable) -> Callable:
    """`command` as Typer sees it: each parameter annotated with an option group (a NamedTuple whose
    fields are annotated Typer options, with defaults) stands for the group's options, in the
    group's order at the parameter's place (so `--help` lists them there); the command receives
    the group as one value."""
    signature = inspect.signature(command, eval_str=True)
    groups: dict[str, tuple[type, tuple[str, ...]]] = {}
    parameters = []
    for parameter in signature.parameters.values():
        group = parameter.annotation
        if not (isinstance(group, type) and issubclass(group, tuple) and hasattr(group, "_field_defaults")):
            parameters.append(parameter)
            continue
        hints = typing.get_type_hints(group, include_extras=True)
        parameters += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                         default=group._field_defaults[name], annotation=hints[name])
                       for name in group._fields]
        groups[parameter.name] = (group, group._fields)
    clashes = sorted(name for name, count in Counter(p.name for p in parameters).items() if count > 1)
    if clashes:
        raise TypeError(f"{command.__name__}: option groups repeat the parameters {', '.join(clashes)}")

    @functools.wraps(command)
    def run(**values):
        for name, (group, names) in groups.items():
            values[name] = group(**{field: values.pop(field) for field in names})
        return command(**values)

    run.__signature__ = signature.replace(parameters=parameters)
    run.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return run


class RunFlags(NamedTuple):
    """Where the runs of `sweep` and `reproduce` execute, and their training states."""

    pack: Pack = "auto"
    backend: Backend = "local"
    address: Address = None
    cpus_per_run: CpusPerRun = None
    gpus_per_run: GpusPerRun = 0.0
    max_retries: MaxRetries = 3
    checkpoint_every: CheckpointEvery = None
    state_dir: StateDir = None
    keep_state: KeepState = False
    log_every: LogEvery = None
    tensorboard: TensorBoard = None

    def curves(self) -> CurveOptions:
        """The runs' training curves and TensorBoard files (FormalRopeError: no tensorboard package)."""
        return curve_options(self.log_every, self.tensorboard)

    def check(self, workers: int = 1) -> tuple[BackendOptions, int | str]:
        """(The backend's options, the parsed --pack); FormalRopeError for run options no sweep can
        honour. Contacts nothing (no cluster, no state folder), so a dry run checks the same options a
        real run does."""
        if self.backend not in BACKENDS:
            raise FormalRopeError(f"--backend must be {one_of(BACKENDS)}, got {self.backend!r}")
        options = backend_options(self.backend, workers=workers, address=self.address, cpus_per_run=self.cpus_per_run,
                                  gpus_per_run=self.gpus_per_run, max_retries=self.max_retries)
        parsed = parse_pack(self.pack)
        options.check_available()  # e.g. Ray not installed: exit 2 with the install command, after the flags
        self.curves()
        return options, parsed

    def sweep_options(self, configs, out: Path, *, workers: int, note: Callable[[str], None],
                      state_dir: str | None = None) -> dict:
        """The run_sweep keyword arguments (backend, pack, state) of a sweep of `configs` into `out`,
        checked before any run starts; `state_dir` replaces --state-dir (a table of `reproduce all`)."""
        options, pack = self.check(workers)
        state_dir = self.state_dir if state_dir is None else state_dir
        steps = max((config.steps for config in configs), default=0)
        state = state_options(self.checkpoint_every, steps, state_dir or out / "state", self.keep_state, note,
                              state_dir is not None)
        return dict(backend=options, state=state, pack=pack, curves=self.curves())


class CurveFlags(NamedTuple):
    """The training curve of `train` (`--log-every`) and its TensorBoard files."""

    log_every: LogEvery = None
    tensorboard: TensorBoard = None

    def curves(self) -> CurveOptions:
        return curve_options(self.log_every, self.tensorboard)


def curve_options(log_every: int | None, tensorboard: str | None) -> CurveOptions:
    """CurveOptions of --log-every and --tensorboard, checked (the tensorboard package is installed)."""
    options = CurveOptions(log_every=log_every, tensorboard=tensorboard)
    check_tensorboard(options)
    if tensorboard is not None:  # a file or unwritable place there: refused now, not as a failed run
        check_output_place(tensorboard, "the TensorBoard folder", folder=True)
    return options


class TrainStateFlags(NamedTuple):
    """The training state of `train`: checkpoints, and resuming from one."""

    checkpoint_every: CheckpointEvery = None
    state_dir: TrainStateDir = None
    resume: Resume = False

    def state(self, config, note: Callable[[str], None] = lambda text: None):
        """StateOptions for `train` (None: no checkpoints). A state this run saved before is
        continued only with --resume: without it, an existing state is an error rather than silently
        replaced. --resume without a state of this run starts at step 0 after a `note` saying where
        it looked."""
        state = state_options(self.checkpoint_every, config.steps, self.state_dir or Path("checkpoints") / "state",
                              False, lambda text: None, self.state_dir is not None)
        if state is None:
            if self.resume or self.state_dir is not None:
                raise FormalRopeError(
                    f"--resume and --state-dir need checkpoints, which are off for a run of {config.steps:,} steps by "
                    "default (on above 10,000 steps): pass --checkpoint-every N"
                )
            return None
        store, key = open_state_store(state.uri), pack_key([config])
        exists = store.exists(key)
        if not self.resume and exists:
            raise FormalRopeError(
                f"{state.uri} holds a saved training state of this run (killed before it finished): pass --resume to "
                "continue from it, or delete it (or choose another --state-dir) to start over"
            )
        if self.resume and not exists:
            # Said out loud: a resume that quietly starts over looks like a resume until the wall time shows.
            others = [name for name in store.keys() if name != key]
            held = (f"; it holds {len(others)} state(s) of other runs (a changed setting changes the run id, "
                    "and with it the state key)") if others else ""
            note(f"--resume: no saved training state of this run (run id {config.run_id()}, state key {key}) in "
                 f"{state.uri}{held}; starting at step 0")
        return state


def state_options(checkpoint_every: int | None, steps: int, state_dir: str | Path, keep: bool,
                  note: Callable[[str], None], explicit_dir: bool):
    """StateOptions for the --checkpoint-every / --state-dir / --keep-state options (None: no
    checkpoints), after checking that the folder can be written (exit 2 before any run starts)."""
    every = interval(checkpoint_every, steps)
    if every is None:
        if explicit_dir or keep:
            note("no checkpoints (--checkpoint-every is off by default for runs of at most 10,000 steps): "
                 "--state-dir and --keep-state have no effect; pass --checkpoint-every N")
        return None
    options = StateOptions(uri=str(state_dir), every=every, keep=keep)
    check_state_dir(options.uri)
    return options
