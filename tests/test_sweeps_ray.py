"""The Ray backend: a Ray instance started here (2 CPUs and one declared GPU) and a real cluster
process (`ray start --head` on 127.0.0.1); workers killed by their PID mid-run and resumed from
their state; failures, Ctrl-C, fractional GPUs; bad addresses and options; no Ray import when Ray
is not used. Runs are real tiny trainings where results must match, fakes where only the plumbing
is under test."""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
import ray

import sweeps_support
from cli_support import run_main
from formal_rope.run_config.config import RunConfig
from formal_rope.storage.training_state import StateOptions
from formal_rope.sweeps.grid import expand_grid
from formal_rope.sweeps.results import load_results
from formal_rope.sweeps.runner import run_sweep
from formal_rope.training.run_result import RunResult
from sweeps_support import fake_runner, spec

REPO = Path(__file__).resolve().parents[1]
RESULT_COLUMNS = ["run_id", "status", "n_star", "accuracy", "final_loss", "steps_done", "first_failure", "error"]


@pytest.fixture(scope="module")
def ray_instance():
    """A Ray instance in this process: 2 CPUs and one declared GPU (a logical resource: tasks that
    ask for a GPU get one assigned, which is what the backend's device choice reads)."""
    saved = os.environ.get("RAY_AUTH_MODE")
    ray.init(address="local", num_cpus=2, num_gpus=1, include_dashboard=False, logging_level="ERROR")
    # The workers do not have tests/ on their path: ship this module's and sweeps_support's helpers by value.
    for module in (sys.modules[__name__], sweeps_support):
        ray.cloudpickle.register_pickle_by_value(module)
    yield
    for module in (sys.modules[__name__], sweeps_support):
        ray.cloudpickle.unregister_pickle_by_value(module)
    ray.shutdown()
    if saved is None:
        os.environ.pop("RAY_AUTH_MODE", None)  # ray.init sets it for its own processes
    else:
        os.environ["RAY_AUTH_MODE"] = saved


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tiny_grid(seeds: int = 2, lrs=(3e-3, 1e-3)) -> list[RunConfig]:
    """Real training, small enough for CI: one (language, PE) group of seeds × lrs runs."""
    return expand_grid(spec(languages=["(ab)*"], pes=["rope"], bases=[1e4], seeds=seeds, lrs=list(lrs), overrides={
        "steps": 40, "layers": 1, "d_model": 16, "heads": 2, "batch_size": 16, "n_per_length": 4,
        "test_max_length": 48, "eval_mode": "full"}))


def rows(out) -> tuple[pd.DataFrame, pd.DataFrame]:
    runs, evals = load_results(out)
    runs = runs[RESULT_COLUMNS].sort_values("run_id").reset_index(drop=True)
    evals = evals.sort_values(["run_id", "length"]).reset_index(drop=True)
    return runs, evals


def assert_same_rows(left, right):
    pd.testing.assert_frame_equal(rows(left)[0], rows(right)[0])
    pd.testing.assert_frame_equal(rows(left)[1], rows(right)[1])


# ----------------------------------------------------------------------------------------------
# Runners shipped to the workers (by value, see the fixture)


def pausing_pack_runner(configs, *, device, threads, state, marks: str, pause_at: int):
    """Train the pack for real; the first attempt of the pack holding seed 0 writes its PID and waits
    at step `pause_at` to be killed. Every attempt records the first step it trained."""
    from formal_rope.runs import run_pack
    from formal_rope.scheduling.packs import pack_key

    key = pack_key(configs)
    victim = any(config.seed == 0 for config in configs)
    paused = Path(marks) / "victim.pid"
    seen: list[int] = []

    def on_step(step, _losses):
        if not seen:
            (Path(marks) / f"{key}.{uuid.uuid4().hex}.first-step").write_text(str(step))
        seen.append(step)
        if victim and step == pause_at and not paused.exists():
            (Path(marks) / "victim.tmp").write_text(str(os.getpid()))
            os.replace(Path(marks) / "victim.tmp", paused)
            time.sleep(600)  # until the test kills this worker

    return run_pack(configs, progress=False, device=device, threads=threads, state=state, on_step=on_step)[0]


def kill_when_paused(marks: Path, timeout: float = 240) -> threading.Thread:
    """SIGKILL the worker that wrote marks/victim.pid, from a thread (the sweep blocks this one)."""
    def killer():
        deadline = time.monotonic() + timeout
        while not (marks / "victim.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(int((marks / "victim.pid").read_text()), signal.SIGKILL)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread


def first_steps(marks: Path) -> list[int]:
    return sorted(int(path.read_text()) for path in marks.glob("*.first-step"))


def raising_runner(config: RunConfig) -> RunResult:
    if config.seed == 1:
        raise RuntimeError("boom in a worker")
    return fake_runner(config)


def suicidal_runner(config: RunConfig) -> RunResult:
    if config.seed == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # killed by its PID, e.g. for memory
    return fake_runner(config)


def device_recording_pack_runner(configs, *, device, threads, state):
    from dataclasses import replace

    return [replace(fake_runner(config), versions={"device": device, "threads": threads}) for config in configs]


def sleeping_runner(config: RunConfig, marks: str) -> RunResult:
    (Path(marks) / f"{os.getpid()}.pid").write_text("")
    time.sleep(600)
    return fake_runner(config)


# ----------------------------------------------------------------------------------------------
# A Ray instance in this process


def test_ray_sweep_writes_the_rows_of_a_local_sweep_and_a_rerun_skips_them(ray_instance, tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope"], bases=[1e4], seeds=2, lrs=[1e-4]))
    run_sweep(configs, tmp_path / "local", runner=fake_runner)
    events = []
    summary = run_sweep(configs, tmp_path / "ray", backend="ray", runner=fake_runner,
                        on_event=lambda kind, config, result: events.append((kind, config.run_id())))
    assert summary.backend == "ray" and summary.completed == 4 and summary.statuses == {"ok": 4}
    assert_same_rows(tmp_path / "local", tmp_path / "ray")
    assert sorted(run_id for kind, run_id in events if kind == "done") == sorted(c.run_id() for c in configs)
    again = run_sweep(configs, tmp_path / "ray", backend="ray", runner=raising_runner)
    assert again.skipped == 4 and again.completed == 0 and again.units == 0
    assert len(load_results(tmp_path / "ray")[0]) == 4


def test_a_worker_killed_mid_run_is_retried_and_resumes_from_its_state(ray_instance, tmp_path):
    configs = tiny_grid()
    run_sweep(configs, tmp_path / "alone", workers=2)  # real training, uninterrupted, local backend
    marks = tmp_path / "marks"
    marks.mkdir()
    killer = kill_when_paused(marks)
    summary = run_sweep(
        configs, tmp_path / "ray", backend="ray", workers=2, state=StateOptions(str(tmp_path / "state"), every=10),
        pack_runner=functools.partial(pausing_pack_runner, marks=str(marks), pause_at=25),
    )
    killer.join(timeout=5)
    assert summary.units == 2 and summary.retries == 1 and summary.statuses == {"ok": 4}
    assert first_steps(marks) == [0, 0, 20]  # two packs from step 0; the killed one again from its state at 20
    assert_same_rows(tmp_path / "alone", tmp_path / "ray")
    assert list((tmp_path / "state").iterdir()) == []  # finished runs leave no state behind


def test_the_local_backend_also_retries_a_killed_worker_from_its_state(tmp_path):
    configs = tiny_grid()
    run_sweep(configs, tmp_path / "alone", workers=2)
    marks = tmp_path / "marks"
    marks.mkdir()
    killer = kill_when_paused(marks)
    summary = run_sweep(
        configs, tmp_path / "local", workers=2, state=StateOptions((tmp_path / "state").as_uri(), every=10),
        pack_runner=functools.partial(pausing_pack_runner, marks=str(marks), pause_at=25),
    )
    killer.join(timeout=5)
    # The pool broke: the packs in flight (the victim, perhaps the other) ran again, the victim from its
    # state at step 20.
    assert summary.statuses == {"ok": 4} and summary.retries >= 1
    assert 20 in first_steps(marks)
    assert_same_rows(tmp_path / "alone", tmp_path / "local")


def test_a_failing_unit_is_recorded_and_lost_workers_fail_after_their_retries(ray_instance, tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=3, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path / "raise", backend="ray", runner=raising_runner)
    runs = load_results(tmp_path / "raise")[0].set_index("seed")
    assert summary.statuses == {"ok": 2, "failed": 1} and "boom in a worker" in runs.loc[1, "error"]
    summary = run_sweep(configs, tmp_path / "kill", backend="ray", runner=suicidal_runner, max_retries=1)
    runs = load_results(tmp_path / "kill")[0].set_index("seed")
    assert summary.statuses == {"ok": 2, "failed": 1} and summary.retries == 1
    assert "worker process died" in runs.loc[1, "error"] and "1 retries" in runs.loc[1, "error"]
    assert len(runs) == 3  # one row per run, whatever the retries


def test_fractional_gpus_share_the_gpu_and_train_on_cuda(ray_instance, tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=2, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path / "gpu", backend="ray", gpus_per_run=0.5, cpus_per_run=1, pack=1,
                        pack_runner=device_recording_pack_runner)
    runs = load_results(tmp_path / "gpu")[0]
    assert summary.units == 2 and set(runs["versions"]) == {'{"device": "cuda", "threads": 1}'}
    run_sweep(configs, tmp_path / "cpu", backend="ray", pack=1, pack_runner=device_recording_pack_runner)
    assert set(load_results(tmp_path / "cpu")[0]["versions"]) == {'{"device": "cpu", "threads": 1}'}


def test_ctrl_c_cancels_the_tasks_in_flight(ray_instance, tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=3, lrs=[1e-4]))
    marks = tmp_path / "marks"
    marks.mkdir()

    def interrupt_once_running(kind, config, result):
        if kind == "start":
            deadline = time.monotonic() + 60
            while len(list(marks.glob("*.pid"))) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(configs, tmp_path / "out", backend="ray", runner=functools.partial(sleeping_runner, marks=str(marks)),
                  on_event=interrupt_once_running)
    pids = [int(path.stem) for path in marks.glob("*.pid")]
    assert len(pids) == 2
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)  # the tasks' workers were stopped, not left sleeping
    assert ray.is_initialized()  # a connection opened by the caller stays open
    assert not list((tmp_path / "out" / "runs").glob("*.parquet"))


def test_gpus_the_instance_lacks_are_refused_before_any_run(ray_instance, tmp_path, capsys):
    code, _, stderr = run_main(capsys, ["sweep", "--lang", "(ab)*", "--seeds", "1", "--out", str(tmp_path / "r"),
                                        "--backend", "ray", "--gpus-per-run", "2"])
    assert code == 2 and "--gpus-per-run 2 but the Ray cluster has 1 GPUs" in stderr and "Traceback" not in stderr
    assert not list((tmp_path / "r" / "runs").glob("*"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (killed, not yet reaped by its parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# ----------------------------------------------------------------------------------------------
# The command line in fresh processes: a real cluster, Ctrl-C, bad addresses


def cli(args, env, timeout=300, **kwargs):
    return subprocess.run([sys.executable, "-m", "formal_rope.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, **kwargs)


def tiny_sweep_args(out: Path) -> list[str]:
    return ["sweep", "--lang", "(ab)*", "--pe", "rope", "--seeds", "2", "--steps", "40", "--layers", "1",
            "--d-model", "16", "--heads", "2", "--batch-size", "16", "--n-per-length", "4", "--out", str(out)]


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """`ray start --head` on 127.0.0.1 with its own ports, temp folder and token; yields (address,
    environment for drivers). Stopped by signalling its own process group (never `ray stop`, which
    would stop every Ray on the machine)."""
    folder = tmp_path_factory.mktemp("cluster")
    token = folder / "token"
    token.write_text(uuid.uuid4().hex)
    env = dict(os.environ, PYTHONPATH=str(REPO), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    port = free_port()
    head = subprocess.Popen(
        ["ray", "start", "--head", "--block", "--num-cpus", "2", "--port", str(port), "--node-ip-address", "127.0.0.1",
         "--ray-client-server-port", str(free_port()), "--dashboard-port", str(free_port()),
         "--dashboard-agent-listen-port", str(free_port()), "--include-dashboard", "false", "--disable-usage-stats",
         "--temp-dir", str(folder / "ray")],
        env=env, stdout=open(folder / "head.log", "w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None and time.monotonic() < deadline, (folder / "head.log").read_text()
                time.sleep(0.2)
        yield f"127.0.0.1:{port}", env
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=3)
        except subprocess.TimeoutExpired:  # `ray start --block` may outlive its daemons' shutdown
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=10)
        for _ in range(50):  # the head's daemons shut down with it
            if not _session_processes(head.pid):
                break
            time.sleep(0.2)
        else:
            os.killpg(head.pid, signal.SIGKILL)


def _session_processes(session: int) -> list[int]:
    listing = subprocess.run(["ps", "-eo", "pid=,sid=,stat="], capture_output=True, text=True).stdout.split("\n")
    return [int(pid) for pid, sid, stat in (line.split() for line in listing if line.strip())
            if int(sid) == session and not stat.startswith("Z")]


def test_a_sweep_on_a_ray_cluster_writes_the_rows_of_a_local_sweep(ray_cluster, tmp_path):
    address, env = ray_cluster
    local = cli(tiny_sweep_args(tmp_path / "local") + ["--workers", "2"], env)
    assert local.returncode == 0, local.stderr
    clustered = cli(tiny_sweep_args(tmp_path / "cluster") + ["--backend", "ray", "--address", address, "--json"], env)
    assert clustered.returncode == 0, clustered.stderr
    assert f"Ray cluster at {address}: 2 CPUs" in clustered.stderr
    assert_same_rows(tmp_path / "local", tmp_path / "cluster")


def test_ctrl_c_stops_the_sweep_shuts_its_ray_down_and_a_rerun_finishes_it(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = tiny_sweep_args(tmp_path / "out") + ["--steps", "600", "--seeds", "1", "--backend", "ray", "--workers", "1",
                                                "--checkpoint-every", "20", "--state-dir", str(tmp_path / "state")]
    driver = subprocess.Popen([sys.executable, "-m", "formal_rope.cli", *args], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as test_hardening's
    deadline = time.monotonic() + 180
    while not list((tmp_path / "state").glob("[!.]*.state")) and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert driver.poll() is None, driver.communicate()[1]
    os.killpg(driver.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    try:
        _, stderr = driver.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # never leave a sweep that ignored the interrupt running on
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        raise
    assert driver.returncode != 0 and "Traceback" not in stderr, stderr
    for _ in range(100):
        if not _session_processes(driver.pid):
            break
        time.sleep(0.2)
    assert not _session_processes(driver.pid)  # no Ray process of that sweep outlives it
    assert list((tmp_path / "state").glob("[!.]*.state"))  # its progress is kept
    assert not list((tmp_path / "out" / "runs").glob("*.parquet"))
    rerun = cli(args, env)
    assert rerun.returncode == 0, rerun.stderr
    assert list(load_results(tmp_path / "out")[0]["status"]) == ["ok"]
    assert not list((tmp_path / "state").glob("[!.]*.state"))


def test_a_dying_node_ends_the_sweep_with_one_paragraph_naming_the_kept_runs(tmp_path):
    # Regression: killing the Ray instance's raylet ended the sweep ~12 s later with exit 1 (Ray's core
    # worker ends the driver) and only Ray's own log lines. Now: exit 3, an error paragraph, the
    # finished run kept and listed, the rest said to be rerun, no Ray process left behind.
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = tmp_path / "out"
    args = [argument for argument in tiny_sweep_args(out) if argument not in ("--steps", "40")]
    args += ["--seeds", "1", "--set", "steps=5,100000", "--backend", "ray", "--workers", "2", "--pack", "1"]
    driver = subprocess.Popen([sys.executable, "-m", "formal_rope.cli", *args], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not list((out / "runs").glob("*.parquet")) and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert driver.poll() is None, driver.communicate()[1]
        listing = subprocess.run(["ps", "-eo", "pid=,sid=,comm="], capture_output=True, text=True).stdout.split("\n")
        raylets = [int(pid) for pid, sid, name in (line.split(None, 2) for line in listing if line.strip())
                   if int(sid) == driver.pid and name.strip() == "raylet"]
        assert len(raylets) == 1
        os.kill(raylets[0], signal.SIGKILL)
        _, stderr = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    kept = load_results(out)[0]
    assert driver.returncode == 3 and "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    first = next(index for index, line in enumerate(lines) if line.startswith("error: "))
    assert all(line.startswith("  ") for line in lines[first + 1:]), stderr  # one paragraph, the last thing said
    paragraph = " ".join(" ".join(lines[first:]).split())
    assert f"the Ray instance this sweep started died (its raylet process (pid {raylets[0]}) exited" in paragraph
    assert f"Kept in {out / 'runs'}: 1 run(s) finished by this sweep" in paragraph
    assert list(kept["status"]) == ["ok"] and kept["run_id"][0] in paragraph and "Not run: 1" in paragraph
    for _ in range(100):
        if not _session_processes(driver.pid):
            break
        time.sleep(0.2)
    assert not _session_processes(driver.pid)  # the instance's other processes are shut down


def test_the_node_check_reads_whether_the_raylet_socket_is_listened_on(ray_instance, tmp_path):
    from formal_rope.sweeps.backends.ray import lost_node, socket_listening

    assert lost_node(ray) is None  # a live instance
    path = str(tmp_path / "sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    assert socket_listening(path) is True
    server.close()
    assert Path(path).exists() and socket_listening(path) is False  # the file stays, nobody listens


def test_addresses_that_do_not_answer_are_user_errors_within_seconds(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("RAY_ADDRESS", None)
    closed = free_port()
    # Ray connects to this machine's address when given 127.0.0.1: the fake server listens there.
    host = ray.util.get_node_ip_address()
    not_ray = socket.socket()
    not_ray.bind((host, 0))
    not_ray.listen(5)

    def answer_like_http():
        while True:
            try:
                connection, _ = not_ray.accept()
            except OSError:
                return
            with connection:
                connection.recv(1024)
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    threading.Thread(target=answer_like_http, daemon=True).start()
    cases = [
        (["--address", f"127.0.0.1:{closed}"], env, "no Ray cluster answers at"),
        (["--address", f"{host}:{not_ray.getsockname()[1]}"], env, "is not a Ray cluster"),
        (["--address", "auto"], dict(env, RAY_ADDRESS=f"127.0.0.1:{closed}"), "(from --address auto)"),
        (["--address", "nonsense"], env, "--address"),
    ]
    try:
        for extra, case_env, message in cases:
            started = time.monotonic()
            done = cli(tiny_sweep_args(tmp_path / "r") + ["--backend", "ray", *extra], case_env, timeout=60)
            assert time.monotonic() - started < 30
            assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
            errors = [line for line in done.stderr.strip().splitlines() if not line.startswith("note:")]
            assert len(errors) == 1  # one paragraph (notes on the tiny grid's settings may precede it)
    finally:
        not_ray.close()
    assert not list((tmp_path / "r" / "runs").glob("*.parquet"))


def test_bad_backend_options_are_user_errors_before_any_run(tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for args, message in [
        (
            ["--backend", "ray", "--checkpoint-every", "5", "--state-dir", str(blocker / "state")],
            "cannot open the state folder",
        ),
        (["--checkpoint-every", "5", "--state-dir", "nosuchscheme://x/y"], "cannot open the state folder"),
        (["--address", "auto"], "--address joins a Ray cluster: use it with --backend ray"),
        (["--backend", "slurm"], "--backend must be local or ray"),
        (["--backend", "ray", "--cpus-per-run", "0"], "--cpus-per-run must be > 0"),
        (["--backend", "ray", "--max-retries", "-1"], "--max-retries must be >= 0"),
        (["--checkpoint-every", "-3"], "--checkpoint-every must be"),
    ]:
        code, _, stderr = run_main(capsys, tiny_sweep_args(tmp_path / "r") + args)
        assert code == 2 and message in stderr and "Traceback" not in stderr, (args, stderr)
    assert not list((tmp_path / "r" / "runs").glob("*.parquet"))
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    code, _, stderr = run_main(capsys, tiny_sweep_args(tmp_path / "r") + ["--backend", "ray"])
    assert code == 2 and 'pip install -e ".[ray]"' in stderr and "Traceback" not in stderr


def test_commands_that_do_not_use_ray_never_import_it(tmp_path):
    script = (
        "import sys\nfrom formal_rope.cli import main\n"
        "def run(argv):\n    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "for command in ('sweep', 'reproduce', 'train'):\n    run([command, '--help'])\n"
        "assert 'torch' not in sys.modules and 'ray' not in sys.modules, 'help imported torch or ray'\n"
        f"run({tiny_sweep_args(tmp_path / 'local') + ['--seeds', '1', '--steps', '5']!r})\n"
        "assert 'ray' not in sys.modules, 'a local sweep imported ray'\n"
        "print('ray-free')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0 and "ray-free" in done.stdout, done.stderr
    assert len(load_results(tmp_path / "local")[0]) == 1  # the local sweep did run


def test_reproduce_checks_and_gives_every_table_its_state_folder(tmp_path, capsys, monkeypatch):
    import formal_rope.sweeps.runner as runner_module

    seen = {}
    real_run_sweep = runner_module.run_sweep

    def recording_run_sweep(configs, out, **options):
        seen[Path(out).name] = options
        return real_run_sweep(configs, out, **{**options, "runner": fake_runner})

    monkeypatch.setattr(runner_module, "run_sweep", recording_run_sweep)
    state = tmp_path / "state"
    code, _, stderr = run_main(capsys, ["reproduce", "all", "--seeds", "1", "--out", str(tmp_path / "r"),
                                        "--checkpoint-every", "5", "--state-dir", str(state), "--keep-state", "--json"])
    assert code == 0, stderr
    for table in ("table2", "table4", "table5"):
        options = seen[table]["state"]
        assert options == StateOptions(str(state / table), every=5, keep=True) and (state / table).is_dir()
    # At quick scale without --checkpoint-every there are no checkpoints, and the options say so.
    code, _, stderr = run_main(capsys, ["reproduce", "table2", "--seeds", "1", "--out", str(tmp_path / "q"),
                                        "--state-dir", str(state)])
    assert code == 0 and seen["q"]["state"] is None and "have no effect" in " ".join(_.split())


def test_ray_workers_write_each_runs_tensorboard_files(ray_instance, tmp_path):
    """--tensorboard on Ray: each task writes its own runs' event files into the shared folder, and
    they hold the same curve the results folder records (OUT/curves)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from formal_rope.storage.curves import CurveOptions
    from formal_rope.storage.tensorboard_log import run_folder_name
    from formal_rope.sweeps.curve_table import read_curves

    configs = tiny_grid(seeds=2, lrs=(3e-3,))
    board = tmp_path / "tb"
    summary = run_sweep(configs, tmp_path / "ray", backend="ray", pack=1,
                        curves=CurveOptions(log_every=10, tensorboard=str(board)))
    assert summary.statuses == {"ok": 2}
    assert sorted(path.name for path in board.iterdir()) == sorted(run_folder_name(c) for c in configs)
    curves = read_curves(tmp_path / "ray")
    for config in configs:
        events = EventAccumulator(str(board / run_folder_name(config))).Reload()
        recorded = curves[curves.run_id == config.run_id()]
        assert [s.step for s in events.Scalars("train/loss")] == list(recorded.step) == [10, 20, 30, 40]
        assert events.Scalars("train/loss")[-1].value == pytest.approx(recorded.loss.iloc[-1], rel=1e-6)
