"""Language sets: named, reproducible lists of languages with the class decider's verdicts, for the atlas.

A set is named by a spec (`build_language_set(spec, seed)`); parts joined by `+` are concatenated:

  mlregtest                         every automaton in data/mlregtest (930)
  mlregtest:per_cell=K              K languages per (alphabet size, MLRegTest class) cell, drawn with the seed
                                    (options: sizes=4/16, classes=SL/SP/..., to restrict the cells)
  generated:family=F,count=N        N random languages of family F (formal_rope.atlas.generate:
                                    ltl_p, ltl_p_mod, ltl_p_y, counting); options period=2/3/4/5 (ltl_p_mod:
                                    N per period), depth=D, alphabets=ab/abc
  registry                          the registry languages (`formalrope languages`)
  file:PATH                         a user list: one language per line (an expression, a registry name or
                                    a .att path), optionally a tab and an alphabet; # starts a comment
  default (also: atlas)             DEFAULT_SPEC, the default atlas set (at least 48 languages)
  full                              FULL_SPEC: all of MLRegTest and 500 generated languages (1,430)

Every entry's `language` is text every command resolves (`resolve_language(language, alphabet)`, as
--lang and --alphabet): an expression (generated ones prefixed ltl: or re:), a registry name, or a .att
path relative to the repository root (where the CLI runs). Generated languages are new up to DFA
equivalence with respect to every entry built before them; the other sources are kept as they are.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from formal_rope.atlas.generate import (
    FAMILIES,
    MIN_BALANCED_FRACTION,
    balanced_fraction,
    dfa_key,
    generate_family,
)
from formal_rope.automata.dfa import DFA
from formal_rope.automata.language import language_dfa
from formal_rope.classes.classify import Classification, classify
from formal_rope.errors import FormalRopeError
from formal_rope.files import read_bounded_text
from formal_rope.lang.registry import registry_entries
from formal_rope.lang.source import parse_alphabet, resolve_language

REPOSITORY = Path(__file__).resolve().parent.parent.parent
MLREGTEST_FOLDER = "data/mlregtest"  # relative to the repository root, as entries name their files
SOURCES = ("mlregtest", "generated", "registry", "user")
# The decider's classes, smallest first; every language is in exactly one of these.
LOGIC_CLASSES = ("LTL[P]", "LTL[P,MOD] \\ LTL[P]", "star-free \\ LTL[P]", "not star-free, not LTL[P,MOD]")
ATLAS_PERIODS = (2, 3, 4, 5)
DEFAULT_SPEC = (
    "mlregtest:per_cell=1"
    f"+generated:family=ltl_p_mod,period={'/'.join(map(str, ATLAS_PERIODS))},count=3"
    "+generated:family=ltl_p_y,count=5"
    "+generated:family=ltl_p,count=5"
    "+generated:family=counting,count=3"
)
# The full atlas: every MLRegTest automaton and 500 generated languages (100 LTL[P,MOD] \ LTL[P] per
# period 2..5, 50 LTL[P,Y] \ LTL[P], 40 LTL[P], 10 counting).
FULL_SPEC = (
    "mlregtest"
    f"+generated:family=ltl_p_mod,period={'/'.join(map(str, ATLAS_PERIODS))},count=100"
    "+generated:family=ltl_p_y,count=50"
    "+generated:family=ltl_p,count=40"
    "+generated:family=counting,count=10"
)
NAMED_SPECS = {"default": DEFAULT_SPEC, "atlas": DEFAULT_SPEC, "full": FULL_SPEC}


def logic_class(verdict: Classification) -> str:
    """The smallest of LOGIC_CLASSES the decider puts the language in."""
    if verdict.ltl_p:
        return LOGIC_CLASSES[0]
    if verdict.ltl_p_mod:
        return LOGIC_CLASSES[1]
    return LOGIC_CLASSES[2] if verdict.star_free else LOGIC_CLASSES[3]


@dataclass(frozen=True)
class LanguageEntry:
    """One language of a set.

    id                 unique in the set: source/name (mlregtest/04.04.SL.2.1.0, generated/ltl_p_mod-k3/s0-1)
    language, alphabet what --lang and --alphabet take (resolve_language(language, alphabet))
    logic_class        the smallest of LOGIC_CLASSES it lies in (from the decider)
    ltl_p, ltl_p_mod, star_free, mod_k, states, monoid_size   the decider's verdicts (formal_rope.classes)
    witness            for each failing class, the decider's JSON-ready witness
    balanced_fraction  fraction of test lengths (41..500) where both classes are non-empty
    mlregtest_class    the MLRegTest class (SL, SP, ...) from the file name; None elsewhere
    family, period     the generated family and its intended period (ltl_p_mod: the least k; counting:
                       the modulus); None elsewhere
    """

    id: str
    source: str
    language: str
    alphabet: tuple[str, ...]
    logic_class: str
    ltl_p: bool
    ltl_p_mod: bool
    star_free: bool
    mod_k: int | None
    states: int
    monoid_size: int
    balanced_fraction: float
    mlregtest_class: str | None = None
    family: str | None = None
    period: int | None = None
    witness: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def alphabet_size(self) -> int:
        return len(self.alphabet)

    def to_row(self) -> dict[str, Any]:
        """Flat JSON/Parquet cells: the alphabet comma-joined (as --alphabet reads it), the witness as
        JSON text, plus alphabet_size."""
        row = {item.name: getattr(self, item.name) for item in fields(self)}
        row["alphabet"] = ",".join(self.alphabet)
        row["alphabet_size"] = self.alphabet_size
        row["witness"] = json.dumps(self.witness, ensure_ascii=False, sort_keys=True)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> LanguageEntry:
        """The entry `to_row` wrote (extra keys such as alphabet_size are ignored; NaN reads as None,
        so rows back from a DataFrame work too)."""
        values = {item.name: _cell(row.get(item.name)) for item in fields(cls)}
        missing = [name for name in ("id", "source", "language", "alphabet") if values[name] is None]
        if missing:
            raise FormalRopeError(f"a language-set row lacks {', '.join(missing)}: {row!r}")
        values["alphabet"] = parse_alphabet(values["alphabet"])
        values["witness"] = json.loads(values["witness"]) if values["witness"] else {}
        for name in ("ltl_p", "ltl_p_mod", "star_free"):
            values[name] = bool(values[name])
        for name in ("mod_k", "period", "states", "monoid_size"):
            values[name] = None if values[name] is None else int(values[name])
        values["balanced_fraction"] = float(values["balanced_fraction"])
        return cls(**values)


def _cell(value: Any) -> Any:
    if isinstance(value, float) and value != value:  # NaN: a missing cell in a DataFrame
        return None
    return value.item() if hasattr(value, "item") else value


@dataclass(frozen=True)
class LanguageSet:
    """A named, reproducible list of languages: `build_language_set(spec, seed)` gives it again."""

    spec: str
    seed: int
    entries: tuple[LanguageEntry, ...]
    # The DFA of each entry, where the set was built (`SetSpec.build`; a set read from a file has
    # none): the atlas's runs train on them instead of resolving the entries' text again.
    dfas: tuple[DFA, ...] = field(default=(), compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(entry.id for entry in self.entries)

    def counts(self, attribute: str) -> dict[Any, int]:
        """How many entries have each value of `attribute` (logic_class, source, mlregtest_class, ...)."""
        return dict(Counter(getattr(entry, attribute) for entry in self.entries))

    def to_rows(self) -> list[dict[str, Any]]:
        return [entry.to_row() for entry in self.entries]

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "seed": self.seed, "entries": self.to_rows()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LanguageSet:
        return cls(str(data["spec"]), int(data["seed"]), tuple(LanguageEntry.from_row(row) for row in data["entries"]))


def merged_language_set(recorded: LanguageSet | None, planned: LanguageSet) -> LanguageSet:
    """What a results folder records after an atlas of `planned` ran into it: every entry it
    recorded (`recorded`, None: none yet), then the planned entries of languages (text and alphabet)
    it did not record. A planned entry whose id another recorded language holds gets a fresh id
    (`ID~2`, ...), so no entry is dropped or replaced. The spec joins both when they differ."""
    if recorded is None:
        return planned
    entries = list(recorded.entries)
    languages = {(entry.language, entry.alphabet) for entry in entries}
    ids = {entry.id for entry in entries}
    for entry in planned.entries:
        if (entry.language, entry.alphabet) in languages:
            continue
        identifier, number = entry.id, 1
        while identifier in ids:
            number += 1
            identifier = f"{entry.id}~{number}"
        entries.append(entry if identifier == entry.id else replace(entry, id=identifier))
        ids.add(identifier)
        languages.add((entry.language, entry.alphabet))
    same = (recorded.spec, recorded.seed) == (planned.spec, planned.seed)
    spec = recorded.spec if same or planned.spec in recorded.spec.split(" + ") else f"{recorded.spec} + {planned.spec}"
    return LanguageSet(spec, recorded.seed, tuple(entries))


def read_language_set(path: str | Path) -> LanguageSet | None:
    """The language set recorded at `path` (an atlas folder's atlas-languages.json); None when there
    is none; FormalRopeError when the file is not one."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return LanguageSet.from_json(json.loads(read_bounded_text(path, "MAX_TEXT_INPUT_BYTES", "the language set")))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise FormalRopeError(f"{path} is not an atlas language set ({error}); move it away first") from None


def entry_dfa(entry: LanguageEntry) -> DFA:
    """The minimal DFA of an entry, resolved exactly as `--lang LANGUAGE --alphabet ALPHABET` is."""
    return language_dfa(resolve_language(entry.language, entry.alphabet))


def _entry(identifier: str, source: str, language: str, alphabet: tuple[str, ...], dfa: DFA,
           verdict: Classification | None = None, fraction: float | None = None, **extra) -> LanguageEntry:
    verdict = classify(dfa) if verdict is None else verdict
    return LanguageEntry(
        id=identifier, source=source, language=language, alphabet=tuple(alphabet), logic_class=logic_class(verdict),
        ltl_p=verdict.ltl_p, ltl_p_mod=verdict.ltl_p_mod, star_free=verdict.star_free, mod_k=verdict.mod_k,
        states=verdict.states, monoid_size=verdict.monoid_size,
        balanced_fraction=balanced_fraction(dfa) if fraction is None else fraction,
        witness=verdict.witness, **extra,
    )


def _resolved_entry(identifier: str, source: str, text: str, alphabet=None, **extra) -> tuple[LanguageEntry, DFA]:
    resolved = resolve_language(text, alphabet)
    dfa = language_dfa(resolved)
    return _entry(identifier, source, text, resolved.alphabet, dfa, **extra), dfa


# ------------------------------------------------------------------------------------- MLRegTest
@dataclass(frozen=True)
class MLRegTestFile:
    """One MLRegTest automaton: its repository-relative path, alphabet size and class (from its name)."""

    path: str
    alphabet_size: int
    language_class: str

    @property
    def name(self) -> str:
        return Path(self.path).stem


def mlregtest_files(root: Path = REPOSITORY) -> tuple[MLRegTestFile, ...]:
    """Every MLRegTest automaton shipped in data/mlregtest, sorted by name (`Sigma.Tau.class.k.t.i.att`)."""
    folder = root / MLREGTEST_FOLDER
    paths = sorted(folder.glob("*.att"))
    if not paths:
        raise FormalRopeError(f"no MLRegTest automata in {folder}; the atlas reads them from the repository's data/")
    found = []
    for path in paths:
        parts = path.name.split(".")
        found.append(MLRegTestFile(f"{MLREGTEST_FOLDER}/{path.name}", int(parts[0]), parts[2]))
    return tuple(found)


def stratified_sample(files: tuple[MLRegTestFile, ...], per_cell: int | None, seed: int) -> tuple[MLRegTestFile, ...]:
    """`per_cell` files of every (alphabet size, class) cell (all of a smaller cell), drawn with the seed;
    all files when per_cell is None. Sorted by cell, then name."""
    cells: dict[tuple[int, str], list[MLRegTestFile]] = {}
    for item in files:
        cells.setdefault((item.alphabet_size, item.language_class), []).append(item)
    chosen = []
    for cell in sorted(cells):
        members = cells[cell]
        if per_cell is not None and per_cell < len(members):
            members = random.Random(f"mlregtest:{cell[0]}:{cell[1]}:{seed}").sample(members, per_cell)
        chosen.extend(sorted(members, key=lambda item: item.name))
    return tuple(chosen)


def mlregtest_entries(per_cell: int | None, seed: int, sizes=None, classes=None) -> list[tuple[LanguageEntry, DFA]]:
    files = _filtered_mlregtest(sizes, classes)
    results = []
    for item in stratified_sample(files, per_cell, seed):
        # Resolved from the repository root, so the entry names the file as the CLI there reads it.
        resolved = resolve_language(str(REPOSITORY / item.path))
        dfa = language_dfa(resolved)
        results.append((_entry(f"mlregtest/{item.name}", "mlregtest", item.path, resolved.alphabet, dfa,
                               mlregtest_class=item.language_class), dfa))
    return results


# ------------------------------------------------------------------------------- the other sources
def generated_entries(family: str, count: int, seed: int, known: set, periods=(None,), depth: int = 3,
                      alphabets=(("a", "b"), ("a", "b", "c"))) -> list[tuple[LanguageEntry, DFA]]:
    results = []
    for period in periods:
        drawn = generate_family(family, count, seed, period=period, depth=depth, alphabets=alphabets, known=known)
        label = family if period is None else f"{family}-k{period}"
        for index, language in enumerate(drawn):
            entry = _entry(f"generated/{label}/s{seed}-{index}", "generated", language.language, language.alphabet,
                           language.dfa, language.classification, language.balanced_fraction,
                           family=family, period=language.period)
            results.append((entry, language.dfa))
    return results


def registry_language_entries() -> list[tuple[LanguageEntry, DFA]]:
    return [_resolved_entry(f"registry/{entry.name}", "registry", entry.name) for entry in registry_entries()]


def user_entries(lines: list[tuple[str, str | None]], label: str, where: str | None = None,
                 numbers: list[int] | None = None) -> list[tuple[LanguageEntry, DFA]]:
    """Entries for (language, alphabet or None) pairs, ids user/<label>/<line index>. An entry that
    does not resolve is an error naming `where` (the list's file) and its line (`numbers`)."""
    results = []
    for index, (text, alphabet) in enumerate(lines):
        try:
            results.append(_resolved_entry(f"user/{label}/{index}", "user", text, alphabet))
        except FormalRopeError as error:
            line = index + 1 if numbers is None else numbers[index]
            place = f"{where}, line {line}" if where is not None else f"item {index + 1}"
            message = str(error).replace("\n", "; ")
            raise FormalRopeError(f"language list {place} ({text!r}): {message}") from None
    return results


def _numbered_language_list(path: str | Path) -> list[tuple[int, str, str | None]]:
    """(line number, language, alphabet or None) of every language line of a user list."""
    try:
        text = read_bounded_text(Path(path), "MAX_TEXT_INPUT_BYTES", "the language list")
    except (OSError, UnicodeDecodeError) as error:
        raise FormalRopeError(f"cannot read language list {path}: {error}") from None
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        language, _, alphabet = line.partition("\t")
        items.append((number, language.strip(), alphabet.strip() or None))
    if not items:
        raise FormalRopeError(f"the language list {path} names no language")
    return items


def read_language_list(path: str | Path) -> list[tuple[str, str | None]]:
    """A user list: one language per line, optionally a tab and an alphabet; blank lines and # comments skipped."""
    return [(language, alphabet) for _, language, alphabet in _numbered_language_list(path)]


def file_entries(path: str) -> list[tuple[LanguageEntry, DFA]]:
    """The entries of a `file:PATH` part; an unresolvable line is an error naming the file and line."""
    numbered = _numbered_language_list(path)
    return user_entries([(language, alphabet) for _, language, alphabet in numbered], Path(path).stem, where=path,
                        numbers=[number for number, _, _ in numbered])


# ------------------------------------------------------------------------------------------- specs
def _options(text: str, allowed: tuple[str, ...], part: str) -> dict[str, str]:
    options = {}
    for item in filter(None, (piece.strip() for piece in text.split(","))):
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals or key not in allowed:
            raise FormalRopeError(
                f"language set {part!r}: unknown option {item!r}; options are {', '.join(f'{k}=...' for k in allowed)}"
            )
        if key in options:  # the last would win silently: the user meant one of them
            raise FormalRopeError(f"language set {part!r}: option {key} is given twice; give it once")
        options[key] = value.strip()
    return options


def _integer(value: str, name: str, part: str, low: int = 1) -> int:
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if number < low:
        raise FormalRopeError(f"language set {part!r}: {name} must be an integer of at least {low}, got {value!r}")
    return number


def _parts(spec: str) -> list[str]:
    text = NAMED_SPECS.get(spec.strip(), spec.strip())
    parts = [part.strip() for part in text.split("+")]
    if not text or any(not part for part in parts):
        raise FormalRopeError(f"empty language set spec {spec!r}; e.g. default, mlregtest:per_cell=2, registry")
    return parts


def _mlregtest_options(rest: str, part: str) -> tuple[int | None, tuple | None, tuple | None]:
    """(per_cell, sizes, classes) of an `mlregtest:...` part."""
    options = _options(rest, ("per_cell", "sizes", "classes"), part)
    per_cell = _integer(options["per_cell"], "per_cell", part) if "per_cell" in options else None
    sizes = tuple(_integer(size, "sizes", part) for size in options["sizes"].split("/")) if "sizes" in options else None
    classes = tuple(options["classes"].split("/")) if "classes" in options else None
    return per_cell, sizes, classes


def _generated_options(rest: str, part: str) -> dict[str, Any]:
    """family, count, periods, depth and alphabets of a `generated:...` part."""
    options = _options(rest, ("family", "count", "period", "depth", "alphabets"), part)
    family = options.get("family")
    if family not in FAMILIES:
        raise FormalRopeError(f"language set {part!r}: family must be one of {', '.join(FAMILIES)}")
    periods = (None,)
    if family == "ltl_p_mod":
        periods = tuple(_integer(p, "period", part, 2) for p in options.get("period", "2/3/4/5").split("/"))
        repeated = sorted({p for p in periods if periods.count(p) > 1})
        if repeated:
            raise FormalRopeError(f"language set {part!r}: period {repeated[0]} is given twice; list each period once")
    elif "period" in options:
        raise FormalRopeError(f"language set {part!r}: period= applies to family=ltl_p_mod only (the least k of "
                              f"its MOD); {family} has none"
                              + (" (its moduli are drawn from 2..5)" if family == "counting" else ""))
    alphabets = []
    for item in options.get("alphabets", "ab/abc").split("/"):
        try:
            alphabet = tuple(parse_alphabet(item))
        except FormalRopeError as error:
            raise FormalRopeError(f"language set {part!r}: alphabets: {error}") from None
        if len(alphabet) < 2:
            raise FormalRopeError(f"language set {part!r}: alphabets: {item!r} has {len(alphabet)} symbol; each "
                                  "alphabet needs at least 2 (e.g. alphabets=ab/abc), since a language over one "
                                  "symbol is one of lengths only")
        alphabets.append(alphabet)
    if len(set(alphabets)) < len(alphabets):
        raise FormalRopeError(f"language set {part!r}: alphabets lists an alphabet twice; list each once")
    return {"family": family, "count": _integer(options.get("count", "5"), "count", part), "periods": periods,
            "depth": _integer(options.get("depth", "3"), "depth", part), "alphabets": tuple(alphabets)}


def _filtered_mlregtest(sizes, classes) -> tuple[MLRegTestFile, ...]:
    files = mlregtest_files()
    if sizes is not None:
        files = tuple(item for item in files if item.alphabet_size in sizes)
    if classes is not None:
        files = tuple(item for item in files if item.language_class in classes)
    if not files:
        raise FormalRopeError("no MLRegTest automaton matches the given sizes and classes")
    return files


@dataclass(frozen=True)
class SetPart:
    """One part of a language set spec, parsed: its source (mlregtest, generated, registry, file),
    its text as written (`rest`: after the colon) and its options (mlregtest: per_cell, sizes,
    classes; generated: family, count, periods, depth, alphabets; file: the path)."""

    source: str
    text: str
    rest: str = ""
    options: tuple = ()

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.options)


@dataclass(frozen=True)
class SetSpec:
    """A language set spec parsed once (`parse_set_spec`): what its set holds without building it
    (`size`), the same spec drawing K MLRegTest languages per cell (`with_per_cell`), and the set
    itself (`build`). `text` is the spec as a set records it (named specs expanded only by
    `with_per_cell`, which rewrites the MLRegTest parts)."""

    text: str
    parts: tuple[SetPart, ...]

    def __str__(self) -> str:
        return self.text

    def size(self, seed: int = 0) -> int:
        """How many languages `build(seed)` holds, without building it: the MLRegTest sample is drawn
        (file names only), generated families count `count` per period (a family that cannot be
        filled is an error only when the set is built), the registry and user lists are counted.
        Instant, but an upper bound: building drops languages equal to earlier ones and refuses what
        cannot be built, so `formalrope atlas --dry-run` builds the set (`atlas.plan.plan_atlas`)."""
        total = 0
        for part in self.parts:
            options = part.settings
            if part.source == "mlregtest":
                files = _filtered_mlregtest(options["sizes"], options["classes"])
                total += len(stratified_sample(files, options["per_cell"], seed))
            elif part.source == "generated":
                total += options["count"] * len(options["periods"])
            elif part.source == "registry":
                total += len(registry_entries())
            else:
                total += len(read_language_list(options["path"]))
        return total

    def with_per_cell(self, per_cell: int) -> "SetSpec":
        """This spec with every MLRegTest part drawing `per_cell` languages per (alphabet size, class)
        cell (`formalrope atlas --per-cell K`)."""
        if not any(part.source == "mlregtest" for part in self.parts):
            raise FormalRopeError(f"--per-cell draws MLRegTest languages per cell, but the language set {self.text!r} "
                                  "has no mlregtest part; add one (e.g. --set mlregtest+registry) or leave --per-cell "
                                  "out")
        parts = []
        for part in self.parts:
            if part.source == "mlregtest":
                kept = [item for item in part.rest.split(",")
                        if item.strip() and item.partition("=")[0].strip() != "per_cell"]
                rest = ",".join([f"per_cell={int(per_cell)}", *kept])
                part = replace(part, text=f"mlregtest:{rest}", rest=rest,
                               options=tuple({**part.settings, "per_cell": int(per_cell)}.items()))
            parts.append(part)
        return SetSpec("+".join(part.text for part in parts), tuple(parts))

    def build(self, seed: int = 0) -> LanguageSet:
        """The language set of this spec (see the module docstring), drawn with `seed`, with the DFA
        of each entry it built (`LanguageSet.dfas`). The same (spec, seed) gives the same entries in
        the same order. FormalRopeError for a duplicate id (the same part twice) or a family that
        cannot be filled."""
        pairs: list[tuple[LanguageEntry, DFA]] = []
        known: set = set()
        for part in self.parts:
            options = part.settings
            if part.source == "mlregtest":
                new = mlregtest_entries(options["per_cell"], seed, options["sizes"], options["classes"])
            elif part.source == "generated":
                new = generated_entries(options["family"], options["count"], seed, known, options["periods"],
                                        options["depth"], options["alphabets"])
            elif part.source == "registry":
                new = registry_language_entries()
            else:
                new = file_entries(options["path"])
            pairs.extend(new)
            known.update(dfa_key(dfa) for _, dfa in new)
        entries = tuple(entry for entry, _ in pairs)
        duplicates = sorted(identifier for identifier, n in Counter(e.id for e in entries).items() if n > 1)
        if duplicates:
            raise FormalRopeError(f"language set {self.text!r} names {duplicates[0]} twice; list each part once")
        return LanguageSet(self.text, seed, entries, tuple(dfa for _, dfa in pairs))


def parse_set_spec(spec: "str | SetSpec") -> SetSpec:
    """The parsed `spec` (a SetSpec is returned as it is): FormalRopeError for an unknown source or
    option, naming the part."""
    if isinstance(spec, SetSpec):
        return spec
    parts = []
    for part in _parts(spec):
        name, _, rest = part.partition(":")
        name = name.strip()
        if name == "mlregtest":
            per_cell, sizes, classes = _mlregtest_options(rest, part)
            options = (("per_cell", per_cell), ("sizes", sizes), ("classes", classes))
        elif name == "generated":
            options = tuple(_generated_options(rest, part).items())
        elif name == "registry" and not rest:
            options = ()
        elif name == "file" and rest:
            options = (("path", rest.strip()),)
        else:
            raise _unknown_part(part)
        parts.append(SetPart(name, part, rest, options))
    return SetSpec(spec.strip(), tuple(parts))


def language_set_size(spec: "str | SetSpec" = "default", seed: int = 0) -> int:
    """How many languages `build_language_set(spec, seed)` holds, without building it (`SetSpec.size`)."""
    return parse_set_spec(spec).size(seed)


def with_per_cell(spec: "str | SetSpec", per_cell: int) -> SetSpec:
    """`spec` with every MLRegTest part drawing `per_cell` languages per cell (`SetSpec.with_per_cell`)."""
    return parse_set_spec(spec).with_per_cell(per_cell)


def _unknown_part(part: str) -> FormalRopeError:
    return FormalRopeError(
        f"unknown language set {part!r}; use default, full, mlregtest, mlregtest:per_cell=K, "
        "generated:family=F,count=N, registry or file:PATH, joined by +"
    )


def build_language_set(spec: "str | SetSpec" = "default", seed: int = 0) -> LanguageSet:
    """The language set named by `spec` (see the module docstring; a string or a parsed `SetSpec`),
    drawn with `seed` (`SetSpec.build`)."""
    return parse_set_spec(spec).build(seed)


__all__ = [
    "ATLAS_PERIODS",
    "DEFAULT_SPEC",
    "FULL_SPEC",
    "LOGIC_CLASSES",
    "NAMED_SPECS",
    "MIN_BALANCED_FRACTION",
    "SOURCES",
    "LanguageEntry",
    "LanguageSet",
    "MLRegTestFile",
    "SetPart",
    "SetSpec",
    "build_language_set",
    "entry_dfa",
    "language_set_size",
    "logic_class",
    "merged_language_set",
    "mlregtest_files",
    "parse_set_spec",
    "read_language_set",
    "read_language_list",
    "stratified_sample",
    "with_per_cell",
]
