"""MLRegTest's theory-backed expectations (README of the data set): SP and PT automata are
piecewise testable (J-trivial, hence R-trivial: LTL[P]); SF automata are star-free; Zp ones are not."""

from __future__ import annotations

import pytest

from formal_rope.automata import load_att
from formal_rope.classes import classify

EXPECTED_CLASSES = ("SP", "PT", "SF", "Zp")


@pytest.fixture(scope="module")
def classified(mlregtest_dir):
    results: dict[str, list] = {name: [] for name in EXPECTED_CLASSES}
    for path in sorted(mlregtest_dir.glob("*.att")):
        language_class = path.name.split(".")[2]
        if language_class in results:
            results[language_class].append((path.name, classify(load_att(path))))
    return results


def test_all_four_classes_are_present(classified):
    assert {name: len(items) for name, items in classified.items()} == {"SP": 60, "PT": 60, "SF": 20, "Zp": 20}


@pytest.mark.parametrize("language_class", ["SP", "PT"])
def test_piecewise_testable_automata_are_in_ltl_p(classified, language_class):
    for name, result in classified[language_class]:
        assert result.ltl_p and result.j_trivial and result.mod_k == 1, name
        assert result.witness == {}, name  # J-trivial: every class holds


def test_star_free_automata_are_aperiodic(classified):
    for name, result in classified["SF"]:
        assert result.star_free and "star_free" not in result.witness, name


def test_zp_automata_are_not_star_free(classified):
    for name, result in classified["Zp"]:
        assert not result.star_free, name
        assert result.witness["star_free"]["period"] > 1, name
