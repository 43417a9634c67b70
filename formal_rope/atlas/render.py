"""The agreement tables as Markdown: what `formalrope atlas` prints and docs/make_atlas.py writes."""

from __future__ import annotations

import math

from formal_rope.atlas.agreement import LEARNED, NOT_LEARNED, Agreement
from formal_rope.atlas.follow_up import SCALED, SEARCHED, FollowUpOutcome, follow_up_summary
from formal_rope.sampling.text import shown_string
from formal_rope.sweeps.statistics import CLOPPER_PEARSON
from formal_rope.theory import VERDICTS


def _percent(value: float) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.0%}"


def _fine_percent(value: float) -> str:
    """A bound in percent to 0.1 ('8.8%', '0%', '100%'): whole percents would round 0–8.8% to 0–9%."""
    text = f"{100 * value:.1f}"
    return (text[:-2] if text.endswith(".0") else text) + "%"


def _interval(interval: dict) -> str:
    """'0%–8.8%' (exact Clopper–Pearson / bootstrap at the level), '0%–100% (50%)' (order statistics:
    with their coverage), '–'."""
    if interval["method"] == "none":
        return "–"
    span = f"{_fine_percent(interval['low'])}–{_fine_percent(interval['high'])}"
    return span if interval["method"] in ("bootstrap", CLOPPER_PEARSON) else f"{span} ({interval['coverage']:.0%})"


def _string(text: str) -> str:
    """A failing string in Markdown: in full, run-length compressed or visibly cut
    (`sampling.text.shown_string`), as code, with its length."""
    return f"`{shown_string(text)}` (len {len(text)})"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]


def agreement_cells(agreement: Agreement) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the agreement table, grouped by encoding, then predicted verdict: what the
    terminal prints and the results page shows (one grouping, one text)."""
    level = f"{agreement.level:.0%}"
    header = ["encoding", "predicted", "runs learned", "run rate", f"run {level} CI", "languages",
              "all seeds", "no seed", "language rate", f"language {level} CI"]
    rows = [[row.encoding, row.predicted, f"{row.learned_runs}/{row.runs}"
             + (f" ({row.failed_runs} failed)" if row.failed_runs else ""), _percent(row.run_rate),
             _interval(row.run_interval), str(row.languages), str(row.languages_all_seeds), str(row.languages_no_seed),
             _percent(row.language_rate), _interval(row.language_interval)] for row in agreement.rows]
    return header, rows


def agreement_table(agreement: Agreement) -> list[str]:
    """Per encoding and predicted verdict: runs learned, and languages' success rates, with intervals."""
    return _table(*agreement_cells(agreement))


def class_table(agreement: Agreement, kind: str) -> list[str]:
    """Per class of `kind` ("logic" or "MLRegTest"): one row per class, one column per encoding
    holding the success rate of its runs and the predictions its languages got."""
    classes = list(dict.fromkeys(row.language_class for row in agreement.classes if row.kind == kind))
    cells = {(row.language_class, row.encoding): row for row in agreement.classes if row.kind == kind}
    rows = []
    for language_class in classes:
        line = [language_class, str(max(row.languages for key, row in cells.items() if key[0] == language_class))]
        for encoding in agreement.encodings:
            row = cells.get((language_class, encoding))
            if row is None:
                line.append("–")
                continue
            predicted = ", ".join(f"{verdict} {row.predicted[verdict]}" if len(row.predicted) > 1 else verdict
                                  for verdict in VERDICTS if verdict in row.predicted)
            line.append(f"{_percent(row.rate)} ({row.learned_runs}/{row.runs}); {predicted}")
        rows.append(line)
    return _table([f"{kind} class", "languages", *agreement.encodings], rows)


def disagreement_lines(agreement: Agreement, limit: int | None = None) -> list[str]:
    """One bullet per disagreement with its evidence (N* sampled/worst-case per seed, a failing string)."""
    lines = []
    for kind in (LEARNED, NOT_LEARNED):
        found = [item for item in agreement.disagreements if item.kind == kind]
        lines.append(f"**{kind}**: {len(found)}" + ("" if found else " (none)"))
        for item in found[:limit]:
            runs = "; ".join(
                f"seed {run['seed']}: N* {run['n_star']}/{'–' if run['n_star_worst'] is None else run['n_star_worst']}"
                f" of {run['longest']}"
                + (f", fails on {_string(run['worst_failure'])}" if run["worst_failure"] else "")
                for run in item.runs)
            mlregtest = item.mlregtest_class and f"MLRegTest {item.mlregtest_class}"
            classes = ", ".join(filter(None, (item.logic_class, mlregtest)))
            lines.append(f"- {item.encoding} on `{item.language}` ({classes}): {runs}. "
                         f"Predicted by {item.predicted_by}")
        if limit is not None and len(found) > limit:
            lines.append(f"- … and {len(found) - limit} more (`--json` lists them all)")
    return lines


def agreement_markdown(agreement: Agreement, limit: int | None = 20) -> str:
    """The whole report: agreement table, class tables, disagreements."""
    searched = "worst-case N*" if agreement.searched else "N* (sampled where a run was not searched)"
    parts = [f"{agreement.runs} runs on {agreement.languages} languages; a run learned when its {searched} "
             "reached its longest tested length.", "", "### Agreement per encoding", "", *agreement_table(agreement),
             "", "### Per logic class", "", *class_table(agreement, "logic")]
    if any(row.kind == "MLRegTest" for row in agreement.classes):
        parts += ["", "### Per MLRegTest class", "", *class_table(agreement, "MLRegTest")]
    parts += ["", "### Disagreements", "", *disagreement_lines(agreement, limit)]
    return "\n".join(parts) + "\n"


def _measure(value) -> str:
    return "–" if value is None else str(value)


def _follow_up_row(outcome: FollowUpOutcome) -> list[str]:
    if outcome.learned is None:
        found = "failed" if outcome.status == "failed" else "not run yet"
    elif outcome.kind == SEARCHED:
        if outcome.learned:
            found = "none"
        elif outcome.worst_failure:
            found = f"at {len(outcome.worst_failure)}: `{shown_string(outcome.worst_failure)}`"
        else:
            found = f"N* {outcome.n_star_worst}"
    else:
        found = "learned" if outcome.learned else (f"fails on {_string(outcome.worst_failure)}"
                                                   if outcome.worst_failure else "not learned")
    return [outcome.encoding, f"`{outcome.language}`", str(outcome.seed),
            f"{_measure(outcome.source_n_star_worst)} of {outcome.source_longest}",
            f"{_measure(outcome.n_star)}/{_measure(outcome.n_star_worst)} of {outcome.longest}",
            _measure(outcome.strings_tried), found]


def follow_up_markdown(outcomes: list[FollowUpOutcome]) -> str:
    """The follow-up of the disagreements: per kind a sentence of counts and a table of runs."""
    if not outcomes:
        return "No follow-up has been planned (`formalrope atlas --follow-up`).\n"
    summary = follow_up_summary(outcomes)
    parts = []
    searched, scaled = summary[SEARCHED], summary[SCALED]
    if searched["runs"]:
        longest = max(o.longest for o in outcomes if o.kind == SEARCHED)
        parts += [f"**{LEARNED}, {SEARCHED}** (trained again, tested up to {longest} with a larger search): "
                  f"{searched['measured']} of {searched['runs']} runs measured; a failure found on "
                  f"{searched['failure_found_runs']} runs, {searched['failure_found_pairs']} of {searched['pairs']} "
                  "(language, encoding) pairs.", ""]
        parts += _table(["encoding", "language", "seed", "atlas worst-case N*", "follow-up N* (sampled/worst)",
                         "strings searched", "failure found"],
                        [_follow_up_row(o) for o in outcomes if o.kind == SEARCHED]) + [""]
    if scaled["runs"]:
        models = ", ".join(sorted({o.model for o in outcomes if o.kind == SCALED}))
        parts += [f"**{NOT_LEARNED}, {SCALED}** (a sample trained again at a larger scale: {models}): "
                  f"{scaled['measured']} of {scaled['runs']} runs measured; {scaled['learned_runs']} learned; the gap "
                  f"closed on {scaled['closed_pairs']} of {scaled['pairs']} (language, encoding) pairs.", ""]
        parts += _table(["encoding", "language", "seed", "atlas worst-case N*", "follow-up N* (sampled/worst)",
                         "strings searched", "outcome"],
                        [_follow_up_row(o) for o in outcomes if o.kind == SCALED]) + [""]
    return "\n".join(parts)
