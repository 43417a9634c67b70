"""What the sweeps tests share: a deterministic fake runner (training replaced: the trainer has its
own tests), a grid builder, and the command line called in-process.

Ray workers do not have tests/ on their path: tests that run these helpers on Ray ship this module
by value (`ray.cloudpickle.register_pickle_by_value`).
"""

from __future__ import annotations

from pathlib import Path

from cli_support import run_main
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.grid import build_spec
from formal_rope.training.run_result import LengthResult, RunResult

REPO = Path(__file__).resolve().parents[1]


def fake_runner(config: RunConfig) -> RunResult:
    """N* depends on the PE and seed so that aggregation has something to check."""
    n_star = {"rope_p": 500, "nope": 41 + 10 * config.seed}.get(config.pe, 60)
    per_length = tuple(LengthResult(length, 1.0 if length <= n_star else 0.5, 4) for length in range(41, 51))
    accuracy = sum(r.accuracy for r in per_length) / len(per_length)
    return RunResult(
        run_id=config.run_id(), config=config, status="ok", n_star=n_star, accuracy=accuracy,
        per_length=per_length, first_failure=None if n_star >= 50 else "ab" * 25, steps_done=config.steps,
        wall_s=0.01, versions={"torch": "x"},
    )


def spec(**kwargs):
    defaults = dict(name="t", languages=["(aa)*", "(ab)*"], pes=["nope", "rope_p", "rope"], bases=[1.0, 1e4],
                    seeds=2, lrs=[1e-4, 3e-4], scale="quick", overrides={"steps": 3})
    defaults.update(kwargs)
    return build_spec(**defaults)


def cli(capsys, argv):
    """(exit code, stdout, stderr) of `formalrope ARGV` run in this process."""
    return run_main(capsys, argv)
