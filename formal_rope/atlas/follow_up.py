"""The atlas's follow-up: rerun its disagreements and say what the extra effort found.

A disagreement (`agreement.Disagreement`) is either a language the theory says an encoding cannot
recognise but every seed learned at every tested length (`LEARNED`), or one it can recognise but no
seed learned (`NOT_LEARNED`). Neither settles anything alone:

* **searched further** (every `LEARNED` run): the theory guarantees a failing string at some length
  for a fixed-precision model; the atlas's search may not have reached it. The run is trained again
  with its own recipe and tested up to `max_length` (default 1,000, twice the atlas's 500), and the
  worst-case search scores `budget` strings per length (default 256, four times the atlas's 64).
  A failure found is the one the theory guarantees (or one on the way); none found means the model
  held up to that length under that search, which the theory does not forbid (its failure may lie
  further out).
* **at a larger scale** (a seeded sample of `sample` `NOT_LEARNED` languages per follow-up, spread over
  the encodings): the core paper's SiPE_P gap was optimisation, not expressivity. Each sampled
  (language, encoding) is trained again at `scale` (default medium: the paper's model size) with
  every seed it had and the atlas's recipe and test lengths: the gap closes if a seed learns.

The follow-up is an ordinary sweep into `OUT/follow-up` (resumable, any backend); `follow-up.json`
there maps each follow-up run to the atlas run it follows. `follow_up_of` reads both folders back into
`FollowUpOutcome`s, which docs/atlas.md and `formalrope atlas --follow-up` print.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from formal_rope.atlas.agreement import LEARNED, NOT_LEARNED, Agreement, Disagreement, agreement_of, cell_value
from formal_rope.atlas.plan import ATLAS_RECIPE, encoding_label, parse_encoding
from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.engine import SearchSettings
from formal_rope.files import write_bytes_atomically
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.results import read_results
from formal_rope.training.scales import SCALES, scale_overrides

FOLLOW_UP_DIR = "follow-up"
PLAN_FILE = "follow-up.json"
SEARCHED = "searched further"
SCALED = "at a larger scale"
DEFAULT_BUDGET = 256
DEFAULT_MAX_LENGTH = 1000
DEFAULT_SAMPLE = 4
DEFAULT_SCALE = "medium"


@dataclass(frozen=True)
class FollowUpRequest:
    """How hard to follow up: the search's budget and longest length for LEARNED runs; how many
    NOT_LEARNED languages (sampled with `seed`) to train again at `scale`."""

    budget: int = DEFAULT_BUDGET
    max_length: int = DEFAULT_MAX_LENGTH
    sample: int = DEFAULT_SAMPLE
    scale: str = DEFAULT_SCALE
    seed: int = 0
    steps: int | None = None  # the scaled reruns' training steps (None: the scale's)

    def __post_init__(self) -> None:
        if self.budget < 0:
            raise FormalRopeError(f"the follow-up's search budget must be non-negative, got {self.budget}")
        if self.sample < 0:
            raise FormalRopeError(f"the follow-up's sample must be non-negative, got {self.sample}")
        if self.scale not in SCALES:
            raise FormalRopeError(f"unknown scale {self.scale!r}; expected one of {', '.join(SCALES)}")

    @property
    def worst_case(self) -> SearchSettings:
        return SearchSettings(budget=self.budget)


def follow_up_folder(out: str | Path, request: FollowUpRequest | None = None) -> Path:
    """Where the follow-up of `request` of the atlas in `out` lives: OUT/follow-up with the default
    settings, else OUT/follow-up-KEY=VALUE,... naming every setting that differs, so follow-ups with
    other settings never share a folder or overwrite each other's follow-up.json."""
    request = FollowUpRequest() if request is None else request
    default = FollowUpRequest()
    names = ("max_length", "budget", "sample", "scale", "seed", "steps")
    changed = [f"{name}={getattr(request, name)}" for name in names
               if getattr(request, name) != getattr(default, name)]
    return Path(out) / (FOLLOW_UP_DIR if not changed else f"{FOLLOW_UP_DIR}-{','.join(changed)}")


@dataclass(frozen=True)
class FollowUpRun:
    """One planned follow-up run: its kind, the atlas run it follows and its own config."""

    kind: str  # SEARCHED or SCALED
    source_run_id: str
    config: RunConfig


@dataclass(frozen=True)
class FollowUpOutcome:
    """A follow-up run beside the atlas run it follows (None where it has not run yet)."""

    kind: str
    encoding: str
    language: str
    seed: int
    source_run_id: str
    run_id: str
    source_n_star_worst: int | None
    source_longest: int
    status: str | None
    n_star: int | None
    n_star_worst: int | None
    longest: int
    learned: bool | None
    worst_failure: str | None
    strings_tried: int | None
    model: str  # the follow-up run's model and training, e.g. "5 layers, d_model 64, 2000 steps"


def _sampled(disagreements: list[Disagreement], count: int, seed: int) -> list[Disagreement]:
    """`count` of `disagreements`, drawn with `seed` and spread over their encodings (round robin)."""
    rng = random.Random(seed)
    by_encoding: dict[str, list[Disagreement]] = {}
    for item in disagreements:
        by_encoding.setdefault(item.encoding, []).append(item)
    for items in by_encoding.values():
        rng.shuffle(items)
    chosen: list[Disagreement] = []
    while len(chosen) < count and any(by_encoding.values()):
        for encoding in sorted(by_encoding):
            if by_encoding[encoding] and len(chosen) < count:
                chosen.append(by_encoding[encoding].pop())
    return chosen


def searched_config(config: RunConfig, max_length: int) -> RunConfig:
    """The same run tested up to `max_length` (its own recipe and training unchanged)."""
    longest = max(config.tested_lengths())
    if max_length <= longest:
        raise FormalRopeError(f"the follow-up's longest length ({max_length}) must exceed the atlas's ({longest})")
    return config.with_(test_max_length=int(max_length))


def scaled_config(config: RunConfig, scale: str, steps: int | None = None) -> RunConfig:
    """The same language, encoding, periods and seed at `scale` (model, steps, batch; `steps` replaces
    the scale's), keeping the atlas's recipe (near-miss training negatives) and test lengths."""
    overrides = {key: value for key, value in scale_overrides(scale).items()
                 if key not in ("test_min_length", "test_max_length", "n_per_length")}
    if steps is not None:
        overrides["steps"] = int(steps)
    settings = parse_encoding(encoding_label(config)).settings(int(overrides.get("layers", config.layers)))
    return config.with_(**{**overrides, **ATLAS_RECIPE, **settings})


def _configs_by_run(results) -> dict[str, RunConfig]:
    return {row["run_id"]: RunConfig.from_dict(json.loads(row["config"]), record=True)
            for row in results.runs.to_dict("records")}


def plan_follow_up(results, agreement: Agreement, request: FollowUpRequest) -> list[FollowUpRun]:
    """Every follow-up run of an atlas (its read results and agreement): each LEARNED disagreement's
    runs searched further, a sample of NOT_LEARNED ones at `request.scale`."""
    configs = _configs_by_run(results)
    learned = [item for item in agreement.disagreements if item.kind == LEARNED]
    missed = _sampled([item for item in agreement.disagreements if item.kind == NOT_LEARNED], request.sample,
                      request.seed)
    planned = []
    for kind, items, change in ((SEARCHED, learned, lambda c: searched_config(c, request.max_length)),
                                (SCALED, missed, lambda c: scaled_config(c, request.scale, request.steps))):
        for item in items:
            for run in item.runs:
                planned.append(FollowUpRun(kind, run["run_id"], change(configs[run["run_id"]])))
    return planned


def write_plan(folder: Path, planned: list[FollowUpRun], request: FollowUpRequest) -> Path:
    """`folder/follow-up.json`: the request and, per follow-up run, its kind and the run it follows.
    Entries an earlier plan recorded there and this one does not plan are kept (after the new ones),
    so a rerun never drops what the folder's runs follow."""
    runs = [{"kind": run.kind, "source_run_id": run.source_run_id, "run_id": run.config.run_id(),
             "config": run.config.to_dict()} for run in planned]
    path = folder / PLAN_FILE
    if path.is_file():
        planned_ids = {entry["run_id"] for entry in runs}
        runs += [entry for entry in _read_plan(folder).get("runs", []) if entry.get("run_id") not in planned_ids]
    payload = {"format": 1, "request": asdict(request), "runs": runs}
    folder.mkdir(parents=True, exist_ok=True)
    write_bytes_atomically(path, (json.dumps(payload, indent=1) + "\n").encode(), "the atlas's follow-up plan")
    return path


def _read_plan(folder: Path) -> dict:
    path = folder / PLAN_FILE
    try:
        payload = json.loads(path.read_text())
        return payload if isinstance(payload.get("runs"), list) else {}
    except (OSError, ValueError, AttributeError) as error:
        raise FormalRopeError(f"{path} is not a follow-up plan ({error})") from None


def _value(row: dict | None, name: str):
    return None if row is None else cell_value(row.get(name))


def follow_up_of(out: str | Path, agreement: Agreement | None = None,
                 request: FollowUpRequest | None = None) -> list[FollowUpOutcome]:
    """The follow-up of `request` (None: the default settings) of the atlas in `out`
    (`follow_up_folder`) beside the runs it follows; [] without one."""
    out = Path(out)
    folder = follow_up_folder(out, request)
    if not (folder / PLAN_FILE).is_file():
        return []
    plan = _read_plan(folder)
    atlas = read_results(out)
    agreement = agreement or agreement_of(atlas)
    sources = {row["run_id"]: row for row in atlas.runs.to_dict("records")}
    done = {}
    if (folder / "runs").is_dir() and any((folder / "runs").glob("*.parquet")):
        done = {row["run_id"]: row for row in read_results(folder).runs.to_dict("records")}
    evidence = {run["run_id"]: run for item in agreement.disagreements for run in item.runs}
    outcomes = []
    for entry in plan["runs"]:
        source = sources.get(entry["source_run_id"])
        if source is None:
            continue  # the plan of another atlas: nothing to compare with
        source_config = RunConfig.from_dict(json.loads(source["config"]), record=True)
        row = done.get(entry["run_id"])
        config = RunConfig.from_dict(json.loads(row["config"]) if row is not None else entry["config"], record=True)
        longest = max(config.tested_lengths())
        worst = _value(row, "n_star_worst")
        measured = worst if worst is not None else _value(row, "n_star")
        status = _value(row, "status")
        refuted_at = _value(row, "refuted_at")  # a misclassified string of the theory's family (runs.blind_spots)
        learned = None if row is None or status == "failed" or measured is None else \
            int(measured) >= longest and (refuted_at is None or int(refuted_at) > longest)
        outcomes.append(FollowUpOutcome(
            kind=entry["kind"], encoding=encoding_label(source_config), language=source_config.language,
            seed=int(source_config.seed), source_run_id=entry["source_run_id"], run_id=entry["run_id"],
            source_n_star_worst=evidence.get(entry["source_run_id"], {}).get("n_star_worst"),
            source_longest=int(max(source_config.tested_lengths())), status=status,
            n_star=_value(row, "n_star"), n_star_worst=worst, longest=int(longest), learned=learned,
            worst_failure=_value(row, "worst_failure") or _value(row, "family_failure"),
            strings_tried=_value(row, "worst_strings_tried"),
            model=f"{config.layers} layers, d_model {config.d_model}, {config.steps} steps",
        ))
    return outcomes


def follow_up_summary(outcomes: list[FollowUpOutcome]) -> dict:
    """Counts per kind: runs planned and measured; for SEARCHED, (language, encoding) pairs where a
    failure was found; for SCALED, pairs where some seed learned (the gap closed)."""
    summary = {}
    for kind in (SEARCHED, SCALED):
        chosen = [o for o in outcomes if o.kind == kind]
        measured = [o for o in chosen if o.learned is not None]
        pairs: dict = {}
        for o in measured:
            pairs.setdefault((o.encoding, o.language), []).append(o.learned)
        entry = {"runs": len(chosen), "measured": len(measured), "pairs": len(pairs)}
        if kind == SEARCHED:
            entry["failure_found_runs"] = sum(not o.learned for o in measured)
            entry["failure_found_pairs"] = sum(not all(values) for values in pairs.values())
        else:
            entry["learned_runs"] = sum(o.learned for o in measured)
            entry["closed_pairs"] = sum(any(values) for values in pairs.values())
        summary[kind] = entry
    return summary
