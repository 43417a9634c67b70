"""Regenerate the measured tables of docs/findings.md from the results folders (never typed by hand).

Each table sits between `<!-- table NAME -->` and `<!-- end NAME -->` markers in findings.md and is
rewritten from the Parquet results of one experiment, with `formal_rope.sweeps.report` (the same
aggregation `formalrope report` prints), labelled with the sweep file's [[variants]] where it has
them:

    python docs/make_findings.py [--results results] [--check]

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
    "table4": ("table4-quick", "table4", ("language", "pe", "base"), "reproduce table4"),
    "table5": ("table5-quick", "table5", ("language", "pe", "base"), "reproduce table5"),
    "medium": ("table2-medium", "table2", ("language", "pe"), "reproduce table2 --scale medium"),
}


def test_sets(runs) -> str:
    """Which test distribution the table's runs were measured on (the paper states none: App. E.2)."""
    fractions = sorted({float(f) for f in runs["test_near_miss_fraction"]}) if "test_near_miss_fraction" in runs \
        else [0.5]  # results written before the field existed used today's default
    names = {0.0: "uniform negatives", 0.5: "half the negatives near-misses", 1.0: "every negative a near-miss"}
    described = [f"{names.get(f, f'{f:g} of the negatives near-misses')} ({f:g})" for f in fractions]
    return "test sets (test_near_miss_fraction): " + ", ".join(described)


def table_markdown(results: Path, sweep: str, by, command: str) -> str:
    from formal_rope.sweeps.grid import load_sweep_file
    from formal_rope.sweeps.report import aggregate, label_variants, markdown_table
    from formal_rope.sweeps.results import read_results

    spec, _ = load_sweep_file(ROOT / "sweeps" / f"{sweep}.toml")
    runs = read_results(results).runs
    if spec.variants:
        runs = label_variants(runs, spec.variants, spec.overrides)
        runs = runs[runs["variant"].notna()]
    statuses = ", ".join(f"{count} {status}" for status, count in runs["status"].value_counts().items())
    source = f"*{len(runs)} runs ({statuses}) in `{results.name}/`, `formalrope {command}`; {test_sets(runs)}*"
    return markdown_table(aggregate(runs, by, language_order=spec.languages), by, spec.reference) + "\n\n" + source


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
    if args.check:
        print("tables that would change:", ", ".join(changed) or "none")
        return 1 if changed else 0
    path.write_text(text)
    print("rewrote:", ", ".join(changed) or "nothing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
