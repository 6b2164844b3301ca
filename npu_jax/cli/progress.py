"""Progress on standard error, so that no command is silent for more than a moment.

A command's :class:`Progress` (``args.progress``, made by :func:`npu_jax.cli.main`):

* a heartbeat: if nothing was shown :data:`HEARTBEAT_S` after the command started in a process that
  has not loaded JAX yet (loading it and the kernels takes seconds), one line says so;
* :meth:`Progress.line`: one status line, e.g. before the first compile of a kernel
  (``npu-jax conv2d: compiling conv2d[img2col] for 1x64x56x56 on ascend910b ...``);
* :meth:`Progress.bar`: a tqdm bar over a loop of runs (layers, strategies, analyses).

Every line starts with ``npu-jax COMMAND:`` and none contains ``error:`` (errors are one line of their
own). Results go to standard output, progress to standard error: ``npu-jax ... > out.txt`` keeps the
results clean, ``2>/dev/null`` hides the progress.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence

from tqdm import tqdm

# Seconds after the start of a command at which the heartbeat line appears if nothing else did.
HEARTBEAT_S = 0.25


class Progress:
    """The progress of one ``npu-jax`` command on ``stream`` (default: the current ``sys.stderr``)."""

    def __init__(self, command: str, stream=None):
        self.command = command
        self.stream = stream
        self._shown = threading.Event()
        self._timer: threading.Timer | None = None
        self._bars: list[tqdm] = []

    def _out(self):
        return self.stream if self.stream is not None else sys.stderr

    def start(self, heartbeat: bool = True) -> Progress:
        """Start the heartbeat timer (``heartbeat=False``: none, e.g. for ``--help``)."""
        if heartbeat:
            self._timer = threading.Timer(HEARTBEAT_S, self._heartbeat)
            self._timer.daemon = True
            self._timer.start()
        return self

    def stop(self) -> None:
        """Cancel the heartbeat and close the bars still open (the command finished or failed)."""
        if self._timer is not None:
            self._timer.cancel()
        for b in self._bars:
            b.close()
        self._bars.clear()

    def _heartbeat(self) -> None:
        if not self._shown.is_set():
            self.line("loading JAX and the kernels ...")

    def line(self, text: str) -> None:
        """One status line: ``npu-jax COMMAND: text``."""
        self._shown.set()
        print(f"npu-jax {self.command}: {text}", file=self._out(), flush=True)

    def compiling(self, kernel: str, shape: str | Sequence[int], hw_name: str) -> None:
        """The line before a kernel's first run: ``compiling conv2d[img2col] for 1x64x56x56 on tiny ...``."""
        what = shape if isinstance(shape, str) else "x".join(map(str, shape))
        self.line(
            f"compiling {kernel} for {what} on {hw_name} "
            f"(each new kernel shape compiles for a few seconds) ..."
        )

    def bar(self, total: int, what: str) -> tqdm:
        """A tqdm bar of ``total`` steps on standard error; ``update(1)`` per step, ``close()`` at the end."""
        self._shown.set()
        bar = tqdm(
            total=total,
            desc=f"npu-jax {self.command}: {what}",
            file=self._out(),
            unit="run",
            leave=False,
            dynamic_ncols=True,
            mininterval=0.5,
        )
        self._bars.append(bar)
        return bar

    def callback(self, total: int, what: str, label: Callable | None = None) -> tuple[Callable, tqdm]:
        """``(progress, bar)``: a ``progress(item)`` callback for the studies' loops that advances a
        :meth:`bar`, showing ``label(item)`` (what just finished) beside it."""
        b = self.bar(total, what)

        def progress(*item):
            if label is not None:
                b.set_postfix_str(label(*item), refresh=False)
            b.update(1)

        return progress, b


__all__ = ["HEARTBEAT_S", "Progress"]
