"""Run ids and records made before the config had sections read back the same: every run of the
committed atlas (atlas/results, its blind-spot and follow-up folders) and the recorded fixtures
recompute the id stored beside their config, and their configs' `to_dict` is the stored one."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from formal_rope.run_config import RunConfig
from formal_rope.run_config.fields import FIELD_NAMES, ID_NEUTRAL

REPO = Path(__file__).resolve().parents[1]
ATLAS_RUNS = sorted((REPO / "atlas" / "results").glob("**/runs/*.parquet"))


def _stored_runs():
    for path in ATLAS_RUNS:
        table = pq.read_table(path, columns=["run_id", "config"]).to_pylist()
        for row in table:
            yield path, row["run_id"], json.loads(row["config"])


def test_the_committed_atlas_is_there_to_check():
    # 408 atlas runs plus the blind-spot and follow-up folders: a moved folder must not empty this test.
    assert len(ATLAS_RUNS) >= 408


def test_every_committed_atlas_run_recomputes_its_stored_run_id():
    checked = 0
    for path, run_id, stored in _stored_runs():
        config = RunConfig.from_dict(stored, record=True)
        assert config.run_id() == run_id, path
        _assert_reads_as_written(config, stored)
        assert path.stem == run_id
        checked += 1
    assert checked >= 408


def _assert_reads_as_written(config: RunConfig, stored: dict) -> None:
    """Each field the record holds reads as written where it applies (a record written before
    `to_dict` left out inapplicable fields holds them too); a field the record predates reads as
    its id-neutral value."""
    written = config.to_dict()
    for name in FIELD_NAMES:
        if not config.applies(name):
            assert written[name] is None, name
        elif name in stored:
            assert written[name] == stored[name], name
        else:
            assert written[name] == ID_NEUTRAL[name], name


def test_the_recorded_objective_fixture_keeps_its_run_ids():
    recorded = json.loads((REPO / "tests" / "data" / "objectives" / "final_before_objectives.json").read_text())
    assert recorded["run_ids"]
    for stored, run_id in zip(recorded["configs"], recorded["run_ids"], strict=True):
        config = RunConfig.from_dict(stored)
        assert config.run_id() == run_id
        _assert_reads_as_written(config, stored)


@pytest.mark.parametrize("name", ["format1_rope_p.zip", "format1_jof_projected.zip"])
def test_the_committed_checkpoints_configs_read_back_unchanged(name):
    with zipfile.ZipFile(REPO / "tests" / "data" / name) as archive:
        stored = json.loads(archive.read("metadata.json"))["config"]
    config = RunConfig.from_dict(stored, record=True)
    _assert_reads_as_written(config, stored)
    assert RunConfig.from_dict(config.to_dict()) == config  # and the record is a valid config, one id
