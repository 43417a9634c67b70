"""Models out: `formalrope export` writes safetensors + config.json + a torch-only model.py whose
verdicts are `formalrope run`'s (compiled models: readout values bitwise equal to the native evaluator)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from formal_rope.compiler import compile_formula
from formal_rope.export import export_model, load_exported
from formal_rope.lang.parser import parse_ltl
from formal_rope.model.evaluate import evaluate
from formal_rope.model.io import save_model
from formal_rope.run_config.encodings import POSITIONAL_ENCODINGS, is_periodic
from tests.cli_support import run_main


def _verdicts(out: str) -> list[bool]:
    """The accept/reject verdicts of `formalrope run --json` (one object per string under results)."""
    return [entry["accepted"] for entry in json.loads(out)["results"]]

def _random_words(alphabet, count, longest, seed=0):
    rng = np.random.default_rng(seed)
    words = []
    for _ in range(count):
        length = int(rng.integers(0, longest + 1))
        words.append(tuple(alphabet[i] for i in rng.integers(0, len(alphabet), length)))
    return words


@pytest.fixture(scope="module")
def compiled_pmy(tmp_path_factory):
    """A compiled model with P, MOD and Y heads (rotary pairs: unrotated, periodic and angle)."""
    alphabet = ("a", "b")
    formula = parse_ltl("(P(a) & MOD_3^1) | Y(b)", alphabet=alphabet)
    compiled = compile_formula(formula, alphabet, fmt="fp32")
    kinds = {pair.kind for layer in compiled.ir.layers for head in layer.heads for pair in head.rotary}
    assert {"periodic", "angle"} <= kinds
    path = tmp_path_factory.mktemp("compiled") / "m.zip"
    save_model(compiled.ir, path)
    return compiled, path


@pytest.mark.parametrize("dtype", [None, "bf16", "fp64"])
def test_compiled_export_matches_the_native_evaluator_bitwise(compiled_pmy, tmp_path, dtype):
    compiled, path = compiled_pmy
    result = export_model(path, tmp_path / "out", dtype=dtype)
    assert sorted(p.rsplit("/", 1)[-1] for p in result.files) == ["config.json", "model.py", "model.safetensors"]
    net = load_exported(tmp_path / "out")
    words = ["".join(w) for w in _random_words(("a", "b"), 200, 60)] + ["", "a", "b", "ab", "ba"]
    fmt = dtype or "fp32"
    native = evaluate(compiled.ir, words, fmt=fmt, mode="native")
    assert np.array_equal(np.array(net.scores(words)), native.readout)
    assert net.classify(words) == native.to_list()


def test_compiled_export_gives_formalrope_run_verdicts(compiled_pmy, tmp_path, capsys):
    compiled, path = compiled_pmy
    export_model(path, tmp_path / "out")
    net = load_exported(tmp_path / "out")
    words = ["".join(w) for w in _random_words(("a", "b"), 60, 40, seed=1)]
    code, out, _ = run_main(capsys, ["run", str(path), *words, "--json"])  # default: emulated fp32
    assert code == 0 and net.classify(words) == _verdicts(out)
    assert sum(_verdicts(out)) not in (0, len(words))  # both verdicts occur


def test_multi_character_symbols_are_read_like_formalrope_run(tmp_path, capsys):
    alphabet = ("open", "long name")
    formula = parse_ltl("P('open') & MOD_2^0", alphabet=alphabet)
    path = tmp_path / "m.zip"
    save_model(compile_formula(formula, alphabet).ir, path)
    export_model(path, tmp_path / "out")
    net = load_exported(tmp_path / "out")
    words = ["open", "open 'long name'", "'long name' 'long name' open", "", "'long name'"]
    code, out, _ = run_main(capsys, ["run", str(path), *words, "--json"])
    assert code == 0 and net.classify(words) == _verdicts(out)
    assert net.classify([("open", "long name")]) == net.classify(["open 'long name'"])


def test_exported_module_needs_torch_alone(compiled_pmy, tmp_path):
    _, path = compiled_pmy
    export_model(path, tmp_path / "out")
    script = (
        "import sys; sys.path.insert(0, '.'); import model\n"
        "net = model.load('.')\n"
        "print(net.classify(['ab', 'ba', 'aab']))\n"
        "assert not [m for m in sys.modules if m.startswith('formal_rope')], 'formal_rope was imported'\n"
    )
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path / "out", capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    source = (tmp_path / "out" / "model.py").read_text()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"__future__", "json", "re", "struct", "math", "pathlib", "torch"}


def test_standalone_safetensors_reader_agrees_with_the_library(compiled_pmy, tmp_path):
    from safetensors.torch import load_file

    _, path = compiled_pmy
    for dtype in ("fp32", "bf16"):
        export_model(path, tmp_path / dtype, dtype=dtype)
        mine = load_exported(tmp_path / dtype)
        module = sys.modules[type(mine).__module__]
        ours = module.read_safetensors(tmp_path / dtype / "model.safetensors")
        theirs = load_file(str(tmp_path / dtype / "model.safetensors"))
        assert ours.keys() == theirs.keys()
        for name in ours:
            assert ours[name].dtype == theirs[name].dtype and torch.equal(ours[name], theirs[name]), name


def test_export_cli_and_transformer_lens_refusal(compiled_pmy, tmp_path, capsys):
    _, path = compiled_pmy
    code, out, _ = run_main(capsys, ["export", str(path), "--out", str(tmp_path / "o"), "--json"])
    summary = json.loads(out)
    assert code == 0 and summary["kind"] == "compiled" and summary["dtype"] == "float32" and len(summary["files"]) == 3
    code, _, err = run_main(
        capsys, ["export", str(path), "--out", str(tmp_path / "tl"), "--format", "transformer-lens"]
    )
    assert code == 2 and "strict-causal" in err and "periodic" in err and not (tmp_path / "tl").exists()
    code, _, err = run_main(capsys, ["export", str(path), "--out", str(tmp_path / "x"), "--dtype", "fp8e4m3"])
    assert code == 2 and "no torch dtype" in err
    code, _, err = run_main(capsys, ["export", str(tmp_path / "missing.zip"), "--out", str(tmp_path / "y")])
    assert code == 2 and "does not exist" in err


# ------------------------------------------------------------------------------------ trained models
TRAINED_PES = POSITIONAL_ENCODINGS


@pytest.fixture(scope="module")
def trained_checkpoints(tmp_path_factory):
    """One tiny trained checkpoint per positional encoding (a few steps: what matters is that the
    weights, learned frequencies and content projectors are no longer at their initial values)."""
    from formal_rope.run_config.config import RunConfig
    from formal_rope.runs import run_training

    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("trained")
    paths = {}
    for pe in TRAINED_PES:
        config = RunConfig(language="(ab)*", pe=pe, steps=25, batch_size=16, layers=2, d_model=16, heads=2, lr=3e-3,
                           periods=(2, 3) if is_periodic(pe) else None, base=50.0,
                           test_min_length=41, test_max_length=42, n_per_length=4)
        paths[pe] = folder / f"{pe}.zip"
        run_training(config, progress=False, checkpoint_path=paths[pe])
    return paths


def _checkpoint_logits(path, words):
    from formal_rope.automata import encode_strings
    from formal_rope.training.model import encode_fixed_length
    from formal_rope.training.trained_classifier import load_checkpoint

    loaded = load_checkpoint(path)
    rows = []
    with torch.no_grad():
        for word in words:
            symbols, lengths = encode_strings([word], loaded.alphabet)
            tokens, readout = encode_fixed_length(symbols[:, : lengths[0]], len(loaded.alphabet))
            rows.append(loaded.model(tokens, readout)[0].tolist())
    return torch.tensor(rows)


@pytest.mark.parametrize("pe", TRAINED_PES)
def test_trained_export_gives_formalrope_run_verdicts(trained_checkpoints, tmp_path, capsys, pe):
    path = trained_checkpoints[pe]
    result = export_model(path, tmp_path / "out")
    assert result.kind == "trained" and result.dtype == "float32"
    net = load_exported(tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["pe"] == pe and config["positional"]["rotate_values"] == pe.startswith("jof")
    words = ["".join(w) for w in _random_words(("a", "b"), 80, 45, seed=2)] + ["", "ab", "abab"]
    code, out, _ = run_main(capsys, ["run", str(path), *words, "--json"])
    assert code == 0 and net.classify(words) == _verdicts(out)
    mine = torch.tensor(net.logits(words))
    assert torch.allclose(mine, _checkpoint_logits(path, words), rtol=0, atol=1e-5)


def test_trained_export_carries_what_training_changed(trained_checkpoints, tmp_path):
    """The learned frequencies and the content projectors are exported as trained (not re-derived)."""
    from safetensors.torch import load_file

    from formal_rope.training.encodings.phases import rope_frequencies

    export_model(trained_checkpoints["jof_learned"], tmp_path / "learned")
    learned = load_file(str(tmp_path / "learned" / "model.safetensors"))["positional.learned_frequencies"]
    assert learned.dtype == torch.float64 and learned.shape == (2, 2, 4)  # (layers, heads, pairs): per head
    assert not np.allclose(learned.numpy(), np.tile(rope_frequencies(50.0, 4), (2, 2, 1)), rtol=0, atol=1e-6)
    assert not torch.equal(learned[:, 0], learned[:, 1])  # the heads learned apart, and export keeps them so
    export_model(trained_checkpoints["jof_projected"], tmp_path / "projected")
    out_weight = load_file(str(tmp_path / "projected" / "model.safetensors"))["positional.projectors.0.out.weight"]
    assert out_weight.abs().max() > 0  # zero at initialisation


def test_trained_export_refuses_other_dtypes_and_transformer_lens(trained_checkpoints, tmp_path, capsys):
    path = trained_checkpoints["rope"]
    code, _, err = run_main(capsys, ["export", str(path), "--out", str(tmp_path / "a"), "--dtype", "bf16"])
    assert code == 2 and "fp32" in err
    code, _, err = run_main(capsys, ["export", str(path), "--out", str(tmp_path / "b"), "--format", "transformer-lens"])
    assert code == 2 and "strict-causal" in err and "JoFormer" in err


@pytest.mark.parametrize("pe", ["jof_projected", "rope_p"])
def test_checkpoints_written_before_packing_export_too(tmp_path, pe):
    """Format-1 checkpoints (no run axis) export to the same network: logits recorded when they were written."""
    from pathlib import Path

    data = Path(__file__).parent / "data"
    expected = json.loads((data / "format1_logits.json").read_text())[pe]
    export_model(data / f"format1_{pe}.zip", tmp_path / "out")
    net = load_exported(tmp_path / "out")
    assert torch.allclose(
        torch.tensor(net.logits(expected["strings"])), torch.tensor(expected["logits"]), rtol=0, atol=1e-5
    )
