"""The positional-encoding registry: every row complete and true to the module its builder builds,
everything else derived from the rows, and the documented recipe for a new encoding working."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import formal_rope
from formal_rope.run_config import applies as applies_module
from formal_rope.run_config import config as config_module
from formal_rope.run_config.encodings import (
    BASE_ENCODINGS,
    ENCODINGS,
    EXPORT_KINDS,
    HYBRID_ENCODINGS,
    MIXABLE_ENCODINGS,
    PERIODIC_ENCODINGS,
    POSITIONAL_ENCODINGS,
    ROPE_FRACTION_ENCODINGS,
    Encoding,
    encoding,
    encoding_names,
    is_periodic,
    report_labels,
)
from formal_rope.training.encodings.base import PositionalEncoding
from formal_rope.training.encodings.builders import BUILDERS, PositionalSpec, build_positional
from formal_rope.training.encodings.phases import rope_frequencies
from formal_rope.training.layout import rectangular_layout

PACKAGE = Path(formal_rope.__file__).resolve().parent
DOCS = PACKAGE.parent / "docs" / "training.md"
STANDALONE = PACKAGE / "export" / "standalone" / "trained.py"


def _module(pe: str, **changes) -> PositionalEncoding:
    spec = PositionalSpec(pe=pe, d_model=16, heads=2, layers=2, periods=(2, 3) if is_periodic(pe) else None)
    module = build_positional(dataclasses.replace(spec, **changes))
    module.reset_run(0, torch.Generator().manual_seed(0))  # what Classifier.initialize does
    return module


def _tables(module: PositionalEncoding, length: int = 12):
    """What the module gives the model: its additive table and the first layer's per-token rotations."""
    tokens = torch.zeros(1, 1, length, dtype=torch.long)
    layout = rectangular_layout(tokens, torch.full((1, 1), length - 1))
    hidden = torch.randn(1, length, 16, generator=torch.Generator().manual_seed(0))
    return module.embedding(length, torch.device("cpu")), module.token_rotation(0, layout, hidden)


def _same(first, second) -> bool:
    return all((a is None and b is None) or (a is not None and b is not None and torch.equal(a, b))
               for a, b in zip(first, second))


@pytest.mark.parametrize("pe", POSITIONAL_ENCODINGS)
def test_every_row_is_complete_and_true_to_the_module_its_builder_builds(pe):
    row = encoding(pe)
    assert row.name == pe and row.label.strip() and row.help.strip()
    assert callable(BUILDERS[pe])
    # The standalone exported model.py computes this kind (it branches on the kind's name).
    assert row.export_kind in EXPORT_KINDS
    assert row.export_kind == "none" or f'"{row.export_kind}"' in STANDALONE.read_text(encoding="utf-8")
    module = _module(pe)
    assert isinstance(module, PositionalEncoding) and module.runs == 1
    additive, rotation = _tables(module)
    assert (additive is not None) == row.additive
    assert (rotation is not None) == row.export_kind.startswith("rotary_")
    # Per-head angles: from content (jof_projected) or learned per head (jof_learned, paper 000 §3.2).
    assert (rotation is not None and rotation.dim() == 3) == (row.content_angles or pe == "jof_learned")
    assert ("periods" in module.describe()) == row.periodic
    # A field the row says applies changes the tables; RunConfig keeps exactly those fields.
    assert (not _same(_tables(module), _tables(_module(pe, base=7.0)))) == row.takes_base
    assert (not _same(_tables(module), _tables(_module(pe, rope_fraction=0.25)))) == row.takes_rope_fraction
    if row.periodic:
        assert not _same(_tables(module), _tables(_module(pe, periods=(5,))))
    run = config_module.RunConfig("(ab)*", pe=pe)
    assert (run.applies("base"), run.applies("periods"), run.applies("rope_fraction")) == (
        row.takes_base, row.periodic, row.takes_rope_fraction)


def test_every_row_has_one_builder_and_every_name_list_is_read_from_the_rows():
    assert list(BUILDERS) == list(ENCODINGS)  # the builder table and the registry name the same encodings
    assert HYBRID_ENCODINGS == tuple(pe for pe, row in ENCODINGS.items() if not row.additive)
    assert MIXABLE_ENCODINGS == tuple(pe for pe, row in ENCODINGS.items() if row.mixable)
    assert ROPE_FRACTION_ENCODINGS == tuple(pe for pe, row in ENCODINGS.items() if row.takes_rope_fraction)


def test_a_row_that_is_incomplete_or_contradicts_itself_is_refused():
    good = dict(name="toy", label="Toy", help="a toy", export_kind="rotary_fixed", report_rank=99)
    assert Encoding(**good).name == "toy"
    for missing in good:
        with pytest.raises(TypeError):
            Encoding(**{key: value for key, value in good.items() if key != missing})
    for change, message in [
        ({"label": " "}, "label and help"),
        ({"help": ""}, "label and help"),
        ({"name": "Toy PE"}, "name must be"),
        ({"export_kind": "rotary_spiral"}, "export_kind 'rotary_spiral' is not one of"),
        ({"additive": True}, "contradicts export_kind"),
        ({"periodic": True}, "contradicts export_kind"),
    ]:
        with pytest.raises(ValueError, match=message):
            Encoding(**{**good, **change})


def test_the_config_tuples_labels_and_help_lists_are_read_from_the_rows():
    assert POSITIONAL_ENCODINGS == tuple(ENCODINGS) == config_module.POSITIONAL_ENCODINGS
    assert set(BASE_ENCODINGS) == {pe for pe, row in ENCODINGS.items() if row.takes_base}
    assert set(PERIODIC_ENCODINGS) == {pe for pe in ENCODINGS if is_periodic(pe)} == {"rope_p", "sipe_p"}
    assert applies_module.FIELD_APPLIES_TO["periods"] == PERIODIC_ENCODINGS
    assert not is_periodic("alibi") and not is_periodic("rope")
    from formal_rope.sweeps.report import PE_LABELS

    assert PE_LABELS == report_labels() and set(PE_LABELS) == set(ENCODINGS)
    paper = {"nope": "NoPE", "rope": "RoPE_NP", "rope_p": "RoPE_P", "sipe": "SiPE_NP", "sipe_p": "SiPE_P",
             "partial_rope": "partial RoPE", "jof_fixed": "JoFormer (fixed)", "jof_learned": "JoFormer (learned)",
             "jof_projected": "JoFormer (projected)"}
    # Report tables keep the core paper's order and names (not the table's order).
    assert list({pe: label for pe, label in PE_LABELS.items() if pe in paper}.items()) == list(paper.items())
    from typer.main import get_command

    from formal_rope.cli import app

    commands = get_command(app).commands
    helps = {name: next(p.help for p in commands[name].params if "--pe" in p.opts) for name in ("train", "sweep")}
    assert helps == {"train": f"Positional encoding: {encoding_names()}.",
                     "sweep": f"Positional encodings, comma-separated (e.g. rope,rope_p): {encoding_names()}."}


def test_the_docs_table_lists_every_encoding_with_its_rows_help():
    text = DOCS.read_text(encoding="utf-8")
    table = text[text.index("| `--pe` | what | where |"):]
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+?) \| [^|]+ \|$", table[: table.index("\n\n")], re.MULTILINE))
    assert rows == {pe: row.help for pe, row in ENCODINGS.items()}


# ------------------------------------------------------------------------------------ the recipe


def _doc_snippets() -> tuple[str, str, str]:
    """The worked example of docs/training.md ("How to extend"): the new file, the row, the builder entry."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## How to extend: add a positional encoding"):]
    section = section[: section.index("\n## ")]
    family, row, entry = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[:3]
    return family, row, entry


def _insert_above(path: Path, marker: str, text: str) -> None:
    source = path.read_text(encoding="utf-8")
    assert source.count(marker) == 1
    path.write_text(source.replace(marker, text.rstrip("\n") + "\n" + marker), encoding="utf-8")


def test_the_documented_recipe_adds_an_encoding_that_trains_checkpoints_exports_and_reports(tmp_path):
    """Apply the docs' snippets to a copy of the package (the family's new file, its row where the
    registry says, its builder where the builder table says), then train, checkpoint, export and
    report the new encoding in a fresh interpreter: nothing else is needed."""
    copy = tmp_path / "formal_rope"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    family, row, entry = _doc_snippets()
    package = copy / "training" / "encodings"
    (package / "p_rope.py").write_text(family, encoding="utf-8")
    _insert_above(copy / "run_config" / "encodings.py", "        # New encodings: add a row above this line", row)
    _insert_above(package / "builders.py", "    # New encodings: add a builder above this line", entry)
    families = "from formal_rope.training.encodings import joformer, nope, rotary, sinusoidal\n"
    _insert_above(package / "builders.py", families, "from formal_rope.training.encodings import p_rope\n")
    script = textwrap.dedent(f"""
        import io, json, sys
        from contextlib import redirect_stdout
        import torch
        import formal_rope
        assert formal_rope.__file__.startswith({str(tmp_path)!r}), formal_rope.__file__
        torch.set_num_threads(1)
        from formal_rope.cli import main
        from formal_rope.export import export_model, load_exported
        from formal_rope.sweeps.report import PE_LABELS
        from formal_rope.runs import run_training
        from formal_rope.run_config import RunConfig
        from formal_rope.training import load_checkpoint
        from formal_rope.run_config.applies import FIELD_APPLIES_TO
        from formal_rope.run_config.encodings import POSITIONAL_ENCODINGS

        config = RunConfig("(ab)*", pe="p_rope", base=100.0, rope_fraction=0.5, steps=4, batch_size=8, layers=1,
                           d_model=16, heads=2, test_min_length=5, test_max_length=6, n_per_length=4)
        result, model = run_training(config, progress=False, checkpoint_path={str(tmp_path / "p.zip")!r})
        words = ["", "ab", "abab", "aab", "abba"]
        export_model({str(tmp_path / "p.zip")!r}, {str(tmp_path / "out")!r})
        out = io.StringIO()
        try:
            with redirect_stdout(out):
                main(["train", "--help"])
        except SystemExit:
            pass
        print(json.dumps({{
            "listed": "p_rope" in POSITIONAL_ENCODINGS, "label": PE_LABELS["p_rope"],
            "applies": [config.base, config.rope_fraction, "p_rope" in FIELD_APPLIES_TO["rope_fraction"]],
            "status": result.status, "steps": result.steps_done,
            "frequencies": model.positional.frequencies.tolist(),
            "loaded": load_checkpoint({str(tmp_path / "p.zip")!r}).classify(words),
            "exported": load_exported({str(tmp_path / "out")!r}).classify(words),
            "in_help": "p_rope" in out.getvalue(),
        }}))
    """)
    environment = {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "400"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=environment, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["listed"] and report["in_help"] and report["label"] == "p-RoPE"
    assert report["applies"] == [100.0, 0.5, True]
    assert report["status"] == "ok" and report["steps"] == 4
    # p-RoPE at p = 0.5 over 4 pairs per head: RoPE's two highest frequencies, the other two removed.
    expected = np.concatenate([rope_frequencies(100.0, 4)[:2], [0.0, 0.0]])
    assert np.array_equal(np.asarray(report["frequencies"][0]), expected)
    assert report["exported"] == report["loaded"] and len(report["loaded"]) == 5
