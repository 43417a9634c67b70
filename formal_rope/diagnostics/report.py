"""JSON-ready summaries of a head's phase decomposition (what `formalrope phases` prints).

Layer and head numbers in these summaries are 1-based, as in `formalrope compile`'s layer table.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from formal_rope.diagnostics.capture import CapturedHeads
from formal_rope.diagnostics.phases import HeadInputs, HeadPhases, Lemma1Check, check_lemma1, decompose_head
from formal_rope.errors import FormalRopeError


def _number(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def resolve_heads(layout: Sequence[Sequence[str]], layer: int | None, head: str | None) -> list[tuple[int, int]] | None:
    """Head selection (1-based layer, head number or name; `--layer`/`--head` on the CLI) → 0-based (layer, head) pairs.

    None/None → None (every rotary head). A layer alone → every head of that layer. A head number
    alone → that head in every layer that has it. A head name matches exactly or, failing that,
    as a unique case-insensitive substring of a head name (compiled heads: `L1.mod:MOD_2^0`).
    """
    n_layers = len(layout)
    if layer is not None and not 1 <= layer <= n_layers:
        raise FormalRopeError(f"layer {layer} (--layer) does not exist: the model has layers 1..{n_layers}")
    layers = range(n_layers) if layer is None else [layer - 1]
    if layer is not None and not layout[layer - 1]:
        # Compiled models have feed-forward-only layers (e.g. the snap after a Y gate).
        with_heads = ", ".join(str(layer_index + 1) for layer_index in range(n_layers) if layout[layer_index]) or "none"
        raise FormalRopeError(f"layer {layer} (--layer) has no attention heads (layers with heads: {with_heads})")
    if head is None:
        return None if layer is None else [(layer_index, h) for layer_index in layers
                                           for h in range(len(layout[layer_index]))]
    head = head.strip()
    if head.isascii() and head.isdigit():
        number = int(head)
        chosen = [(layer_index, number - 1) for layer_index in layers if 1 <= number <= len(layout[layer_index])]
        if not chosen:
            where = f"layer {layer}" if layer is not None else "any layer"
            counts = ", ".join(
                f"layer {layer_index + 1}: " + (f"1..{len(layout[layer_index])}" if layout[layer_index] else "none")
                for layer_index in layers
            )
            raise FormalRopeError(f"head {number} (--head) does not exist in {where} (heads per layer: {counts})")
        return chosen
    candidates = [(layer_index, h) for layer_index in layers for h, name in enumerate(layout[layer_index])]
    exact = [(layer_index, h) for layer_index, h in candidates if layout[layer_index][h] == head]
    if exact:
        return exact
    partial = [(layer_index, h) for layer_index, h in candidates if head.lower() in layout[layer_index][h].lower()]
    names = ", ".join(layout[layer_index][h] for layer_index, h in candidates)
    if not partial:
        raise FormalRopeError(f"no head named {head!r} (--head); heads: {names}")
    if len(partial) > 1:
        matched = ", ".join(layout[layer_index][h] for layer_index, h in partial)
        raise FormalRopeError(
            f"head {head!r} (--head) matches several heads ({matched}); give a longer name or a layer (--layer)"
        )
    return partial


def check_phase_options(top: int | None, epsilon: float) -> None:
    """FormalRopeError for a key count below 1 or a phase tolerance that is negative or not finite
    (checked before any work: the CLI calls it before loading the model)."""
    if top is not None and top < 1:
        raise FormalRopeError(f"top (--top) must be at least 1 (got {top})")
    if not (epsilon >= 0 and epsilon < float("inf")):
        raise FormalRopeError(f"epsilon (--epsilon) must be a finite non-negative angle in radians (got {epsilon})")


def check_query(captured: CapturedHeads, query: int | None) -> int:
    """The query position to show: default the readout (eos); bos (0) attends to nothing."""
    if query is None:
        return captured.readout
    if not 0 <= query < captured.length:
        raise FormalRopeError(
            f"query {query} (--query) is outside the input: positions run from 0 (bos) to {captured.readout} (eos)"
        )
    if query == 0:
        raise FormalRopeError("query 0 (--query) is bos, which attends to no key (strict causal mask); use 1..N+1")
    return query


def _lemma_summary(lemma: Lemma1Check, scale: float, mask: np.ndarray | None = None) -> dict[str, Any]:
    hypothesis = lemma.hypothesis if mask is None else lemma.hypothesis & mask
    violations = hypothesis & ~lemma.holds
    slack = lemma.slack[hypothesis]
    return {
        "epsilon": lemma.epsilon,
        "hypothesis_count": int(hypothesis.sum()),
        "violations": int(violations.sum()),
        "all_hold": bool(not violations.any()),
        "min_slack": float(slack.min()) if slack.size else None,
        "scale": scale,
    }


def head_summary(
    inputs: HeadInputs,
    positions: Sequence[str],
    query: int,
    epsilon: float,
    top: int | None = None,
) -> dict[str, Any]:
    """Everything the CLI shows for one head: pairs, head-wide error and Lemma 1, and the query's keys.

    The whole head is decomposed (every query against every key) for the head-wide numbers; the
    keys of `query` are sorted by the model's actual score, highest first (`top` keeps the first).
    """
    phases: HeadPhases = decompose_head(inputs)
    lemma = check_lemma1(phases, epsilon)
    hypothesis_entries = np.argwhere(lemma.hypothesis)
    row = phases.row(query)
    keys = inputs.visible_keys(query)
    order = keys[np.argsort(-phases.actual[row, keys], kind="stable")]
    if top is not None:
        order = order[:top]
    scale = inputs.scale
    key_rows = []
    for j in order.tolist():
        hypothesis = bool(lemma.hypothesis[row, j])
        contributing = phases.magnitude[row, j] > 0
        key_rows.append(
            {
                "key": j,
                "token": positions[j],
                "score": float(phases.score[row, j]),
                "actual": _number(phases.actual[row, j]),
                "abs_error": float(phases.abs_error[row, j]),
                "unrotated": float(phases.unrotated[row, j]),
                "s_max": float(scale * lemma.s_max[row, j]),
                "max_abs_delta": float(np.abs(phases.phase[row, j][contributing]).max(initial=0.0)),
                "lemma1": {
                    "hypothesis": hypothesis,
                    "bound": float(scale * lemma.bound[row, j]),
                    "holds": bool(lemma.holds[row, j]),
                },
                "pairs": [
                    {
                        "pair": p,
                        "rho": float(phases.magnitude[row, j, p]),
                        "content_phase": float(phases.content_phase[row, j, p]),
                        "position_phase": float(phases.position_phase[row, j, p]),
                        "delta": float(phases.phase[row, j, p]),
                        "term": float(phases.terms[row, j, p]),
                    }
                    for p in range(inputs.n_pairs)
                ],
            }
        )
    return {
        "layer": inputs.layer + 1,
        "head": inputs.head + 1,
        "name": inputs.name,
        "scale": scale,
        "dtype": inputs.dtype,
        "rotary": inputs.is_rotary,
        "pairs": [
            {
                "pair": p,
                "rotation": inputs.pair_kinds[p],
                "frequency": _number(inputs.frequencies[p]),
                "rotated": bool(inputs.rotated[p]),
            }
            for p in range(inputs.n_pairs)
        ],
        "recompute_error": inputs.recompute_error,
        "window": inputs.window,  # the layer's sliding window (None: global attention)
        # The (i, j) the head attends to (j < i, inside the window): what the errors and Lemma 1 cover.
        "visible_entries": int(phases.visible.sum()),
        "max_abs_error": phases.max_abs_error,
        "max_rel_error": phases.max_rel_error,
        "lemma1": {
            **_lemma_summary(lemma, scale),
            "entries": hypothesis_entries.tolist(),
        },
        "query": {
            "position": query,
            "token": positions[query],
            "max_abs_error": float(phases.abs_error[row].max(initial=0.0)),
            "keys_shown": len(key_rows),
            "keys_total": len(keys),  # the keys the query attends to: j < i, inside the layer's window
            "lemma1": _lemma_summary(
                lemma, scale, np.arange(len(phases.queries))[:, None] == row
            ),
            "keys": key_rows,
        },
    }


def phases_summary(
    captured: CapturedHeads,
    query: int | None,
    epsilon: float,
    top: int | None = None,
    on_head: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The JSON object of `formalrope phases`: the input and one `head_summary` per captured head.

    `on_head(k)` is called after the k-th head (1-based) is summarized (progress reporting).
    """
    check_phase_options(top, epsilon)
    query = check_query(captured, query)
    heads = []
    for number, inputs in enumerate(captured.heads, start=1):
        heads.append(head_summary(inputs, captured.positions, query, epsilon, top))
        if on_head is not None:
            on_head(number)
    return {
        "kind": captured.model_kind,
        "description": captured.description,
        "string": captured.string,
        "positions": list(captured.positions),
        "dtype": captured.dtype,
        # Compiled models: the certified length in this dtype (native arithmetic) and whether the
        # input is longer, so that the scores shown need not select what the construction intends.
        "certified_length": None if captured.certificate is None else captured.certificate.certified_length,
        "certified_length_is_lower_bound": None
        if captured.certificate is None
        else captured.certificate.is_lower_bound,
        "beyond_certified_length": captured.beyond_certified_length,
        "query": query,
        "epsilon": epsilon,
        "heads": heads,
    }
