"""Models out: any saved model (compiled zip or trained checkpoint) as safetensors + config.json +
one self-contained PyTorch file (`model.py`, torch and the standard library only).

`export_model(path, out)` writes the three files; `load_exported(out)` imports the written
`model.py` and loads the model with it (what a user without formal-rope does). TransformerLens's
HookedTransformer cannot express these models exactly (see `transformer_lens_obstacles`), so no
TransformerLens export is offered.
"""

from formal_rope.export.core import (
    EXPORT_FORMATS,
    ExportResult,
    export_model,
    load_exported,
    transformer_lens_obstacles,
)

__all__ = ["EXPORT_FORMATS", "ExportResult", "export_model", "load_exported", "transformer_lens_obstacles"]
