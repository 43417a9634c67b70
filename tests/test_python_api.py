"""The Python API: everything the CLI does, called the way a researcher would from a notebook.

docs/python_api.md shows the same workflow; the CLI-command table there is `CLI_TO_PYTHON` below.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

from cli_support import torch_free_stdout
from formal_rope.errors import FormalRopeError

SUBPACKAGES = (
    "lang",
    "automata",
    "classes",
    "theory",
    "sampling",
    "precision",
    "certify",
    "compiler",
    "model",
    "storage",
    "run_config",
    "training",
    "scheduling",
    "sweeps",
    "diagnostics",
    "evaluation",
    "runs",
    "kernels",
    "export",
    "atlas",
)

# Each CLI command -> the public names (sub-package:name) that do its work. The commands in
# formal_rope/commands/*.py only parse options and print what these return.
CLI_TO_PYTHON = {
    "version": ["formal_rope:__version__"],
    "languages": ["lang:registry_entries", "lang:resolve_language", "automata:language_dfa", "classes:classify"],
    "parse": ["lang:resolve_language", "lang:parse_ltl", "lang:parse_regex", "lang:format_ltl", "lang:format_regex",
              "lang:ltl_fragment", "lang:ast_to_dict"],
    "dfa": ["automata:language_dfa", "automata:regex_to_dfa", "automata:ltl_to_dfa", "automata:load_att",
            "automata:to_table", "automata:to_json", "automata:to_dot"],
    "accepts": ["automata:accepts"],
    "equiv": ["automata:equivalent", "automata:union_alphabet"],
    "classify": ["classes:classify"],
    "sample": ["sampling:test_sets", "sampling:test_set", "sampling:decode", "sampling:write_sets"],
    "certify": ["certify:certified_range", "certify:scale_overflows"],
    "compile": ["compiler:compile_formula", "compiler:verify_compiled", "model:save_model", "compiler:compile_report",
                "compiler:CompileOptions", "compiler:VerificationOptions", "compiler:language_to_formula"],
    "formula": ["compiler:language_to_formula", "compiler:LanguageFormula", "compiler:NoFormulaFound",
                "compiler:formula_json"],
    "run": ["evaluation:load_runnable", "model:load_model", "model:evaluate", "model:read_metadata"],
    "train": ["run_config:RunConfig", "training:resolve_runs", "training:scale_overrides", "runs:run_training",
              "evaluation:evaluate_model", "training:load_checkpoint"],
    "sweep": ["sweeps:build_spec", "sweeps:load_sweep_file", "sweeps:expand_grid", "sweeps:resolve_grid",
              "sweeps:run_sweep"],
    "report": ["sweeps:load_results", "sweeps:aggregate", "sweeps:plot_n_star"],
    "reproduce": ["sweeps:paper_sweep_path", "sweeps:load_sweep_file", "sweeps:expand_grid", "sweeps:run_sweep",
                  "sweeps:aggregate", "sweeps:plot_n_star"],
    "export": ["export:export_model", "export:load_exported", "export:transformer_lens_obstacles"],
    "attack": ["evaluation:load_runnable", "evaluation:worst_case", "evaluation:SearchSettings", "evaluation:model_dfa",
               "evaluation:model_language"],
    "atlas": ["atlas:build_language_set", "atlas:atlas_request", "atlas:atlas_configs", "sweeps:run_sweep",
              "atlas:read_agreement", "atlas:agreement_markdown", "atlas:write_figure", "atlas:planned_runs",
              "atlas:calibrate", "atlas:estimate"],
    "phases": ["diagnostics:load_model_any", "diagnostics:capture_heads", "diagnostics:phases_summary",
               "diagnostics:decompose_head", "diagnostics:check_lemma1", "diagnostics:check_phase_options"],
}


def _resolve(qualified: str):
    package, name = qualified.split(":")
    module = importlib.import_module("formal_rope" if package == "formal_rope" else f"formal_rope.{package}")
    return module, getattr(module, name)


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_every_name_in_all_exists(package):
    module = importlib.import_module(f"formal_rope.{package}")
    exported = module.__all__
    assert len(exported) == len(set(exported)), f"duplicates in formal_rope.{package}.__all__"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"formal_rope.{package}.__all__ lists names it does not define: {missing}"
    # `from formal_rope.<package> import *` is what a notebook does; it must not fail either.
    namespace: dict = {}
    exec(f"from formal_rope.{package} import *", namespace)
    assert set(exported) <= set(namespace)


@pytest.mark.parametrize("command", sorted(CLI_TO_PYTHON))
def test_each_cli_command_has_exported_python_calls(command):
    for qualified in CLI_TO_PYTHON[command]:
        module, value = _resolve(qualified)
        name = qualified.split(":")[1]
        assert name in getattr(module, "__all__", [name]), f"{qualified} works but is not in __all__"
        if callable(value):
            doc = inspect.getdoc(value) or ""
            # A dataclass without its own docstring gets "Name(field, ...)": that documents nothing.
            assert doc and not doc.startswith(f"{name}("), f"{qualified} has no docstring"


def _own_docstring(value) -> str:
    """The docstring written for `value` itself: not inherited, not a dataclass's generated signature."""
    doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
    doc = inspect.cleandoc(doc or "")
    return "" if doc.startswith(f"{value.__name__}(") else doc


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_every_exported_callable_has_its_own_docstring(package):
    module = importlib.import_module(f"formal_rope.{package}")
    undocumented = [
        f"{package}:{name}"
        for name in module.__all__
        if callable(value := getattr(module, name)) and hasattr(value, "__name__") and not _own_docstring(value)
    ]
    assert not undocumented, f"exported without a docstring of their own: {undocumented}"


def test_own_docstring_rejects_generated_and_inherited_ones():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Bare:
        value: int

    class Child(Bare):
        pass

    def documented():
        """Says something."""

    assert Bare.__doc__.startswith("Bare(") and _own_docstring(Bare) == ""
    assert _own_docstring(Child) == "" and _own_docstring(documented) == "Says something."


def test_cli_table_covers_every_registered_command():
    from typer.main import get_command

    from formal_rope.cli import app

    assert set(get_command(app).commands) == set(CLI_TO_PYTHON)


def test_torch_free_stages_stay_torch_free_with_their_exports():
    """Exporting names must not drag torch into packages that promise not to import it."""
    torch_free_stdout(
        "def run():\n"
        "    import formal_rope.lang, formal_rope.automata, formal_rope.classes, formal_rope.sampling\n"
        "    import formal_rope.precision, formal_rope.certify, formal_rope.model, formal_rope.compiler\n"
        "    import formal_rope.training, formal_rope.sweeps, formal_rope.export, formal_rope.theory\n"
        "    import formal_rope.atlas\n"
        "    from formal_rope.run_config import RunConfig\n"
        "    from formal_rope.training import scale_overrides\n"
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda: importlib.import_module("formal_rope.lang").parse_regex("(ab"),
        lambda: importlib.import_module("formal_rope.lang").parse_ltl("P(c)", ("a", "b")),
        lambda: importlib.import_module("formal_rope.automata").accepts(_ab_star_dfa(), ["abc"]),
        lambda: importlib.import_module("formal_rope.classes").classify(_ab_star_dfa(), max_monoid_size=2),
        lambda: importlib.import_module("formal_rope.sampling").test_set(_ab_star_dfa(), 4, 4, near_miss_fraction=2.0),
        lambda: importlib.import_module("formal_rope.certify").certified_range(0, 1.0, 1e4, "fp32"),
        lambda: importlib.import_module("formal_rope.certify").certified_range(1, 1.0, 1e4, "fp99"),
        lambda: importlib.import_module("formal_rope.compiler").compile_formula(
            importlib.import_module("formal_rope.lang").parse_ltl("a S b"), ("a", "b")),
        lambda: importlib.import_module("formal_rope.model").load_model("no/such/model.zip"),
        lambda: importlib.import_module("formal_rope.training").scale_overrides("huge"),
        lambda: importlib.import_module("formal_rope.run_config.config").check_config(
            importlib.import_module("formal_rope.run_config").RunConfig("(ab)*", pe="alibi")),
        lambda: importlib.import_module("formal_rope.sweeps").load_results("no/such/results"),
        lambda: importlib.import_module("formal_rope.sweeps").paper_sweep_path("table3"),
        lambda: importlib.import_module("formal_rope.run_config").RunConfig.from_dict({"language": "a", "bogus": 1}),
        lambda: importlib.import_module("formal_rope.run_config").RunConfig.from_dict({"pe": "rope"}),
        lambda: _evaluate_tiny_model(mode="zz"),
        lambda: importlib.import_module("formal_rope.evaluation").evaluate_sets(
            _tiny_model(), [], decode=str, mode="zz"),
        lambda: importlib.import_module("formal_rope.compiler").verify_compiled(_compiled_a(), verify_to=-5),
        lambda: importlib.import_module("formal_rope.compiler").verify_compiled(_compiled_a(), exhaustive_up_to=-1),
        lambda: importlib.import_module("formal_rope.compiler").verify_compiled(_compiled_a(), per_length=-2),
        lambda: importlib.import_module("formal_rope.compiler").verify_compiled(_compiled_a(), mode="zz"),
    ],
    ids=["regex syntax", "atom outside alphabet", "unknown symbol", "monoid too large", "near-miss fraction",
         "offset 0", "unknown format", "since not compilable", "missing model file", "unknown scale",
         "unknown positional encoding", "missing results folder", "unknown paper table", "unknown config key",
         "config without language", "unknown eval mode (evaluate_model)", "unknown eval mode (evaluate_sets)",
         "negative verify_to", "negative exhaustive_up_to", "negative per_length", "unknown verify mode"],
)
def test_bad_input_raises_formal_rope_error(call):
    with pytest.raises(FormalRopeError):
        call()


def _functions_taking_a_dfa():
    """(package:name, parameter) for every exported function of the DFA stages with a DFA parameter."""
    found = []
    for package in ("automata", "classes", "sampling"):
        module = importlib.import_module(f"formal_rope.{package}")
        for name in module.__all__:
            function = getattr(module, name)
            if inspect.isfunction(function):
                for parameter in inspect.signature(function).parameters.values():
                    if "DFA" in str(parameter.annotation):
                        found.append((f"{package}:{name}", parameter.name))
    return found


TAKES_A_DFA = _functions_taking_a_dfa()


def test_functions_taking_a_dfa_are_found():
    # The guard below is only as good as this discovery; these must be among what it checks.
    assert {("classes:classify", "dfa"), ("automata:equivalent", "b"), ("sampling:test_set", "dfa")} <= set(TAKES_A_DFA)


@pytest.mark.parametrize("qualified, argument", TAKES_A_DFA, ids=[f"{q}({a})" for q, a in TAKES_A_DFA])
def test_a_string_where_a_dfa_is_expected_says_how_to_build_one(qualified, argument):
    """classify("(ab)*") used to raise AttributeError from deep inside; now it names the fix."""
    _, function = _resolve(qualified)
    name = qualified.split(":")[1]
    arguments = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == argument:
            arguments[parameter.name] = "(ab)*"
        elif "DFA" in str(parameter.annotation):
            arguments[parameter.name] = _ab_star_dfa()
        elif parameter.default is parameter.empty:
            arguments[parameter.name] = 4  # lengths/counts; never reached, the DFA is checked first
    with pytest.raises(FormalRopeError) as error:
        function(**arguments)
    message = str(error.value)
    assert message.startswith(f"{name} expects a DFA for `{argument}`, got the string '(ab)*'")
    assert "language_dfa(resolve_language('(ab)*'))" in message and "regex_to_dfa" in message


def test_the_suggested_fix_builds_the_dfa():
    from formal_rope.automata import equivalent, language_dfa
    from formal_rope.classes import classify
    from formal_rope.lang import resolve_language

    with pytest.raises(FormalRopeError, match="got a Language"):
        classify(resolve_language("(ab)*"))  # a resolved language is not an automaton yet either
    dfa = language_dfa(resolve_language("(ab)*"))
    assert equivalent(dfa, _ab_star_dfa()).equivalent and classify(dfa).mod_k == 2


def _tiny_model():
    from formal_rope.run_config import RunConfig
    from formal_rope.training import build_model

    return build_model(RunConfig("(ab)*", layers=1, d_model=8, heads=1), 2, None)


def _evaluate_tiny_model(mode):
    from formal_rope.evaluation import evaluate_model
    from formal_rope.run_config import RunConfig
    from formal_rope.training import resolve_dfa

    config = RunConfig("(ab)*", layers=1, d_model=8, heads=1, test_min_length=2, test_max_length=3, n_per_length=2)
    return evaluate_model(_tiny_model(), config, resolve_dfa(config), mode=mode)


def _compiled_a():
    from formal_rope.compiler import compile_formula
    from formal_rope.lang import parse_ltl

    return compile_formula(parse_ltl("a"), ("a", "b"))


def test_compile_alphabet_errors_name_both_the_option_and_the_argument():
    from formal_rope.compiler import compile_formula
    from formal_rope.lang import parse_ltl

    for alphabet in (("a",), ()):
        with pytest.raises(FormalRopeError) as error:
            compile_formula(parse_ltl("a & P(b)", ("a", "b")), alphabet)
        assert "--alphabet / alphabet=" in str(error.value)


def test_certify_scan_cap_errors_name_both_the_option_and_the_argument():
    from formal_rope.certify import certified_range

    for max_length in (0, 2**25):
        with pytest.raises(FormalRopeError, match=r"max_length \(--max-length\)"):
            certified_range(1, 1.0, 1e4, "fp32", mode="realized", max_length=max_length)


def test_phases_selection_errors_name_both_the_argument_and_the_option():
    """resolve_heads/check_query are called from Python too: "--layer 3" alone was misleading there."""
    from formal_rope.diagnostics import resolve_heads

    layout = (("L1.mod:MOD_2^0", "L1.yesterday:Y(a)"), ())
    for layer, head, expected in [
        (3, None, r"layer 3 \(--layer\) does not exist"),
        (2, None, r"layer 2 \(--layer\) has no attention heads"),
        (None, "9", r"head 9 \(--head\) does not exist"),
        (None, "L1", r"\(--head\) matches several heads .* a layer \(--layer\)"),
        (None, "zz", r"no head named 'zz' \(--head\)"),
    ]:
        with pytest.raises(FormalRopeError, match=expected):
            resolve_heads(layout, layer, head)
    assert resolve_heads(layout, None, "y") == [(0, 1)]


def test_paper_sweep_path_finds_each_table_that_reproduce_runs():
    from formal_rope.sweeps import PAPER_TABLES, expand_grid, load_sweep_file, paper_sweep_path

    assert PAPER_TABLES == ("table2", "table4", "table5")
    for table in PAPER_TABLES:
        path = paper_sweep_path(table)
        assert path.name == f"{table}.toml" and path.is_file()
        spec, scale = load_sweep_file(path, "quick")
        assert spec.name == table and scale == "quick" and expand_grid(spec)
    with pytest.raises(FormalRopeError, match="table2, table4, table5"):
        paper_sweep_path("table2.toml")
    # The lookup is the library's now; the command module keeps no copy of its own.
    assert not hasattr(importlib.import_module("formal_rope.commands.sweep"), "sweeps_dir")


def test_config_and_eval_mode_errors_say_what_is_allowed():
    """The messages name what was wrong and what is allowed (the CLI prints them as they are)."""
    from formal_rope.run_config import RunConfig

    with pytest.raises(FormalRopeError, match="bogus") as error:
        RunConfig.from_dict({"language": "a", "bogus": 1})
    assert "eval_mode" in str(error.value)  # lists the known keys
    with pytest.raises(FormalRopeError, match="full, nstar"):
        _evaluate_tiny_model(mode="zz")
    config = RunConfig("(ab)*", periods=(2, 3), alphabet=("a", "b"))
    assert RunConfig.from_dict(config.to_dict()) == config  # valid dicts still round-trip


def _ab_star_dfa():
    from formal_rope.automata import regex_to_dfa
    from formal_rope.lang import parse_regex

    return regex_to_dfa(parse_regex("(ab)*"), ("a", "b"))


def test_researcher_workflow_end_to_end(tmp_path):
    """docs/python_api.md's example, step by step, asserting what each step must give."""
    from formal_rope.automata import accepts, equivalent, ltl_to_dfa, minimize, regex_to_dfa
    from formal_rope.certify import certified_range
    from formal_rope.classes import classify
    from formal_rope.compiler import compile_formula, verify_compiled
    from formal_rope.diagnostics import capture_heads, model_layout, phases_summary
    from formal_rope.evaluation import evaluate_model, load_runnable, n_star
    from formal_rope.lang import format_ltl, ltl_fragment, parse_ltl, parse_regex
    from formal_rope.model import evaluate, save_model
    from formal_rope.precision import f_large
    from formal_rope.run_config import RunConfig
    from formal_rope.runs import run_training
    from formal_rope.sampling import decode, test_sets
    from formal_rope.training import load_checkpoint, resolve_dfa

    alphabet = ("a", "b")
    # 1. Parse: the regex (ab)* and an LTL[P,MOD] formula meant to define the same language.
    regex = parse_regex("(ab)*")
    formula = parse_ltl("!P((a & MOD_2^0) | (b & MOD_2^1)) & MOD_2^1")
    assert ltl_fragment(formula) == "LTL[P,MOD]"
    assert parse_ltl(format_ltl(formula, "ascii")) == formula  # the printer round-trips

    # 2. Minimal DFAs; the formula and the regex define the same language.
    dfa = minimize(regex_to_dfa(regex, alphabet))
    assert dfa.n_states == 3  # start/accepting, after a, sink
    assert equivalent(dfa, ltl_to_dfa(formula, alphabet)).equivalent
    assert not equivalent(dfa, regex_to_dfa(parse_regex("(ab)*a?"), alphabet)).equivalent

    # 3. Classify: in LTL[P,MOD] with block length 2, not in LTL[P], star-free.
    classes = classify(dfa)
    assert (classes.ltl_p, classes.ltl_p_mod, classes.mod_k, classes.star_free) == (False, True, 2, True)
    assert classes.to_dict()["witness"]["ltl_p"]["explanation"]  # a reason for each "no"

    # 4. A labelled test set (what `sample` writes); odd lengths have no positive string.
    sets = test_sets(dfa, [6, 7, 12], 8, seed=0)
    assert [s.length for s in sets] == [6, 7, 12]
    assert sets[0].labels.sum() == 4 and not sets[1].labels.any() and "only negative" in sets[1].note
    strings = [text for labelled in sets for text in decode(labelled.symbols, dfa.alphabet)]
    labels = np.concatenate([labelled.labels for labelled in sets])
    assert (accepts(dfa, strings) == labels).all()

    # 5. Compile the formula into an exact transformer and verify it against the DFA.
    compiled = compile_formula(formula, alphabet, fmt="fp32")
    verification = verify_compiled(compiled, exhaustive_up_to=6, verify_to=40, per_length=4)
    assert verification.ok and verification.disagreements == 0 and verification.verified_strings > 2**6
    assert compiled.certified_length is None  # no Y heads: exact at every length

    # 6. Run the compiled model on the sampled strings: it agrees with DFA membership.
    result = evaluate(compiled.ir, strings, fmt="fp32")
    assert (np.asarray(result.accepted) == labels).all()
    model_file = save_model(compiled.ir, tmp_path / "ab_star.zip")
    assert load_runnable(model_file).classify(strings) == labels.tolist()  # what `run` does

    # 7. Certify a RoPE offset head (eq. 10), and see the compiler use the same certificate.
    large = f_large("fp32")
    too_small = certified_range(1, 1.0, 0.6 * large, "fp32")
    certificate = certified_range(1, 1.0, 1e4, "fp32")
    assert too_small.n_max < certificate.n_max
    assert certificate.n_max == certified_range(1, 1.0, 1e4, "fp32", mode="realized", max_length=64).n_max
    previous = compile_formula(parse_ltl("Y(a)"), alphabet, scale=1e4, certify_mode="ideal")
    assert previous.certified_length == certificate.n_max
    beyond = certificate.n_max + 40
    checked = verify_compiled(previous, exhaustive_up_to=4, verify_to=beyond, per_length=4)
    assert checked.first_disagreement_inside is None  # exact wherever it is certified

    # 8. Train a tiny RoPE classifier (seconds on one core) and read N* off its per-length accuracy.
    config = RunConfig("(ab)*", pe="rope", steps=30, batch_size=16, layers=1, d_model=8, heads=1, lr=1e-2,
                       train_max_length=8, test_min_length=9, test_max_length=14, n_per_length=4)
    run, model = run_training(config, progress=False, checkpoint_path=tmp_path / "tiny.zip")
    assert run.status == "ok" and run.steps_done == 30
    assert [r.length for r in run.per_length] == list(range(9, 15))
    assert run.n_star == n_star([r.length for r in run.per_length], [r.accuracy for r in run.per_length])
    again = evaluate_model(model, config, resolve_dfa(config))  # deterministic re-evaluation
    assert (again.n_star, again.per_length) == (run.n_star, run.per_length)
    checkpoint = load_checkpoint(tmp_path / "tiny.zip")
    assert checkpoint.config == config and checkpoint.result.n_star == run.n_star
    assert checkpoint.classify(strings) == load_runnable(tmp_path / "tiny.zip").classify(strings)

    # 9. Phases of the compiled model's rotary (MOD) heads: the decomposition reproduces the scores.
    layout = model_layout(compiled.ir)
    assert any("mod" in name for name in layout[0])
    summary = phases_summary(capture_heads(compiled.ir, "abab"), query=None, epsilon=0.25)
    assert summary["heads"], "the MOD heads rotate pairs, so there is something to decompose"
    for head in summary["heads"]:
        assert head["max_abs_error"] <= 1e-5
        assert head["lemma1"]["violations"] == 0


def test_docs_example_runs(capsys):
    """docs/python_api.md's workflow block runs as written (the guide must not rot)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "python_api.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/python_api.md", "exec"), {"__name__": "docs_example"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "LTL[P,MOD]"
    assert printed[1] == "False True 2 True"


def test_compile_formula_accepts_formula_text():
    # Issue 9: compile_formula("P(a)", ...) needed an AST.
    from formal_rope.compiler import compile_formula
    from formal_rope.errors import ExpressionError
    from formal_rope.lang import parse_ltl

    from_text = compile_formula("P(a) & MOD_2^0", "ab")
    from_ast = compile_formula(parse_ltl("P(a) & MOD_2^0"), ("a", "b"))
    assert from_text.formula == from_ast.formula and from_text.alphabet == ("a", "b")
    assert compile_formula("ltl:Y(a)", "ab", certify_mode="ideal").certified_length is not None
    with pytest.raises(ExpressionError, match="not in the alphabet"):
        compile_formula("P(c)", "ab")


@pytest.mark.parametrize("field, value, message", [
    ("eval_mode", "worst-case", r"run_training\(config, worst_case=evaluation.SearchSettings"),
    ("eval_mode", "nstar,worst-case", "worst_case="),
    ("attention", "flash", "expected auto, triton or torch"),
    ("lr_schedule", "linear", "expected constant or cosine"),
    ("phase_precision", "fp16", "expected fp64 or fp32"),
    ("pe", "alibi", "unknown positional encoding 'alibi'"),
])
def test_a_config_value_no_run_can_use_is_refused_when_built(field, value, message):
    # Issue 35: RunConfig(eval_mode="worst-case") was accepted, and run_training then said "unknown eval mode".
    from formal_rope.run_config import RunConfig

    with pytest.raises(FormalRopeError, match=message):
        RunConfig("(ab)*", **{"pe": "rope", field: value})
    with pytest.raises(FormalRopeError, match="layer_pe: unknown positional encoding 'zz'"):
        RunConfig("(ab)*", layers=2, layer_pe=("rope", "zz"))


def test_the_worst_case_search_of_a_trained_run_is_run_training_s_argument():
    """What docs/python_api.md's attack row says works in Python: n_star_worst beside n_star."""
    from formal_rope.evaluation import SearchSettings
    from formal_rope.run_config import RunConfig
    from formal_rope.runs import run_training

    config = RunConfig("(ab)*", pe="rope", steps=2, layers=1, d_model=8, heads=1, batch_size=4,
                       test_min_length=41, test_max_length=43, n_per_length=2, nnch_samples=0)
    result, _ = run_training(config, progress=False, worst_case=SearchSettings(budget=4))
    assert result.n_star_worst is not None and result.n_star_worst <= result.n_star


def test_model_language_of_a_compiled_model_speaks_python():
    # Issue 35: model_language(compile_formula(...)) said "a hand-built model: give one with --lang".
    from dataclasses import replace

    from formal_rope.compiler import compile_formula
    from formal_rope.evaluation import model_language, worst_case

    compiled = compile_formula("P(a) & MOD_2^0", "ab")
    assert model_language(compiled) == model_language(compiled.ir) == "ltl:P(a) & MOD_2^0"
    assert worst_case(model=compiled, lengths=[1, 2, 3], budget=4, seed=0).n_star_worst == 3
    with pytest.raises(FormalRopeError, match=r"model_dfa\(model, language\)") as raised:
        model_language(replace(compiled.ir, metadata={}))
    assert "hand-built" not in str(raised.value)
