"""Whether this worker's own event loop stalled: a clock read by a timer
every ``INTERVAL`` seconds. A process stopped (SIGSTOP, a laptop's sleep,
a VM paused) or a loop kept busy (a CPU the worker cannot get) wakes the
timer late; the stall is remembered, so that what was measured across it
(a download's latency, a timeout) is not taken for the site's doing.

The adaptive rate (``crawler/rate.py``) reads it: a download whose time
overlapped a stall of this worker slows no site. Without it, a worker
stopped for eight seconds read eight seconds of latency from every site
it had a request in flight to, and slowed them all, for the whole cluster,
to one request every 8, 15, then 30 s (the chaos run, issue 54).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from twisted.internet.task import LoopingCall

__all__ = ["LoopWatch"]


class LoopWatch:
    """``tick`` every ``INTERVAL`` s; ``clean(since)``: no stall of more than
    ``slack`` seconds has ended since ``since`` (``clock``'s time) and none
    is going on now."""

    INTERVAL = 0.1

    def __init__(self, slack: float = 0.5, clock: Callable[[], float] = time.monotonic) -> None:
        self.slack = slack
        self.clock = clock
        self.last_tick = clock()
        self.stall_ended = -float("inf")  # when the latest stall ended (the tick after it)
        self.stalls = 0
        self._loop: LoopingCall | None = None

    def start(self) -> None:
        if self._loop is None:
            self.last_tick = self.clock()
            self._loop = LoopingCall(self.tick)
            self._loop.start(self.INTERVAL, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def tick(self) -> None:
        now = self.clock()
        if now - self.last_tick > self.INTERVAL + self.slack:
            self.stall_ended = now
            self.stalls += 1
        self.last_tick = now

    def clean(self, since: float) -> bool:
        """Nothing measured from ``since`` to now crossed a stall of this loop."""
        now = self.clock()
        if self._loop is not None and now - self.last_tick > self.INTERVAL + self.slack:
            return False  # a stall the timer has not seen end yet (this code runs first after it)
        return self.stall_ended < since
