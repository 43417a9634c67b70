"""Option texts that become RunConfig fields: per-layer encodings (`rope*5,nope`), windows
(`32*4,global`) and length ranges or lists (`41..500`, `41,45,50`). Torch-free."""

from __future__ import annotations

from formal_rope.errors import FormalRopeError
from formal_rope.numbers import int_text
from formal_rope.run_config.rules import GLOBAL_WINDOW, MAX_LENGTH_LIST


def parse_layer_pe(text: str) -> tuple[str, ...]:
    """`--layer-pe rope,rope,nope` -> ("rope", "rope", "nope"); `NAME*K` repeats a name K times
    (rope*5,nope). Names are checked by validation (`training.setup`)."""
    names: list[str] = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        name, star, count = part.partition("*")
        try:
            repeat = int_text(count) if star else 1
        except ValueError:
            raise FormalRopeError(f"layer_pe: {part!r} is not NAME or NAME*COUNT") from None
        if repeat < 1 or not name.strip():
            raise FormalRopeError(f"layer_pe: {part!r} is not NAME or NAME*COUNT with COUNT >= 1")
        names += [name.strip()] * repeat
    if not names:
        raise FormalRopeError("layer_pe is empty; give one encoding per layer, e.g. rope,rope,nope")
    return tuple(names)


def parse_window(text: str) -> int | tuple[int, ...] | None:
    """`--window 32` -> 32 (every layer); `32,32,global` or `32*5,-1` -> one window per layer
    (global or -1: a global layer). Values are checked by validation (`training.setup`)."""
    parts = [piece.strip() for piece in text.split(",") if piece.strip()]
    windows: list[int] = []
    for part in parts:
        value, star, count = part.partition("*")
        try:
            repeat = int_text(count) if star else 1
            width = GLOBAL_WINDOW if value.strip().lower() in ("global", "g") else int_text(value)
        except ValueError:
            raise FormalRopeError(f"window: {part!r} is not a window (an integer, or global)") from None
        if repeat < 1:
            raise FormalRopeError(f"window: {part!r} repeats a window {repeat} times")
        windows += [width] * repeat
    if not windows:
        raise FormalRopeError("window is empty; give e.g. 32 or 32,32,global")
    if len(parts) == 1 and "*" not in parts[0]:
        return None if windows[0] == GLOBAL_WINDOW else windows[0]  # `--window global`: no window
    return tuple(windows)


def lengths_fields(text: str, option: str = "--test-lengths", prefix: str = "test", as_list: bool = False) -> dict:
    """RunConfig fields for a length option: '41..500' (one range, kept lazy) -> {prefix_min_length,
    prefix_max_length}; '41,45,50' or '41..45,50' (a list, test lengths only) -> {test_lengths};
    '7' -> the range 7..7; as_list: always {test_lengths}. FormalRopeError for anything else,
    negative lengths, or a list of more than MAX_LENGTH_LIST lengths."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise FormalRopeError(f"{option} is empty; use e.g. 41..500 or 41,45,50")
    ranges = []
    for part in parts:
        try:
            low, high = (int_text(piece) for piece in part.split("..", 1)) if ".." in part else (int_text(part),) * 2
        except ValueError:
            raise FormalRopeError(
                f"{option}: {part!r} is not a length or a range; use e.g. 41..500 or 41,45,50"
            ) from None
        if low < 0 or low > high:
            raise FormalRopeError(f"{option}: {part!r} is not a non-empty range of non-negative lengths")
        ranges.append((low, high))
    if len(ranges) == 1 and not as_list:
        return {f"{prefix}_min_length": ranges[0][0], f"{prefix}_max_length": ranges[0][1],
                **({"test_lengths": None} if prefix == "test" else {})}
    if prefix != "test":
        raise FormalRopeError(f"{option} takes one range such as 0..40, got {text!r}")
    count = sum(high - low + 1 for low, high in ranges)
    if count > MAX_LENGTH_LIST:
        raise FormalRopeError(
            f"{option} {text!r} lists {count:,} lengths, more than {MAX_LENGTH_LIST:,}; use one range A..B"
        )
    lengths = sorted({length for low, high in ranges for length in range(low, high + 1)})
    return {"test_lengths": tuple(lengths)}
