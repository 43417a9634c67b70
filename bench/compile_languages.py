"""Compile every expressible benchmark language into its exact transformer and verify it.

The languages: every MLRegTest automaton of data/mlregtest in LTL[P] (its minimal DFA is partially
ordered: 120 of the 930) and every language of the atlas's default set in LTL[P,MOD] that is not
one of those (generated LTL[P], LTL[P,MOD] \\ LTL[P] and counting languages, regexes, formulas).
For each: language → formula (`language_to_formula`: the automaton construction for LTL[P], the
bounded search otherwise, each checked equivalent to the DFA), formula → model
(`compile_formula`), model vs the language's DFA (`verify_compiled`: every string up to
--exhaustive within the compiler's budget, --per-length strings at each sampled length up to
--verify-to). Printed: formula size (distinct subformulas), tree size, depth, layers, heads,
residual width, seconds per stage and the verification; totals at the end. A language the compiler
refuses (a model above its parameter limit) is listed as refused, with the reason.

    python bench/compile_languages.py                       # everything (tens of minutes on 2 cores)
    python bench/compile_languages.py --only 04.04 --verify-to 200
    python bench/compile_languages.py --json results.json --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from formal_rope.errors import FormalRopeError  # noqa: E402


@dataclass(frozen=True)
class Row:
    name: str
    source: str
    states: int
    method: str = ""
    size: int = 0
    tree_size: int = 0
    depth: int = 0
    layers: int = 0
    heads: int = 0
    d_model: int = 0
    formula_seconds: float = 0.0
    compile_seconds: float = 0.0
    verify_seconds: float = 0.0
    verified_strings: int = 0
    verified_max_length: int = 0
    disagreements: int = 0
    status: str = "ok"


def mlregtest_ltl_p() -> list[tuple[str, str, str, str | None]]:
    """(name, source, language, alphabet) of every MLRegTest automaton whose minimal DFA is a PODFA, fewest
    states first."""
    from formal_rope.automata import language_dfa
    from formal_rope.automata.ops import minimize
    from formal_rope.classes.podfa import block_cycle
    from formal_rope.lang.source import resolve_language

    found = []
    for path in sorted((ROOT / "data" / "mlregtest").glob("*.att")):
        relative = str(path.relative_to(ROOT))
        dfa = minimize(language_dfa(resolve_language(relative)))
        if block_cycle(dfa, 1) is None:
            found.append((dfa.n_states, (path.stem, "mlregtest", relative, None)))
    return [item for _, item in sorted(found, key=lambda pair: pair[0])]  # smallest first


def atlas_expressible(skip: set[str]) -> list[tuple[str, str, str, str | None]]:
    """The atlas default set's languages in LTL[P,MOD] whose language is not already listed."""
    from formal_rope.atlas.languages import build_language_set

    chosen = []
    for entry in build_language_set("default").entries:
        if entry.ltl_p_mod and entry.language not in skip:
            chosen.append((entry.id, entry.source, entry.language, ",".join(entry.alphabet)))
    return chosen


def measure(item: tuple[str, str, str, str | None], verify_to: int, per_length: int, exhaustive: int,
            mode: str, verify: bool) -> Row:
    import torch

    torch.set_num_threads(1)
    from formal_rope.automata import language_dfa
    from formal_rope.compiler import compile_formula, verify_compiled
    from formal_rope.compiler.language_to_formula import language_to_formula
    from formal_rope.lang.source import resolve_formula_first

    name, source, text, alphabet = item
    language = resolve_formula_first(text, alphabet)
    dfa = language_dfa(language)
    row = Row(name, source, dfa.n_states)
    started = time.perf_counter()
    try:
        built = language_to_formula(language, dfa=dfa)
    except FormalRopeError as error:
        return Row(**{**asdict(row), "status": "no formula: " + str(error).splitlines()[0][:120]})
    formula_seconds = time.perf_counter() - started
    metrics = built.metrics
    row = Row(**{**asdict(row), "method": built.method, "size": metrics.dag_size, "tree_size": metrics.tree_size,
                 "depth": metrics.depth, "formula_seconds": formula_seconds})
    started = time.perf_counter()
    try:
        compiled = compile_formula(built.formula, built.alphabet, language=text)
    except FormalRopeError as error:
        return Row(**{**asdict(row), "status": "refused: " + str(error).splitlines()[0][:160]})
    compile_seconds = time.perf_counter() - started
    heads = sum(len(layer.heads) for layer in compiled.ir.layers)
    row = Row(**{**asdict(row), "layers": len(compiled.ir.layers), "heads": heads,
                 "d_model": len(compiled.ir.coordinates), "compile_seconds": compile_seconds})
    if not verify:
        return Row(**{**asdict(row), "status": "compiled (not verified)"})
    started = time.perf_counter()
    result = verify_compiled(compiled, exhaustive_up_to=exhaustive, verify_to=verify_to, per_length=per_length,
                             mode=mode, dfa=built.dfa)
    return Row(**{**asdict(row), "verify_seconds": time.perf_counter() - started,
                  "verified_strings": result.verified_strings, "verified_max_length": result.verified_max_length,
                  "disagreements": result.disagreements, "status": "ok" if result.ok else "DISAGREES"})


def _print_table(rows: list[Row]) -> None:
    header = (f"{'language':38} {'states':>6} {'method':9} {'size':>6} {'tree size':>10} {'depth':>5} {'layers':>6} "
              f"{'heads':>5} {'d_model':>7} {'formula s':>9} {'compile s':>9} {'verify s':>8} {'strings':>7} "
              f"{'max len':>7} {'wrong':>5}  status")
    print(header)
    for row in rows:
        print(f"{row.name[:38]:38} {row.states:6d} {row.method:9} {row.size:6d} {row.tree_size:10.3g} {row.depth:5d} "
              f"{row.layers:6d} {row.heads:5d} {row.d_model:7d} {row.formula_seconds:9.2f} {row.compile_seconds:9.2f} "
              f"{row.verify_seconds:8.1f} {row.verified_strings:7d} {row.verified_max_length:7d} "
              f"{row.disagreements:5d}  {row.status}")
    ok = [row for row in rows if row.status == "ok"]
    compiled = [row for row in rows if row.layers]
    print(f"\ntotals: {len(rows)} languages; formula found for {sum(bool(row.method) for row in rows)}; compiled "
          f"{len(compiled)}; verified without a disagreement {len(ok)}; disagreements "
          f"{sum(row.disagreements for row in rows)}; refused {sum(row.status.startswith('refused') for row in rows)}")
    if compiled:
        print(f"        formula {sum(row.formula_seconds for row in rows):.1f} s, compile "
              f"{sum(row.compile_seconds for row in rows):.1f} s, verification "
              f"{sum(row.verify_seconds for row in rows):.1f} s; "
              f"{sum(row.verified_strings for row in rows):,} strings verified; largest model "
              f"{max(row.layers for row in compiled)} layers, {max(row.heads for row in compiled)} heads, d_model "
              f"{max(row.d_model for row in compiled)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="Only languages whose name contains this text.")
    parser.add_argument("--sets", default="mlregtest,atlas", help="mlregtest, atlas or both (comma-separated).")
    parser.add_argument("--verify-to", type=int, default=500, help="Longest sampled verification length.")
    parser.add_argument("--per-length", type=int, default=2, help="Sampled strings per length (half in L).")
    parser.add_argument("--exhaustive", type=int, default=8, help="Every string up to this length (within budget).")
    parser.add_argument("--mode", default="native", help="native (float arithmetic of the format) or emulated.")
    parser.add_argument("--no-verify", action="store_true", help="Compile only.")
    parser.add_argument("--jobs", type=int, default=1, help="Worker processes.")
    parser.add_argument("--json", help="Write the rows to this JSON file.")
    parser.add_argument("--rows", help="Append each row to this JSON-lines file as it is measured, and skip the "
                        "languages it already holds (a long run resumes).")
    args = parser.parse_args(argv)
    sets = set(args.sets.split(","))
    items: list[tuple[str, str, str, str | None]] = []
    if "mlregtest" in sets:
        items.extend(mlregtest_ltl_p())
    if "atlas" in sets:
        items.extend(atlas_expressible({text for _, _, text, _ in items}))
    if args.only:
        items = [item for item in items if args.only in item[0]]
    done: dict[str, Row] = {}
    if args.rows and Path(args.rows).is_file():
        for line in Path(args.rows).read_text().splitlines():
            if line.strip():
                row = Row(**json.loads(line))
                done[row.name] = row
    print(f"{len(items)} languages ({len(done)} already measured)", file=sys.stderr)
    options = (args.verify_to, args.per_length, args.exhaustive, args.mode, not args.no_verify)
    rows: list[Row] = [done[item[0]] for item in items if item[0] in done]
    items = [item for item in items if item[0] not in done]

    def record(row: Row) -> None:
        rows.append(row)
        if args.rows:
            with open(args.rows, "a") as handle:
                handle.write(json.dumps(asdict(row)) + "\n")

    if args.jobs > 1:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        with ProcessPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(measure, item, *options) for item in items]
            for number, future in enumerate(futures, 1):
                record(future.result())
                print(f"[{number}/{len(items)}] {rows[-1].name}: {rows[-1].status}", file=sys.stderr, flush=True)
    else:
        for number, item in enumerate(items, 1):
            record(measure(item, *options))
            print(f"[{number}/{len(items)}] {rows[-1].name}: {rows[-1].status}", file=sys.stderr, flush=True)
    _print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(row) for row in rows], indent=1))
    return 0 if all(row.disagreements == 0 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
