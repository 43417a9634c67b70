"""Where runs keep the training state they resume from: a folder on any filesystem pyarrow opens.

A long run saves its whole training state every `StateOptions.every` steps under a key (the pack it
trains, see `formal_rope.scheduling.packs.pack_key`) and loads it when it starts again — after a
lost worker on another node, a rerun of the sweep, or `formalrope train --resume`. The folder is a
local path or a URI `pyarrow.fs` opens (file://, s3://, gs://, hdfs://), so every node of a cluster
can reach it. Importing this module does not import torch (sweep plans use the store without
training); `save_pack_state` and `load_pack_state` turn a pack's whole training state (weights,
optimizer moments, `PackTrainingState`) into those bytes and back.

    store = open_state_store("s3://bucket/runs/state")
    store.save("pack-1a2b", data)          # atomic: a reader sees the old bytes or the new, never a part
    store.load("pack-1a2b")                # bytes, or None when nothing was saved
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import time
import uuid
from dataclasses import dataclass

import numpy as np
from pyarrow import fs
from pyarrow.fs import FileSelector, FileType

from formal_rope import limits
from formal_rope.errors import FormalRopeError

SUFFIX = ".state"
# The payload a pack's state is stored as (`save_pack_state`): this magic, the length of a JSON header
# (format, run ids, progress counters and generator states), the header, then the tensors (weights,
# optimizer moments) as safetensors bytes. Neither part can run code when read, whoever wrote it;
# states of earlier versions were torch pickles (a zip archive, "PK..."), which could, and are refused.
PAYLOAD_MAGIC = b"FRPACK02"
STATE_FORMAT = 2  # of the header; 1 was the torch pickle
_PAYLOAD_HEADER = struct.Struct(">8sQ")
_PICKLE_ZIP = b"PK\x03\x04"
TEMP_PREFIX = ".tmp-"  # hidden, half-written or not yet renamed objects
# Every stored state is framed: magic, payload length, SHA-256 of the payload. Writes are atomic,
# but an object store may serve one read as several ranged requests, and a save landing between
# them mixes two versions; the frame detects that and the read is retried.
MAGIC = b"FRSTATE1"
_HEADER = struct.Struct(">8sQ32s")
READ_ATTEMPTS = 5
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")

# Runs longer than this checkpoint by default; shorter ones (quick scale: 1,000 steps) only when asked.
DEFAULT_CHECKPOINT_ABOVE = 10_000


class TrainingStateError(FormalRopeError):
    """A saved training state that cannot be used (damaged, foreign, of an earlier format, of other
    runs): bad input, never a run's failure; the message names the state and how to start over."""

    def __init__(self, location: str, problem: str):
        self.location = location
        super().__init__(f"the training state {location} {problem}; delete it to start that run over")


@dataclass(frozen=True)
class StateOptions:
    """Save the training state every `every` steps into the folder `uri` (a local path or a pyarrow.fs
    URI) and resume from it; `keep` keeps the state of finished runs (removed by default)."""

    uri: str
    every: int
    keep: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise FormalRopeError(f"the checkpoint interval must be a positive number of steps, got {self.every!r}")
        if not str(self.uri).strip():
            raise FormalRopeError("the state folder must be a path or a URI, got an empty string")


def default_checkpoint_every(steps: int) -> int | None:
    """The checkpoint interval when none is given: every max(1000, steps // 100) steps for runs of more
    than 10,000 steps (a killed 10^6-step run loses at most 1% of its steps), none for shorter runs."""
    return max(1000, steps // 100) if steps > DEFAULT_CHECKPOINT_ABOVE else None


def checkpoint_every(explicit: int | None, steps: int) -> int | None:
    """The interval to use: `explicit` (0 turns checkpointing off) or the default for `steps`."""
    if explicit is None:
        return default_checkpoint_every(steps)
    if explicit < 0:
        raise FormalRopeError(f"--checkpoint-every must be a number of steps (0 turns checkpoints off), got {explicit}")
    return explicit or None


def is_uri(location: str) -> bool:
    return "://" in str(location)


def absolute_location(location: str | os.PathLike) -> str:
    """A URI unchanged, a local path made absolute (workers may run in another directory)."""
    location = os.fspath(location)
    return location if is_uri(location) else os.path.abspath(os.path.expanduser(location))


def state_subfolder(location: str | os.PathLike, name: str) -> str:
    """The folder `name` inside a state folder (before a URI's ?query, which holds its options)."""
    location = os.fspath(location)
    base, mark, query = location.partition("?")
    return f"{base.rstrip('/')}/{name}{mark}{query}"


class StateStore:
    """Bytes under keys in one folder of a pyarrow filesystem; `save` is atomic (see `save`)."""

    def __init__(self, filesystem, root: str, uri: str):
        self.filesystem = filesystem
        self.root = root.rstrip("/")
        self.uri = uri

    def _path(self, key: str) -> str:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(f"state key {key!r} must be letters, digits, '.', '_' or '-' (at most 200)")
        return f"{self.root}/{key}{SUFFIX}"

    def _exists(self, path: str) -> bool:
        return self.filesystem.get_file_info(path).type != FileType.NotFound

    def location(self, key: str) -> str:
        """Where the state under `key` lives, as messages show it (the folder's URI and the file name)."""
        base, mark, query = self.uri.partition("?")
        return f"{base.rstrip('/')}/{key}{SUFFIX}{mark}{query}"

    def _read(self, path: str) -> bytes | None:
        name = path.rsplit("/", 1)[-1]
        where = f"{self.uri.partition('?')[0].rstrip('/')}/{name}"
        limit = limits.MAX_STATE_BYTES + _HEADER.size
        for attempt in range(READ_ATTEMPTS):
            try:
                size = self.filesystem.get_file_info(path).size
                if size is not None and size > limit:  # checked before reading: a state is read whole
                    raise TrainingStateError(where, f"holds more than {limits.describe('MAX_STATE_BYTES')} allows")
                with self.filesystem.open_input_stream(path) as stream:
                    framed = stream.read()
            except FileNotFoundError:
                return None
            payload = _unframe(framed)
            if payload is not None:
                return payload
            time.sleep(0.05 * (attempt + 1))  # a save replaced the object while it was read
        raise TrainingStateError(where, "is damaged (its checksum does not match)")

    def load(self, key: str) -> bytes | None:
        """The bytes last saved under `key`, or None when there are none."""
        path = self._path(key)
        data = self._read(path)
        if data is None:
            # A save on a filesystem whose rename does not replace (HDFS) was interrupted between
            # setting the old state aside and moving the new one in: the old one is complete.
            data = self._read(path + ".old")
        return data

    def exists(self, key: str) -> bool:
        path = self._path(key)
        return self._exists(path) or self._exists(path + ".old")

    def save(self, key: str, data: bytes) -> None:
        """Store `data` under `key` so that no reader ever sees a partial state.

        The bytes go to a hidden temporary object first and are then moved over the key. On a local
        disk the move is a rename (atomic). On object stores (S3, GCS) it is a server-side copy,
        which creates the destination object whole or not at all; writing the key directly would
        not be enough, because pyarrow completes an interrupted upload stream when it is closed
        from its destructor, publishing the part written so far. HDFS renames atomically but does
        not replace an existing file: the old state is renamed aside first and `load` falls back to
        it until the new one is in place.
        """
        self._save_at(self._path(key), key, data)

    def _save_at(self, path: str, name: str, data: bytes) -> None:
        temporary = f"{self.root}/{TEMP_PREFIX}{name}.{uuid.uuid4().hex}"
        try:
            with self.filesystem.open_output_stream(temporary) as stream:
                stream.write(_frame(bytes(data)))
            try:
                self.filesystem.move(temporary, path)
            except OSError:
                if not self._exists(path):
                    raise
                self.filesystem.move(path, path + ".old")
                self.filesystem.move(temporary, path)
                self.filesystem.delete_file(path + ".old")
        except BaseException:
            self._remove(temporary)
            raise

    def probe(self) -> bool:
        """Save, read back and delete a probe the way a state is saved; True if it came back whole.
        The probe is hidden like a half-written state, so a listing (or anyone watching the folder
        for a run's first state) never takes it for one."""
        name = f"{TEMP_PREFIX}probe-{uuid.uuid4().hex[:12]}"
        path = f"{self.root}/{name}{SUFFIX}"
        payload = b"formal-rope state probe"
        try:
            self._save_at(path, name, payload)
            return self._read(path) == payload
        finally:
            self._remove(path)

    def _remove(self, path: str) -> None:
        try:
            self.filesystem.delete_file(path)
        except (FileNotFoundError, OSError):
            pass

    def delete(self, key: str) -> None:
        """Remove the state under `key` and any temporary objects a killed save left (no error if absent)."""
        path = self._path(key)
        self._remove(path)
        self._remove(path + ".old")
        stale = f"{self.root}/{TEMP_PREFIX}{key}."
        try:
            infos = self.filesystem.get_file_info(FileSelector(self.root, allow_not_found=True))
        except OSError:
            return
        for info in infos:
            if info.path.startswith(stale):
                self._remove(info.path)

    def keys(self) -> list[str]:
        """The keys that hold a saved state, sorted."""
        infos = self.filesystem.get_file_info(FileSelector(self.root, allow_not_found=True))
        names = {info.base_name for info in infos}
        return sorted({
            name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name[: -len(SUFFIX + ".old")]
            for name in names
            if not name.startswith(TEMP_PREFIX) and (name.endswith(SUFFIX) or name.endswith(SUFFIX + ".old"))
        })


def open_state_store(uri: str | os.PathLike) -> StateStore:
    """The state folder at `uri`: a local path, or a URI pyarrow.fs opens (file://, s3://, gs://, hdfs://;
    S3 options such as ?endpoint_override=host:port&scheme=http&region=... go in the query string).
    The folder is created when missing. FormalRopeError when the URI cannot be opened."""
    location = absolute_location(uri)
    try:
        if is_uri(location):
            filesystem, root = fs.FileSystem.from_uri(location)
        else:
            filesystem, root = fs.LocalFileSystem(), location
        filesystem.create_dir(root, recursive=True)
    except Exception as error:  # pyarrow raises ArrowInvalid, OSError, ... with a readable message
        raise FormalRopeError(f"cannot open the state folder {location!r}: {_first_line(error)}") from None
    return StateStore(filesystem, root, location)


def check_state_dir(uri: str | os.PathLike) -> StateStore:
    """Open the state folder and prove it writable (save, read back, delete a probe), before any run
    starts: a folder that cannot take a state must not cost a run its progress. FormalRopeError if not."""
    store = open_state_store(uri)
    try:
        readable = store.probe()
    except Exception as error:
        raise FormalRopeError(f"cannot write the state folder {store.uri!r}: {_first_line(error)}") from None
    if not readable:
        raise FormalRopeError(f"the state folder {store.uri!r} did not return what was written to it")
    return store


def pack_payload(header: dict, tensors: bytes) -> bytes:
    """A trainer's state as stored: PAYLOAD_MAGIC, the JSON header's length, the header, the tensors."""
    text = json.dumps(header, allow_nan=True, separators=(",", ":")).encode("utf-8")
    return _PAYLOAD_HEADER.pack(PAYLOAD_MAGIC, len(text)) + text + tensors


def unpack_payload(payload: bytes, location: str) -> tuple[dict, bytes]:
    """(header, tensor bytes) of a stored state; TrainingStateError naming `location` for anything
    else (an earlier version's pickle, a foreign or truncated payload, a header that is not JSON)."""
    if payload.startswith(_PICKLE_ZIP):
        raise TrainingStateError(
            location, "was written by an earlier formal-rope as a torch pickle, which can run code when it is loaded, "
            "so it is never loaded"
        )
    if len(payload) < _PAYLOAD_HEADER.size:
        raise TrainingStateError(location, "is not a formal-rope training state (too short)")
    magic, length = _PAYLOAD_HEADER.unpack_from(payload)
    if magic != PAYLOAD_MAGIC:
        raise TrainingStateError(location, "is not a formal-rope training state of this version")
    end = _PAYLOAD_HEADER.size + length
    if end > len(payload):
        raise TrainingStateError(location, "is truncated (its header runs past its end)")
    try:
        header = json.loads(payload[_PAYLOAD_HEADER.size:end])
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise TrainingStateError(location, f"has a damaged header ({error})") from None
    if not isinstance(header, dict):
        raise TrainingStateError(location, "has a damaged header (not a JSON object)")
    return header, payload[end:]


def read_saved_state(store: StateStore, key: str, run_ids: list[str]) -> tuple[dict, bytes] | None:
    """(header, tensor bytes) of the state saved under `key` for the runs `run_ids`, or None when there
    is none; TrainingStateError when it cannot be theirs (damaged, an earlier format, other runs).
    Torch-free: a sweep's driver checks every state this way before any unit starts."""
    blob = store.load(key)
    if blob is None:
        return None
    where = store.location(key)
    header, tensors = unpack_payload(blob, where)
    if header.get("format") != STATE_FORMAT:
        raise TrainingStateError(where, f"has format {header.get('format')!r}, not {STATE_FORMAT}")
    if header.get("run_ids") != list(run_ids):
        raise TrainingStateError(where, "belongs to other runs")
    return header, tensors


def _frame(payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload


def _unframe(framed: bytes) -> bytes | None:
    """The payload of a framed state, or None when the bytes are not one whole state."""
    if len(framed) < _HEADER.size:
        return None
    magic, length, digest = _HEADER.unpack_from(framed)
    payload = framed[_HEADER.size:]
    if magic != MAGIC or length != len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


# ----------------------------------------------------------------------------------------------
# A pack's training state


@dataclass
class PackTrainingState:
    """Everything that changes while a pack trains, besides weights and optimizer moments: what a
    resumed pack restores to continue bit-identically (per run: generator, status, counters)."""

    step: int
    rngs: list
    status: list[str]
    steps_done: list[int]
    final_loss: list
    window_loss: list[float]
    window_correct: list[int]
    window_count: list[int]

    @classmethod
    def fresh(cls, configs) -> "PackTrainingState":
        runs = len(configs)
        return cls(
            step=0,
            rngs=[np.random.default_rng(np.random.SeedSequence([int(c.seed), 1])) for c in configs],
            status=["ok"] * runs,
            steps_done=[0] * runs,
            final_loss=[None] * runs,
            window_loss=[0.0] * runs,
            window_correct=[0] * runs,
            window_count=[0] * runs,
        )

    def to_dict(self) -> dict:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "rngs"}
        data["rngs"] = [rng.bit_generator.state for rng in self.rngs]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "PackTrainingState":
        rngs = []
        for saved in data["rngs"]:
            rng = np.random.default_rng()
            rng.bit_generator.state = saved
            rngs.append(rng)
        return cls(**{**{k: v for k, v in data.items() if k != "rngs"}, "rngs": rngs})


def _safetensors():
    import safetensors.torch  # function-local: it imports torch, and sweep plans open stores without it

    return safetensors.torch


def save_pack_state(store: StateStore, key: str, configs, model, optimizer, progress: PackTrainingState,
                    curves=None) -> None:
    """The pack's whole training state in a format that cannot run code when read: the tensors
    (weights of `model`, steps and moments of its `PackedAdamW`) as safetensors, everything else
    (progress, and the training curves so far when `curves` records them) as JSON."""
    moments = optimizer.state_dict()
    tensors = {f"model.{name}": tensor for name, tensor in model.state_dict().items()}
    tensors["optimizer.steps"] = moments["steps"]
    for name in ("exp_avg", "exp_avg_sq"):
        tensors.update({f"optimizer.{name}.{index}": tensor for index, tensor in enumerate(moments[name])})
    header = {
        "format": STATE_FORMAT,
        "run_ids": [c.run_id() for c in configs],
        "moments": len(moments["exp_avg"]),
        "progress": progress.to_dict(),
    }
    if curves is not None:  # the training curves so far (`curves.PackCurves`), so a resumed run continues them
        header["curves"] = curves.state_dict()
    # Contiguous copies on the CPU: safetensors refuses views that share memory.
    payload = _safetensors().save({name: tensor.detach().cpu().contiguous().clone() for name, tensor in
                                   tensors.items()})
    store.save(key, pack_payload(header, payload))


def load_pack_state(store: StateStore, key: str, configs, model, optimizer,
                    curves=None) -> PackTrainingState | None:
    """Restore the state saved under `key` into `model` and `optimizer` and return its progress, or
    None when there is none. TrainingStateError (bad input: the caller must not record it as a failed
    run) when it cannot be used; nothing in it is executed."""
    saved = read_saved_state(store, key, [c.run_id() for c in configs])
    if saved is None:
        return None
    header, payload = saved
    where = store.location(key)
    try:
        tensors = _safetensors().load(payload)
        moments = int(header["moments"])
        model_state = {name[len("model."):]: t for name, t in tensors.items() if name.startswith("model.")}
        model.load_state_dict(model_state)
        optimizer.load_state_dict({
            "steps": tensors["optimizer.steps"],
            **{name: [tensors[f"optimizer.{name}.{index}"] for index in range(moments)]
               for name in ("exp_avg", "exp_avg_sq")},
        })
        progress = PackTrainingState.from_dict(header["progress"])
        runs = len(configs)
        if not (isinstance(progress.step, int) and 0 <= progress.step <= configs[0].steps) or any(
            len(getattr(progress, name)) != runs for name in PackTrainingState.__dataclass_fields__ if name != "step"
        ):
            raise ValueError(f"its progress is not that of {runs} run(s) of {configs[0].steps} steps")
        if curves is not None:  # continue the curves the state holds
            curves.load_state_dict(header.get("curves"))
        return progress
    except Exception as error:  # noqa: BLE001 - safetensors, torch and numpy raise many types for one bad file
        detail = (str(error).strip().splitlines() or [""])[0][:300]
        raise TrainingStateError(where, f"does not fit this pack ({type(error).__name__}: {detail})") from None
