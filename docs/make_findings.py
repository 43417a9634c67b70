"""Regenerate the measured tables of docs/findings.md from the results folders (never typed by hand).

Each table sits between `<!-- table NAME -->` and `<!-- end NAME -->` markers in findings.md and is
rewritten from the Parquet results of one experiment, with `formal_rope.sweeps.report` (the same
aggregation `formalrope report` prints), labelled with the sweep file's [[variants]] where it has
them:

    python docs/make_findings.py [--results results] [--check]

Each comparison a section's prose draws from a table is listed in COMPARISONS and written between
`<!-- tests NAME -->` and `<!-- end tests NAME -->` markers with its test (exact permutation test of
N* over seeds, or Mann-Whitney U for large cells, with Cliff's δ: formal_rope.sweeps.statistics),
computed from the table's own "N* of each run" (and "worst-case N* of each run") columns, so a
stated p always belongs to the numbers printed above it.

`--results` is the folder holding the `reproduce` outputs (`<experiment>-<scale>/`). `--check`
only reports which tables would change (exit 1 if any).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's package, installed or not

# table name -> (results folder, sweep file, grouping columns, the command that makes the results)
TABLES = {
    "table2": ("table2-quick", "table2", ("language", "pe"), "reproduce table2 --eval worst-case"),
    "ablation": ("ablation-quick", "ablation_table2", ("language", "pe", "variant"), "reproduce ablation"),
    "ablation45": (
        "ablation45-quick", "ablation_tables45", ("language", "pe", "base", "variant"), "reproduce ablation45"
    ),
    "stability": ("stability-quick", "rope_p_stability", ("language", "variant"), "reproduce stability"),
    "joformer": ("joformer-quick", "joformer", ("language", "pe"), "reproduce joformer"),
    "recipes": ("recipes-quick", "rope_p_recipes", ("language", "variant"), "reproduce recipes --eval worst-case"),
    "test_sets": ("test_sets-quick", "table2_test_sets", ("language", "pe", "variant"), "reproduce test_sets"),
    "table4": ("table4-quick", "table4", ("language", "pe", "base"), "reproduce table4 --eval worst-case"),
    "table5": ("table5-quick", "table5", ("language", "pe", "base"), "reproduce table5 --eval worst-case"),
    "medium": ("table2-medium", "table2", ("language", "pe"), "reproduce table2 --scale medium"),
    "hybrids": (
        "hybrids-quick", "hybrids", ("language", "variant", "base"),
        "reproduce hybrids --eval worst-case --worst-case-budget 64",
    ),
    "e6": ("e6-quick", "e6_hybrid", ("language", "variant"), "reproduce e6 --seeds 1"),
}


# table name -> the comparisons its section's prose makes: (cell a, cell b), each cell the values of
# the table's leading key columns (language, PE, then base and/or variant as the table has them).
def versus_baseline(baseline: str, *cells) -> list:
    """Each cell compared with the same cell under `baseline` (its last key, the variant, replaced)."""
    return [(cell, (*cell[:-1], baseline)) for cell in cells]


TABLE45_BASES = ("1e-12", "1e-8", "1e-4", "1", "1e4", "1e8", "1e12")  # as the tables print them
COMPARISONS = {
    "table2": [
        (("(ab)*", "RoPE_P"), ("(ab)*", "NoPE")),
        (("(aa)*", "RoPE_P"), ("(aa)*", "NoPE")),
    ],
    "ablation": versus_baseline(
        "quick recipe",
        ("(ab)*", "SiPE_P", "half near-miss negatives"), ("(ab)*", "SiPE_P", "paper-size model"),
        ("(ab)*", "SiPE_P", "constant lr"), ("(ab)*", "RoPE_P", "constant lr"), ("(ab)*", "RoPE_P", "3x steps"),
        ("(aa)*", "RoPE_P", "3x steps"), ("(ab)*", "NoPE", "half near-miss negatives"),
        ("(ab)*", "NoPE", "paper-size model"),
    ),
    "stability": versus_baseline(
        "quick recipe",
        *((language, "all negatives near-misses") for language in ("(ab)*", "(abc)*", "(abcd)*")),
        ("(abc)*", "half near-miss negatives"), ("(ab)*", "3x steps"), ("(abc)*", "3x steps"), ("(ab)*", "constant lr"),
    ),
    "recipes": versus_baseline(
        "quick recipe",
        ("(abc)*", "constant lr"),
        *((language, recipe) for language in ("(abc)*", "(abcd)*")
          for recipe in ("constant lr, 3x steps", "constant lr, batch 128")),
    ),
    "ablation45": [
        (("Σ*abΣ*", "NoPE", "–", "paper-size model"), ("Σ*abΣ*", "NoPE", "–", "quick recipe")),
        (("Σ*abΣ*", "NoPE", "–", "paper-size model"), ("Σ*abΣ*", "RoPE_NP", "1e4", "paper-size model")),
        (("(ab)*", "RoPE_NP", "1e4", "half near-miss negatives"), ("(ab)*", "RoPE_NP", "1e4", "quick recipe")),
        (("(ab)*", "NoPE", "–", "3x steps"), ("(ab)*", "NoPE", "–", "quick recipe")),
    ],
    "table4": [
        (("(aa)*", "SiPE_NP", "1e-4"), ("(aa)*", "SiPE_NP", "1e4")),
        (("(aa)*", "SiPE_NP", "1e-8"), ("(aa)*", "SiPE_NP", "1e4")),
    ],
    "table5": [
        *((("Σ*a", "RoPE_NP", base), ("Σ*a", "NoPE", "–")) for base in TABLE45_BASES),
        *((("aΣ*", "NoPE", "–"), ("aΣ*", "RoPE_NP", base)) for base in TABLE45_BASES),
        *((("Σ*abΣ*", "NoPE", "–"), ("Σ*abΣ*", "RoPE_NP", base)) for base in TABLE45_BASES),
    ],
    "hybrids": [
        *(((language, "RoPE_NP + NoPE", base), (language, "RoPE_NP (control)", base))
          for language in ("aΣ*", "Σ*a", "Σ*abΣ*") for base in ("1e2", "1e4")),
        *(((language, "windowed RoPE_NP + global NoPE", base), (language, "RoPE_NP + NoPE", base))
          for language in ("Σ*a", "Σ*abΣ*") for base in ("1e2", "1e4")),
        *(((language, "RoPE_P + NoPE", "–"), (language, "RoPE_P (control)", "–"))
          for language in ("(aa)*", "(ab)*", "aΣ*")),
    ],
    "medium": [
        (("(aa)*", "RoPE_P"), ("(aa)*", "NoPE")),
        (("(aa)*", "SiPE_P"), ("(aa)*", "NoPE")),
        (("(ab)*", "RoPE_P"), ("(ab)*", "NoPE")),
    ],
}


def markdown_rows(table: str) -> list[dict]:
    """The rows of the first markdown table in `table` as {column header: cell text}."""
    lines = [line for line in table.splitlines() if line.startswith("|")]
    if len(lines) < 2:
        return []
    split = lambda line: [cell.strip() for cell in line.strip().strip("|").split("|")]  # noqa: E731
    header = split(lines[0])
    return [dict(zip(header, split(line))) for line in lines[2:]]


def _per_run(cell: str) -> list[float]:
    return [float(value) for value in cell.split(",") if value.strip() not in ("", "–")]


def comparison_lines(table: str, comparisons) -> list[str]:
    """One markdown bullet per comparison: both cells' N* of each run and the test between them
    (and the same for the worst-case N* where the table has it). A comparison with a cell missing
    from the table (a partial experiment) is left out, and said on stderr."""
    from formal_rope.sweeps.statistics import compare

    rows = markdown_rows(table)
    if not rows:
        print("comparisons left out: the table has no rows yet", file=sys.stderr)
        return []
    keys = [column for column in rows[0] if column in ("language", "PE", "base", "variant")]  # table order

    def find(cell):
        for row in rows:
            if tuple(row[key] for key in keys) == tuple(cell):
                return row
        return None

    def name(cell):
        parts = dict(zip(keys, cell))
        text = parts["language"].replace("*", "\\*") + (f" {parts['PE']}" if "PE" in parts else "")
        if parts.get("base", "–") != "–":
            text += f" β {parts['base']}"
        return text + (f", {parts['variant']}" if "variant" in parts else "")

    lines = []
    for a, b in comparisons:
        row_a, row_b = find(a), find(b)
        if row_a is None or row_b is None:
            print(f"comparison {name(a)} vs {name(b)} left out: a cell is not in the table", file=sys.stderr)
            continue
        for column, metric in (("N* of each run", "N*"), ("worst-case N* of each run", "worst-case N*")):
            if column not in row_a:
                continue
            values_a, values_b = _per_run(row_a[column]), _per_run(row_b[column])
            lines.append(f"- {name(a)} vs {name(b)}: {metric} {', '.join(f'{v:g}' for v in values_a)} vs "
                         f"{', '.join(f'{v:g}' for v in values_b)}; {compare(values_a, values_b).text(metric)}")
    return lines


def with_comparisons(text: str, name: str) -> str:
    """`text` with the tests block of table `name` rewritten from that table (unchanged if either
    marker pair is absent)."""
    table = re.search(rf"<!-- table {re.escape(name)} -->\n(.*?)<!-- end {re.escape(name)} -->", text, re.DOTALL)
    block = re.compile(rf"(<!-- tests {re.escape(name)} -->\n)(.*?)(<!-- end tests {re.escape(name)} -->)", re.DOTALL)
    if table is None or not block.search(text) or name not in COMPARISONS:
        return text
    heading = ("*The tests behind this section's comparisons, computed from the table above by "
               "`docs/make_findings.py` (exact permutation test over seeds, two-sided; Cliff's δ > 0: the first "
               "cell larger):*\n\n")
    lines = comparison_lines(table.group(1), COMPARISONS[name])
    return block.sub(lambda m: m.group(1) + heading + "\n".join(lines) + "\n" + m.group(3), text)


def test_sets(runs) -> str:
    """Which test distribution the table's runs were measured on (the paper states none: App. E.2)."""
    fractions = sorted({float(f) for f in runs["test_near_miss_fraction"]}) if "test_near_miss_fraction" in runs \
        else [0.5]  # results written before the field existed used today's default
    names = {0.0: "uniform negatives", 0.5: "half the negatives near-misses", 1.0: "every negative a near-miss"}
    described = [f"{names.get(f, f'{f:g} of the negatives near-misses')} ({f:g})" for f in fractions]
    return "test sets (test_near_miss_fraction): " + ", ".join(described)


def table_markdown(results: Path, sweep: str, by, command: str) -> str:
    from formal_rope.sweeps.grid import load_sweep_file, variant_run_ids
    from formal_rope.sweeps.report import aggregate, label_variants, markdown_table
    from formal_rope.sweeps.results import read_results

    spec, _ = load_sweep_file(ROOT / "sweeps" / f"{sweep}.toml")
    runs = read_results(results).runs
    if spec.variants:
        runs = label_variants(runs, spec.variants, spec.overrides, variant_run_ids(spec))
        runs = runs[runs["variant"].notna()]
    statuses = ", ".join(f"{count} {status}" for status, count in runs["status"].value_counts().items())
    source = f"*{len(runs)} runs ({statuses}) in `{results.name}/`, `formalrope {command}`; {test_sets(runs)}*"
    return markdown_table(aggregate(runs, by, language_order=spec.languages), by, spec.reference) + "\n\n" + source


def with_recipe_study(text: str, results: Path) -> str:
    """`text` with the block between `<!-- recipe study -->` and `<!-- end recipe study -->` rebuilt
    from the committed study (`atlas/recipe-study`, `sweeps/recipe_study.toml`:
    `formal_rope.atlas.recipe_study`); unchanged without the block or the results."""
    from formal_rope.atlas.recipe_study import planned_runs, study_markdown, study_outcomes, summarise

    pattern = re.compile(r"(<!-- recipe study -->\n)(.*?)(<!-- end recipe study -->)", re.DOTALL)
    if not pattern.search(text) or not any((results / "runs").glob("*.parquet")):
        return text
    sweep = ROOT / "sweeps" / "recipe_study.toml"
    outcomes = study_outcomes(results, sweep)
    variants = sorted({o.variant for o in outcomes})
    planned = planned_runs(sweep)
    partial = "" if len(outcomes) >= planned else (
        f" — **partial: {len(outcomes)} of the {planned} planned runs** (the same command resumes it)")
    source = (f"*{len(outcomes)} runs in `atlas/recipe-study/` over {len(variants)} variants{partial}, "
              "`formalrope sweep "
              "--config sweeps/recipe_study.toml --eval worst-case --worst-case-budget 8 --out atlas/recipe-study`; "
              "learned = worst-case N* reached 500; cost = the run's share of its pack's wall time on this "
              "2-core machine, beside other jobs*")
    table = study_markdown(summarise(outcomes), outcomes) + "\n" + source
    return pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(3), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    path = ROOT / "docs" / "findings.md"
    text = path.read_text()
    changed = []
    for name, (folder, sweep, by, command) in TABLES.items():
        pattern = re.compile(rf"(<!-- table {name} -->\n)(.*?)(<!-- end {name} -->)", re.DOTALL)
        if not pattern.search(text):
            continue
        results = args.results / folder
        if not (results / "runs").is_dir():
            print(f"{name}: no results in {results}; table left as it is", file=sys.stderr)
            continue
        from formal_rope.errors import FormalRopeError

        try:
            table = table_markdown(results, sweep, by, command)
        except FormalRopeError as error:
            print(f"{name}: {error}; table left as it is", file=sys.stderr)
            continue
        new = pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(3), text)
        if new != text:
            changed.append(name)
            text = new
    for name in COMPARISONS:
        new = with_comparisons(text, name)
        if new != text:
            changed.append(f"tests {name}")
            text = new
    new = with_recipe_study(text, ROOT / "atlas" / "recipe-study")
    if new != text:
        changed.append("recipe study")
        text = new
    if args.check:
        print("tables that would change:", ", ".join(changed) or "none")
        return 1 if changed else 0
    path.write_text(text)
    print("rewrote:", ", ".join(changed) or "nothing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
