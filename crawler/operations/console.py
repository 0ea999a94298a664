"""The web console behind ``scrapy console``: the crawl's status sampled in
the background, and the actions an operator may take on it; its HTTP
server, endpoints and the checks an action passes are in
``crawler/operations/consolehttp.py`` (whose names are importable from here too).

One background thread samples the status every ``interval`` seconds and
``/api/status`` answers from the last sample: Redis's load does not grow
with the number of open pages, and the console answers at once while Redis
is away (it says so and keeps trying; redis-py reconnects by itself). Every
call into the frontier (the sampler's and the actions') holds one lock.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

import redis
from redis.exceptions import RedisClusterException

from crawler.operations import ops
from crawler.operations.consolehttp import ACTIONS, TOKEN_HEADER, ConsoleServer, is_loopback
from crawler.redis.client import RedisUnavailable

if TYPE_CHECKING:
    from crawler.frontier.frontier import Frontier

logger = logging.getLogger(__name__)

__all__ = ["ACTIONS", "Console", "ConsoleServer", "History", "TOKEN_HEADER", "is_loopback"]

T = TypeVar("T")

MAX_URLS = 10_000
REDIS_ERRORS = (RedisUnavailable, redis.RedisError, RedisClusterException)


class History:
    """Each node's stored pages over the last ``window`` seconds (Redis's
    clock), and from them its pages/min between consecutive samples, thinned
    to ``points`` intervals at most, none shorter than ``resolution``
    seconds (workers acknowledge pages in batches: a rate over a second or
    two jumps between nothing and a batch), for the ``lines`` busiest nodes."""

    def __init__(self, window: float = 3600.0, points: int = 240, lines: int = 24, resolution: float = 5.0) -> None:
        self.window, self.points, self.lines, self.resolution = window, points, lines, resolution
        self._samples: deque[tuple[float, dict[str, int]]] = deque()

    def add(self, at: float, pages: Mapping[str, int]) -> None:
        if self._samples and at <= self._samples[-1][0]:
            return  # the same reading again, or Redis's clock went back
        self._samples.append((at, dict(pages)))
        while self._samples[0][0] < at - self.window:
            self._samples.popleft()

    def rates(self) -> dict[str, Any]:
        """``{"window", "from", "to", "nodes": [{"id", "points": [[time,
        pages_per_min], ...]}]}``; a point closes the interval it measures.
        A node gets points only between two samples that both hold it; a
        counter that went down (the crawl was reset) reads as 0."""
        samples = list(self._samples)
        if not samples:
            return {"window": self.window, "from": None, "to": None, "nodes": []}
        step = max(self.resolution, (samples[-1][0] - samples[0][0]) / self.points)
        kept = [samples[0]]
        for sample in samples[1:]:
            if sample[0] - kept[-1][0] >= step:
                kept.append(sample)
        if len(kept) > 1 and kept[-1] is not samples[-1]:
            kept[-1] = samples[-1]  # end at the latest reading
        lines: dict[str, list[list[float]]] = {}
        gained: dict[str, int] = {}
        for (t0, p0), (t1, p1) in zip(kept, kept[1:]):
            for node, pages in p1.items():
                if node in p0:
                    done = max(0, pages - p0[node])
                    gained[node] = gained.get(node, 0) + done
                    lines.setdefault(node, []).append([round(t1, 3), round(done * 60.0 / (t1 - t0), 2)])
        # In the order of their ids, so that a node keeps its colour.
        busiest = sorted(sorted(lines, key=lambda n: (-gained[n], n))[:self.lines])
        return {"window": self.window, "from": samples[0][0], "to": samples[-1][0],
                "nodes": [{"id": n, "points": lines[n]} for n in busiest]}


def _finite(obj: Any) -> Any:
    """``obj`` with infinite and NaN numbers (a node record in Redis may hold
    them) as None: browsers' JSON has no ``Infinity``."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


class Console:
    """The frontier, its lock, the sampler thread and its last sample."""

    def __init__(self, open_frontier: Callable[[], Frontier], lease_timeout: float, *, queue_by: str = "site",
                 interval: float = 2.0, top: int = 10, token: str | None = None,
                 audit: Callable[[str], None] | None = None) -> None:
        self._open = open_frontier
        self.lease_timeout, self.queue_by, self.interval, self.top = lease_timeout, queue_by, interval, top
        self.token = token
        self.audit = audit or (lambda line: None)
        self.history = History()
        self._frontier: Frontier | None = None
        self._redis = threading.Lock()  # every call into the frontier
        self._state = threading.Lock()  # the last sample, the error, the history
        self._status: dict[str, Any] | None = None
        self._error: tuple[int, str] | None = (503, "no sample yet")
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.page = (resources.files("crawler") / "data" / "console.html").read_text(encoding="utf-8")

    def _call(self, work: Callable[[Frontier], T]) -> T:
        with self._redis:
            if self._frontier is None:
                self._frontier = self._open()
            return work(self._frontier)

    def sample(self) -> str | None:
        """Read the status once; the error (one line) if it failed."""
        try:
            st = self._call(lambda f: ops.status(f, self.lease_timeout, top=self.top))
        except REDIS_ERRORS as exc:
            error: tuple[int, str] = (503, f"Redis unreachable: {_one_line(exc)}")
        except ops.NoSuchCrawl as exc:  # reset under the console, or named wrongly
            error = (404, _one_line(exc))
        except Exception as exc:  # hostile entries in Redis must not end the sampler
            logger.exception("Reading the crawl's status failed")
            error = (500, f"reading the status failed: {type(exc).__name__}: {_one_line(exc)}")
        else:
            with self._state:
                self._status, self._error = _finite(st), None
                self.history.add(float(st["time"]), {n["id"]: n["pages"] for n in st["nodes"]})
            return None
        with self._state:
            self._error = error
        return error[1]

    def error_status(self) -> int | None:
        """The HTTP status of the last sample's failure (None: it worked)."""
        with self._state:
            return self._error[0] if self._error is not None else None

    def _sample_forever(self) -> None:
        while not self._stopping.is_set():
            self.sample()
            self._wake.wait(self.interval)
            self._wake.clear()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._sample_forever, name="console-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)

    def status(self) -> tuple[int, dict[str, Any]]:
        """``/api/status``: the last sample and the history, or the error."""
        with self._state:
            if self._error is not None or self._status is None:
                code, message = self._error or (503, "no sample yet")
                return code, {"error": message, "retry_in": self.interval}
            return 200, {**self._status, "history": self.history.rates()}

    def act(self, action: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Run one action (its body checked); the answer and its status."""
        try:
            args = _checked(action, body)
        except ValueError as exc:
            return 400, {"error": str(exc)}

        def work(f: Frontier) -> dict[str, Any]:
            if action == "seed":
                return ops.seed(f, args["urls"], queue_by=self.queue_by)
            if action == "remove":
                return ops.remove(f, args["urls"], args["sites"], queue_by=self.queue_by)
            if action == "stop":
                return ops.request_stop(f, now=args["now"])
            return {"crawl": f.crawl, "cleared": f.control.clear_stop()}

        try:
            out = self._call(work)
        except REDIS_ERRORS as exc:
            return 503, {"error": f"Redis unreachable: {_one_line(exc)}"}
        except ops.NoSuchCrawl as exc:
            return 404, {"error": _one_line(exc)}
        self._wake.set()  # show its effect at the next poll
        return 200, out


def _checked(action: str, body: dict[str, Any]) -> dict[str, Any]:
    """An action's arguments from its JSON body; ValueError says what is wrong."""
    allowed = {"seed": {"urls"}, "remove": {"urls", "sites"}, "stop": {"now"}, "clear": set()}[action]
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ValueError(f"/api/{action} takes {sorted(allowed) or 'no field'}, not {unknown}")
    out: dict[str, Any] = {}
    for key in ("urls", "sites"):
        if key in allowed:
            value = body.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key!r} must be a list of strings")
            if len(value) > MAX_URLS:
                raise ValueError(f"{key!r} holds {len(value)} items; at most {MAX_URLS} at once")
            out[key] = value
    if action == "seed" and not out["urls"]:
        raise ValueError("'urls' is empty: nothing to seed")
    if action == "remove" and not (out["urls"] or out["sites"]):
        raise ValueError("give 'urls' or 'sites' to remove")
    if action == "stop":
        if not isinstance(body.get("now", False), bool):
            raise ValueError("'now' must be true or false")
        out["now"] = body.get("now", False)
    return out
