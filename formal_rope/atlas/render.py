"""The agreement tables as Markdown: what `formalrope atlas` prints and docs/make_atlas.py writes."""

from __future__ import annotations

import math
from types import SimpleNamespace

from formal_rope.atlas.agreement import LEARNED, NOT_LEARNED, Agreement, agreement_of, cell_value, run_outcomes
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
    """(header, rows) of the agreement table, grouped by encoding, then predicted verdict: runs refuted /
    learned / not learned (fit, not fit), and languages' success rates, with intervals. What the
    terminal prints and the results page shows (one grouping, one text)."""
    level = f"{agreement.level:.0%}"
    header = ["encoding", "predicted", "refuted", "learned", "not learned (fit / not fit)", "run rate",
              f"run {level} CI", "languages", "all seeds", "no seed", "language rate", f"language {level} CI"]
    rows = [[row.encoding, row.predicted, str(row.refuted_runs), f"{row.learned_runs}/{row.runs}"
             + (f" ({row.failed_runs} failed)" if row.failed_runs else ""),
             f"{row.missed_fit_runs} / {row.missed_unfit_runs}" if row.missed_fit_runs + row.missed_unfit_runs else "–",
             _percent(row.run_rate),
             _interval(row.run_interval), str(row.languages), str(row.languages_all_seeds), str(row.languages_no_seed),
             _percent(row.language_rate), _interval(row.language_interval)] for row in agreement.rows]
    return header, rows


def agreement_cells_of_runs(runs, level: float) -> tuple[list[str], list[list[str]]]:
    """`agreement_cells` of a results table's runs (pandas, with the atlas's prediction columns): what
    the results page draws for an atlas folder (`sweeps.results_page.write_results_page(atlas_table=)`)."""
    return agreement_cells(agreement_of(SimpleNamespace(runs=runs), level))


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


def _run_evidence(run: dict, kind: str) -> str:
    """One seed's evidence: N* sampled/worst-case, the failing string, the families, whether it fit."""
    text = f"seed {run['seed']}: N* {run['n_star']}/{'–' if run['n_star_worst'] is None else run['n_star_worst']}" \
           f" of {run['longest']}"
    if run["worst_failure"]:
        text += f", fails on {_string(run['worst_failure'])}"
    if run.get("family_strings_tried") is not None:
        text += (f", the theory's family held on {run['family_strings_tried']} strings" if run.get("refuted_at") is None
                 else f", refuted by the family at length {run['refuted_at']}: {_string(run['family_failure'])}")
    if kind == NOT_LEARNED and run.get("fit") is not None:
        by_loss = run.get("fit_by") == "final loss"
        if run["fit"]:
            text += ", training fit" + (" (final loss < 0.01)" if by_loss else " (final training accuracy ≥ 99%)")
        else:
            text += ", training did not fit" + (" (final loss ≥ 0.01)" if by_loss
                                                else " (final training accuracy < 99%)")
    return text


def disagreement_lines(agreement: Agreement, limit: int | None = None) -> list[str]:
    """One bullet per disagreement with its evidence (N* sampled/worst-case per seed, a failing string,
    the theory's family, whether training fit)."""
    lines = []
    for kind in (LEARNED, NOT_LEARNED):
        found = [item for item in agreement.disagreements if item.kind == kind]
        lines.append(f"**{kind}**: {len(found)}" + ("" if found else " (none)"))
        for item in found[:limit]:
            runs = "; ".join(_run_evidence(run, kind) for run in item.runs)
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
    modes = agreement.sampling or {"uniform": agreement.runs}
    drawn = ", ".join(f"{mode} sampling for {count}" for mode, count in modes.items())
    families = (f"; {agreement.family_tested} runs predicted not expressible were also scored on the theory's "
                "families, and a misclassified family string counts as a failure" if agreement.family_tested
                else "; no run was scored on the theory's families (results written before they existed)")
    parts = [f"{agreement.runs} runs on {agreement.languages} languages (data drawn by {drawn}); a run learned when "
             f"its {searched} reached its longest tested length{families}. A run predicted not expressible is "
             "**refuted** when a failure was found (the one the theory guarantees); a run not learned is **fit** "
             "when training fit its training lengths (final training accuracy ≥ 99%; runs without it: final "
             "loss < 0.01).", "", "### Agreement per encoding", "", *agreement_table(agreement),
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


def _blind_spot_row(outcome, row: dict) -> list[str]:
    covered, total = cell_value(row.get("test_transitions_covered")), cell_value(row.get("test_transitions"))
    tried = cell_value(row.get("family_strings_tried"))
    if tried is None:
        family = "not tested"
    elif outcome.refuted_at is None:
        family = f"held on all {tried} strings"
    else:
        family = f"refuted at length {outcome.refuted_at}: `{shown_string(outcome.family_failure)}`"
    worst = "–" if outcome.n_star_worst is None else str(outcome.n_star_worst)
    search = (f"at {len(outcome.worst_failure)}: `{shown_string(outcome.worst_failure)}`" if outcome.worst_failure
              else "none")
    accuracy = cell_value(row.get("final_train_accuracy"))
    return [outcome.encoding, outcome.sampling, str(outcome.seed), f"{outcome.n_star}/{worst} of {outcome.longest}",
            _measure(cell_value(row.get("worst_strings_tried"))), search,
            "–" if covered is None else f"{covered}/{total}", family,
            "–" if accuracy is None else f"{accuracy:.1%}", outcome.verdict or "failed"]


def blind_spot_markdown(results) -> str:
    """The blind-spot check of a results folder read back (`sweeps.results.read_results`): per run its
    sampling mode, N* (sampled/worst-case), the search's failure, the transitions of the minimal DFA
    its test strings took, the theory's family (held, or refuted at a length, with the string), the
    final training accuracy and the run's verdict; then the families tested, once each."""

    rows = {row["run_id"]: row for row in results.runs.to_dict("records")}
    outcomes = sorted(run_outcomes(results.runs), key=lambda o: (o.language, o.encoding, o.sampling, o.seed))
    table = _table(["encoding", "sampling", "seed", "N* (sampled/worst)", "strings searched", "search found",
                    "test transitions covered", "theory's family", "final train accuracy", "verdict"],
                   [_blind_spot_row(o, rows[o.run_id]) for o in outcomes])
    families = sorted({(o.language, cell_value(rows[o.run_id].get("family"))) for o in outcomes
                       if cell_value(rows[o.run_id].get("family"))})
    lines = [f"- `{language}`: {family} (the DFA labels the two strings of each m differently)"
             for language, family in families]
    return "\n".join(table + ([""] + lines if lines else [])) + "\n"


def _training_best(outcomes, language: str, encoding: str) -> str:
    """The best worst-case N* any seed of `encoding` reached on `language`, and of how many seeds ('–': no run)."""
    runs = [o for o in outcomes if o.language == language and o.encoding == encoding and o.predicted == "expressible"]
    if not runs:
        return "–"
    measured = [o.n_star_worst if o.n_star_worst is not None else o.n_star for o in runs if o.learned is not None]
    learned = sum(bool(o.learned) for o in runs)
    best = max((value for value in measured if value is not None), default=None)
    return f"{'–' if best is None else best} ({learned}/{len(runs)} learned)"


def constructed_summary(models, runs) -> dict:
    """How many expressible languages have a constructed model right at every tested length (the
    worst-case search included), and how many of those training learned under some encoding."""
    outcomes = run_outcomes(runs)
    right = [m for m in models if m.status == "ok" and m.n_star_worst == m.longest and m.failure is None]
    learned = {o.language for o in outcomes if o.learned and o.predicted == "expressible"
               and o.encoding in ("nope", "rope_p")}
    # function-local: atlas.constructed imports torch (the training data); the report stays torch-free
    from formal_rope.atlas.constructed import expressible_languages

    return {"languages": len(expressible_languages(runs)), "measured": len(models),
            "built": sum(m.status == "ok" for m in models), "right": len(right),
            "learned_by_training": sum(m.language in learned for m in right),
            "largest_d_model": max((m.d_model for m in right), default=0),
            "largest_layers": max((m.layers for m in right), default=0)}


def constructed_sentence(models, runs) -> str:
    """One sentence for the atlas's headline ("" when no constructed model was measured)."""
    if not models:
        return ""
    summary = constructed_summary(models, runs)
    refused = summary["measured"] - summary["built"]
    unmeasured = summary["languages"] - summary["measured"]
    wrong = summary["built"] - summary["right"]
    sparse = sum(0 < m.lengths_measured < m.lengths_tested for m in models if m.status == "ok")
    return (f"Constructed: for {summary['right']} of the {summary['languages']} languages predicted expressible the "
            "compiler built the exact transformer the theory promises and it was right at every length it was "
            "measured at, on the trained runs' test sets and under the worst-case search "
            f"(up to {summary['largest_layers']} layers, d_model {summary['largest_d_model']}"
            + (f"; the {sparse} largest measured at a subset of the tested lengths, with a smaller search budget"
               if sparse else "") + ")"
            + (f"; {wrong} built but wrong somewhere" if wrong else "")
            + (f"; {refused} not built" if refused else "")
            + (f"; {unmeasured} not measured yet (`formalrope atlas --report-only OUT --constructed` builds them)"
               if unmeasured else "")
            + f"; training learned {summary['learned_by_training']} of those {summary['right']} by some seed of NoPE "
            "or RoPE_P (an unlearned one is a model that exists and that training did not find).")


def constructed_cells(models, runs) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the constructed models beside training: what docs/atlas.md and the results
    page show (plain text; code marks added by the Markdown)."""
    outcomes = run_outcomes(runs)
    rows = []
    for model in sorted(models, key=lambda m: (m.d_model, m.language)):
        if model.status != "ok":
            built, measured = f"not built: {model.status}", "–"
        else:
            built = f"{model.method}, {model.formula_size} nodes: {model.layers} layers, {model.heads} heads, " \
                    f"d_model {model.d_model}"
            measured = f"{model.n_star}/{model.n_star_worst} of {model.longest}"
            if 0 < model.lengths_measured < model.lengths_tested:
                measured += f" (at {model.lengths_measured} of the {model.lengths_tested} tested lengths)"
            if model.failure:
                measured += f", fails on {shown_string(model.failure)}"
        searched = f"{model.strings_tried:,} (budget {model.budget})" if model.status == "ok" else "–"
        rows.append([model.language, built, measured, searched, _training_best(outcomes, model.language, "nope"),
                     _training_best(outcomes, model.language, "rope_p"), f"{model.seconds:.0f} s"])
    header = ["language", "constructed model (fp32)", "constructed N* (sampled/worst)", "strings searched",
              "NoPE trained: best worst-case N*", "RoPE_P trained: best worst-case N*", "cost"]
    return header, rows


def constructed_cells_of_folder(out, runs) -> tuple[list[str], list[list[str]]] | None:
    """`constructed_cells` of the models cached in an atlas folder (None when none were measured)."""
    # function-local: atlas.constructed imports torch (the training data); the report stays torch-free
    from formal_rope.atlas.constructed import read_constructed

    models = list(read_constructed(out).values())
    languages = set(runs["language"]) if "language" in runs.columns else set()
    models = [model for model in models if model.language in languages]
    return constructed_cells(models, runs) if models else None


def constructed_markdown(models, runs) -> str:
    """Per expressible language: its constructed model (how it was found, its size, N* sampled/worst
    of the longest tested length, the search's failure) beside the best worst-case N* training reached
    under NoPE and RoPE_P (and how many seeds learned)."""
    if not models:
        return "No constructed models measured yet (`formalrope atlas --report-only OUT --constructed`).\n"
    header, rows = constructed_cells(models, runs)
    rows = [[f"`{row[0]}`", *row[1:]] for row in rows]
    return "\n".join(_table(header, rows)) + "\n"
