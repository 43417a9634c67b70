"""Evaluation takes the cores of idle sweep workers (`sweeps.backends.cores`) because its results do
not depend on the thread count: every encoding's logits at 1 and 2 threads are the same bits, an
evaluation asked to change threads per length gives the same Evaluation, and the local pool tells a
worker when another has finished."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from formal_rope.evaluation.length_generalization import evaluate_pack_sets, pack_scores
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.backends import LocalBackend, LocalOptions, local
from formal_rope.sweeps.backends.cores import BusyUnits, CoreShare
from formal_rope.sweeps.units import UnitTask
from formal_rope.training.resolve import pack_ingredients
from formal_rope.training.scales import apply_scale
from formal_rope.training.setup import build_pack

QUICK = dict(steps=1, n_per_length=4, nnch_samples=2, test_min_length=41, test_max_length=44)


def _pack(language: str, pes, **fields):
    configs = [apply_scale(RunConfig(language=language, pe=pe, seed=index), "quick").with_(**{**QUICK, **fields})
               for index, pe in enumerate(pes)]
    ingredients = pack_ingredients(configs)
    return build_pack(configs, len(ingredients.alphabet), ingredients.periods).eval(), configs, ingredients


PACKS = {
    "mixable encodings": ("(ab)*", ("nope", "sipe", "sipe_p", "rope", "rope_p", "partial_rope"), {}),
    "jof_fixed": ("(ab)*", ("jof_fixed", "jof_fixed"), {}),
    "jof_learned": ("(ab)*", ("jof_learned",), {}),
    "jof_projected": ("(ab)*", ("jof_projected", "jof_projected"), {}),
    "windowed hybrid": ("(ab)*", ("rope",), {"layer_pe": ("rope", "nope"), "window": (8, -1)}),
}


@pytest.mark.parametrize("name", list(PACKS))
def test_logits_are_the_same_bits_at_one_and_two_threads(name):
    language, pes, fields = PACKS[name]
    model, _, _ = _pack(language, pes, **fields)
    if name == "jof_projected":  # W2 starts at zero; give the content angles something to rotate by
        with torch.no_grad():
            for parameter_name, parameter in model.named_parameters():
                if "positional" in parameter_name:
                    parameter.add_(0.05 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(1)))
    rng = np.random.default_rng(0)
    before = torch.get_num_threads()
    try:
        for length in (41, 137, 300):
            symbols = rng.integers(0, 2, size=(3, length))
            torch.set_num_threads(1)
            one = pack_scores(model, symbols)[1]
            two = pack_scores(model, symbols, threads=lambda: 2)[1]
            assert torch.get_num_threads() == 1  # the call restores the threads it found
            assert np.array_equal(one, two), f"{name}: logits differ between 1 and 2 threads at length {length}"
    finally:
        torch.set_num_threads(before)


def test_an_evaluation_changing_threads_per_length_equals_one_at_fixed_threads():
    model, configs, ingredients = _pack("(ab)*", ("nope", "rope_p", "sipe_p"), test_max_length=120,
                                        eval_mode="full")
    data = ingredients.data[0]
    asked = []

    def alternating() -> int:
        asked.append(len(asked) % 2 + 1)
        return asked[-1]

    def evaluate(threads):
        return evaluate_pack_sets(model, data.test_sets(), decode=data.decode, modes=["full"] * 3,
                                  uniform_sets=data.nnch_set, threads=threads)

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fixed, alternating_threads = evaluate(None), evaluate(alternating)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert len(asked) == 80 and set(asked) == {1, 2}  # asked once per length (41..120)
    assert fixed == alternating_threads


def test_a_core_share_gives_a_unit_the_threads_of_the_idle_workers(tmp_path):
    with BusyUnits(workers=2) as busy:
        share = busy.share
        assert share.busy() == 2 and share.evaluation_threads(1) == 1
        busy.set(1)
        assert share.busy() == 1 and share.evaluation_threads(1) == 2
        path = share.path
    assert share.busy() is None and share.evaluation_threads(1) == 1  # the driver is done: own threads
    with pytest.raises(FileNotFoundError):
        open(path)
    wide = CoreShare(path=str(tmp_path / "count"), workers=4)
    (tmp_path / "count").write_bytes((1).to_bytes(4, "little"))
    assert wide.evaluation_threads(3) == 12  # four workers of three threads, one unit left
    (tmp_path / "count").write_bytes((3).to_bytes(4, "little"))
    assert wide.evaluation_threads(3) == 4
    (tmp_path / "count").write_bytes(b"\x01")  # a torn or foreign file: own threads
    assert wide.evaluation_threads(3) == 3


class WaitingTask:
    """A unit runner that reports the evaluation threads it would get: unit "fast" returns at once,
    unit "slow" waits (up to 60 s) until the pool says it is the only unit in flight."""

    def __init__(self, share=None):
        self.share = share

    def sharing_cores(self, share):
        return WaitingTask(share)

    def __call__(self, unit, device=None):
        if unit[0] == "fast" or self.share is None:
            return [None if self.share is None else self.share.evaluation_threads(1)]
        deadline = time.monotonic() + 60
        while self.share.busy() != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        return [self.share.evaluation_threads(1)]

    def failed(self, unit, error):
        return [repr(error)]


def test_the_local_pool_tells_a_worker_when_the_others_are_done(monkeypatch):
    # This runner never touches torch, so its workers may widen whatever torch did in this process.
    monkeypatch.setattr(local, "forked_workers_may_widen", lambda: True)
    done = {}
    backend = LocalBackend(LocalOptions(workers=2))
    backend.open(lambda text: None)
    backend.run([("slow",), ("fast",)], WaitingTask(), lambda unit: unit[0],
                lambda kind, unit, results=None: done.update({unit[0]: results}) if kind == "done" else None)
    backend.close()
    assert done == {"fast": [1], "slow": [2]}  # the fast unit shared with a busy pool; the slow one alone


def test_a_unit_task_shares_cores_with_its_default_pack_runner_only():
    share = CoreShare(path="/nonexistent", workers=2)
    task = UnitTask().sharing_cores(share)
    assert task.cores == share and UnitTask().cores is None


PROBE = """
import time, torch
from formal_rope.sweeps.backends.cores import forked_workers_may_widen
fresh = forked_workers_may_widen()
torch.set_num_threads(1); torch.ones(1 << 20).add(1.0)
single = forked_workers_may_widen()
torch.set_num_threads(2); torch.ones(1 << 20).add(1.0); torch.set_num_threads(1)
started = time.monotonic(); threaded = forked_workers_may_widen(timeout=1.0); waited = time.monotonic() - started
started = time.monotonic(); again = forked_workers_may_widen(timeout=1.0); asked = time.monotonic() - started
print(fresh, single, threaded, again, waited >= 1.0, asked < 0.5)
"""


def test_workers_widen_only_when_a_forked_child_can_compute_on_two_threads():
    # GNU OpenMP hangs in a forked child of a process that already computed on several threads.
    output = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert output.returncode == 0, output.stderr
    assert output.stdout.split() == ["True", "True", "False", "False", "True", "True"]


DIRTY_SWEEP = """
import sys, torch
sys.path.insert(0, {tests!r})
from formal_rope.sweeps.results import load_results
from formal_rope.sweeps.runner import run_sweep
from test_sweeps_ray import tiny_grid
if {dirty}:
    torch.set_num_threads(2); torch.ones(1 << 20).add(1.0)  # this process's torch has used two threads
summary = run_sweep(tiny_grid(), {out!r}, workers=2, cpus_per_run=2)
runs = load_results({out!r})[0].sort_values("run_id")
print(summary.statuses, list(runs.n_star), list(runs.accuracy))
"""


def test_units_on_several_threads_get_fresh_workers_when_forked_ones_would_hang(tmp_path):
    # Forked from a process whose torch already used two threads, a worker training on two threads
    # would hang in GNU OpenMP; such units get spawned workers and end as from a clean process.
    tests = str(Path(__file__).resolve().parent)
    outputs = []
    for dirty in (False, True):
        script = DIRTY_SWEEP.format(tests=tests, dirty=dirty, out=str(tmp_path / f"dirty-{dirty}"))
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(done.stdout.strip().splitlines()[-1])
    assert outputs[0] == outputs[1] and outputs[0].startswith("{'ok': 4}")
