"""The objective seam of the training loop: targets -> loss -> correct counts, in one place.

A training step hands its strings (one `TrainingBatch` per run, laid out as a `TokenLayout`) and
each run's DFA to `objective_targets` (every target the step is scored against: the eos labels and
what the position components read), and the model with those targets to `objective_step`, which
returns each run's loss, its count of correct eos verdicts and each component's loss. The loop
(`training.train`) calls these two and nothing else of an objective: a new one is a component here
and its name, weight and head in `run_config.objective`. The
components (`run_config.objective`) read these positions of `bos w1 .. wN eos` (SPEC §1: position i
attends to positions j < i only, so the prefix w1..wi is all of position i+1's past, and eos at
N+1 reads the whole string, as the classifier does):

- `final`: the readout's two logits at eos against the string's label (cross-entropy, mean over
  the batch) — the computation the trainer made before objectives existed, op for op;
- `prefix`: the readout at position i+1 against the label of w1..wi, for i = 0..N. The eos term is
  `final`'s (the same weight), and the earlier positions (i < N) add their mean over the batch's
  tokens;
- `next-set`: at position i+1 (i = 0..N), for every symbol s whether δ(q, s) is live (w1..wi·s
  extends to a member; q the state after w1..wi) and for eos whether q accepts. The eos column is
  the readout's logit difference (the same verdict `final` trains); binary cross-entropy, mean
  over the run's columns and then over the positions;
- `lm`: at position i (i = 0..N, bos for i = 0) the next symbol w(i+1), or eos after wN:
  cross-entropy over the run's symbols and eos, on positive strings only (mean over their tokens).
  Position i holds wi itself, so predicting w(i+1) there reads exactly the prefix w1..wi.

Targets are exact: read from the DFA's transitions, acceptance and live states along each string.
Correct counts are always those of the eos verdict: every objective is scored on the same question.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from formal_rope.automata.ops import coaccessible_states
from formal_rope.errors import FormalRopeError
from formal_rope.run_config.objective import Objective, head_width, parse_objective
from formal_rope.training.layout import TokenLayout


@dataclass(frozen=True, eq=False)
class ObjectiveTargets:
    """What a step is scored against: labels (R, B), each string's label in its run's batch order
    (`final`'s target and the reference of the correct counts); and what the position components
    read, per run-major token (R, L) of the step's layout (None for an objective read at eos alone):

    prefix_label: the label of the prefix read at the token (positions 1..N+1; 0 elsewhere);
    before_eos: tokens at positions 1..N (prefix readouts other than eos); read: positions 1..N+1;
    next_set: (R, L, S) the symbols that keep the prefix live (S: the pack's largest alphabet),
    symbol_columns: (R, S) the columns of each run's own alphabet;
    lm_target: the class (0: eos, 1 + s: symbol s) that follows the prefix ending at the token
    (positions 0..N), lm_read: those tokens of positive strings; lm_columns: (R, S + 1)."""

    labels: torch.Tensor
    prefix_label: torch.Tensor | None = None
    before_eos: torch.Tensor | None = None
    read: torch.Tensor | None = None
    next_set: torch.Tensor | None = None
    symbol_columns: torch.Tensor | None = None
    lm_target: torch.Tensor | None = None
    lm_read: torch.Tensor | None = None
    lm_columns: torch.Tensor | None = None


@dataclass(frozen=True, eq=False)
class ObjectiveStep:
    """One step's per-run loss (R,) (the weighted sum the optimiser follows), correct eos verdicts
    (R,), and each component's loss (R,) by name (detached)."""

    loss: torch.Tensor
    correct: torch.Tensor
    components: dict


def prefix_states(dfa, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(B, T + 1) the DFA's state after each prefix w1..wi (i = 0..T) of right-padded strings
    (symbols (B, T), PAD < 0 past each string's length: the state stays put there)."""
    symbols = np.asarray(symbols, dtype=np.int64)
    count, width = symbols.shape if symbols.ndim == 2 else (len(lengths), 0)
    states = np.empty((count, width + 1), dtype=np.int64)
    states[:, 0] = dfa.start
    table = np.asarray(dfa.transitions)
    for column in range(width):
        symbol = symbols[:, column]
        moved = table[states[:, column], np.maximum(symbol, 0)]
        states[:, column + 1] = np.where(symbol >= 0, moved, states[:, column])
    return states


def string_targets(dfa, symbols: np.ndarray, lengths: np.ndarray) -> dict:
    """Per string b and prefix length i (0..T): `accepts` (B, T + 1) whether w1..wi is in L,
    `continues` (B, T + 1, |Σ|) whether w1..wi·s extends to a member (δ(q, s) live), and `next`
    (B, T + 1) the class after w1..wi (1 + w(i+1), or 0 = eos at i = N; -1 past the string)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    states = prefix_states(dfa, symbols, lengths)
    live = coaccessible_states(dfa)
    following = np.full(states.shape, -1, dtype=np.int64)
    width = states.shape[1] - 1
    if width:
        padded = np.asarray(symbols, dtype=np.int64)[:, :width]
        following[:, :width] = np.where(padded >= 0, padded + 1, -1)
    following[np.arange(len(lengths)), lengths] = 0
    return {
        "accepts": np.asarray(dfa.accepting)[states],
        "continues": live[np.asarray(dfa.transitions)[states]],
        "next": following,
    }


def objective_targets(objective: Objective, batches, dfas, layout: TokenLayout, device="cpu") -> ObjectiveTargets:
    """The targets of one step: run r's strings `batches[r]` (symbols, lengths, labels; equal batch
    sizes), their labels as given and, for the position components, labelled by `dfas[r]` and
    placed at their tokens in `layout`'s run-major rows (`dfas` is not read for an objective read
    at eos alone)."""
    labels = torch.from_numpy(np.stack([np.asarray(b.labels, dtype=np.int64) for b in batches])).to(device)
    if not objective.reads_positions:
        return ObjectiveTargets(labels)
    runs, columns = layout.tokens.shape
    symbols_max = max(len(dfa.alphabet) for dfa in dfas)
    readout = layout.readout_rows.cpu().numpy() - np.arange(runs)[:, None] * columns  # (R, B): eos columns
    prefix_label = np.zeros((runs, columns), dtype=np.int64)
    before_eos = np.zeros((runs, columns), dtype=bool)
    read = np.zeros((runs, columns), dtype=bool)
    next_set = np.zeros((runs, columns, symbols_max), dtype=np.float32)
    lm_target = np.zeros((runs, columns), dtype=np.int64)
    lm_read = np.zeros((runs, columns), dtype=bool)
    symbol_columns = np.zeros((runs, symbols_max), dtype=bool)
    lm_columns = np.zeros((runs, symbols_max + 1), dtype=bool)
    for run, (batch, dfa) in enumerate(zip(batches, dfas)):
        lengths = np.asarray(batch.lengths, dtype=np.int64)
        positives = np.asarray(batch.labels, dtype=bool)
        targets = string_targets(dfa, batch.symbols, lengths)
        start = readout[run] - lengths - 1  # column of each string's bos
        # Every (string, prefix length i) with i <= N: read at column start + i + 1, lm at start + i.
        string = np.repeat(np.arange(len(lengths)), lengths + 1)
        prefix = np.arange(string.size) - np.repeat(np.cumsum(lengths + 1) - (lengths + 1), lengths + 1)
        at = start[string] + prefix + 1
        prefix_label[run, at] = targets["accepts"][string, prefix]
        before_eos[run, at] = prefix < lengths[string]
        read[run, at] = True
        next_set[run, at, : len(dfa.alphabet)] = targets["continues"][string, prefix]
        positive = positives[string]
        lm_target[run, at - 1] = targets["next"][string, prefix]
        lm_read[run, (at - 1)[positive]] = True
        symbol_columns[run, : head_width("next_set", len(dfa.alphabet))] = True
        lm_columns[run, : head_width("lm", len(dfa.alphabet))] = True
    as_tensor = lambda array: torch.from_numpy(array).to(device)  # noqa: E731
    return ObjectiveTargets(
        labels=labels, prefix_label=as_tensor(prefix_label), before_eos=as_tensor(before_eos), read=as_tensor(read),
        next_set=as_tensor(next_set), symbol_columns=as_tensor(symbol_columns),
        lm_target=as_tensor(lm_target), lm_read=as_tensor(lm_read), lm_columns=as_tensor(lm_columns),
    )


def check_objective_dfas(objective: Objective, dfas, language: str) -> None:
    """FormalRopeError when `objective` needs per-prefix labels and some run has no DFA to give them."""
    if objective.reads_positions and any(dfa is None for dfa in dfas):
        raise FormalRopeError(
            f"objective {objective.text} labels every prefix with the language's DFA, and {language} has none "
            "(data files without a language): give --lang too, or train with objective final"
        )


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per run (R,) the mean of values (R, L) over its masked tokens (0 where it has none)."""
    kept = torch.where(mask, values, torch.zeros((), dtype=values.dtype, device=values.device))
    return kept.sum(1) / mask.sum(1).clamp(min=1).to(values.dtype)


def objective_step(model, objective: Objective, layout: TokenLayout, targets: ObjectiveTargets) -> ObjectiveStep:
    """Each run's loss, correct eos verdicts and component losses for one step (see the module doc)."""
    labels = targets.labels
    runs, batch = labels.shape
    if not objective.reads_positions:
        logits = model.forward_layout(layout)  # (R, B, 2): the readout-only path
        final = F.cross_entropy(logits.reshape(-1, 2), labels.reshape(-1), reduction="none").view(runs, batch).mean(1)
        correct = (logits.detach().argmax(-1) == labels).sum(1)
        loss = final if objective.weight("final") == 1.0 else objective.weight("final") * final
        return ObjectiveStep(loss, correct, {"final": final.detach()})
    hidden = model.hidden_states(layout)  # (R, L, d)
    verdicts = model.readout(hidden)  # (R, L, 2): the eos readout at every token
    flat = verdicts.reshape(-1, 2)
    at_eos = flat.index_select(0, layout.readout_rows.reshape(-1)).view(runs, batch, 2)
    final = F.cross_entropy(at_eos.reshape(-1, 2), labels.reshape(-1), reduction="none").view(runs, batch).mean(1)
    components = {}
    if "final" in objective.names:
        components["final"] = final
    if "prefix" in objective.names:
        per_token = F.cross_entropy(flat, targets.prefix_label.reshape(-1), reduction="none").view(runs, -1)
        components["prefix"] = final + _masked_mean(per_token, targets.before_eos)
    if "next-set" in objective.names:
        symbols = model.auxiliary["next_set"](hidden)  # (R, L, S)
        symbol_loss = F.binary_cross_entropy_with_logits(symbols, targets.next_set, reduction="none")
        columns = targets.symbol_columns[:, None, :]
        symbol_sum = torch.where(columns, symbol_loss, torch.zeros((), dtype=symbol_loss.dtype,
                                                                 device=symbol_loss.device)).sum(-1)
        eos_logit = verdicts[..., 1] - verdicts[..., 0]
        eos_loss = F.binary_cross_entropy_with_logits(eos_logit, targets.prefix_label.to(eos_logit.dtype),
                                                      reduction="none")
        width = (targets.symbol_columns.sum(1) + 1).to(symbol_sum.dtype)[:, None]  # the run's symbols and eos
        components["next-set"] = _masked_mean((symbol_sum + eos_loss) / width, targets.read)
    if "lm" in objective.names:
        scores = model.auxiliary["lm"](hidden)  # (R, L, S + 1)
        scores = scores.masked_fill(~targets.lm_columns[:, None, :], float("-inf"))
        per_token = F.cross_entropy(scores.reshape(-1, scores.shape[-1]), targets.lm_target.reshape(-1),
                                    reduction="none").view(runs, -1)
        components["lm"] = _masked_mean(per_token, targets.lm_read)
    loss = sum(objective.weight(name) * value for name, value in components.items())
    correct = (at_eos.detach().argmax(-1) == labels).sum(1)
    return ObjectiveStep(loss, correct, {name: value.detach() for name, value in components.items()})


def resolve_objective(configs) -> Objective:
    """The objective every run of a pack trains with (a shared field: `scheduling.packs.SHARED_FIELDS`)."""
    texts = {config.objective for config in configs}
    if len(texts) != 1:
        raise FormalRopeError(f"runs of one pack train with one objective, got {', '.join(sorted(texts))}")
    return parse_objective(texts.pop())
