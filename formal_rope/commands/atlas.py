"""CLI: `atlas` — the theory's prediction beside training, over a language set (docs/atlas.md).

Builds the language set (`formal_rope.atlas.languages`), plans its runs through the sweep machinery
(`formal_rope.atlas.plan`), runs them as a sweep (local pool or Ray; a rerun skips finished runs)
and prints the agreement tables (`formal_rope.atlas.agreement`) and writes the figure. This module
loads only when `atlas` runs (cli.COMMANDS), so it imports the library at its top.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.console import Console

from formal_rope.atlas.agreement import agreement_of, read_agreement
from formal_rope.atlas.constructed import constructed_models
from formal_rope.atlas.estimate import calibrate, duration_text
from formal_rope.atlas.estimate import estimate as estimate_of
from formal_rope.atlas.figure import write_figure
from formal_rope.atlas.follow_up import DEFAULT_BUDGET as FOLLOW_UP_BUDGET
from formal_rope.atlas.follow_up import (
    DEFAULT_MAX_LENGTH,
    DEFAULT_SAMPLE,
    LEARNED,
    NOT_LEARNED,
    SEARCHED,
    FollowUpRequest,
    follow_up_folder,
    follow_up_of,
    plan_follow_up,
    write_plan,
)
from formal_rope.atlas.follow_up import DEFAULT_SCALE as FOLLOW_UP_SCALE
from formal_rope.atlas.languages import merged_language_set, parse_set_spec, read_language_set
from formal_rope.atlas.plan import DEFAULT_BUDGET, atlas_request, calibration_config, encoding_label, plan_atlas
from formal_rope.atlas.render import (
    agreement_markdown,
    constructed_markdown,
    constructed_sentence,
    constructed_summary,
    follow_up_markdown,
)
from formal_rope.commands import run_options as ro
from formal_rope.commands.run_options import check_positive
from formal_rope.commands.sweep_display import interrupted, run_with_progress
from formal_rope.commands.terminal import check_output_place, json_ready
from formal_rope.errors import FormalRopeError
from formal_rope.files import write_bytes_atomically
from formal_rope.sweeps.checks import resolve_grid
from formal_rope.sweeps.plan import swept_fields
from formal_rope.sweeps.results import ATLAS_LANGUAGES_FILE, ensure_results_dir, finished_run_ids, read_results

DEFAULT_OUT = Path("results/atlas")
LANGUAGES_FILE = ATLAS_LANGUAGES_FILE  # the set's entries, beside runs/ and evals/
FIGURE_FILE = "atlas.png"
ATLAS_PACK = "auto/languages"  # the atlas's --pack unless one is given: packs mix languages

_ESTIMATE_HELP = (
    "With --dry-run: the run count and an estimate of core-hours measured on this machine: a warm-up and "
    "three short calibration runs of the atlas's model and recipe (10 and 40 steps, 2 and 10 test lengths, each "
    "timed twice, the faster kept) give seconds per step and per tested length; a run costs fixed + steps × "
    "per-step + lengths × per-length, core-hours = runs × that / 3600 (each run trained alone on one core; "
    "packs only make it shorter). About 10 s; --no-estimate skips it."
)


def _split(text: str) -> list[str]:
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise FormalRopeError(f"--pe {text!r}: expected a comma-separated list without empty items")
    return parts


def _periods(text: str):
    if text.strip() == "auto":
        return "auto"
    try:
        periods = tuple(int(part) for part in text.split(","))
    except ValueError:
        periods = ()
    if not periods or any(period < 1 for period in periods):
        raise FormalRopeError(f"--periods {text!r}: expected auto or positive integers like 2,3")
    if len(set(periods)) < len(periods):
        raise FormalRopeError(f"--periods {text!r} names a period twice; list each once")
    return periods


def _print_json(payload) -> None:
    print(json.dumps(json_ready(payload), indent=2, allow_nan=False))


def _constructed(out: Path, runs, budget: int, compute: bool) -> list:
    """The constructed models of `out`'s expressible languages: cached ones, and (when `compute`) the
    missing ones built and measured now, one line each on stderr."""
    console = Console(stderr=True)

    def said(model) -> None:
        worst = "–" if model.n_star_worst is None else model.n_star_worst
        console.print(f"constructed {model.language}: {model.status}, N* {model.n_star}/{worst} of "
                      f"{model.longest}, {model.layers} layers, d_model {model.d_model} ({model.seconds:.0f} s)",
                      highlight=False, soft_wrap=True)

    return constructed_models(out, runs, budget, compute=compute, on_built=said)


def _report(out: Path, json_output: bool, figure: Path | None, level: float, extra: dict | None = None,
            constructed: bool = False, budget: int = DEFAULT_BUDGET) -> None:
    """Print the agreement tables of `out` (Markdown, or JSON) and draw the figure at `figure` (None: none);
    the constructed models measured so far beside them (`constructed`: the missing ones built first)."""
    results = read_results(out)
    agreement = agreement_of(results, level)
    models = _constructed(out, results.runs, budget, constructed)
    written = write_figure(agreement, figure, title=f"atlas: {out}") if figure is not None else None
    if json_output:
        _print_json({**(extra or {}), "results": str(out), "figure": None if written is None else str(written),
                     **agreement.to_json(), "constructed": [model.to_json() for model in models],
                     "constructed_summary": constructed_summary(models, results.runs) if models else None})
        return
    print(agreement_markdown(agreement))
    if models:
        print("## Constructed models\n\n" + constructed_sentence(models, results.runs) + "\n\n"
              + constructed_markdown(models, results.runs))
    if written is not None:
        print(f"figure written to {written}")


# The options each mode reads; one given where its mode does not read it is refused, never ignored.
_ATLAS_ONLY = ("set_spec", "per_cell", "pe", "periods", "seeds", "scale", "eval_mode", "worst_case_budget")
_FOLLOW_UP_ONLY = ("follow_up_budget", "follow_up_max_length", "follow_up_sample", "follow_up_scale")
_RUN_OPTIONS = ("workers", "dry_run", *ro.RunFlags._fields)


def _given_options(context) -> dict[str, str]:
    """The options given on the command line (parameter name -> its flag); none without a context
    (the function called from Python)."""
    if context is None:
        return {}
    given = {}
    for param in context.command.params:
        source = context.get_parameter_source(param.name)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            given[param.name] = "/".join(param.opts + list(getattr(param, "secondary_opts", []) or []))
    return given


def _refuse(given: dict[str, str], names, why: str) -> None:
    unused = [given[name] for name in names if name in given]
    if unused:
        raise FormalRopeError(f"{', '.join(unused)} {'has' if len(unused) == 1 else 'have'} no effect {why}; "
                              "leave it out")


def _check_modes(given: dict[str, str], report_only: bool, follow_up: bool, dry_run: bool) -> None:
    if report_only:
        kept = ("worst_case_budget",) if "constructed" in given else ()  # the constructed models' search
        _refuse(given, ("follow_up", "seed", "steps", "out", "estimate", *(n for n in _ATLAS_ONLY if n not in kept),
                        *_FOLLOW_UP_ONLY, *_RUN_OPTIONS), "with --report-only (it reads the folder and trains nothing)")
    elif follow_up:
        _refuse(given, _ATLAS_ONLY, "with --follow-up (it reruns the atlas in --out with that atlas's languages, "
                "encodings and recipe)")
        _refuse(given, ("figure", "confidence", "estimate", "constructed"), "with --follow-up")
    else:
        _refuse(given, _FOLLOW_UP_ONLY, "without --follow-up")
    if not dry_run:
        _refuse(given, ("estimate",), "without --dry-run")
    else:
        _refuse(given, ("figure",), "with --dry-run (it draws nothing)")
        _refuse(given, ("constructed",), "with --dry-run (it builds nothing)")


def _plan_lines(plan, request, finished: set[str], out: Path) -> list[str]:
    """What the plan runs, as the dry run and the real run both say it."""
    runs = len(plan.configs)
    done = sum(config.run_id() in finished for config in plan.configs)
    others = len(finished) - done
    lines = [f"{plan.languages.spec} (seed {plan.languages.seed}): {len(plan.languages)} languages, "
             f"{len(request.encodings)} encodings, {request.recipe.seeds} seeds: {runs} runs "
             f"({request.recipe.scale} scale) → {out}"]
    if plan.dropped:
        names = ", ".join(entry.id for entry in plan.dropped[:3]) + (", ..." if len(plan.dropped) > 3 else "")
        lines.append(f"{len(plan.dropped)} listed language(s) left out: the same language as an earlier entry "
                     f"({names})")
    if done or others:
        lines.append(f"{out} holds {done} of these runs finished (skipped) and {others} other run(s), kept")
    return lines


def _dry_run(plan, request, out: Path, estimate: bool, workers: int, json_output: bool) -> None:
    """The plan the real run would run (built by the same code), and, with `estimate`, its cost."""
    finished = finished_run_ids(out) if out.is_dir() else set()
    to_run = [config for config in plan.configs if config.run_id() not in finished]
    payload = {"set": plan.languages.spec, "seed": plan.languages.seed, "languages": len(plan.languages),
               "encodings": [item.name for item in request.encodings], "seeds": request.recipe.seeds,
               "scale": request.recipe.scale, "runs": len(plan.configs), "to_run": len(to_run),
               "dropped": [entry.id for entry in plan.dropped], "other_runs_in_out": len(finished - {
                   config.run_id() for config in plan.configs})}
    lines = _plan_lines(plan, request, finished, out)
    if estimate and to_run:
        template = calibration_config(request.recipe)
        result = estimate_of([template], calibrate(template, request.worst_case), runs=len(to_run))
        payload["estimate"] = result.to_dict(workers)
        lines.append(
            f"estimate on this machine: {result.seconds_per_run:.0f} s per run that never learns, "
            f"{result.worst_seconds_per_run:.0f} s per run that learns (searched at every tested length); "
            f"{len(to_run)} runs: {duration_text(result.core_hours_if_none_learns)} to "
            f"{duration_text(result.core_hours)} of one core, at most about "
            f"{duration_text(result.wall_hours(workers))} "
            f"with {workers} worker(s) (calibrated in {result.calibration.measured_s:.0f} s; packs make it shorter)")
    if json_output:
        _print_json(payload)
    else:
        print("\n".join(lines))


@ro.with_option_groups
def atlas(
    ctx: typer.Context,
    set_spec: str = typer.Option(
        "default", "--set",
        help="The language set: default (51 languages), full (all 930 MLRegTest automata + 500 generated), or a "
        "spec joining parts with +, such as mlregtest:per_cell=2 (docs/atlas.md).",
    ),
    per_cell: Optional[int] = typer.Option(
        None, "--per-cell", help="MLRegTest languages per (alphabet size, class) cell (replaces the set's per_cell)."
    ),
    seed: int = typer.Option(
        0, "--seed", help="The language set's seed (sampling and generation), and the follow-up's sample."
    ),
    pe: str = typer.Option(
        "nope,rope_p,rope,rope_w8+nope", "--pe", show_default=False,
        help="Encodings, comma-separated: registry encodings or windowed hybrids ENC_wW+nope (every layer but the "
        "last ENC with a window of W keys, the last global NoPE). Default: nope, rope_p, rope and rope_w8+nope.",
    ),
    periods: str = typer.Option(
        "auto", "--periods",
        help="auto (each language's least k; outside LTL[P,MOD] the counting modulus, else 2) or periods 2,3.",
    ),
    seeds: int = typer.Option(2, "--seeds", help="Training seeds per language and encoding."),
    scale: str = typer.Option("quick", "--scale", help="quick, medium or paper (docs/training.md)."),
    steps: Optional[int] = typer.Option(
        None, "--steps", help="Training steps per run (default: the scale's); with --follow-up, of the scaled reruns."
    ),
    eval_mode: str = typer.Option(
        "worst-case", "--eval",
        help="worst-case (the default: the outcome is the worst-case N*) or full (sampled N* only).",
    ),
    worst_case_budget: int = typer.Option(
        64, "--worst-case-budget", help="Strings per test length the worst-case search scores beyond the test set."
    ),
    out: Path = typer.Option(
        DEFAULT_OUT, "--out",
        help="Results folder (runs/, evals/, atlas-languages.json, atlas.png); finished runs there are skipped, "
        "so rerunning resumes. The committed atlas lives in atlas/results.",
    ),
    workers: int = typer.Option(2, "--workers", help="Parallel worker processes (local backend) or Ray tasks."),
    run: ro.RunFlags = None,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the plan (languages and runs, built as the real run builds them: what it "
        "refuses is refused) and the estimate; run nothing. With --follow-up: every planned run."),
    estimate: bool = typer.Option(True, "--estimate/--no-estimate", help=_ESTIMATE_HELP),
    report_only: Optional[Path] = typer.Option(
        None, "--report-only", help="Print the agreement tables of this results folder; train and write nothing "
        "(--figure PATH draws its figure).",
    ),
    figure: Optional[Path] = typer.Option(
        None, "--figure", show_default=False,
        help="Draw the figure (success rate per class and encoding) into this PNG. Default: OUT/atlas.png after a "
        "run; with --report-only no figure unless this is given (a report writes nothing unless asked).",
    ),
    follow_up: bool = typer.Option(
        False, "--follow-up",
        help="Rerun the disagreements of the atlas in --out into OUT/follow-up (resumable): every 'not expressible, "
        "learned' run tested to --follow-up-max-length with --follow-up-budget strings per length, and a sample of "
        "'expressible, not learned' languages (every seed) at --follow-up-scale; prints what each found.",
    ),
    follow_up_budget: int = typer.Option(
        FOLLOW_UP_BUDGET, "--follow-up-budget", help="With --follow-up: the search's strings per test length."
    ),
    follow_up_max_length: int = typer.Option(
        DEFAULT_MAX_LENGTH, "--follow-up-max-length",
        help="With --follow-up: the longest test length of the runs searched further.",
    ),
    follow_up_sample: int = typer.Option(
        DEFAULT_SAMPLE, "--follow-up-sample",
        help="With --follow-up: how many 'expressible, not learned' (language, encoding) pairs to train again.",
    ),
    follow_up_scale: str = typer.Option(
        FOLLOW_UP_SCALE, "--follow-up-scale", help="With --follow-up: the scale of the sampled pairs' reruns."
    ),
    constructed: bool = typer.Option(
        False, "--constructed",
        help="Also compile the exact transformer of every language a NoPE / RoPE_P run predicts expressible "
        "(`formalrope formula` + `compile`, fp32) and measure it like a run (the run's test sets, then the "
        "worst-case search at --worst-case-budget): constructed N* beside training. Cached in OUT/constructed.json; "
        "minutes per language. Without it the report shows the cached ones.",
    ),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the intervals."),
    json_output: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Put the theory's prediction beside training over a language set: plan, run (resumable), agreement tables."""
    _check_modes(_given_options(ctx), report_only is not None, follow_up, dry_run)
    check_positive(workers=workers, seeds=seeds, steps=steps)
    if not 0 < confidence < 1:
        raise FormalRopeError(f"--confidence must lie strictly between 0 and 1, got {confidence}")
    if figure is not None:
        check_output_place(figure, "the figure")
    if report_only is not None:
        _report(report_only, json_output, figure, confidence, constructed=constructed, budget=worst_case_budget)
        return

    if follow_up:
        request = FollowUpRequest(budget=follow_up_budget, max_length=follow_up_max_length, sample=follow_up_sample,
                                  scale=follow_up_scale, seed=seed, steps=steps)
        run.check(workers)  # what a real run checks, contacting nothing
        if not dry_run:
            check_output_place(follow_up_folder(out, request), "the follow-up folder", folder=True)
        _run_follow_up(request, out, workers, run, json_output, dry_run)
        return
    spec = parse_set_spec(set_spec)  # parsed once: its size, per-cell draw and build read the value
    spec = spec if per_cell is None else spec.with_per_cell(per_cell)
    request = atlas_request(_split(pe), scale=scale, seeds=seeds, periods=_periods(periods), eval_mode=eval_mode,
                            budget=worst_case_budget, steps=steps)
    run.check(workers)  # before the set is built: contacts nothing
    if not dry_run:
        check_output_place(out, "the results folder", folder=True)
        read_language_set(out / LANGUAGES_FILE)  # a damaged record: refused before the set is built
    plan = plan_atlas(spec, seed, request)
    console = Console(stderr=True)
    resolved = resolve_grid(list(plan.configs), "atlas", dfas=plan.dfas)  # each run once, on the set's DFAs
    for note in resolved.notes:
        console.print(f"[dim]note: {note}[/]", highlight=False, soft_wrap=True)
    if dry_run:
        _dry_run(plan, request, out, estimate, workers, json_output)
        return
    _run_atlas(plan, request, out, workers, run, json_output, confidence,
               out / FIGURE_FILE if figure is None else figure, console, resolved.runs, constructed, worst_case_budget)


def _run_atlas(plan, request, out: Path, workers: int, run, json_output: bool, confidence: float, figure: Path,
               console, resolved=(), constructed: bool = False, budget: int = DEFAULT_BUDGET) -> None:
    finished = finished_run_ids(out)  # a damaged or foreign file in the folder: an error before any training
    recorded = read_language_set(out / LANGUAGES_FILE)
    configs = list(plan.configs)

    def record_set() -> None:
        # Merged into what the folder records: a rerun with another set never drops the other runs' entries.
        languages = merged_language_set(recorded, plan.languages)
        write_bytes_atomically(out / LANGUAGES_FILE, (json.dumps(languages.to_json(), ensure_ascii=False, indent=1)
                                                      + "\n").encode(), "the atlas's language set")
        for index, line in enumerate(_plan_lines(plan, request, finished, out)):
            console.print(f"[bold]atlas[/] {line}" if index == 0 else line, highlight=False, soft_wrap=True)

    summary = _sweep(configs, out, run, workers, console, request.worst_case, record_set, resolved)
    planned = {config.run_id() for config in configs}
    others = len(finished - planned)
    if others and not json_output:
        console.print(f"the tables cover every run in {out}: this plan's {len(configs)} and {others} other(s)",
                      highlight=False, soft_wrap=True)
    _report(out, json_output, figure, confidence, extra={
        "sweep": summary.to_dict(), "plan": {"set": plan.languages.spec, "seed": plan.languages.seed,
                                             "languages": len(plan.languages), "runs": len(configs),
                                             "dropped": [entry.id for entry in plan.dropped],
                                             "other_runs_in_out": others}}, constructed=constructed, budget=budget)
    if not json_output:
        print(f"the language set is in {out / LANGUAGES_FILE}", file=sys.stderr)


def _sweep(configs, out: Path, run, workers: int, console, worst_case, before: Callable[[], None], resolved=()):
    """Run `configs` as a sweep into `out` (the atlas's packs mix languages unless --pack says
    otherwise), after the options are checked and `before` has recorded what the folder holds;
    `resolved`: the runs as the plan's check resolved them (trained without resolving again)."""
    if run.pack == "auto":  # many small languages: the atlas's auto packs mix them (docs/packing.md)
        run = run._replace(pack=ATLAS_PACK)
    options = run.sweep_options(configs, out, workers=workers, note=lambda text: console.print(f"note: {text}"))
    ensure_results_dir(out)
    before()
    try:
        summary = run_with_progress(configs, out, console, axes=swept_fields(configs), worst_case=worst_case,
                                    resolved=resolved, **options)
    except KeyboardInterrupt:
        raise interrupted(configs, out) from None
    console.print(f"{summary.completed} run(s) finished, {summary.skipped} already done, statuses "
                  f"{summary.statuses}, {summary.wall_s:.0f}s")
    return summary


def _planned_json(item) -> dict:
    config = item.config
    return {"kind": item.kind, "source_run_id": item.source_run_id, "run_id": config.run_id(),
            "language": config.language, "encoding": encoding_label(config), "seed": config.seed,
            "test_max_length": max(config.tested_lengths()), "layers": config.layers, "d_model": config.d_model,
            "steps": config.steps}


def _planned_line(item) -> str:
    config = item.config
    change = (f"tested to {max(config.tested_lengths())}" if item.kind == SEARCHED
              else f"{config.layers} layers, d_model {config.d_model}, {config.steps} steps")
    return (f"  {item.kind}: {config.language} · {encoding_label(config)} · seed {config.seed} ({change}); "
            f"run {config.run_id()} follows {item.source_run_id}")


def _run_follow_up(request: FollowUpRequest, out: Path, workers: int, run, json_output: bool, dry_run: bool) -> None:
    """Plan the follow-up of the atlas in `out`, run it into its folder (unless `dry_run`), print it."""
    console = Console(stderr=True)
    results = read_results(out)
    agreement = read_agreement(out)
    planned = plan_follow_up(results, agreement, request)
    folder = follow_up_folder(out, request)
    kinds = {}
    for item in planned:
        kinds[item.kind] = kinds.get(item.kind, 0) + 1
    found = {kind: sum(item.kind == kind for item in agreement.disagreements) for kind in (LEARNED, NOT_LEARNED)}
    why = f"{found[LEARNED]} '{LEARNED}' and {found[NOT_LEARNED]} '{NOT_LEARNED}' disagreement(s)"
    if found[NOT_LEARNED] and not request.sample:
        why += " (--follow-up-sample 0 reruns none of the latter)"
    console.print(f"[bold]atlas follow-up[/] of {out}: {len(planned)} runs "
                  f"({', '.join(f'{count} {kind}' for kind, count in kinds.items()) or 'nothing to rerun'}; {why}) "
                  f"→ {folder}", highlight=False, soft_wrap=True)
    if dry_run or not planned:
        if json_output:
            _print_json({"results": str(out), "follow_up": str(folder), "runs": len(planned), "kinds": kinds,
                         "disagreements": found, "planned": [_planned_json(item) for item in planned]})
        elif planned:
            print("\n".join(_planned_line(item) for item in planned))
        return
    configs = [item.config for item in planned]
    if folder.is_dir():
        finished_run_ids(folder)  # a damaged or foreign file: an error before any training
    summary = _sweep(configs, folder, run, workers, console, request.worst_case,
                     lambda: write_plan(folder, planned, request))
    outcomes = follow_up_of(out, request=request)
    if json_output:
        _print_json({"results": str(out), "follow_up": str(folder), "sweep": summary.to_dict(),
                     "planned": [_planned_json(item) for item in planned],
                     "outcomes": [asdict(item) for item in outcomes]})
    else:
        print(follow_up_markdown(outcomes))
