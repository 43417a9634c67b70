"""Files the commands write and read, made safe against careless and hostile paths.

Outputs (every `--out`, `--plot`, a results folder's tables):

* only a regular file (or, for folder outputs, a folder) is ever replaced: an existing FIFO, device,
  socket or folder in the way is refused, and a symbolic link is followed, so its target is written
  (`output_path`);
* a file appears whole or not at all, under a temporary name unique to the writing process first
  (`atomic_file`); two processes writing one file both succeed, the last one's bytes win;
* a folder of several files (a FLaRe split, an export) is written into a temporary sibling folder
  that replaces the old one at once (`atomic_folder`), never file by file, under a lock: a second
  writer of the same folder is refused with an "in use" line (`output_lock`), as is a second sweep
  in one results folder.

Inputs read whole are bounded: a regular file by its size before reading, anything else (a FIFO,
/dev/zero) while reading (`read_bounded`), and zip members by the size their archive declares and
then by what they really hold (`read_zip_member`). The limits are in `formal_rope.limits`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from formal_rope import limits
from formal_rope.errors import FormalRopeError
from formal_rope.limits import describe, describe_bytes

TEMPORARY_MARK = ".tmp"
LOCK_SUFFIX = ".lock"


class OutputInUseError(FormalRopeError):
    """Another process holds the output's lock (a second writer of one folder, a second sweep)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def output_path(path: str | os.PathLike, what: str, *, folder: bool = False) -> Path:
    """The path an output really writes: `path` with every symbolic link followed (a link's target is
    written, created when missing). FormalRopeError when that exists and is not a regular file (with
    `folder`: not a folder), so that a FIFO, a device or a folder is never replaced by a file."""
    given = Path(os.path.expanduser(os.fspath(path)))
    target = Path(os.path.realpath(given))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as error:
        raise FormalRopeError(f"cannot write {what} {given}: {error.strerror or error}") from None
    via = f" (the link's target {target})" if given.is_symlink() else ""
    if folder:
        if stat.S_ISDIR(mode):
            return target
        raise FormalRopeError(
            f"cannot write {what} {given}: it exists and is {'a file' if stat.S_ISREG(mode) else _kind(mode)}{via}, "
            "and this output is a folder; give a folder name"
        )
    if stat.S_ISREG(mode):
        return target
    hint = " (give a file name inside it)" if stat.S_ISDIR(mode) else "; only a regular file is ever replaced"
    raise FormalRopeError(f"cannot write {what} {given}: it exists and is {_kind(mode)}{via}{hint}")


def temporary_sibling(target: Path, mark: str = TEMPORARY_MARK) -> Path:
    """A hidden name next to `target`, unique to this process and call: .NAME.PID.RANDOM.tmp.SUFFIX
    (the suffix kept last, for writers that pick a format by it, such as matplotlib)."""
    return target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}{mark}{target.suffix}")


def _remove_file(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


@contextmanager
def atomic_file(path: str | os.PathLike, what: str) -> Iterator[Path]:
    """Yield a temporary path to write the output `path` into; when the block ends normally it
    replaces the output at once (`os.replace`), otherwise it is removed. Missing parent folders are
    created; `path` is checked by `output_path` first (a symbolic link's target is what is replaced)."""
    target = output_path(path, what)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_sibling(target)
    # Reserved now (O_EXCL), with the permissions a new file gets (0666 less the umask).
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield temporary
        os.replace(temporary, target)
    except BaseException:
        _remove_file(temporary)
        raise


def probe_output(path: str | os.PathLike, what: str) -> Path:
    """Check, before the work that fills it, that the output `path` can be written: `output_path`,
    its missing parent folders created, a temporary file made and removed there. OSError when the
    folder cannot take a file (for the caller's message); returns the path really written."""
    target = output_path(path, what)
    target.parent.mkdir(parents=True, exist_ok=True)
    probe = temporary_sibling(target)
    os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    _remove_file(probe)
    return target


def write_bytes_atomically(path: str | os.PathLike, data: bytes, what: str) -> Path:
    """Write `data` as the output `path` (see `atomic_file`); returns the path really written."""
    with atomic_file(path, what) as temporary:
        temporary.write_bytes(data)
    return output_path(path, what)


# ----------------------------------------------------------------------------------------- locks
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OutputLock:
    """An exclusive lock on one output, held by this process (`flock` on a hidden lock file, which the
    kernel releases when the process dies, however it dies). Release removes the lock file."""

    def __init__(self, lock_file: Path, descriptor: int):
        self.lock_file = lock_file
        self._descriptor: int | None = descriptor

    def release(self) -> None:
        if self._descriptor is None:
            return
        try:
            _remove_file(self.lock_file)  # while still locked: a waiting process then finds it gone and retries
        finally:
            os.close(self._descriptor)
            self._descriptor = None


def acquire_lock(lock_file: Path, what: str, shown: str | os.PathLike) -> OutputLock:
    """Lock `lock_file` for this process; OutputInUseError (exit 2) naming the holder's pid when
    another process holds it."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    while True:
        descriptor = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = os.read(descriptor, 64).decode("ascii", "replace").strip()
            os.close(descriptor)
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            by = f" (pid {holder})" if holder.isdigit() else ""
            raise OutputInUseError(
                f"{what} {shown} is in use by another formalrope process{by}: wait for it to finish, or choose "
                "another --out"
            ) from None
        try:
            same = os.stat(lock_file).st_ino == os.fstat(descriptor).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(descriptor, 0)
            os.write(descriptor, f"{os.getpid()}\n".encode())
            return OutputLock(lock_file, descriptor)
        os.close(descriptor)  # the holder removed this file as it released it: lock the new one


def lock_file_of(target: Path) -> Path:
    """The hidden lock file of an output: .NAME.lock next to it."""
    return target.with_name(f".{target.name}{LOCK_SUFFIX}")


@contextmanager
def output_lock(target: Path, what: str, shown: str | os.PathLike | None = None) -> Iterator[OutputLock]:
    """Hold the lock of the output `target` for the block (see `acquire_lock`)."""
    lock = acquire_lock(lock_file_of(target), what, target if shown is None else shown)
    try:
        yield lock
    finally:
        lock.release()


# ------------------------------------------------------------------------------- folder outputs
def _remove_stale_siblings(target: Path) -> None:
    """Temporary folders a killed writer of `target` left (their process is gone)."""
    prefix = f".{target.name}."
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix) or TEMPORARY_MARK not in entry.name:
            continue
        pid = entry.name[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True) if entry.is_dir(follow_symlinks=False) else _remove_file(
                Path(entry.path))


def _swap_in(temporary: Path, target: Path, owned: Collection[str]) -> None:
    try:
        os.rename(temporary, target)  # no folder there, or an empty one: one rename
        return
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    # Files in the old folder that this output does not write (a user's notes, __pycache__) move
    # into the new one; files it writes are never kept from an earlier write (no mixing of two).
    for entry in os.scandir(target):
        if entry.name not in owned and not (temporary / entry.name).exists():
            os.rename(entry.path, temporary / entry.name)
    old = temporary_sibling(target, ".old" + TEMPORARY_MARK)
    os.rename(target, old)
    os.rename(temporary, target)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def atomic_folder(path: str | os.PathLike, what: str, owned: Collection[str]) -> Iterator[Path]:
    """Yield a fresh temporary folder to write the folder output `path` into. When the block ends
    normally the folder replaces `path`'s at once (the files in `owned`, the names this output may
    write, all come from this write; other files already there are kept); otherwise it is removed.
    The output is locked meanwhile: a second writer gets OutputInUseError."""
    target = output_path(path, what, folder=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(target, what, path):
        _remove_stale_siblings(target)
        temporary = temporary_sibling(target)
        temporary.mkdir()
        try:
            yield temporary
            _swap_in(temporary, target, set(owned))
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise


# ---------------------------------------------------------------------------------- bounded reads
def too_large(what: str, path, limit_name: str, size: int | None = None) -> FormalRopeError:
    held = f"holds {describe_bytes(size)}" if size is not None else "holds more"
    return FormalRopeError(f"{what} {path} {held}, more than {describe(limit_name)} allows; it is not read")


def read_bounded(path: str | os.PathLike, limit_name: str, what: str) -> bytes:
    """The bytes of `path`, at most the limit `limit_name` of formal_rope.limits: a regular file is
    refused by its size before reading, anything else (a FIFO, a device) once it gave more.
    OSError (missing, unreadable) propagates for the caller's message."""
    limit = getattr(limits, limit_name)  # read at the call: tests lower a limit
    with open(path, "rb") as handle:
        status = os.fstat(handle.fileno())
        if stat.S_ISREG(status.st_mode) and status.st_size > limit:
            raise too_large(what, path, limit_name, status.st_size)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise too_large(what, path, limit_name)
    return data


def read_bounded_text(path: str | os.PathLike, limit_name: str, what: str, encoding: str = "utf-8") -> str:
    """`read_bounded` decoded (UnicodeDecodeError propagates)."""
    return read_bounded(path, limit_name, what).decode(encoding)


def read_zip_member(archive, name: str, limit_name: str, what: str) -> bytes:
    """The bytes of member `name` of an open zipfile.ZipFile, at most the limit `limit_name`: refused
    by the uncompressed size the archive declares before anything is inflated, and by what it really
    inflates to. KeyError when the member is missing (as ZipFile.read)."""
    limit = getattr(limits, limit_name)  # read at the call: tests lower a limit
    info = archive.getinfo(name)
    where = f"{archive.filename}:{name}" if archive.filename else name
    if info.file_size > limit:
        raise too_large(what, where, limit_name, info.file_size)
    with archive.open(info) as member:
        data = member.read(limit + 1)
    if len(data) > limit:
        raise too_large(what, where, limit_name)
    return data
