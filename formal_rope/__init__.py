"""formal-rope: a testbed for the expressivity of positional encodings in transformers.

Stages (one sub-package each), following the data:
  lang/       text -> AST (Lark grammars in ../grammars), language sources and registry
  automata/   AST -> DFA (numpy transition tables), DFA operations
  classes/    DFA -> logical/algebraic classes with witnesses
  sampling/   DFA -> uniform samples and balanced test sets
  precision/  floating-point formats, correctly rounded emulation, f_large
  model/      transformer IR and evaluator (native torch dtypes or emulated formats)
  compiler/   LTL[P,Y,MOD] formula -> model IR, verification against the DFA; certified ranges
  run_config/ the run configuration (frozen sections, run ids) and the encodings' registry
  training/   config -> trained classifier, positional-encoding zoo, N* evaluation
  evaluation/ worst-case search of saved or trained models
  runs/       configs -> trained, evaluated, searched runs -> results (above training and evaluation)
  sweeps/     grids of runs -> Parquet -> reports and plots
  kernels/    fused rotary attention (torch reference, Triton)
  commands/   thin Typer command groups used by formal_rope.cli
"""

__version__ = "0.1.0"
