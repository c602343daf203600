"""Progress bars in job logs as readable lines. tqdm (ours, the Trainer's, huggingface_hub's,
datasets') redraws its bar with carriage returns; in a log file those runs become one huge line.
Where stderr is not a terminal, each redraw becomes its own line, at most one per
`TQDM_MININTERVAL` seconds (tqdm reads its defaults from TQDM_* variables when it is imported)."""

from __future__ import annotations

import io
import os
import sys

LOG_INTERVAL_S = "30"  # seconds between two progress lines of one bar in a log


class CarriageReturnsAsLines(io.TextIOBase):
    """A text stream that writes each carriage-return redraw as a line of its own, without the
    spaces tqdm pads a shorter bar with, blank lines or a repeated line."""

    def __init__(self, stream):
        self.stream = stream
        self.at_line_start = True
        self.last_redraw = ""

    def write(self, text: str) -> int:
        first, *redraws = text.split("\r")
        if self.last_redraw and first and not self.at_line_start and not first.startswith("\n"):
            first = "\n" + first  # a warning printed while a bar is open starts a line of its own
        self._put(first)
        for redraw in redraws:
            redraw = redraw.rstrip(" ")  # tqdm's padding over a longer bar; a cleared bar is all spaces
            if redraw and redraw != self.last_redraw:  # closing a bar redraws its last state
                self._put(redraw if self.at_line_start else "\n" + redraw)
                self.last_redraw = redraw
        return len(text)

    def _put(self, text: str) -> None:
        if text:
            self.stream.write(text)
            self.at_line_start = text.endswith("\n")

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self):
        return getattr(self.stream, "encoding", "utf-8")


def readable_progress() -> object:
    """Where stderr is a log file: progress redraws as lines (sys.stderr wrapped) at most every
    LOG_INTERVAL_S seconds (TQDM_MININTERVAL, unless set; inherited by the job's child processes).
    Returns the stderr to restore afterwards."""
    original = sys.stderr
    if not original.isatty() and not isinstance(original, CarriageReturnsAsLines):
        os.environ.setdefault("TQDM_MININTERVAL", LOG_INTERVAL_S)
        sys.stderr = CarriageReturnsAsLines(original)
    return original
