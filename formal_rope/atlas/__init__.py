"""Atlas stage: the theory's verdicts beside training over many languages.

`languages` builds named, reproducible language sets (MLRegTest, generated families, the registry,
user lists) with the class decider's verdicts; `generate` draws random languages of a chosen logic
class (LTL[P], LTL[P,MOD] \\ LTL[P] of a given period, LTL[P,Y] \\ LTL[P], a counting control);
`predicted` gives every sweep run the theory's verdict from its config; `plan` turns a set into the
atlas's runs, `estimate` times them on this machine, `agreement` sets the verdicts beside the
outcomes and `figure` draws them.
"""

from formal_rope.atlas.agreement import Agreement, agreement_of, read_agreement
from formal_rope.atlas.estimate import calibrate, estimate
from formal_rope.atlas.figure import write_figure
from formal_rope.atlas.generate import (
    FAMILIES,
    GeneratedLanguage,
    balanced_fraction,
    both_classes_nonempty,
    counting_regex,
    dfa_key,
    generate_family,
    in_family_class,
    random_formula,
)
from formal_rope.atlas.languages import (
    DEFAULT_SPEC,
    FULL_SPEC,
    LOGIC_CLASSES,
    NAMED_SPECS,
    LanguageEntry,
    LanguageSet,
    MLRegTestFile,
    build_language_set,
    entry_dfa,
    language_set_size,
    logic_class,
    merged_language_set,
    mlregtest_files,
    read_language_list,
    read_language_set,
    stratified_sample,
    with_per_cell,
)
from formal_rope.atlas.plan import AtlasPlan, atlas_configs, atlas_request, plan_atlas, planned_runs
from formal_rope.atlas.render import agreement_markdown

__all__ = [
    "Agreement",
    "AtlasPlan",
    "agreement_markdown",
    "agreement_of",
    "atlas_configs",
    "atlas_request",
    "calibrate",
    "estimate",
    "plan_atlas",
    "planned_runs",
    "read_agreement",
    "write_figure",
    "DEFAULT_SPEC",
    "FULL_SPEC",
    "NAMED_SPECS",
    "FAMILIES",
    "LOGIC_CLASSES",
    "GeneratedLanguage",
    "LanguageEntry",
    "LanguageSet",
    "MLRegTestFile",
    "balanced_fraction",
    "both_classes_nonempty",
    "build_language_set",
    "counting_regex",
    "dfa_key",
    "entry_dfa",
    "language_set_size",
    "generate_family",
    "in_family_class",
    "logic_class",
    "merged_language_set",
    "mlregtest_files",
    "read_language_set",
    "random_formula",
    "read_language_list",
    "stratified_sample",
    "with_per_cell",
]
