"""Where a training pack's curves go while it trains: the recorder (`curves.PackCurves`) and, with
`--tensorboard DIR`, TensorBoard event files written by torch's own SummaryWriter.

The writers live where the run trains (this process, a local pool's worker, a Ray task), one
sub-folder of DIR per run named by a readable label and its run id, so `tensorboard --logdir DIR`
shows every run's curve while a sweep trains. Scalars: train/loss, train/accuracy, train/lr at each
curve point; when the run ends, its config as hparams with hparams/n_star (and hparams/n_star_worst,
hparams/accuracy, hparams/final_loss where measured) as the metrics. A run started again (resumed
from a saved state, retried, rerun) opens its writer with `purge_step` at its first new point, so
TensorBoard hides the points an interrupted attempt wrote past the state it resumes from.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from dataclasses import replace

from formal_rope.errors import FormalRopeError
from formal_rope.storage.curves import CurveOptions, CurvePoint, PackCurves

TENSORBOARD_INSTALL = "pip install 'formal-rope[tensorboard]' (or pip install tensorboard)"
FLUSH_SECONDS = 10  # how stale a curve in TensorBoard may be while the run trains
_UNSAFE = re.compile(r"[^A-Za-z0-9+,.=@_-]+")  # parentheses and brackets too: the shell's


def check_tensorboard(options: CurveOptions | None = None) -> None:
    """FormalRopeError (exit 2) when --tensorboard is asked for and the tensorboard package (which
    torch's SummaryWriter needs) is missing. Imports nothing: a sweep's driver checks it first."""
    if options is not None and options.tensorboard is None:
        return
    if importlib.util.find_spec("tensorboard") is None:
        raise FormalRopeError(f"--tensorboard writes event files with torch's SummaryWriter, which needs the "
                              f"tensorboard package: {TENSORBOARD_INSTALL}")


def run_folder_name(config) -> str:
    """A run's sub-folder of the TensorBoard folder: language, encoding, seed and lr, then its run id
    (characters a file name or the shell would trip on become '_')."""
    label = f"{config.language[:40]} {config.pe} seed={config.seed} lr={config.lr:g}"
    return f"{_UNSAFE.sub('_', label).strip('_')}-{config.run_id()}"


def hparams_of(config, result) -> dict:
    """The run's config as TensorBoard hparams (lists as text, unset fields left out) and its run id."""
    values = {"run_id": result.run_id, "pack_id": result.pack_id}
    for name, value in config.to_dict().items():
        if isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        values[name] = value
    return {name: value for name, value in values.items() if value is not None}


def metrics_of(result) -> dict:
    """The run's final numbers as hparams metrics (unmeasured ones left out)."""
    values = {"hparams/n_star": result.n_star, "hparams/n_star_worst": result.n_star_worst,
              "hparams/accuracy": result.accuracy, "hparams/final_loss": result.final_loss}
    return {name: float(value) for name, value in values.items()
            if value is not None and not (isinstance(value, float) and math.isnan(value))}


class PackBoard:
    """One SummaryWriter per run of a pack, each opened at its run's first point (or its end)."""

    def __init__(self, folder: str, configs):
        check_tensorboard()
        self.folder = os.path.abspath(os.path.expanduser(os.fspath(folder)))
        self.configs = list(configs)
        self.writers: dict[int, object] = {}

    def _writer(self, run: int, first_step: int):
        if run not in self.writers:
            # function-local: the optional tensorboard package loads only where event files are written
            from torch.utils.tensorboard import SummaryWriter

            self.writers[run] = SummaryWriter(os.path.join(self.folder, run_folder_name(self.configs[run])),
                                              purge_step=first_step, flush_secs=FLUSH_SECONDS)
        return self.writers[run]

    def point(self, run: int, point: CurvePoint) -> None:
        writer = self._writer(run, point.step)
        writer.add_scalar("train/loss", point.loss, point.step)
        writer.add_scalar("train/accuracy", point.train_accuracy, point.step)
        writer.add_scalar("train/lr", point.lr, point.step)

    def finish(self, results) -> None:
        """Each run's config as hparams and its N* (worst-case N*, accuracy, final loss) as metrics."""
        from torch.utils.tensorboard.summary import hparams  # function-local: the optional package, as above

        for run, result in enumerate(results):
            step = max(1, int(result.steps_done))
            writer = self._writer(run, step)
            metrics = metrics_of(result)
            for summary in hparams(hparams_of(self.configs[run], result), metrics):
                writer.file_writer.add_summary(summary, step)
            for name, value in metrics.items():
                writer.add_scalar(name, value, step)

    def flush(self) -> None:
        for writer in self.writers.values():
            writer.flush()

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        self.writers = {}


class PackLog:
    """A pack's curves (and TensorBoard board) while it trains: `recorder` goes into the training
    loop, `attach` puts each run's curve on its result and writes the final metrics, `flush` puts
    what was written on disk (also after an error)."""

    def __init__(self, configs, every: int, lr_at, tensorboard: str | None):
        self.board = PackBoard(tensorboard, configs) if tensorboard is not None else None
        self.recorder = PackCurves(configs, every, lr_at, on_point=None if self.board is None else self.board.point)

    def attach(self, results) -> list:
        curves = self.recorder.curves()
        results = [replace(result, curve=curve) for result, curve in zip(results, curves)]
        if self.board is not None:
            self.board.finish(results)
            self.board.close()
        return results

    def flush(self, close: bool = False) -> None:
        """Write what the writers hold (and end them with `close`): after training, or after an error."""
        if self.board is not None:
            self.board.close() if close else self.board.flush()


def open_pack_log(configs, options: CurveOptions | None, lr_at) -> PackLog | None:
    """The log of a pack about to train (None: no curves, `log_every` 0)."""
    every = None if options is None else options.every(configs[0].steps)
    if every is None:
        return None
    return PackLog(configs, every, lr_at, options.tensorboard)
