"""CLI start-up: `formalrope --help`, `classify --help`, `accepts --help` must not import torch.

Prints the wall time of each command (best of N fresh processes), whether torch was imported, and
the ratio to a bare `python -c pass` measured in the same run (the interpreter's own start-up).
Target: < 0.5 s for --help.
"""

from __future__ import annotations

import subprocess
import sys
import time

REPEATS = 5
PROBE = (
    "import sys, runpy; sys.argv = ['formalrope'] + {args!r}\n"
    "try:\n"
    "    from formal_rope.cli import main; main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "sys.stderr.write('TORCH=%s' % ('torch' in sys.modules))\n"
)


def best_time(argv: list[str]) -> tuple[float, str]:
    best, stderr = float("inf"), ""
    for _ in range(REPEATS):
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True)
        best = min(best, time.perf_counter() - start)
        stderr = done.stderr
    return best, stderr


def main() -> None:
    baseline, _ = best_time([sys.executable, "-c", "pass"])
    print(f"python -c pass: {baseline:.3f} s (interpreter start-up)")
    for args in (["--help"], ["classify", "--help"], ["accepts", "--help"], ["classify", "(ab)*", "--json"]):
        seconds, stderr = best_time([sys.executable, "-c", PROBE.format(args=args)])
        torch_loaded = "TORCH=True" in stderr
        slow = "--help" in args and seconds >= 0.5  # the 0.5 s target is for --help
        verdict = "IMPORTS TORCH" if torch_loaded else "SLOW" if slow else "ok"
        print(f"formalrope {' '.join(args):24s} {seconds:.3f} s  ({seconds / baseline:4.1f}x python -c pass)  "
              f"torch imported: {torch_loaded}  [{verdict}]")


if __name__ == "__main__":
    main()
