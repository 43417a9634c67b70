"""Regenerate the results part of docs/atlas.md from the committed atlas results (never typed by hand).

The atlas's runs and evals Parquet files are committed in `atlas/results/` (`formalrope atlas --out
atlas/results`), so this page can be rebuilt without training:

    python docs/make_atlas.py [--results atlas/results] [--check]

It rewrites two blocks of docs/atlas.md: between `<!-- atlas verdict -->` and `<!-- end atlas
verdict -->` (in the first paragraph: whether NoPE = LTL[P] and RoPE_P = LTL[P,MOD] held at this
breadth and scale) and between `<!-- atlas results -->` and `<!-- end atlas results -->` (the
agreement tables, per-class tables, disagreements and the figure, docs/img/atlas.png), all from
`formal_rope.atlas.agreement` (what `formalrope atlas --report-only` prints), and between `<!-- atlas
follow-up -->` and its end the follow-up of the disagreements (`formal_rope.atlas.follow_up`: what
`formalrope atlas --follow-up` prints), and between `<!-- atlas blind spots -->` and its end the
blind-spot check of `atlas/results/blind-spots` (`formal_rope.atlas.render.blind_spot_markdown`), and
between `<!-- atlas constructed -->` and its end the constructed models cached in
`atlas/results/constructed.json` (`formal_rope.atlas.render.constructed_markdown`).
`--check` only says
whether the page would change (exit 1 if it would).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's package, installed or not

RESULTS = ROOT / "atlas" / "results"
PAGE = ROOT / "docs" / "atlas.md"
FIGURE = ROOT / "docs" / "img" / "atlas.png"
BLIND_SPOTS = "blind-spots"  # the blind-spot check's results, inside the atlas's folder
# encoding -> the claim its runs test
CLAIMS = {"nope": "NoPE = LTL[P] (Li & Cotterell 2025)", "rope_p": "RoPE_P = LTL[P,MOD] (core paper Thm 3.1)"}


def claim_sentence(agreement, encoding: str, claim: str) -> str:
    """What the encoding's runs say about `claim`, in three verdicts: of the languages predicted not
    expressible, on how many the failure the theory guarantees was found (refuted) and on how many it
    was not (every seed right at every tested length: the claim's open cases); of those predicted
    expressible, how many some seed learned, and how many none did, split by whether training fit
    its training lengths (an unlearned expressible language is the recipe's failure, not the
    theory's)."""
    from formal_rope.atlas.agreement import LEARNED, NOT_LEARNED
    from formal_rope.theory import EXPRESSIBLE, NOT_EXPRESSIBLE

    rows = [row for row in agreement.rows if row.encoding == encoding]
    if not rows:
        return f"{claim} was not tested (no {encoding} runs)."
    found = [item for item in agreement.disagreements if item.encoding == encoding]
    standing = [item for item in found if item.kind == LEARNED]
    missed = [item for item in found if item.kind == NOT_LEARNED]
    by_verdict = {row.predicted: row for row in rows}
    parts = []
    impossible = by_verdict.get(NOT_EXPRESSIBLE)
    if impossible is not None:
        shown = ", ".join(f"`{item.language}`" for item in standing)
        parts.append(f"of {impossible.languages} languages predicted not expressible, a failure was found on "
                     f"{impossible.languages - len(standing)} (refuted, as the theory says)"
                     + (f" and not found on {len(standing)} ({shown}: every seed right at every tested length; "
                        "the follow-up and the blind-spot check below look again)" if standing else ", on every one"))
    possible = by_verdict.get(EXPRESSIBLE)
    if possible is not None:
        fit = sum(any(run.get("fit") for run in item.runs) for item in missed)
        parts.append(f"of {possible.languages} predicted expressible, {possible.languages - len(missed)} were learned "
                     f"by some seed" + (f" and {len(missed)} by none ({fit} fit their training lengths and failed "
                                         f"beyond them, {len(missed) - fit} never fit them: the training recipe's "
                                         "failures, which the theory does not predict either way)" if missed else ""))
    return f"{claim}: " + "; ".join(parts) + "."


def planned_languages(results: Path) -> int | None:
    """How many languages the atlas in `results` set out to cover (its atlas-languages.json), or None."""
    import json

    listed = results / "atlas-languages.json"
    if not listed.is_file():
        return None
    entries = json.loads(listed.read_text())
    return len(entries.get("entries", entries) if isinstance(entries, dict) else entries)


def follow_up_sentence(outcomes) -> str:
    """What the follow-up of the disagreements found, in one sentence ("" without a measured one)."""
    from formal_rope.atlas.follow_up import SCALED, SEARCHED, follow_up_summary

    summary = follow_up_summary(outcomes)
    searched, scaled = summary[SEARCHED], summary[SCALED]
    parts = []
    if searched["measured"]:
        parts.append(f"searched further (longer lengths, a larger budget), {searched['failure_found_pairs']} of the "
                     f"{searched['pairs']} learned-but-not-expressible (language, encoding) pairs showed a failure")
    if scaled["measured"]:
        parts.append(f"trained again at a larger scale, {scaled['closed_pairs']} of {scaled['pairs']} sampled "
                     "expressible-but-not-learned pairs were learned by some seed")
    return ("Followed up: " + "; ".join(parts) + " (below).") if parts else ""


def blind_spot_sentence(folder: Path) -> str:
    """What the blind-spot check in `folder` found, per (language, encoding, sampling mode): refuted
    (the shortest failure and its string) or held ("" without runs there)."""
    from formal_rope.atlas.agreement import REFUTED, run_outcomes
    from formal_rope.sweeps.results import read_results

    if not (folder / "runs").is_dir() or not any((folder / "runs").glob("*.parquet")):
        return ""
    cells: dict = {}
    for outcome in run_outcomes(read_results(folder).runs):
        cells.setdefault((outcome.language, outcome.encoding, outcome.sampling), []).append(outcome)
    parts = []
    for (language, encoding, sampling), outcomes in sorted(cells.items()):
        refuted = [o for o in outcomes if o.verdict == REFUTED]
        name = f"{encoding} on `{Path(language).name.removesuffix('.att')}` ({sampling} sampling)"
        if not refuted:
            parts.append(f"{name} held on {len(outcomes)} of {len(outcomes)} runs, the theory's family included")
            continue
        failures = []
        for o in refuted:
            if o.refuted_at is not None and (o.n_star_worst is None or o.refuted_at <= o.n_star_worst):
                failures.append((o.refuted_at, o.family_failure, "the theory's family"))
            elif o.worst_failure:
                failures.append((len(o.worst_failure), o.worst_failure, "the search"))
        length, string, by = min(failures) if failures else (None, None, None)
        shown = f"; shortest failure at length {length}, found by {by}: `{string}`" if string else ""
        parts.append(f"{name} was refuted on {len(refuted)} of {len(outcomes)} runs{shown}")
    return "Evaluated again (below): " + "; ".join(parts) + "."


def constructed_of(results: Path) -> list:
    """The constructed models cached in `results` (`formalrope atlas --report-only RESULTS --constructed`
    builds them; nothing is compiled here)."""
    from formal_rope.atlas.constructed import constructed_models
    from formal_rope.atlas.plan import DEFAULT_BUDGET
    from formal_rope.sweeps.results import read_results

    return constructed_models(results, read_results(results).runs, DEFAULT_BUDGET, compute=False)


def constructed_text(results: Path) -> str:
    from formal_rope.atlas.render import constructed_markdown
    from formal_rope.sweeps.results import read_results

    return constructed_markdown(constructed_of(results), read_results(results).runs)


def verdict_paragraph(agreement, planned: int | None = None, outcomes=(), blind_spots: str = "",
                      constructed: str = "") -> str:
    sentences = [claim_sentence(agreement, encoding, claim) for encoding, claim in CLAIMS.items()]
    if constructed:
        sentences.append(constructed)
    followed = follow_up_sentence(list(outcomes)) if outcomes else ""
    if followed:
        sentences.append(followed)
    if blind_spots:
        sentences.append(blind_spots)
    scope = f"{agreement.languages} languages, {agreement.runs} runs"
    if planned is not None and agreement.languages < planned:
        return (f"**A partial atlas so far** ({scope}; {planned} languages planned: the same command resumes it, "
                "and no claim is settled until it has run): " + " ".join(sentences))
    return f"**At this breadth and scale** ({scope}): " + " ".join(sentences)


def results_markdown(agreement, figure: str | None) -> str:
    from formal_rope.atlas.render import agreement_markdown

    text = agreement_markdown(agreement, limit=None)
    if figure is not None:
        text += f"\n![Success rate per class and encoding, the prediction in each cell]({figure})\n"
    return text


def replaced(text: str, block: str, content: str) -> str:
    """`text` with the block between `<!-- block -->` and `<!-- end block -->` replaced by `content`."""
    pattern = re.compile(rf"(<!-- {block} -->\n)(.*?)(<!-- end {block} -->)", re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"docs/atlas.md has no <!-- {block} --> block")
    return pattern.sub(lambda match: match.group(1) + content.rstrip("\n") + "\n" + match.group(3), text)


def regenerate(text: str, results: Path, figure: Path | None, figure_link: str = "img/atlas.png") -> str:
    """The page `text` with both blocks rebuilt from `results`; the figure drawn at `figure` (None: not
    drawn, as with --check) and linked as `figure_link`."""
    from formal_rope.atlas.agreement import read_agreement
    from formal_rope.atlas.figure import write_figure
    from formal_rope.atlas.follow_up import follow_up_of
    from formal_rope.atlas.render import follow_up_markdown

    agreement = read_agreement(results)
    outcomes = follow_up_of(results, agreement)
    if figure is not None:
        write_figure(agreement, figure, title="the atlas: success rate by class and encoding")
    from formal_rope.atlas.render import constructed_sentence
    from formal_rope.sweeps.results import read_results

    models = constructed_of(results)
    text = replaced(text, "atlas verdict", verdict_paragraph(
        agreement, planned_languages(results), outcomes, blind_spot_sentence(results / BLIND_SPOTS),
        constructed_sentence(models, read_results(results).runs)))
    text = replaced(text, "atlas results", results_markdown(agreement, figure_link))
    if "<!-- atlas follow-up -->" in text:  # a page without the block (an older one) keeps its shape
        text = replaced(text, "atlas follow-up", follow_up_markdown(outcomes))
    if "<!-- atlas constructed -->" in text:
        text = replaced(text, "atlas constructed", constructed_text(results))
    if "<!-- atlas blind spots -->" in text:
        text = replaced(text, "atlas blind spots", blind_spots_text(results / BLIND_SPOTS))
    return text


def blind_spots_text(folder: Path) -> str:
    """The blind-spot check's table (`formal_rope.atlas.render.blind_spot_markdown`) from `folder`."""
    from formal_rope.atlas.render import blind_spot_markdown
    from formal_rope.sweeps.results import read_results

    if not (folder / "runs").is_dir() or not any((folder / "runs").glob("*.parquet")):
        return f"No blind-spot runs in `{folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder}` yet.\n"
    return blind_spot_markdown(read_results(folder))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if not (args.results / "runs").is_dir():
        print(f"no atlas results in {args.results} (run `formalrope atlas --out {args.results}`); page left as it is",
              file=sys.stderr)
        return 0
    text = PAGE.read_text()
    new = regenerate(text, args.results, None if args.check else FIGURE)
    if args.check:
        print("docs/atlas.md would change" if new != text else "docs/atlas.md is up to date")
        return 1 if new != text else 0
    PAGE.write_text(new)
    print("rewrote docs/atlas.md and docs/img/atlas.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
