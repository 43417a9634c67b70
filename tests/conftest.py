"""Test configuration: CPU-friendly torch, Triton interpreter when no GPU, deterministic hypothesis."""

import os

import pytest

try:
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    torch.set_num_threads(1)  # small ops: a 2-thread op costs ~8 ms of overhead on this machine
except ImportError:  # pragma: no cover - torch is a runtime dependency
    os.environ.setdefault("TRITON_INTERPRET", "1")

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def mlregtest_dir():
    """The 930 MLRegTest automata the project carries in data/mlregtest (CC BY 4.0, see its README)."""
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "data" / "mlregtest"
    assert len(list(folder.glob("*.att"))) == 930, f"{folder} must hold the 930 MLRegTest automata"
    return folder
