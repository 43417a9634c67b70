"""A results folder as one self-contained HTML page (`formalrope report RESULTS --html FILE`).

The page holds everything inline, so it opens from a file or an e-mail attachment with no server
and no network: the style sheet and a small script in the page, the N* figure as a PNG data: URI,
each language's minimal DFA as an inline SVG drawn here (a circular layout: no Graphviz). The
tables are plain HTML, readable without JavaScript; the script only adds sorting (click a column
header) and filtering (a text box above each table).

Sections: the report's table (intervals, successes) and its comparisons (`--compare`, else every
encoding against NoPE in the same language), the notes, the figures, one section per language
(class verdicts and witnesses from `formal_rope.classes.classify`, the DFA, the runs with their
first failing and worst-case strings, accuracy by test length), and — when the runs carry the
atlas's `predicted` and `predicted_by` columns — the atlas agreement table (`atlas_agreement_section`).
"""

from __future__ import annotations

import base64
import html
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from formal_rope.automata import language_dfa
from formal_rope.automata.render import to_table
from formal_rope.classes import classify
from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_file, output_path
from formal_rope.lang.source import resolve_language
from formal_rope.sampling.text import shown_string
from formal_rope.sweeps.report import PE_LABELS, Report, ReportRequest, build_report, cell_text, plot_n_star
from formal_rope.sweeps.results import ATLAS_LANGUAGES_FILE, read_results
from formal_rope.sweeps.statistics import DEFAULT_LEVEL, compare

ATLAS_COLUMNS = ("predicted", "predicted_by")  # the atlas's prediction of a run's outcome, and what made it
MAX_DRAWN_STATES = 24  # larger DFAs get their transition table only: a circle of more states is unreadable


def write_results_page(out: str | Path, path: str | Path, *, by=None, sort: str | None = None,
                       reference: dict | None = None, title: str = "", level: float = DEFAULT_LEVEL,
                       comparison: tuple[str, str] | None = None, metric: str = "n_star", languages=(),
                       atlas_table=None, constructed_table=None) -> Path:
    """Aggregate the results folder `out` (`report.build_report`, same options) and write the page to
    `path` (.html added when it has no suffix; written atomically, missing folders created).
    `atlas_table(runs, level) -> (header, rows)` draws the agreement table when the folder holds an
    atlas (the caller passes `atlas.render.agreement_cells_of_runs`: the atlas stage builds on the
    sweeps, so the page never imports it); `constructed_table(out, runs) -> (header, rows) | None` the
    atlas's constructed models beside training (`atlas.render.constructed_cells_of_folder`). Returns
    the path written."""
    path = Path(path)
    if path.is_dir():
        raise FormalRopeError(f"cannot write the results page {str(path)!r}: it is a folder; give a file name such "
                              f"as {str(path / 'results.html')!r}")
    target = output_path(path if path.suffix else path.with_name(path.name + ".html"), "the results page")
    report = build_report(ReportRequest(out=out, by=by, sort=sort, reference=reference, title=title, level=level,
                                        comparison=comparison, metric=metric, languages=languages))
    atlas = (Path(out) / ATLAS_LANGUAGES_FILE).is_file()
    constructed = constructed_table(out, report.runs) if atlas and constructed_table is not None else None
    page = render_page(report, read_results(out).evals, title=title or f"results in {out}",
                       reference=reference, atlas_table=atlas_table if atlas else None, constructed=constructed)
    try:
        with atomic_file(target, "the results page") as temporary:
            temporary.write_text(page, encoding="utf-8")
    except OSError as error:
        raise FormalRopeError(f"cannot write the results page {str(path)!r}: {error.strerror or error}") from None
    return target


def render_page(report: Report, evals, *, title: str, reference: dict | None = None, atlas_table=None,
                constructed: tuple[list[str], list[list[str]]] | None = None) -> str:
    """The page's HTML text for a built report and the folder's `evals` table (pandas); with
    `atlas_table` (given when the folder holds an atlas: `formalrope atlas` wrote its language set
    there) the agreement table of the runs' predictions and outcomes (every sweep's runs carry a
    prediction; an ordinary sweep's
    page leaves the agreement table to `report` and `atlas`)."""
    runs = report.runs
    languages = list(dict.fromkeys(row.language for row in report.rows if row.language is not None))
    if not languages and "language" in runs.columns:
        languages = list(dict.fromkeys(runs["language"]))
    sections = [
        _Section("summary", "Results", _summary_section(report)),
        _Section("comparisons", "Comparisons", _comparisons_section(report)),
        _Section("figures", "Figures", _figures_section(report, reference)),
    ]
    if report.notes:
        sections.insert(1, _Section("notes", "Notes", "<ul>" + "".join(f"<li>{_e(note)}</li>" for note in report.notes)
                                    + "</ul>"))
    agreement = atlas_agreement_section(runs, atlas_table) if atlas_table is not None else ""
    if agreement:
        sections.append(_Section("atlas", "Atlas agreement", agreement))
    if constructed is not None:
        header, rows = constructed
        sections.append(_Section("constructed", "Constructed models", (
            '<p class="note">For each language a NoPE or RoPE_P run predicts expressible, the exact transformer the '
            "compiler builds, measured like a trained run (its test sets, then the worst-case search), beside the "
            "best worst-case N* training reached (`formalrope atlas --constructed`).</p>"
            + _table("constructed-table", header, [[(_e(text), _sort_key(text)) for text in row] for row in rows]))))
    for index, language in enumerate(languages):
        sections.append(_Section(f"language-{index + 1}", f"Language {language}",
                                 _language_section(language, runs, evals, f"l{index + 1}")))
    statuses = ", ".join(f"{count} {status}" for status, count in report.payload["statuses"].items())
    navigation = "".join(f'<li><a href="#{section.anchor}">{_e(section.heading)}</a></li>' for section in sections)
    body = "".join(
        f'<section id="{section.anchor}" class="section"><h2>{_e(section.heading)}</h2>{section.body}</section>'
        for section in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f'<body><header><h1>{_e(title)}</h1><p class="meta">{_e(report.payload["results"])}: '
        f"{report.payload['runs']} runs ({_e(statuses)}), grouped by {_e(', '.join(report.by))}. "
        f"Written by <code>formalrope report --html</code>.</p>"
        f'<nav><ul>{navigation}</ul></nav></header><main>{body}</main>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


@dataclass(frozen=True)
class _Section:
    anchor: str
    heading: str
    body: str


# ----------------------------------------------------------------------------------------------
# Tables


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _table(table_id: str, headers: list[str], rows: list[list[tuple[str, object]]], caption: str = "") -> str:
    """A sortable, filterable table: each cell is (text shown, sort key: a number or None for the text)."""
    head = "".join(f'<th scope="col" tabindex="0">{_e(name)}</th>' for name in headers)
    lines = []
    for row in rows:
        cells = []
        for text, key in row:
            number = key is not None and isinstance(key, (int, float)) and not math.isnan(key)
            sort_key = f' data-sort="{key!r}"' if number else ""
            cells.append(f"<td{sort_key}>{text}</td>")
        lines.append("<tr>" + "".join(cells) + "</tr>")
    filter_box = (f'<label class="filter needs-js">Filter rows <input type="search" data-filter="{table_id}" '
                  f'placeholder="text in any cell"></label>')
    return (f'{filter_box}<div class="scroll"><table id="{table_id}" class="sortable">'
            + (f"<caption>{_e(caption)}</caption>" if caption else "")
            + f"<thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table></div>")


def _number(value, digits: int) -> tuple[str, object]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–", None
    return f"{value:.{digits}f}", float(value)


def _mean_std(mean: float, std: float, digits: int) -> tuple[str, object]:
    if math.isnan(mean):
        return "–", None
    return f"{mean:.{digits}f}±{std:.{digits}f}", float(mean)


def _interval(interval, digits: int) -> tuple[str, object]:
    if interval is None or interval.method == "none":
        return "–", None
    return _e(interval.text(digits)), float(interval.low)


def _summary_section(report: Report) -> str:
    rows = report.rows
    level = report.payload["level"]
    confidence = f"{level:.0%}".replace(".0%", "%")
    searched = any(row.runs_searched for row in rows)
    headers = [{"pe": "PE"}.get(name, name) for name in report.by]
    headers += ["runs", "acc max", "acc mean±std", f"acc {confidence} CI", "N* max", "N* mean±std",
                f"N* {confidence} CI", "N* of each run", "reached max"]
    if searched:
        headers += ["worst N* max", "worst N* mean±std", "worst reached max"]
    headers += ["NNCH max", "NNCH mean±std"]
    body = []
    for row in rows:
        cells = [(_e(cell_text(name, value)), value if isinstance(value, (int, float)) else None)
                 for name, value in row.group]
        cells += [
            (f"{row.runs}" + ("" if row.ok_runs == row.runs else f" ({row.runs - row.ok_runs} not ok)"), row.runs),
            _number(row.accuracy_max, 3), _mean_std(row.accuracy_mean, row.accuracy_std, 3),
            _interval(row.accuracy_interval, 3),
            _number(row.n_star_max, 0), _mean_std(row.n_star_mean, row.n_star_std, 1),
            _interval(row.n_star_interval, 0),
            (", ".join(str(n) for n in row.n_stars) or "–", None),
            (f"{row.successes}/{len(row.n_stars)}", row.successes / len(row.n_stars) if row.n_stars else None),
        ]
        if searched:
            cells += [
                _number(row.n_star_worst_max, 0), _mean_std(row.n_star_worst_mean, row.n_star_worst_std, 1),
                ("–", None) if row.successes_worst is None else (
                    f"{row.successes_worst}/{row.runs_searched}", row.successes_worst / row.runs_searched),
            ]
        cells += [_number(row.nnch_max, 3), _mean_std(row.nnch_mean, row.nnch_std, 3)]
        body.append(cells)
    return _table("summary-table", headers, body) + f'<p class="note">{_e(report.payload["intervals"])}.</p>'


def _comparisons_section(report: Report) -> str:
    """`--compare`'s comparisons, else every encoding's N* against NoPE's in the same language (and
    the same values of the other grouping columns but the base, which NoPE does not have)."""
    given = report.payload["comparisons"]
    if given:
        strata = [name for name in report.by if name in given[0]]
        entries = [({name: entry[name] for name in strata}, entry["a"], entry["b"], entry) for entry in given]
        first = given[0]
        intro = f"--compare {first['a']} {first['b']} on {first['metric']}, per {', '.join(strata) or 'folder'}."
    else:
        entries, strata = [], []
        if {"language", "pe"} <= set(report.by):
            keys = [name for name in report.by if name not in ("pe", "base")]
            strata = keys
            nope = {tuple(dict(row.group)[name] for name in keys): row for row in report.rows if row.pe == "nope"}
            for row in report.rows:
                group = dict(row.group)
                baseline = nope.get(tuple(group[name] for name in keys))
                if row.pe == "nope" or baseline is None or not row.n_stars or not baseline.n_stars:
                    continue
                label = " ".join(cell_text(name, value) for name, value in row.group
                                 if name not in keys and value is not None)
                entries.append(({name: group[name] for name in keys}, label, "NoPE",
                                compare(row.n_stars, baseline.n_stars).to_dict()))
        intro = "N* of every encoding against NoPE's in the same cell (give --compare A B for other pairs)."
        if not entries:
            return '<p class="note">No comparisons: give <code>--compare A B</code> (e.g. pe=rope_p pe=nope).</p>'
    headers = [*strata, "A", "B", "runs", "mean", "median", "test", "p", "Cliff's δ"]
    body = []
    for values, a, b, entry in entries:
        p, delta = entry["p_value"], entry["cliffs_delta"]
        body.append([
            *((_e(cell_text(name, values[name])), None) for name in strata),
            (_e(a), None), (_e(b), None),
            (f"{entry['n_a']} vs {entry['n_b']}", None),
            (f"{_short(entry['mean_a'])} vs {_short(entry['mean_b'])}", entry["mean_a"]),
            (f"{_short(entry['median_a'])} vs {_short(entry['median_b'])}", entry["median_a"]),
            (_e(entry["method"]), None),
            ("–", None) if p is None else (f"{p:.3g}", p),
            ("–", None) if delta is None else (f"{delta:+.2f}", delta),
        ])
    return f'<p class="note">{_e(intro)}</p>' + _table("comparisons-table", headers, body)


def _short(value) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3g}"


# ----------------------------------------------------------------------------------------------
# Figures


def _figures_section(report: Report, reference: dict | None) -> str:
    """`report --plot`'s N* figure, rendered to a PNG inside the page."""
    rows = [row for row in report.rows if not math.isnan(row.n_star_mean)]
    if not rows or not {"language", "pe"} <= {name for row in report.rows for name, _ in row.group}:
        return '<p class="note">No figure: the N* plot needs rows grouped by language and pe, with an N*.</p>'
    with tempfile.TemporaryDirectory(prefix="formal-rope-page-") as folder:
        path = plot_n_star(report.rows, Path(folder) / "nstar.png", title=report.payload["results"],
                           reference=reference)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="mean N* per encoding and base, ±1 std, one panel per language" '
            f'src="data:image/png;base64,{data}"><figcaption>N* per encoding (mean ±1 std over runs; '
            "as <code>report --plot</code> draws it).</figcaption></figure>")


# ----------------------------------------------------------------------------------------------
# One section per language


def _present(value) -> bool:
    """A cell holds a value (not None, NaN or pandas' NA)."""
    try:
        return not bool(pd.isna(value))
    except (TypeError, ValueError):  # a sequence: present
        return True


def _language_section(language: str, runs, evals, prefix: str) -> str:
    mine = runs[runs["language"] == language] if "language" in runs.columns else runs
    alphabet = next((a for a in mine["alphabet"] if _present(a)), None) if "alphabet" in mine.columns else None
    parts = [f'<p class="meta">alphabet {_e(alphabet or "–")}; {len(mine)} runs.</p>']
    parts.append(_classes_part(language, alphabet, prefix))
    parts.append("<h3>Runs</h3>" + _runs_table(mine, f"{prefix}-runs"))
    parts.append(_accuracy_figure(mine, evals, prefix))
    return "".join(parts)


def _language_dfa(language: str, alphabet: str | None):
    """The minimal DFA of a run's language over the alphabet the run used (FormalRopeError when it
    cannot be built here, e.g. a .att file that is not beside the page's maker)."""
    try:
        resolved = resolve_language(language, alphabet)
    except FormalRopeError:
        resolved = resolve_language(language)
    return language_dfa(resolved)


def _classes_part(language: str, alphabet: str | None, prefix: str) -> str:
    try:
        dfa = _language_dfa(language, alphabet)
        verdicts = classify(dfa)
    except FormalRopeError as error:  # a file language not at hand, a monoid too large: the page goes on
        return f'<p class="note">No class verdicts: {_e(str(error).removeprefix("error: "))}</p>'
    classes = [
        ("LTL[P]", verdicts.ltl_p), ("LTL[P,MOD]", verdicts.ltl_p_mod), ("star-free", verdicts.star_free),
        ("R-trivial", verdicts.r_trivial), ("L-trivial", verdicts.l_trivial), ("J-trivial", verdicts.j_trivial),
    ]
    cells = "".join(f'<tr><th scope="row">{name}</th><td class="{"yes" if value else "no"}">{"yes" if value else "no"}'
                    + (f" (k = {verdicts.mod_k})" if name == "LTL[P,MOD]" and value else "") + "</td></tr>"
                    for name, value in classes)
    facts = (f"minimal DFA {verdicts.states} states; syntactic monoid {verdicts.monoid_size} elements; "
             f"stability index {verdicts.stability_index}, period {verdicts.stability_period}")
    witnesses = "".join(
        f"<li><b>not {_e(name)}</b>: " + "; ".join(f"{_e(key)} {_e(_witness_text(value))}" for key, value in
                                                   witness.items()) + "</li>"
        for name, witness in verdicts.witness.items()
    )
    return (
        '<div class="classes"><div><h3>Classes</h3>'
        f'<table class="verdicts">{cells}</table><p class="meta">{_e(facts)}</p>'
        + (f'<h4>Witnesses</h4><ul class="witnesses">{witnesses}</ul>' if witnesses else "")
        + f'</div><div><h3>Minimal DFA</h3>{dfa_svg(dfa, prefix)}{_transition_table(dfa)}</div></div>'
    )


def _witness_text(value) -> str:
    if isinstance(value, str):
        return repr(value) if value else "ε"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_witness_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_witness_text(item)}" for key, item in value.items()) + "}"
    return str(value)


def _transition_table(dfa) -> str:
    headers, rows = to_table(dfa)
    head = "".join(f'<th scope="col">{_e(name)}</th>' for name in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return (f'<details><summary>transition table (→ start, * accepting)</summary><table class="transitions">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></details>")


# The page's DFA rules, for an SVG file standing alone (`dfa --svg`).
_DFA_FILE_STYLE = (
    "svg text{font:12px system-ui,sans-serif}"
    ".state circle{fill:#fff;stroke:#1d1f23;stroke-width:1.4}.state.accepting circle{fill:#eaf4ff}"
    ".state text{text-anchor:middle;dominant-baseline:central}.edge{fill:none;stroke:#444;stroke-width:1.2}"
    ".label{text-anchor:middle;dominant-baseline:central;fill:#1a56b0}"
)


def dfa_svg_file(dfa) -> str:
    """The DFA drawn as the results page draws it, as a standalone SVG document (its style inside):
    what `formalrope dfa --svg` writes, with no Graphviz needed. FormalRopeError above
    MAX_DRAWN_STATES states (a circle of more states is unreadable: use --dot and Graphviz)."""
    if dfa.n_states > MAX_DRAWN_STATES:
        raise FormalRopeError(f"the DFA has {dfa.n_states} states; --svg draws at most {MAX_DRAWN_STATES} "
                              "(use --dot and Graphviz's dot for larger ones)")
    drawing = dfa_svg(dfa)
    head, _, rest = drawing.partition(">")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{head}><style>{_DFA_FILE_STYLE}</style>{rest}\n'


def dfa_svg(dfa, prefix: str = "dfa") -> str:
    """The DFA as an inline SVG: states on a circle (double circles accept, an arrow into the start),
    parallel transitions merged into one arrow labelled with their symbols, arrows between two
    states bent so both directions show, self-loops as small arcs outside the circle. `prefix`
    makes the arrowhead's id unique in the page."""
    n = dfa.n_states
    if n > MAX_DRAWN_STATES:
        return f'<p class="note">{n} states: too many to draw; see the transition table.</p>'
    node = 16
    radius = 0 if n == 1 else max(60.0, n * 2.6 * node / (2 * math.pi))
    margin = 58
    size = 2 * (radius + margin)
    centre = size / 2
    angles = [-math.pi + 2 * math.pi * index / n for index in range(n)]  # the start state sits on the left
    order = [dfa.start, *(state for state in range(n) if state != dfa.start)]
    position = {state: (centre + radius * math.cos(angle), centre + radius * math.sin(angle))
                for state, angle in zip(order, angles)}
    edges: dict[tuple[int, int], list[str]] = {}
    for state in range(n):
        for column, symbol in enumerate(dfa.alphabet):
            edges.setdefault((state, int(dfa.transitions[state, column])), []).append(symbol)
    marker = f"{prefix}-arrow"
    parts = [f'<svg class="dfa" role="img" viewBox="0 0 {size:.0f} {size:.0f}" width="{size:.0f}" '
             f'height="{size:.0f}" xmlns="http://www.w3.org/2000/svg"><title>minimal DFA, {n} states</title>'
             f'<defs><marker id="{marker}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>']
    for (source, target), symbols in edges.items():
        label = _e(",".join(symbols))
        x1, y1 = position[source]
        if source == target:
            # A loop on the side facing away from the circle's centre.
            away = math.atan2(y1 - centre, x1 - centre) if n > 1 else -math.pi / 2
            start = (x1 + node * math.cos(away - 0.5), y1 + node * math.sin(away - 0.5))
            end = (x1 + node * math.cos(away + 0.5), y1 + node * math.sin(away + 0.5))
            c1 = (x1 + 3.2 * node * math.cos(away - 0.6), y1 + 3.2 * node * math.sin(away - 0.6))
            c2 = (x1 + 3.2 * node * math.cos(away + 0.6), y1 + 3.2 * node * math.sin(away + 0.6))
            lx, ly = x1 + 3.1 * node * math.cos(away), y1 + 3.1 * node * math.sin(away)
            parts.append(f'<path class="edge" d="M{start[0]:.1f},{start[1]:.1f} C{c1[0]:.1f},{c1[1]:.1f} '
                         f'{c2[0]:.1f},{c2[1]:.1f} {end[0]:.1f},{end[1]:.1f}" marker-end="url(#{marker})"/>')
        else:
            x2, y2 = position[target]
            length = math.hypot(x2 - x1, y2 - y1)
            ux, uy = (x2 - x1) / length, (y2 - y1) / length
            bend = 0.18 * length if (target, source) in edges else 0.06 * length  # both directions: apart
            mx, my = (x1 + x2) / 2 + bend * uy, (y1 + y2) / 2 - bend * ux  # to the right of the direction
            sx, sy = _towards(x1, y1, mx, my, node)
            ex, ey = _towards(x2, y2, mx, my, node + 1)
            lx, ly = (sx + 2 * mx + ex) / 4 + 7 * uy, (sy + 2 * my + ey) / 4 - 7 * ux
            parts.append(f'<path class="edge" d="M{sx:.1f},{sy:.1f} Q{mx:.1f},{my:.1f} {ex:.1f},{ey:.1f}" '
                         f'marker-end="url(#{marker})"/>')
        parts.append(f'<text class="label" x="{lx:.1f}" y="{ly:.1f}">{label}</text>')
    sx, sy = position[dfa.start]
    parts.append(f'<path class="edge" d="M{sx - 2.6 * node:.1f},{sy:.1f} L{sx - node - 1:.1f},{sy:.1f}" '
                 f'marker-end="url(#{marker})"/>')
    for state in range(n):
        x, y = position[state]
        accepting = bool(dfa.accepting[state])
        parts.append(f'<g class="state{" accepting" if accepting else ""}" data-state="{state}">'
                     f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{node}"/>'
                     + (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{node - 3.5}"/>' if accepting else "")
                     + f'<text x="{x:.1f}" y="{y:.1f}">{state}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _towards(x: float, y: float, tx: float, ty: float, distance: float) -> tuple[float, float]:
    """The point `distance` from (x, y) in the direction of (tx, ty): where an arrow leaves a state's circle."""
    length = math.hypot(tx - x, ty - y) or 1.0
    return x + distance * (tx - x) / length, y + distance * (ty - y) / length


_RUN_COLUMNS = (  # (column, header, digits) of the runs tables; columns a folder lacks are left out
    ("pe", "PE", None), ("base", "base", None), ("seed", "seed", None), ("lr", "lr", None),
    ("variant", "variant", None), ("status", "status", None), ("n_star", "N*", 0), ("n_star_worst", "worst N*", 0),
    ("accuracy", "accuracy", 3), ("nnch_accuracy", "NNCH", 3), ("first_failure", "first failing string", None),
    ("worst_failure", "worst-case string", None), ("worst_failure_margin", "worst margin", 3),
    ("sampling", "sampling", None), ("test_transitions_covered", "test transitions", None),
    ("refuted_at", "family refuted at", None), ("family_failure", "family string", None),
    ("final_train_accuracy", "final train acc", 3),
    ("steps_done", "steps", None), ("final_loss", "final loss", 4), ("wall_s", "wall s", 1),
    ("predicted", "predicted", None), ("predicted_by", "predicted by", None), ("run_id", "run id", None),
)


def _runs_table(runs, table_id: str) -> str:
    columns = [(name, header, digits) for name, header, digits in _RUN_COLUMNS
               if name in runs.columns and (name in ("n_star", "status", "run_id", "pe") or runs[name].notna().any())]
    body = []
    for _, run in runs.sort_values(["pe", "seed"] if {"pe", "seed"} <= set(runs.columns) else "run_id").iterrows():
        cells = []
        for name, _, digits in columns:
            value = run[name]
            if not _present(value):
                cells.append(("–", None))
            elif name == "test_transitions_covered" and _present(run.get("test_transitions")):
                cells.append((f"{int(value)}/{int(run['test_transitions'])}", float(value)))
            elif name in ("first_failure", "worst_failure", "family_failure"):
                text = str(value)
                # in full, run-length compressed or visibly cut (the whole string in its tooltip)
                shown = shown_string(text)
                cells.append((f'<code title="{_e(text)}">{_e(shown)}</code> <span class="meta">(len '
                              f"{len(text)})</span>", len(text)))
            elif digits is not None:
                cells.append(_number(float(value), digits))
            elif name in ("pe", "base"):
                cells.append((_e(cell_text(name, value)), float(value) if name == "base" else None))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                cells.append((_e(cell_text(name, value)), float(value)))
            else:
                cells.append((_e(value), None))
        body.append(cells)
    return _table(table_id, [header for _, header, _ in columns], body)


def _accuracy_figure(runs, evals, prefix: str) -> str:
    """Accuracy by test length, one line per run coloured by its encoding, as an inline SVG."""
    if evals is None or not len(evals) or "run_id" not in runs.columns:
        return ""
    mine = evals[evals["run_id"].isin(set(runs["run_id"]))]
    if not len(mine):
        return ""
    width, height, left, bottom, top, right = 560, 220, 44, 30, 10, 150
    lengths = mine["length"].astype(float)
    low, high = float(lengths.min()), float(lengths.max())
    span = (high - low) or 1.0

    def x(length: float) -> float:
        return left + (length - low) / span * (width - left - right)

    def y(accuracy: float) -> float:
        return top + (1 - accuracy) * (height - top - bottom)

    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
               "#17becf"]
    # One colour per encoding across the page's figures: encodings in the paper's order, then by name.
    order = list(PE_LABELS)
    encodings = (sorted(set(runs["pe"]), key=lambda pe: (order.index(pe) if pe in order else len(order), str(pe)))
                 if "pe" in runs.columns else [None])
    colour = {pe: palette[index % len(palette)] for index, pe in enumerate(encodings)}
    pe_of = dict(zip(runs["run_id"], runs["pe"])) if "pe" in runs.columns else {}
    lines = []
    for run_id, group in mine.sort_values("length").groupby("run_id", sort=True):
        points = " ".join(f"{x(float(a)):.1f},{y(float(b)):.1f}" for a, b in zip(group["length"], group["accuracy"])
                          if _present(b))
        lines.append(f'<polyline points="{points}" stroke="{colour.get(pe_of.get(run_id))}" fill="none" '
                     f'stroke-width="1.2" opacity="0.75"><title>{_e(run_id)}</title></polyline>')
    axes = (f'<line x1="{left}" y1="{y(0):.1f}" x2="{width - right}" y2="{y(0):.1f}" class="axis"/>'
            f'<line x1="{left}" y1="{y(0):.1f}" x2="{left}" y2="{y(1):.1f}" class="axis"/>'
            + "".join(f'<text x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>' for v in (0, 0.5, 1))
            + f'<text x="{x(low):.1f}" y="{height - 10}" text-anchor="middle">{low:g}</text>'
            f'<text x="{x(high):.1f}" y="{height - 10}" text-anchor="middle">{high:g}</text>'
            f'<text x="{(left + width - right) / 2:.1f}" y="{height - 10}" text-anchor="middle">test length</text>')
    legend = "".join(f'<text x="{width - right + 12}" y="{top + 14 * (index + 1)}" fill="{colour[pe]}">'
                     f"{_e(PE_LABELS.get(pe, pe))}</text>" for index, pe in enumerate(encodings) if pe is not None)
    return (f'<figure><svg class="curves" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>accuracy by test length, one line per run</title>'
            f"{axes}{''.join(lines)}{legend}</svg><figcaption>Accuracy by test length, one line per run "
            "(colour: encoding).</figcaption></figure>")


# ----------------------------------------------------------------------------------------------
# The atlas's agreement table: rendered when the runs carry its prediction columns.


def atlas_agreement_section(runs, atlas_table, level: float = 0.95) -> str:
    """The atlas agreement table, or "" when the runs lack the atlas's columns (`ATLAS_COLUMNS`): the
    table `formalrope atlas` prints (`atlas.render.agreement_cells`: per encoding, then prediction,
    the runs and languages that learned, judged on the worst-case N* where searched), so the page
    and the terminal group and count alike."""
    if not set(ATLAS_COLUMNS) <= set(runs.columns) or not runs["predicted"].notna().any():
        return ""
    header, rows = atlas_table(runs[runs["predicted"].notna()], level)
    body = [[(_e(text), _sort_key(text)) for text in row] for row in rows]
    return ('<p class="note">The atlas\'s prediction for each encoding beside what training reached (a run '
            'learned when its worst-case N* reached its longest test length), as `formalrope atlas` prints it.</p>'
            + _table("atlas-table", header, body))


def _sort_key(text: str):
    """A cell's number for sorting: 4/18 -> 4/18, 22% -> 22, 12 -> 12; None for text."""
    head = text.split(" ")[0].rstrip("%")
    try:
        if "/" in head:
            done, total = head.split("/")
            return int(done) / int(total) if int(total) else None
        return float(head)
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------------
# Style and script, inline


_STYLE = """
:root{--fg:#1d1f23;--muted:#5b6270;--line:#d6d9de;--head:#f3f4f6;--yes:#0a7a35;--no:#b42318}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0 auto;
max-width:1280px;padding:0 20px 40px}
header{border-bottom:1px solid var(--line);margin-bottom:8px}h1{font-size:22px;margin:18px 0 4px}
h2{font-size:18px;margin:26px 0 8px;border-bottom:1px solid var(--line);padding-bottom:3px}
h3{font-size:15px;margin:14px 0 6px}
nav ul{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:4px 14px}nav a{color:#1a56b0;text-decoration:none}
.meta,.note{color:var(--muted)}.scroll{overflow-x:auto}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:4px 0}
th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:top;white-space:nowrap}
thead th{background:var(--head);position:sticky;top:0}
table.sortable thead th{cursor:pointer;user-select:none}
table.sortable thead th[aria-sort=ascending]::after{content:" ▲"}
table.sortable thead th[aria-sort=descending]::after{content:" ▼"}
tbody tr:nth-child(even){background:#fafafb}
td.yes{color:var(--yes);font-weight:600}td.no{color:var(--no);font-weight:600}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.classes{display:flex;flex-wrap:wrap;gap:10px 40px}.witnesses{max-width:560px;white-space:normal}
svg text{font:12px system-ui,sans-serif}
svg.dfa .state circle{fill:#fff;stroke:var(--fg);stroke-width:1.4}svg.dfa .state.accepting circle{fill:#eaf4ff}
svg.dfa .state text{text-anchor:middle;dominant-baseline:central}svg.dfa .edge{fill:none;stroke:#444;stroke-width:1.2}
svg.dfa .label{text-anchor:middle;dominant-baseline:central;fill:#1a56b0}svg .axis{stroke:#888}
figure{margin:10px 0}figure img{max-width:100%;border:1px solid var(--line)}figcaption{color:var(--muted)}
.filter{display:block;margin:6px 0}.filter input{margin-left:6px;padding:2px 6px;width:220px}
.needs-js{display:none}html.js .needs-js{display:block}tr.filtered-out{display:none}
"""

# Sorting: a click on (or Enter in) a header orders the rows by that column, ascending then
# descending; cells with data-sort compare as numbers, the others as text, "–" last.
# Filtering: rows whose text lacks the box's text (case-insensitive) are hidden.
_SCRIPT = """
document.documentElement.classList.add('js');
(function(){
function key(cell){
  if(!cell) return null;
  var number=cell.getAttribute('data-sort');
  if(number!==null) return parseFloat(number);
  var text=cell.textContent.trim();
  return text==='–'?null:text.toLowerCase();
}
function compare(a,b){
  if(a===null&&b===null) return 0; if(a===null) return 1; if(b===null) return -1;
  if(typeof a==='number'&&typeof b==='number') return a-b;
  return String(a).localeCompare(String(b),undefined,{numeric:true});
}
document.querySelectorAll('table.sortable').forEach(function(table){
  var headers=table.tHead.rows[0].cells;
  Array.prototype.forEach.call(headers,function(th,column){
    function sort(){
      var descending=th.getAttribute('aria-sort')==='ascending';
      Array.prototype.forEach.call(headers,function(other){other.removeAttribute('aria-sort');});
      th.setAttribute('aria-sort',descending?'descending':'ascending');
      var body=table.tBodies[0];
      var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(r1,r2){
        var a=key(r1.cells[column]),b=key(r2.cells[column]);
        if(a===null||b===null) return compare(a,b);
        return descending?compare(b,a):compare(a,b);
      });
      rows.forEach(function(row){body.appendChild(row);});
    }
    th.addEventListener('click',sort);
    th.addEventListener('keydown',function(event){if(event.key==='Enter') sort();});
  });
});
document.querySelectorAll('input[data-filter]').forEach(function(input){
  var table=document.getElementById(input.getAttribute('data-filter'));
  input.addEventListener('input',function(){
    var needle=input.value.trim().toLowerCase();
    Array.prototype.forEach.call(table.tBodies[0].rows,function(row){
      row.classList.toggle('filtered-out',needle!==''&&row.textContent.toLowerCase().indexOf(needle)<0);
    });
  });
});
})();
"""

