"""Options shared by `sweep` and `reproduce` (where the runs execute, their checkpoints) and `train`
(checkpoints): declared once here as annotated types so each command adds one line per option."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Callable, Optional

import typer

from formal_rope.errors import FormalRopeError

Pack = Annotated[str, typer.Option(
    "--pack", help="Runs trained together in one computation: auto (compatible runs grouped into packs sized "
    "to the workers and the memory; the default) or N (packs of at most N compatible runs; 1 trains every "
    "run alone). docs/packing.md.")]
Backend = Annotated[str, typer.Option(
    "--backend", help="Where runs execute: local (--workers processes on this machine) or ray (Ray tasks on a "
    "local Ray instance, or on the cluster at --address; needs pip install -e \".\\[ray]\").")]
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


def state_options(checkpoint_every: int | None, steps: int, state_dir: str | Path, keep: bool,
                  note: Callable[[str], None], explicit_dir: bool) -> "StateOptions | None":
    """StateOptions for the --checkpoint-every / --state-dir / --keep-state options (None: no
    checkpoints), after checking that the folder can be written (exit 2 before any run starts)."""
    from formal_rope.training.state import StateOptions, check_state_dir, checkpoint_every as interval

    every = interval(checkpoint_every, steps)
    if every is None:
        if explicit_dir or keep:
            note("no checkpoints (--checkpoint-every is off by default for runs of at most 10,000 steps): "
                 "--state-dir and --keep-state have no effect; pass --checkpoint-every N")
        return None
    options = StateOptions(uri=str(state_dir), every=every, keep=keep)
    check_state_dir(options.uri)
    return options


def check_sweep_options(*, backend: str, address: str | None, cpus_per_run: float | None, gpus_per_run: float,
                        max_retries: int, pack: str = "auto", workers: int = 1) -> int | str:
    """FormalRopeError for run options that no sweep can honour; the parsed --pack. Contacts nothing
    (no cluster, no state folder), so a dry run checks the same options a real run does."""
    from formal_rope.sweeps.runner import check_run_options
    from formal_rope.training.packing import parse_pack

    if backend not in ("local", "ray"):
        raise FormalRopeError(f"--backend must be local or ray, got {backend!r}")
    check_run_options(backend, workers, cpus_per_run, gpus_per_run, max_retries, address)
    parsed = parse_pack(pack)
    if backend == "ray":
        from formal_rope.sweeps.ray_backend import import_ray

        import_ray()  # not installed: exit 2 with the install command now, not after other checks
    return parsed


def sweep_run_options(configs, out: Path, *, backend: str, address: str | None, cpus_per_run: float | None,
                      gpus_per_run: float, max_retries: int, checkpoint_every: int | None, state_dir: str | None,
                      keep_state: bool, note: Callable[[str], None], pack: str = "auto") -> dict:
    """The run_sweep keyword arguments these options ask for, checked before any run starts."""
    pack = check_sweep_options(backend=backend, address=address, cpus_per_run=cpus_per_run,
                               gpus_per_run=gpus_per_run, max_retries=max_retries, pack=pack)
    steps = max((config.steps for config in configs), default=0)
    state = state_options(checkpoint_every, steps, state_dir or out / "state", keep_state, note, state_dir is not None)
    return dict(backend=backend, address=address, cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run,
                max_retries=max_retries, state=state, pack=pack)


def train_state(config, checkpoint_every: int | None, state_dir: str | None, resume: bool,
                note: Callable[[str], None] = lambda text: None) -> "StateOptions | None":
    """StateOptions for `train` (None: no checkpoints). A state this run saved before is continued
    only with --resume: without it, an existing state is an error rather than silently replaced.
    --resume without a state of this run starts at step 0 after a `note` saying where it looked."""
    from formal_rope.training.packing import pack_key
    from formal_rope.training.state import open_state_store

    state = state_options(checkpoint_every, config.steps, state_dir or Path("checkpoints") / "state", False,
                          lambda text: None, state_dir is not None)
    if state is None:
        if resume or state_dir is not None:
            raise FormalRopeError(
                f"--resume and --state-dir need checkpoints, which are off for a run of {config.steps:,} steps by "
                "default (on above 10,000 steps): pass --checkpoint-every N"
            )
        return None
    store, key = open_state_store(state.uri), pack_key([config])
    exists = store.exists(key)
    if not resume and exists:
        raise FormalRopeError(
            f"{state.uri} holds a saved training state of this run (killed before it finished): pass --resume to "
            "continue from it, or delete it (or choose another --state-dir) to start over"
        )
    if resume and not exists:
        # Said out loud: a resume that quietly starts over looks like a resume until the wall time shows.
        others = [name for name in store.keys() if name != key]
        held = (f"; it holds {len(others)} state(s) of other runs (a changed setting changes the run id, "
                "and with it the state key)") if others else ""
        note(f"--resume: no saved training state of this run (run id {config.run_id()}, state key {key}) in "
             f"{state.uri}{held}; starting at step 0")
    return state
