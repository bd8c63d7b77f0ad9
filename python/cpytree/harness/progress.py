"""A tiny progress bar for stderr (no dependency).

Redraws one line in place when the stream is a terminal, at most ten times a
second; writes nothing otherwise, so logs stay clean.

Usage:

    bar = ProgressBar(total=100, label="timing")
    for _ in range(100):
        bar.advance()
    bar.close()
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


class ProgressBar:
    """Counts `advance()` calls up to `total` and draws them on `stream`."""

    def __init__(
        self,
        total: int,
        label: str = "",
        stream: TextIO | None = None,
        enabled: bool | None = None,
        width: int = 30,
        prefix: str = "",
    ) -> None:
        self.total = max(total, 1)
        self.label = label
        self.prefix = prefix
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.width = width
        self.done = 0
        self.start = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False

    def advance(self, n: int = 1, label: str | None = None) -> None:
        self.done = min(self.done + n, self.total)
        if label is not None:
            self.label = label
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last_draw >= 0.1 or self.done == self.total:
            self._last_draw = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = self.done / self.total
        filled = int(self.width * frac)
        elapsed = now - self.start
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        line = (
            f"\r{(self.prefix + self.label)[:28]:<28} "
            f"[{'#' * filled}{'-' * (self.width - filled)}] "
            f"{frac * 100:3.0f}% {_clock(elapsed)} eta {_clock(eta)}"
        )
        self.stream.write(line)
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Erase the bar (the table that follows is the record)."""
        if self.enabled and self._drawn:
            self._drawn = False
            self.stream.write("\r" + " " * (self.width + 60) + "\r")
            self.stream.flush()
