"""The files `formalrope export` copies next to the weights as `model.py`: one per model kind,
each importing torch and the standard library only (never formal_rope)."""
