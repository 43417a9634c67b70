"""The training-state store: atomic saves on a local path, a file:// URI and an s3:// URI served by
moto's S3 server on 127.0.0.1, an HDFS-like filesystem whose rename does not replace, and the checks
that run before any training starts."""

from __future__ import annotations

import io
import socket
import threading

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from formal_rope.errors import FormalRopeError
from formal_rope.storage.training_state import (
    StateOptions,
    StateStore,
    check_state_dir,
    checkpoint_every,
    default_checkpoint_every,
    open_state_store,
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server on 127.0.0.1 with one bucket; yields the endpoint host:port."""
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    with pytest.MonkeyPatch.context() as env:
        for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_DEFAULT_REGION": "us-east-1"}.items():
            env.setenv(name, value)
        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1").create_bucket(
            Bucket="states"
        )
        yield f"127.0.0.1:{port}"
    server.stop()


def s3_uri(endpoint: str, folder: str) -> str:
    return f"s3://states/{folder}?endpoint_override={endpoint}&scheme=http&region=us-east-1"


@pytest.fixture(params=["path", "file_uri", "s3"])
def store_uri(request, tmp_path):
    if request.param == "path":
        return str(tmp_path / "state")
    if request.param == "file_uri":
        return (tmp_path / "state").as_uri()
    return s3_uri(request.getfixturevalue("s3_server"), f"run-{request.node.originalname}")


def test_save_load_overwrite_delete_on_every_filesystem(store_uri):
    store = check_state_dir(store_uri)
    assert store.load("pack-a") is None and not store.exists("pack-a")
    store.save("pack-a", b"\x00first" * 1000)
    store.save("pack-b", b"other")
    assert store.load("pack-a") == b"\x00first" * 1000 and store.exists("pack-a")
    store.save("pack-a", b"second")
    assert store.load("pack-a") == b"second"
    assert store.keys() == ["pack-a", "pack-b"]  # no temporary object is left visible
    store.delete("pack-a")
    store.delete("pack-a")  # deleting what is gone is not an error
    assert store.load("pack-a") is None and store.keys() == ["pack-b"]
    # A second handle (another process, another node) reads the same folder.
    assert open_state_store(store_uri).load("pack-b") == b"other"


def test_readers_never_see_a_partial_state(store_uri):
    store = open_state_store(store_uri)
    payloads = [bytes([i]) * (200_000 + 7919 * i) for i in range(4)]
    store.save("hot", payloads[0])
    seen, stop = [], threading.Event()

    def read_while_writing():
        while not stop.is_set():
            seen.append(store.load("hot"))

    reader = threading.Thread(target=read_while_writing)
    reader.start()
    rounds = 12 if "s3://" in store_uri else 60
    for index in range(rounds):
        store.save("hot", payloads[index % len(payloads)])
    stop.set()
    reader.join()
    assert seen and all(data in payloads for data in seen)


class FailingHandler(pafs.FileSystemHandler):
    """The local filesystem, except that writes break after `fail_after` bytes (a killed save) and,
    with `hdfs_rename`, a move never replaces an existing file (as HDFS); `fail_moves` fails the
    n-th move from now (a process killed between two renames)."""

    def __init__(self, fail_after=None, hdfs_rename=False):
        self.local = pafs.LocalFileSystem()
        self.fail_after = fail_after
        self.hdfs_rename = hdfs_rename
        self.fail_moves = None

    def get_type_name(self):
        return "failing"

    def normalize_path(self, path):
        return path

    def equals(self, other):
        return self is other

    def get_file_info(self, paths):
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.local.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.local.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise OSError("not here")

    def delete_file(self, path):
        self.local.delete_file(path)

    def move(self, src, dest):
        if self.fail_moves is not None:
            self.fail_moves -= 1
            if self.fail_moves == 0:
                raise OSError("killed between two renames")
        if self.hdfs_rename and self.local.get_file_info(dest).type != pafs.FileType.NotFound:
            raise OSError(f"{dest} exists")
        self.local.move(src, dest)

    def copy_file(self, src, dest):
        self.local.copy_file(src, dest)

    def open_input_stream(self, path):
        return self.local.open_input_stream(path)

    def open_input_file(self, path):
        return self.local.open_input_file(path)

    def open_output_stream(self, path, metadata):
        stream = self.local.open_output_stream(path)
        if self.fail_after is None:
            return stream
        keep = self.fail_after

        class Breaking(io.RawIOBase):
            def writable(self):
                return True

            def write(self, data):
                stream.write(bytes(data)[:keep])
                raise OSError("connection reset mid-write")

            def close(self):
                if not stream.closed:
                    stream.close()
                super().close()

        return pa.PythonFile(Breaking(), mode="w")

    def open_append_stream(self, path, metadata):
        return self.local.open_append_stream(path)


def test_a_save_that_breaks_mid_write_keeps_the_previous_state_and_leaves_nothing(tmp_path):
    handler = FailingHandler()
    store = StateStore(pafs.PyFileSystem(handler), str(tmp_path), str(tmp_path))
    store.save("pack", b"complete state")
    handler.fail_after = 5
    with pytest.raises(OSError, match="mid-write"):
        store.save("pack", b"a newer state that never finished")
    assert store.load("pack") == b"complete state"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack.state"]


def test_a_filesystem_whose_rename_does_not_replace_still_saves_atomically(tmp_path):
    handler = FailingHandler(hdfs_rename=True)
    store = StateStore(pafs.PyFileSystem(handler), str(tmp_path), str(tmp_path))
    store.save("pack", b"one")
    store.save("pack", b"two")
    assert store.load("pack") == b"two" and store.keys() == ["pack"]
    # Killed after setting the old state aside, before moving the new one in: the old one is read.
    handler.fail_moves = 3  # the refused rename, the old state set aside, then the kill
    with pytest.raises(OSError, match="between two renames"):
        store.save("pack", b"three")
    assert not (tmp_path / "pack.state").exists()
    assert store.load("pack") == b"two" and store.exists("pack") and store.keys() == ["pack"]
    store.save("pack", b"four")
    assert store.load("pack") == b"four"
    store.delete("pack")
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_state_is_named_not_loaded(tmp_path):
    store = open_state_store(tmp_path)
    store.save("pack", b"x" * 100)
    path = tmp_path / "pack.state"
    path.write_bytes(path.read_bytes()[:-10])  # torn by something other than this store
    with pytest.raises(FormalRopeError, match="pack.state is damaged"):
        store.load("pack")


def test_delete_removes_what_killed_saves_left_behind(tmp_path):
    store = open_state_store(tmp_path)
    store.save("pack", b"x")
    (tmp_path / ".tmp-pack.deadbeef").write_bytes(b"half")  # a save killed before its rename
    (tmp_path / ".tmp-other.cafe").write_bytes(b"half")
    store.delete("pack")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-other.cafe"]


def test_bad_state_folders_are_user_errors(tmp_path, s3_server):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for uri, message in [
        (str(blocker / "state"), "cannot open the state folder"),
        ("nosuchscheme://host/state", "cannot open the state folder"),
        (s3_uri(s3_server, "x").replace("s3://states/", "s3://no-such-bucket/"), "no-such-bucket"),
    ]:
        with pytest.raises(FormalRopeError, match=message):
            check_state_dir(uri)
    with pytest.raises(ValueError, match="state key"):
        open_state_store(tmp_path).save("../escape", b"x")


def test_checkpoint_interval_defaults_and_options():
    assert default_checkpoint_every(1000) is None and default_checkpoint_every(10_000) is None
    assert default_checkpoint_every(10_001) == 1000 and default_checkpoint_every(1_000_000) == 10_000
    assert checkpoint_every(None, 1_000_000) == 10_000 and checkpoint_every(100, 1000) == 100
    assert checkpoint_every(0, 1_000_000) is None
    with pytest.raises(FormalRopeError, match="checkpoint-every"):
        checkpoint_every(-5, 1000)
    with pytest.raises(FormalRopeError, match="positive number of steps"):
        StateOptions("x", every=0)


def test_the_writability_probe_never_shows_as_a_state(tmp_path, monkeypatch):
    # A watcher that waits for a run's first state (or `keys()`) must not take the probe for one.
    seen: list[list[str]] = []
    original = StateStore._save_at

    def save_and_look(self, path, name, data):
        original(self, path, name, data)
        seen.append(self.keys() + [p.name for p in tmp_path.glob("[!.]*")])

    monkeypatch.setattr(StateStore, "_save_at", save_and_look)
    check_state_dir(tmp_path)
    assert seen == [[]]
    assert list(tmp_path.iterdir()) == []
