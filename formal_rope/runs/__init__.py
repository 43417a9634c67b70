"""Runs stage: configs -> trained, evaluated and (with `--eval worst-case`) searched runs -> results.

    results, model = run_pack(configs, progress=True)          # a pack of compatible runs, one computation
    result, model = run_training(config, progress=False)       # one run (a pack of one)

It sits above `training` (the model, the encodings, the loop), `evaluation` (length
generalisation, NNCH's score, the worst-case search), `scheduling` (which runs share a pack) and
`storage` (state, checkpoints, curves), which import nothing from here; the sweeps and the `train`
command run their runs here.
"""

from __future__ import annotations

from formal_rope.runs.pack import PackOptions, run_pack, run_training
from formal_rope.runs.search import search_pack, with_worst_case

__all__ = ["PackOptions", "run_pack", "run_training", "search_pack", "with_worst_case"]
