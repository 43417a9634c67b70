"""Which runs can train together, and in packs of what size.

Runs share a pack when they share the architecture and the training shape: everything in their
RunConfig except the fields in `PER_RUN_FIELDS`, which each run of a pack keeps for itself (its
seed, learning rate and schedule, base or periods, weight decay, clipping norm, near-miss share,
evaluation mode, the checkpoint it continues from). Runs of different mixable encodings (NoPE,
SiPE, SiPE_P, RoPE, RoPE_P, partial RoPE) also share packs: each keeps its own encoding
(`encodings.composites.MixedPositional`), so `reproduce table2` trains as one pack per language.
`group_packs` cuts a grid into such packs, never refusing a run: runs that cannot share a pack go
into different packs.
"""

from __future__ import annotations

import hashlib
import math
import os

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import ENCODINGS
from formal_rope.run_config.fields import FIELD_NAMES

# A run's language and alphabet: its own in a pack (its own DFA, data, vocabulary and evaluation),
# but `group_packs` keeps languages apart unless the pack value ends in LANGUAGES.
LANGUAGE_FIELDS = ("language", "alphabet")
PER_RUN_FIELDS = frozenset(
    {"seed", "lr", "lr_schedule", "warmup_steps", "weight_decay", "grad_clip", "base", "periods",
     "train_near_miss_fraction", "eval_mode", "init_from", *LANGUAGE_FIELDS}
)
SHARED_FIELDS = tuple(name for name in FIELD_NAMES if name not in PER_RUN_FIELDS)
MAX_AUTO_PACK = 64  # beyond this a CPU pack gains nothing and one failure costs too many runs
MEMORY_SHARE = 0.5  # `auto` packs use at most this share of the memory available to all workers


# Encodings whose runs share a pack with runs of another such encoding (`encodings.composites.MixedPositional`).
MIXED = "mixable encodings"


def _shared_value(config: RunConfig, name: str, mix: bool = True):
    """What a pack compares of field `name`: the encoding's mixing group for `pe` (with `mix`; a
    hybrid keeps its own encoding), else the value."""
    if name == "pe" and mix:
        row = ENCODINGS.get(config.pe)
        return MIXED if row is not None and row.mixable and config.layer_pe is None else config.pe
    return getattr(config, name)


def pack_signature(config: RunConfig, mix: bool = True, languages: bool = False) -> tuple:
    """What runs of one pack share when `group_packs` cuts them: the values of SHARED_FIELDS, except
    that runs of different mixable encodings (`encodings.Encoding.mixable`: NoPE, SiPE, SiPE_P,
    RoPE, RoPE_P, partial RoPE) may share a pack (unless `mix` is False); also the language and
    alphabet unless `languages` (runs of different languages then share packs)."""
    shared = tuple(_shared_value(config, name, mix) for name in SHARED_FIELDS)
    return shared if languages else shared + tuple(getattr(config, name) for name in LANGUAGE_FIELDS)


def check_packable(configs) -> None:
    """FormalRopeError naming the first setting that differs between runs that cannot share a pack."""
    configs = list(configs)
    for config in configs[1:]:
        for name in SHARED_FIELDS:
            if _shared_value(config, name) != _shared_value(configs[0], name):
                raise FormalRopeError(
                    f"runs of one pack must share {name} ({getattr(configs[0], name)!r} vs {getattr(config, name)!r}); "
                    "group them with formal_rope.scheduling.packs.group_packs"
                )


def pack_key(configs) -> str:
    """A pack's name: a hash of its members' run ids in order (its training state is saved under it)."""
    joined = ",".join(config.run_id() for config in configs)
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def estimate_pack_bytes(config: RunConfig, runs: int) -> int:
    """A generous estimate of the memory a pack of `runs` runs of `config` needs while training:
    weights, gradients and two AdamW moments, plus the saved activations of one step."""
    d, layers, ffn = config.d_model, config.layers, config.ffn_mult
    parameters = layers * (4 * d * d + 2 * ffn * d * d + 10 * d) + (config.train_max_length + 8) * d + 4 * d
    # The content projectors (jof_projected: W1, W2 per layer that uses it; a hybrid's layer_pe says which).
    names = config.layer_pe if config.layer_pe is not None else (config.pe,) * layers
    rows = [ENCODINGS.get(name) for name in names]  # None for an unknown encoding (validation names it)
    parameters += sum(row is not None and row.content_angles for row in rows) * (2 * d * d + 4 * d)
    tokens = config.batch_size * (config.train_max_length + 2)
    # per layer and token: ~ (12 + 2*ffn) * d floats saved for backward, plus attention scores
    activations = layers * tokens * ((12 + 2 * ffn) * d + 2 * config.heads * (config.train_max_length + 2))
    return int(runs * 4 * (4 * parameters + 2 * activations) + 64 * 2**20 * min(1, runs))


def available_memory_bytes() -> int:
    """Memory this process may use: MemAvailable, or the cgroup limit when lower."""
    available = None
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except OSError:
        pass
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = open(limit_file).read().strip()
        except OSError:
            continue
        if text.isdigit():
            available = min(available or int(text), int(text))
    return available or 8 * 2**30


APART = "/by-pe"  # a --pack suffix: runs of different encodings never share a pack (the packs before mixing)
LANGUAGES = "/languages"  # a --pack suffix: runs of different languages and alphabets share packs
SUFFIXES = (APART, LANGUAGES)  # in the order a parsed value writes them


def _without_suffixes(text: str) -> tuple[str, tuple[str, ...]]:
    """(`text` without its trailing SUFFIXES, those suffixes in SUFFIXES' order); a repeated one is
    left in the text (and makes it invalid)."""
    found: list[str] = []
    stripped = True
    while stripped:
        stripped = False
        for suffix in SUFFIXES:
            if text.endswith(suffix) and suffix not in found:
                text, stripped = text[: -len(suffix)], True
                found.append(suffix)
    return text, tuple(suffix for suffix in SUFFIXES if suffix in found)


def parse_pack(value) -> int | str:
    """`auto` or a positive integer (what `--pack` takes), either optionally followed by `/by-pe`
    (runs of different encodings then never share a pack: how packs were cut before mixed packs;
    it reproduces results of that time bit for bit) and/or `/languages` (runs of different
    languages and alphabets share packs, each with its own vocabulary). A suffixed form is
    returned as text (`auto/by-pe`, `4/languages`, `auto/by-pe/languages`)."""
    if value is None or value == "auto":
        return "auto"
    base, suffixes = _without_suffixes(str(value).strip())
    return f"{_parse_size(base or '-')}{''.join(suffixes)}" if suffixes else _parse_size(value)


def _parse_size(value) -> int | str:
    """`auto` or a positive integer, without suffixes."""
    if value == "auto":
        return "auto"
    text = str(value).strip()
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise FormalRopeError(f"--pack must be 'auto' or a positive integer, optionally followed by {APART} "
                              f"and/or {LANGUAGES}, got {value!r}") from None
    if number < 1 or text not in (str(number), f"+{number}"):
        raise FormalRopeError(f"--pack must be 'auto' or a positive integer, optionally followed by {APART} "
                              f"and/or {LANGUAGES}, got {value!r}")
    return number


def split_pack(pack) -> tuple[int | str, bool]:
    """(`auto` or the size, whether runs of different mixable encodings may share a pack) of a
    parsed --pack value."""
    size, mix, _ = pack_mixing(pack)
    return size, mix


def pack_mixing(pack) -> tuple[int | str, bool, bool]:
    """(`auto` or the size, whether runs of different mixable encodings may share a pack, whether
    runs of different languages may) of a --pack value."""
    pack = parse_pack(pack)
    if not isinstance(pack, str) or pack == "auto":
        return pack, True, False
    base, suffixes = _without_suffixes(pack)
    return _parse_size(base), APART not in suffixes, LANGUAGES in suffixes


def pack_cost(runs: int) -> float:
    """Relative wall time of a pack of `runs` runs on one worker: a pack trains more run-steps per
    second the larger it is, about 1 + 0.15 log2(R) times a single run's on this CPU at quick dims
    (bench/packed_training.py: 1.2x at R = 2, 1.4x at 4, 1.5x at 8 and 16)."""
    return runs / (1.0 + 0.15 * math.log2(max(1, runs)))


def _makespan(sizes: list[int], workers: int) -> float:
    """When the busiest worker finishes if packs of these sizes are handed out largest first."""
    loads = [0.0] * workers
    for size in sorted(sizes, reverse=True):
        loads[loads.index(min(loads))] += pack_cost(size)
    return max(loads)


def _split_sizes(count: int, size: int) -> list[int]:
    """`count` runs in packs of at most `size`, as even as possible (10 at 4: 4, 3, 3)."""
    packs = math.ceil(count / size)
    base, extra = divmod(count, packs)
    return [base + (1 if index < extra else 0) for index in range(packs)]


def _auto_sizes(counts: list[int], workers: int, limit: int) -> list[int]:
    """The largest pack size per group for `--pack auto`: among a few ways to cut the grid (each
    group given a share of the workers in proportion to its size; each group spread over every
    worker; one size cap for all groups at 1/k of the grid per worker), the one whose busiest
    worker finishes first (`pack_cost`), fewer packs on a tie. No size exceeds `limit`."""
    total = sum(counts)
    candidates = [
        [math.ceil(n / max(1, min(workers, math.floor(workers * n / total + 0.5)))) for n in counts],
        [math.ceil(n / workers) for n in counts],
    ]
    for rounds in (1, 2, 3, 4):
        cap = max(1, math.ceil(total / (workers * rounds)))
        candidates.append([min(n, cap) for n in counts])
    best = None
    for candidate in candidates:
        sizes = [max(1, min(limit, size)) for size in candidate]
        packs = [piece for n, size in zip(counts, sizes) for piece in _split_sizes(n, size)]
        score = (round(_makespan(packs, workers), 9), len(packs))
        if best is None or score < best[0]:
            best = (score, sizes)
    return best[1]


def group_packs(configs, pack: int | str = "auto", *, workers: int = 1, memory_bytes: int | None = None):
    """Cut `configs` into packs (tuples of configs), keeping the grid's order within each pack;
    the largest packs come first (the order a pool of workers should take them in).

    Compatible runs share the architecture and training shape (`pack_signature`), their encodings
    may differ when each is mixable; with a pack value ending in `/by-pe` (`pack_mixing`) they may not.
    Their languages and alphabets differ only with a pack value ending in `/languages`.
    pack N: packs of at most N compatible runs; pack 1 trains every run alone. A fixed N whose
    estimated memory (`estimate_pack_bytes`) exceeds what is available raises FormalRopeError naming
    the need, before anything trains.
    pack "auto": packs as large as keeps every worker busy (`_auto_sizes`): a grid of many small
    groups packs each group whole (Table 2: six groups of two seeds), one large group is spread
    over every worker; at most MAX_AUTO_PACK runs per pack and within MEMORY_SHARE of the
    available memory.
    """
    pack, mix, languages = pack_mixing(pack)
    workers = max(1, int(workers))
    memory = available_memory_bytes() if memory_bytes is None else memory_bytes
    groups: dict[tuple, list[RunConfig]] = {}
    for config in configs:
        groups.setdefault(pack_signature(config, mix, languages), []).append(config)
    members_list = list(groups.values())
    if pack == "auto":
        fits = [
            max(1, int(MEMORY_SHARE * memory / workers) // max(1, estimate_pack_bytes(m[0], 1))) for m in members_list
        ]
        sizes = _auto_sizes([len(m) for m in members_list], workers, min([MAX_AUTO_PACK, *fits]))
    else:
        sizes = []
        for members in members_list:
            size = min(pack, len(members))
            need = estimate_pack_bytes(members[0], size) * min(workers, math.ceil(len(members) / size))
            if need > memory:
                raise FormalRopeError(
                    f"--pack {pack} needs about {need / 2**30:.1f} GiB for {members[0].language} {members[0].pe} "
                    f"(d_model {members[0].d_model}, {members[0].layers} layers, batch {members[0].batch_size}) "
                    f"with {workers} worker(s), but about {memory / 2**30:.1f} GiB is available; use a smaller --pack"
                )
            sizes.append(size)
    packs: list[tuple[RunConfig, ...]] = []
    for members, size in zip(members_list, sizes):
        start = 0
        for length in _split_sizes(len(members), size):
            packs.append(tuple(members[start : start + length]))
            start += length
    return sorted(packs, key=len, reverse=True)  # stable: equal sizes keep the grid's order


def default_threads(pack_size: int, workers: int) -> int:
    """Threads per worker: the machine's cores shared by the workers (packs of one stay single-threaded)."""
    if pack_size <= 1:
        return 1
    return max(1, (os.cpu_count() or 1) // max(1, workers))
