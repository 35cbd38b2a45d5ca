"""Progress of long runs (training, the gate's repair, large Monte Carlo runs, the dowhy
refuters) on standard error.

The command line turns reporting on (:func:`enable`); library calls stay silent unless
asked. On a terminal a run shows a tqdm bar; otherwise (CI logs, ``2> log``) it prints one
plain line at a steady rate, at most every ``CAUSALFAIR_PROGRESS_SECONDS`` seconds
(default 10), and a closing line, so a log shows that a long run is alive and how far it
is. Runs shorter than the interval print nothing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["enable", "enabled", "start", "task", "Task"]

_ENABLED = False
ENV = "CAUSALFAIR_PROGRESS_SECONDS"
DEFAULT_SECONDS = 10.0


def enable(on: bool = True) -> None:
    """Report progress of long runs on standard error (the CLI does this)."""
    global _ENABLED
    _ENABLED = bool(on)


def enabled() -> bool:
    return _ENABLED


def _interval() -> float:
    raw = os.environ.get(ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_SECONDS
    except ValueError:
        value = DEFAULT_SECONDS
    return max(0.0, value)


class Task:
    """One long run: ``update(n, **info)`` after each unit of work."""

    def __init__(self, desc: str, total: int | None, unit: str, stream: TextIO,
                 interval: float, clock: Any = time.monotonic):
        self.desc, self.total, self.unit = desc, total, unit
        self.stream, self.interval, self.clock = stream, interval, clock
        self.done = 0
        self.info: dict[str, Any] = {}
        self.start = self.last = clock()
        self.printed = False
        self.bar = None
        if stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=stream, leave=False)

    def _line(self, now: float, final: bool = False) -> str:
        elapsed = now - self.start
        if self.total:
            pct = 100.0 * self.done / self.total
            head = f"{self.done}/{self.total} {self.unit} ({pct:.0f}%)"
            if not final and 0 < self.done < self.total:
                head += f", about {elapsed * (self.total - self.done) / self.done:.0f} s left"
        else:
            head = f"{self.done} {self.unit}"
        info = "".join(f", {k} {v}" for k, v in self.info.items())
        word = "done" if final else "running"
        return f"[{self.desc}] {word}: {head}, {elapsed:.1f} s elapsed{info}"

    def update(self, n: int = 1, **info: Any) -> None:
        self.done += n
        self.info.update(info)
        if self.bar is not None:
            if info:
                self.bar.set_postfix({k: str(v) for k, v in self.info.items()}, refresh=False)
            self.bar.update(n)
            return
        now = self.clock()
        if now - self.last >= self.interval:
            print(self._line(now), file=self.stream, flush=True)
            self.last, self.printed = now, True

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.printed:
            print(self._line(self.clock(), final=True), file=self.stream, flush=True)


class _Silent:
    def update(self, n: int = 1, **info: Any) -> None:
        pass

    def close(self) -> None:
        pass


def start(desc: str, total: int | None = None, unit: str = "it", *,
          force: bool = False) -> Task | _Silent:
    """A progress reporter (call ``close()`` at the end); silent unless reporting is
    enabled (or ``force``)."""
    if not (_ENABLED or force):
        return _Silent()
    return Task(desc, total, unit, sys.stderr, _interval())


@contextmanager
def task(desc: str, total: int | None = None, unit: str = "it", *,
         force: bool = False) -> Iterator[Task | _Silent]:
    """A progress reporter for one long run; silent unless reporting is enabled (or
    ``force``)."""
    t = start(desc, total, unit, force=force)
    try:
        yield t
    finally:
        t.close()
