"""Classify all MLRegTest automata: time per automaton, verdict counts per subregular class.

Baselines measured in the same run: (1) loading + minimizing each automaton (the work every
later stage does anyway): ratio "classification cost / DFA construction cost"; (2) when
libsemigroups_pybind11 is installed, its C++ Froidure-Pin enumeration of the same transition
monoids: ratio "our numpy BFS / libsemigroups", with the sizes compared.
The theory-backed expectations of the data set's README are checked and reported.

    python bench/classify_mlregtest.py [DATA_DIR]
"""

from __future__ import annotations

import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from formal_rope.automata import load_att, minimize
from formal_rope.classes import classify

VERDICTS = ("ltl_p", "ltl_p_mod", "star_free", "r_trivial", "l_trivial", "j_trivial")


def default_data_dir() -> Path:
    folder = Path(__file__).resolve().parent.parent / "data" / "mlregtest"
    if folder.is_dir():
        return folder
    raise SystemExit(f"MLRegTest data not found in {folder}; pass the folder as the first argument")


def main() -> None:
    data_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else default_data_dir()
    files = sorted(data_dir.glob("*.att"))
    classify(minimize(load_att(files[0])))  # warm-up: first-call imports (scipy.sparse) are not classification time
    build_seconds, classify_seconds = [], []
    per_class: dict[str, Counter] = defaultdict(Counter)
    mod_k: dict[str, Counter] = defaultdict(Counter)
    sizes: dict[str, list[tuple[int, int]]] = defaultdict(list)
    slowest = (0.0, "")
    for path in files:
        language_class = path.name.split(".")[2]
        started = time.perf_counter()
        dfa = minimize(load_att(path))
        built = time.perf_counter()
        result = classify(dfa)
        done = time.perf_counter()
        build_seconds.append(built - started)
        classify_seconds.append(done - built)
        slowest = max(slowest, (done - built, path.name))
        counts = per_class[language_class]
        counts["n"] += 1
        for verdict in VERDICTS:
            counts[verdict] += bool(getattr(result, verdict))
        mod_k[language_class][result.mod_k] += 1
        sizes[language_class].append((result.states, result.monoid_size))

    total_build, total_classify = sum(build_seconds), sum(classify_seconds)
    print(f"{len(files)} automata from {data_dir}")
    print(
        f"classify: total {total_classify:.2f} s, mean {1000 * np.mean(classify_seconds):.2f} ms, "
        f"median {1000 * np.median(classify_seconds):.2f} ms, max {1000 * slowest[0]:.1f} ms ({slowest[1]})"
    )
    print(
        f"baseline load+minimize: total {total_build:.2f} s; ratio classify/baseline = "
        f"{total_classify / total_build:.2f}"
    )
    _libsemigroups_baseline(files)
    print()
    header = (
        f"{'class':6} {'n':>4} " + " ".join(f"{v:>9}" for v in VERDICTS) + "  states(max) monoid(max)  mod_k counts"
    )
    print(header)
    for language_class in sorted(per_class):
        counts = per_class[language_class]
        states = max(s for s, _ in sizes[language_class])
        monoid = max(m for _, m in sizes[language_class])
        ks = ", ".join(
            f"{k}:{n}" for k, n in sorted(mod_k[language_class].items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
        )
        print(
            f"{language_class:6} {counts['n']:>4} "
            + " ".join(f"{counts[v]:>9}" for v in VERDICTS)
            + f"  {states:>11} {monoid:>11}  {ks}"
        )
    print()
    checks = {
        "SP in LTL[P]": per_class["SP"]["ltl_p"] == per_class["SP"]["n"],
        "PT in LTL[P]": per_class["PT"]["ltl_p"] == per_class["PT"]["n"],
        "SF star-free": per_class["SF"]["star_free"] == per_class["SF"]["n"],
        "Zp not star-free": per_class["Zp"]["star_free"] == 0,
    }
    for name, ok in checks.items():
        print(f"{name}: {'ok' if ok else 'FAILED'}")


def _libsemigroups_baseline(files: list[Path]) -> None:
    try:
        import libsemigroups_pybind11 as libsemigroups
    except ImportError:
        print("libsemigroups_pybind11 not installed: no monoid-enumeration baseline")
        return
    from formal_rope.classes import transition_monoid

    guard = libsemigroups.ReportGuard(False)
    dfas = [minimize(load_att(path)) for path in files]
    started = time.perf_counter()
    ours = [transition_monoid(dfa).size for dfa in dfas]
    ours_seconds = time.perf_counter() - started
    started = time.perf_counter()
    theirs = []
    for dfa in dfas:
        generators = [libsemigroups.Transf(list(range(dfa.n_states)))] + [
            libsemigroups.Transf([int(t) for t in dfa.transitions[:, a]]) for a in range(dfa.n_symbols)
        ]
        theirs.append(libsemigroups.FroidurePin(generators).size())
    theirs_seconds = time.perf_counter() - started
    del guard
    print(
        f"monoid enumeration: ours {ours_seconds:.2f} s, libsemigroups Froidure-Pin {theirs_seconds:.2f} s, "
        f"ratio {ours_seconds / theirs_seconds:.2f}; sizes agree on "
        f"{sum(a == b for a, b in zip(ours, theirs))}/{len(dfas)}"
    )


if __name__ == "__main__":
    main()
