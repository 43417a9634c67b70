"""Training objectives (`run_config.objective`, `training.objectives`): parsing, exact targets
from the DFA on hand-checked strings, each component's loss against a per-string computation,
`final` bit-identical to the trainer before objectives existed, and a tiny run that `next-set`
learns where `final` does not at the same budget."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from formal_rope.automata import language_dfa
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.fields import parse_field_text
from formal_rope.run_config.objective import parse_objective
from formal_rope.runs.pack import run_pack, run_training
from formal_rope.sampling import TrainingBatch
from formal_rope.scheduling.packs import pack_signature
from formal_rope.training.layout import rectangular_layout
from formal_rope.training.objectives import objective_step, string_targets
from formal_rope.training.setup import build_pack
from formal_rope.training.train import pack_inputs
from formal_rope.training.trained_classifier import load_checkpoint
from tests.resume_support import resumed_equals_whole

FIXTURE = Path(__file__).parent / "data" / "objectives"
# LDP-1's shape over {a, x, y} (x: b0, y: b1): no x before the first a, no y after it.
LDP1 = "re:y*a[ax]*"
TINY = dict(pe="nope", layers=1, d_model=16, heads=2, steps=2, batch_size=4, test_min_length=41,
            test_max_length=41, n_per_length=4)


def _dfa():
    return language_dfa(resolve_language(LDP1, ("a", "x", "y")))


def _ids(dfa, text: str) -> list[int]:
    index = dfa.symbol_index()
    return [index[symbol] for symbol in text]


def _batch(dfa, strings, labels) -> TrainingBatch:
    width = max(1, max(len(s) for s in strings))
    symbols = np.full((len(strings), width), -1, dtype=np.int64)
    for row, text in enumerate(strings):
        symbols[row, : len(text)] = _ids(dfa, text)
    return TrainingBatch(symbols, np.array([len(s) for s in strings]), np.array(labels, dtype=bool))


# ---------------------------------------------------------------------------------------- the setting


def test_objective_is_id_neutral_canonical_and_checked_when_built():
    plain = RunConfig("Σ*abΣ*")
    assert plain.objective == "final" and "objective" not in plain.id_fields()
    assert RunConfig("Σ*abΣ*", objective="final:1").run_id() == plain.run_id()
    summed = RunConfig("Σ*abΣ*", objective=" next_set:0.5+final ")
    assert summed.objective == "final+next-set:0.5" and summed.run_id() != plain.run_id()
    assert parse_field_text("objective", "prefix") == "prefix"
    for bad, words in (("lm", "trains no eos verdict"), ("final+final", "twice"), ("finals", "unknown component"),
                       ("final:-1", "positive"), ("final:x", "must be a number")):
        with pytest.raises(FormalRopeError, match=words):
            RunConfig("Σ*abΣ*", objective=bad)


def test_runs_of_different_objectives_never_share_a_pack():
    one, other = RunConfig("Σ*abΣ*"), RunConfig("Σ*abΣ*", objective="prefix")
    assert pack_signature(one) != pack_signature(other)


# ---------------------------------------------------------------------------------------- targets


def test_string_targets_follow_the_dfa_on_hand_checked_strings():
    dfa = _dfa()
    a, x, y = (dfa.symbol_index()[s] for s in "axy")
    batch = _batch(dfa, ["yax", "xa", ""], [True, False, False])
    targets = string_targets(dfa, batch.symbols, batch.lengths)
    # yax: prefixes ε, y, ya, yax; only ya and yax are in L.
    assert targets["accepts"][0, :4].tolist() == [False, False, True, True]
    continues = targets["continues"][0, :4]
    # before a: a and y keep the prefix completable, x (b0) does not; after a: a and x, not y (b1).
    assert [sorted(np.flatnonzero(row)) for row in continues] == [sorted([a, y])] * 2 + [sorted([a, x])] * 2
    assert targets["next"][0, :4].tolist() == [1 + y, 1 + a, 1 + x, 0]
    # xa: dead after x, so nothing continues it.
    assert targets["accepts"][1, :3].tolist() == [False, False, False]
    assert targets["continues"][1, 1].tolist() == [False, False, False]
    assert targets["next"][2, 0] == 0  # the empty string: eos follows at once


def test_targets_sit_at_the_position_after_their_prefix():
    """Position i+1 reads w1..wi (strict past), eos reads the whole string; lm reads at position i."""
    dfa = _dfa()
    batch = _batch(dfa, ["yax", "xa"], [True, False])
    inputs = pack_inputs([batch], len(dfa.alphabet), (8,), objective=parse_objective("prefix+next-set+lm:1"),
                         dfas=[dfa])
    targets, layout = inputs.targets, inputs.layout
    tokens = layout.tokens[0].tolist()
    bos, eos = len(dfa.alphabet), len(dfa.alphabet) + 1
    starts = [i for i, token in enumerate(tokens) if token == bos]
    first, second = starts
    assert tokens[first + 4] == eos and int(layout.readout_rows[0, 0]) == first + 4
    assert targets.read[0, first + 1 : first + 5].all() and not targets.read[0, first]
    assert targets.before_eos[0, first + 1 : first + 4].all() and not targets.before_eos[0, first + 4]
    assert targets.prefix_label[0, first + 1 : first + 5].tolist() == [0, 0, 1, 1]
    assert targets.lm_read[0, first : first + 4].all() and not targets.lm_read[0, first + 4]
    assert not targets.lm_read[0, second : second + 4].any()  # a negative string: no lm target
    assert targets.next_set[0, second + 2].tolist() == [0.0, 0.0, 0.0]  # after x: dead


def _per_string_losses(model, dfa, batch, objective):
    """Each component's loss for a pack of one, string by string on its own rectangular layout."""
    runs_logits, prefix_terms, next_terms, lm_terms = [], [], [], []
    n = len(dfa.alphabet)
    for row in range(len(batch.lengths)):
        length = int(batch.lengths[row])
        tokens = torch.tensor([[[n] + batch.symbols[row, :length].tolist() + [n + 1]]])
        layout = rectangular_layout(tokens, torch.tensor([[length + 1]]))
        hidden = model.hidden_states(layout)[0]  # (T, d)
        verdict = model.readout(hidden[None])[0]
        runs_logits.append(verdict[length + 1])
        targets = string_targets(dfa, batch.symbols[row : row + 1, :length], np.array([length]))
        labels = torch.from_numpy(targets["accepts"][0].astype(np.int64))
        prefix_terms += [F.cross_entropy(verdict[i + 1][None], labels[i : i + 1]) for i in range(length)]
        if "next-set" in objective.names:
            symbols = model.auxiliary["next_set"](hidden[None])[0]
            for i in range(length + 1):
                wanted = torch.from_numpy(targets["continues"][0, i].astype(np.float32))
                eos = verdict[i + 1, 1] - verdict[i + 1, 0]
                terms = torch.cat((F.binary_cross_entropy_with_logits(symbols[i + 1], wanted, reduction="none"),
                                   F.binary_cross_entropy_with_logits(eos, labels[i].float())[None]))
                next_terms.append(terms.mean())
        if "lm" in objective.names and batch.labels[row]:
            scores = model.auxiliary["lm"](hidden[None])[0]
            following = torch.from_numpy(targets["next"][0])
            lm_terms += [F.cross_entropy(scores[i][None], following[i : i + 1]) for i in range(length + 1)]
    final = F.cross_entropy(torch.stack(runs_logits), torch.from_numpy(batch.labels.astype(np.int64)))
    mean = lambda terms: torch.stack(terms).mean()  # noqa: E731
    return {"final": final, "prefix": final + mean(prefix_terms), "next-set": mean(next_terms), "lm": mean(lm_terms)}


def test_each_component_equals_its_per_string_definition():
    dfa = _dfa()
    objective = parse_objective("final+prefix+next-set+lm:0.5")
    config = RunConfig(LDP1, alphabet=("a", "x", "y"), objective=objective.text, **TINY)
    torch.manual_seed(0)
    model = build_pack([config], len(dfa.alphabet), [None])
    batch = _batch(dfa, ["yax", "xa", "ayy", "a", ""], [True, False, False, True, False])
    inputs = pack_inputs([batch], len(dfa.alphabet), (4, 6), objective=objective, dfas=[dfa])
    step = objective_step(model, objective, inputs.layout, inputs.targets)
    expected = _per_string_losses(model, dfa, batch, objective)
    for name in objective.names:
        assert torch.allclose(step.components[name][0], expected[name], atol=1e-5), name
    total = sum(objective.weight(name) * expected[name] for name in objective.names)
    assert torch.allclose(step.loss[0], total, atol=1e-5)


# ---------------------------------------------------------------------------------------- training


def test_final_is_bit_identical_to_the_trainer_before_objectives(tmp_path):
    """The fixtures were written by tests/data/objectives/record_final.py with the code before the
    objective seam existed (commit ecb49ad), each on one kind of CPU: torch's CPU kernels round the
    first step's matmuls differently on an AVX-512 machine (the `.amd-epyc-avx512` record) than on the
    machine of the first record, and the difference grows from there. The same script now must give
    the same bits as one of them; run ids, N*, accuracies and per-length outcomes agree on both."""
    out = tmp_path / "now.json"
    subprocess.run([sys.executable, str(FIXTURE / "record_final.py"), str(out)], check=True, capture_output=True)
    now = json.loads(out.read_text())
    keys = ("run_ids", "step_losses", "final_loss", "n_star", "accuracy", "per_length", "curve_loss", "weights_sha256")
    records = sorted(FIXTURE.glob("final_before_objectives*.json"))
    assert len(records) == 2
    mismatches = {record.name: [key for key in keys if now[key] != json.loads(record.read_text())[key]]
                  for record in records}
    assert any(not wrong for wrong in mismatches.values()), mismatches


def _max_n_star(objective: str, steps: int = 150) -> list[int]:
    configs = [RunConfig("re:[cy]*a[acx]*", alphabet=tuple("acxy"), pe="nope", layers=2, d_model=32, heads=2,
                         steps=steps, batch_size=32, lr=1e-3, seed=seed, test_min_length=41, test_max_length=60,
                         n_per_length=32, objective=objective) for seed in (0, 1)]
    results, _ = run_pack(configs, curve_options=None)
    return [result.n_star for result in results]


def test_next_set_learns_ldp1_where_final_does_not_at_the_same_budget():
    """LDP-1's shape (no x before the first a, no y after it) at 150 steps of batch 32: the next-symbol
    sets say at every position which symbol would break the string, the eos label says it once."""
    final, next_set = _max_n_star("final"), _max_n_star("next-set")
    assert max(final) < 60
    assert min(next_set) == 60  # every test length 41..60 perfect for both seeds


def test_objective_runs_checkpoint_and_export(tmp_path):
    from formal_rope.export import export_model, load_exported

    config = RunConfig(LDP1, alphabet=("a", "x", "y"), objective="final+next-set:0.5+lm:0.25", **TINY)
    result, model = run_training(config, progress=False, checkpoint_path=tmp_path / "run.zip")
    assert result.status == "ok" and set(model.auxiliary.keys()) == {"next_set", "lm"}
    loaded = load_checkpoint(tmp_path / "run.zip")
    assert loaded.config.objective == "final+next-set:0.5+lm:0.25"
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, loaded.model.state_dict()[name]), name
    exported = export_model(tmp_path / "run.zip", tmp_path / "export")
    assert any("objective" in note for note in exported.notes)
    verdicts = load_exported(tmp_path / "export").classify(["ya", "xa"])
    assert len(verdicts) == 2


def test_a_mixed_language_pack_gives_each_run_its_own_heads():
    """A run's heads in a pack over a larger alphabet are those it has alone (drawn over its own symbols)."""
    small = RunConfig("(ab)*", objective="final+next-set+lm", **TINY)
    large = RunConfig(LDP1, alphabet=("a", "x", "y"), objective="final+next-set+lm", **TINY)
    pack = build_pack([small, large], [2, 3], [None, None])
    alone = build_pack([small], 2, [None])
    cut = pack.select_runs([0])
    for name, tensor in alone.state_dict().items():
        assert torch.equal(tensor, cut.state_dict()[name]), name


def test_objective_without_a_dfa_is_refused():
    from formal_rope.training.objectives import check_objective_dfas

    with pytest.raises(FormalRopeError, match="labels every prefix"):
        check_objective_dfas(parse_objective("prefix"), [None], "data:somewhere")
    check_objective_dfas(parse_objective("final"), [None], "data:somewhere")


def test_a_killed_run_with_auxiliary_heads_resumes_bit_identically(tmp_path):
    settings = {**TINY, "steps": 12}
    configs = [RunConfig(LDP1, alphabet=("a", "x", "y"), objective="prefix+next-set+lm:0.5", seed=seed, **settings)
               for seed in (0, 1)]
    whole_model = resumed_equals_whole(configs, tmp_path / "state", every=4, stop_step=7)
    assert any(name.startswith("auxiliary.") for name in whole_model.state_dict())


def test_train_and_sweep_take_the_objective(tmp_path, capsys):
    from sweeps_support import cli

    code, stdout, _ = cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "nope", "--seeds", "1", "--set",
                                   "objective=final,final+next-set:0.5", "--dry-run", "--json"])
    assert code == 0 and [run["objective"] for run in json.loads(stdout)] == ["final", "final+next-set:0.5"]
    code, stdout, _ = cli(capsys, ["train", "--lang", "(ab)*", "--pe", "nope", "--layers", "1", "--d-model", "16",
                                   "--heads", "2", "--steps", "2", "--batch-size", "4", "--test-lengths", "41..42",
                                   "--n-per-length", "2", "--objective", "next_set", "--no-save", "--json"])
    assert code == 0 and json.loads(stdout)["config"]["objective"] == "next-set"
    code, _, stderr = cli(capsys, ["train", "--lang", "(ab)*", "--objective", "final+lm:x"])
    assert code == 2 and "must be a number" in stderr
