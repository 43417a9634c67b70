"""`report --html`: the self-contained results page (formal_rope.sweeps.results_page), read as
HTML by the standard library's parser and rendered by a real headless Chromium."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from browser_support import Browser, browser_path
from formal_rope.atlas.render import agreement_cells_of_runs
from formal_rope.automata import language_dfa
from formal_rope.lang.source import resolve_language
from formal_rope.sweeps.grid import expand_grid
from formal_rope.sweeps.report import build_report
from formal_rope.sweeps.results import read_results
from formal_rope.sweeps.results_page import (
    MAX_DRAWN_STATES,
    atlas_agreement_section,
    dfa_svg,
    render_page,
    write_results_page,
)
from formal_rope.sweeps.runner import run_sweep
from sweeps_support import cli, fake_runner, spec


def _runner(config):
    """sweeps_support's runner, with a worst-case search recorded for RoPE_NP (its worst string
    fails at length 45, before N*)."""
    result = fake_runner(config)
    if config.pe == "rope":
        result = replace(result, n_star_worst=45, worst_failure="ab" * 22 + "a", worst_strings_tried=100,
                         worst_failure_margin=-0.25)
    return result


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two languages × NoPE, RoPE_P, RoPE_NP at two bases × 3 seeds: 24 runs, 8 rows."""
    out = tmp_path_factory.mktemp("results")
    run_sweep(expand_grid(spec(seeds=3, lrs=[1e-4])), out, runner=_runner)
    return out


@pytest.fixture(scope="module")
def page(folder, tmp_path_factory):
    """The page `report --html` writes for the folder (the library call behind the option)."""
    return write_results_page(folder, tmp_path_factory.mktemp("page") / "results.html")


class _Outline(HTMLParser):
    """What the page holds, as the standard library's parser reads it."""

    def __init__(self):
        super().__init__()
        self.sections, self.tables, self.resources, self.states = [], {}, [], []
        self._table = None
        self.svgs = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.sections.append(attrs["id"])
        if tag == "table" and "id" in attrs:
            self._table = attrs["id"]
            self.tables[self._table] = 0
        if tag == "tr" and self._table is not None:
            self.tables[self._table] += 1
        if tag in ("img", "script", "link", "iframe", "source") and ("src" in attrs or "href" in attrs):
            self.resources.append(attrs.get("src") or attrs.get("href"))
        if tag == "svg":
            self.svgs += 1
        if tag == "g" and "data-state" in attrs:
            self.states.append(attrs["data-state"])

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None


def _outline(path: Path) -> _Outline:
    outline = _Outline()
    outline.feed(path.read_text(encoding="utf-8"))
    return outline


def test_page_holds_every_section_table_and_figure_inline(page, folder):
    outline = _outline(page)
    report = build_report(folder)
    languages = list(dict.fromkeys(row.language for row in report.rows))
    assert outline.sections[:3] == ["summary", "comparisons", "figures"]
    assert outline.sections[3:] == [f"language-{index + 1}" for index in range(len(languages))]
    # Header row + one row per report row; comparisons: RoPE_P and RoPE_NP at each base against NoPE, per language.
    assert outline.tables["summary-table"] == 1 + len(report.rows) == 9
    assert outline.tables["comparisons-table"] == 1 + 3 * len(languages)
    assert outline.tables["l1-runs"] == 1 + 12 and outline.tables["l2-runs"] == 1 + 12
    # Nothing fetched: the only resource is the inline PNG figure.
    assert outline.resources and all(src.startswith("data:image/png;base64,") for src in outline.resources)
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"(src|href)=\"(https?:)?//", text) and "@import" not in text
    # Each language's DFA (2 states for (aa)* and 3 for (ab)*, sinks included), plus each accuracy figure.
    assert outline.svgs == 2 * len(languages)
    assert outline.states == ["0", "1", "0", "1", "2"]
    assert "not ltl_p" in text and "LTL[P,MOD]" in text and "(k = 2)" in text
    # The runs' failing strings: NoPE seed 0 fails first on (ab)^25; RoPE_NP's worst case at length 45.
    assert "ab" * 20 in text and "(len 50)" in text and "(len 45)" in text
    assert "atlas" not in outline.sections  # no atlas columns in this folder


def test_page_reads_without_javascript(page):
    """Every table row and cell is in the HTML itself; the script only sorts and filters, and the
    filter boxes are hidden unless it runs (class "needs-js")."""
    text = page.read_text(encoding="utf-8")
    without_script = re.sub(r"<script>.*?</script>", "", text, flags=re.S)
    outline = _Outline()
    outline.feed(without_script)
    assert outline.tables == _outline(page).tables
    assert all('class="filter needs-js"' in label for label in re.findall(r"<label[^>]*data-filter|<label[^>]*>",
                                                                          without_script) if "filter" in label)
    assert ".needs-js{display:none}" in text


def test_report_cli_writes_the_page_and_compare_replaces_the_default_comparisons(folder, page, tmp_path, capsys):
    code, out, err = cli(capsys, ["report", str(folder), "--html", str(tmp_path / "plain.html")])
    assert code == 0 and f"results page written to {tmp_path / 'plain.html'}" in out and "N* 95% CI" in out
    assert (tmp_path / "plain.html").read_text(encoding="utf-8") == page.read_text(encoding="utf-8")  # deterministic
    path = tmp_path / "page"
    code, out, err = cli(capsys, ["report", str(folder), "--compare", "pe=rope_p", "pe=nope", "--json",
                                  "--html", str(path)])
    assert code == 0, err
    payload = json.loads(out)  # the JSON on stdout stays parseable; the page's line goes to stderr
    assert "results page written to" in err and (tmp_path / "page.html").exists()
    outline = _outline(tmp_path / "page.html")
    assert outline.tables["comparisons-table"] == 1 + len(payload["comparisons"])
    code, _, err = cli(capsys, ["report", str(folder), "--html", str(tmp_path)])
    assert code == 2 and "it is a folder" in err


def test_dfa_drawing_has_one_node_per_state_and_one_arrow_per_state_pair():
    dfa = language_dfa(resolve_language("(ab)*"))
    svg = dfa_svg(dfa, "t")
    pairs = {(state, int(dfa.transitions[state, column])) for state in range(dfa.n_states)
             for column in range(len(dfa.alphabet))}
    assert svg.count("<g class=\"state") == dfa.n_states
    assert svg.count('class="edge"') == len(pairs) + 1  # plus the arrow into the start state
    assert svg.count("<circle") == dfa.n_states + int(np.sum(dfa.accepting))  # accepting: a double circle
    assert 'id="t-arrow"' in svg and "url(#t-arrow)" in svg
    big = language_dfa(resolve_language("a{30}"))
    assert big.n_states > MAX_DRAWN_STATES and "<svg" not in dfa_svg(big)


def test_atlas_agreement_section_renders_from_the_atlas_columns(folder):
    report = build_report(folder)
    runs = report.runs.drop(columns=["predicted", "predicted_by"])
    assert atlas_agreement_section(runs, agreement_cells_of_runs) == ""
    predicted = np.where(runs["pe"] == "rope_p", "learns", "fails")
    with_atlas = runs.assign(predicted=predicted, predicted_by="classes")
    section = atlas_agreement_section(with_atlas, agreement_cells_of_runs)
    rows = re.findall(r"<tr>(.*?)</tr>", section)[1:]  # after the header
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    # grouped as the terminal groups it: by encoding, then prediction (atlas.render.agreement_cells)
    from formal_rope.atlas.agreement import agreement_of
    from formal_rope.atlas.render import agreement_cells

    header, expected = agreement_cells(agreement_of(SimpleNamespace(runs=with_atlas)))
    assert cells == [[html.escape(text) for text in row] for row in expected]
    assert [row[0] for row in cells] == sorted({row[0] for row in cells}, key=[row[0] for row in cells].index)
    # RoPE_P reaches the longest test length (500) on every run; no other encoding does.
    learned = {row[0]: row[header.index("learned")] for row in cells}
    assert learned["rope_p"] == "6/6" and all(value.startswith("0/") for key, value in learned.items()
                                              if key != "rope_p")
    # a run predicted not expressible that did not reach the longest length is refuted
    refuted_runs = atlas_agreement_section(with_atlas.assign(
        predicted=np.where(runs["pe"] == "rope_p", "expressible", "not_expressible")), agreement_cells_of_runs)
    refuted_cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", refuted_runs)[1:]]
    refuted = {row[0]: row[header.index("refuted")] for row in refuted_cells}
    expected_refuted = {pe: str(count) for pe, count in runs[runs["pe"] != "rope_p"]["pe"].value_counts().items()}
    assert refuted == {"rope_p": "0", **expected_refuted}
    text = render_page(replace(report, runs=with_atlas), read_results(folder).evals, title="t",
                       atlas_table=agreement_cells_of_runs)
    assert '<section id="atlas"' in text and "run rate" in text
    assert '<section id="atlas"' not in render_page(replace(report, runs=with_atlas), read_results(folder).evals,
                                                    title="t")  # an ordinary sweep's page


# ----------------------------------------------------------------------------------------------
# In a real browser


BROWSER = browser_path()
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium installed (Debian: apt-get install chromium)")


def _column(browser: Browser, table: str, index: int) -> list[str]:
    return browser.evaluate(f"Array.from(document.querySelectorAll('#{table} tbody tr'))"
                            f".filter(r => r.offsetParent !== null).map(r => r.cells[{index}].textContent)")


@needs_browser
def test_page_in_headless_chromium(page, tmp_path):
    with Browser(BROWSER) as browser:
        browser.open(page)
        assert browser.evaluate("document.documentElement.classList.contains('js')")  # the script ran
        sections = browser.evaluate("Array.from(document.querySelectorAll('section h2')).map(h => h.textContent)")
        assert sections == ["Results", "Comparisons", "Figures", "Language (aa)*", "Language (ab)*"]
        assert browser.evaluate("document.querySelectorAll('#summary-table tbody tr').length") == 8
        # The figure decoded (a broken data: URI has no natural width) and the DFAs laid out.
        assert browser.evaluate("document.querySelector('#figures img').naturalWidth") > 100
        assert browser.evaluate("document.querySelectorAll('svg.dfa g.state').length") == 5
        screenshot = browser.screenshot(tmp_path / "results-page.png", full_page=True)
        print(f"screenshot of the results page: {screenshot}")
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        # Sorting by clicking the "N* max" header: ascending, then descending; "–" stays last.
        headers = browser.evaluate("Array.from(document.querySelectorAll('#summary-table th')).map(h => h.textContent)")
        column = headers.index("N* max")
        before = _column(browser, "summary-table", column)
        browser.click(f"#summary-table thead th:nth-child({column + 1})")
        ascending = _column(browser, "summary-table", column)
        assert ascending == sorted(before, key=float) and ascending[0] == "60" and ascending[-1] == "500"
        browser.click(f"#summary-table thead th:nth-child({column + 1})")
        assert _column(browser, "summary-table", column) == sorted(before, key=float, reverse=True)
        assert browser.evaluate(f"document.querySelectorAll('#summary-table th')[{column}].getAttribute('aria-sort')") \
            == "descending"
        # Text columns sort as text: the runs table by its first failing string's length.
        runs_headers = browser.evaluate("Array.from(document.querySelectorAll('#l2-runs th')).map(h => h.textContent)")
        seed = runs_headers.index("seed")
        browser.click(f"#l2-runs thead th:nth-child({seed + 1})")
        assert _column(browser, "l2-runs", seed) == sorted(_column(browser, "l2-runs", seed), key=int)

        # Filtering: typing in the box hides the rows without the text.
        browser.type_text('input[data-filter="summary-table"]', "RoPE_P")
        assert _column(browser, "summary-table", 1) == ["RoPE_P", "RoPE_P"]
        assert browser.errors() == []


@needs_browser
def test_the_browser_check_sees_console_errors(tmp_path):
    """The "no console errors" check above can fail: a page that throws and logs an error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>console.error('logged'); undefinedName();</script>"
                   "</body></html>")
    with Browser(BROWSER) as browser:
        browser.open(bad)
        errors = browser.errors()
    assert any("logged" in error for error in errors) and any("undefinedName" in error for error in errors)
