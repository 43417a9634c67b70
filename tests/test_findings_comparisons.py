"""docs/make_findings.py's tests blocks: every comparison docs/findings.md states is computed from
the table printed above it (the numbers a reader sees), and the committed blocks are current."""

import importlib.util
from pathlib import Path

import pytest

from formal_rope.sweeps.statistics import compare

REPO = Path(__file__).resolve().parent.parent


def _make_findings():
    spec = importlib.util.spec_from_file_location("make_findings", REPO / "docs" / "make_findings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLE = """| language | PE | base | runs | N* of each run | worst-case N* of each run |
|---|---|---|---|---|---|
| (ab)* | NoPE | – | 3 | 61, 57, 57 | 41, 41, 41 |
| (ab)* | RoPE_NP | 1e4 | 3 | 500, 500, 500 | 500, 500, 269 |
"""


def test_a_comparison_line_is_the_test_of_the_tables_per_run_values():
    module = _make_findings()
    lines = module.comparison_lines(TABLE, [(("(ab)*", "RoPE_NP", "1e4"), ("(ab)*", "NoPE", "–"))])
    assert len(lines) == 2  # N* and worst-case N*
    assert lines[0].startswith("- (ab)\\* RoPE_NP β 1e4 vs (ab)\\* NoPE: N* 500, 500, 500 vs 61, 57, 57; ")
    assert lines[0].endswith(compare([500, 500, 500], [61, 57, 57]).text("N*"))
    assert "p = 0.10, Cliff's δ = +1.00" in lines[0]  # 3 vs 3: the smallest two-sided p is 2/20
    assert lines[1].endswith(compare([500, 500, 269], [41, 41, 41]).text("worst-case N*"))


def test_a_comparison_with_a_missing_cell_is_left_out_and_said(capsys):
    module = _make_findings()
    assert module.comparison_lines(TABLE, [(("(ab)*", "RoPE_P"), ("(ab)*", "NoPE"))]) == []
    assert "left out" in capsys.readouterr().err


def test_a_tests_block_is_rewritten_from_its_table_and_nothing_else():
    module = _make_findings()
    text = f"<!-- table toy -->\n{TABLE}<!-- end toy -->\n\n<!-- tests toy -->\nstale\n<!-- end tests toy -->\n"
    module.COMPARISONS["toy"] = [(("(ab)*", "RoPE_NP", "1e4"), ("(ab)*", "NoPE", "–"))]
    try:
        new = module.with_comparisons(text, "toy")
    finally:
        del module.COMPARISONS["toy"]
    assert "stale" not in new and "N* 500, 500, 500 vs 61, 57, 57" in new
    assert new.startswith(f"<!-- table toy -->\n{TABLE}<!-- end toy -->")


@pytest.mark.parametrize("name", sorted(_make_findings().COMPARISONS))
def test_the_committed_findings_state_the_tests_of_their_own_tables(name):
    module = _make_findings()
    text = (REPO / "docs" / "findings.md").read_text()
    assert f"<!-- tests {name} -->" in text
    assert module.with_comparisons(text, name) == text, f"run python docs/make_findings.py: tests {name} is stale"
