"""What a golden crawl leaves that can be observed, read without the
crawler's own code (it may be another checkout's): the SQLite store, the
crawl log's stats and warnings, the WARC files, the Redis keys and the
Redis commands the crawl sent. Each reader returns plain JSON values,
normalized by ``Normalizer``.

What is normalized (time- or run-dependent, nothing else):
- the crawl's temp directory -> ``<tmp>``, the code checkout -> ``<code>``,
  the worker's pid -> ``<pid>``, its node id (host:pid:random) -> ``<node>``
  (the servers listen on a fixed port: URLs stay as they are);
- numbers that are epoch times (seconds or milliseconds within a day before
  the capture and 20 years after) -> ``<time>``, ISO and HTTP dates, log
  timestamps, compact ones (WARC file names, CDXJ) and Redis stream ids
  -> ``<time>``; so are numbers kept as text (a Redis hash field
  "1733350000.12") and ``dup_order`` (microseconds, hex); the host name in
  WARC file names -> ``<host>``; a re-crawl's change evidence (``u``
  seconds, ``c`` length classes) and ``RUN_DERIVED`` fields; bytes that are not UTF-8 are kept escaped (``bytes:...``) so
  that times and paths inside are found;
- WARC record ids and dates, and the block digests of records whose HTTP
  headers carry the server's ``Date`` (payload digests stay).
Stats dropped (times and memory): ``DROPPED_STATS``.
"""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.harness import stats_of

DROPPED_STATS = ("start_time", "finish_time", "elapsed_time_seconds", "memusage/", "log_count/DEBUG",
                 "responses_per_minute", "items_per_minute", "warc/bytes", "gc/")
# Stats of Redis calls made on timers (heartbeats, leases polled while
# waiting, commits batched by time): kept as "<timed>", their value not.
TIMED_STATS = ("frontier/redis_calls/lease", "frontier/redis_calls/heartbeat", "frontier/redis_calls/beats",
               "frontier/redis_calls/reap", "frontier/redis_calls/commit", "frontier/redis_calls/hget",
               "frontier/redis_calls/hgetall", "frontier/redis_calls/hmget", "frontier/redis_round_trips")
_ISO = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")
_HTTP_DATE = re.compile(r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
_EPOCH = re.compile(r"(?<![\d.])1\d{9}(?:\.\d+)?(?![\d.])")  # "rtxt1 1796423443\n..."
_HEX_TIME = re.compile(r"0[0-9a-f]{13}")
# Fields computed from the seconds between two visits or a worker's rate,
# the worker's pid, and WARC positions (gzip sizes of records that carry
# dates: a byte more or less).
RUN_DERIVED = frozenset({"change_rate", "warc_offset", "offset", "length", "pages_per_min", "pid"})
_STREAM_ID = re.compile(r"\b1\d{12}-\d+\b")
_COMPACT = re.compile(r"(?<!\d)(20\d{12})(\d{3})?(?!\d)")  # WARC file names, CDXJ: 20241204222659[614]


class Normalizer:
    def __init__(self, tmp: Path, code: Path) -> None:
        now = self.started = time.time()
        self.low, self.high = now - 86400, now + 20 * 365 * 86400
        self.paths = [(str(tmp.resolve()), "<tmp>"), (str(tmp), "<tmp>"), (str(code.resolve()), "<code>")]
        self.pids: set[str] = set()
        self.host = socket.gethostname()
        self.node = re.compile(re.escape(self.host) + r":\d+:[0-9a-f]{6}\b")

    def is_time(self, x: float) -> bool:
        return self.low <= x <= self.high or self.low * 1000 <= x <= self.high * 1000

    def is_compact_time(self, digits: str) -> bool:
        try:
            at = datetime.strptime(digits, "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            return False
        return self.is_time(at)

    def binary_times(self, v: bytes) -> bytes:
        """``v`` with each 7-byte big-endian number that is a time of this
        capture in microseconds (a duplicate check's order, packed) masked."""
        low, high = int((self.started - 3600) * 1e6), int((time.time() + 3600) * 1e6)
        i, out = 0, bytearray()
        while i < len(v):
            if i + 7 <= len(v) and low <= int.from_bytes(v[i:i + 7], "big") <= high:
                out += b"<time7>"
                i += 7
            else:
                out.append(v[i])
                i += 1
        return bytes(out)

    def text(self, s: str) -> Any:
        if _NUMBER.fullmatch(s.strip()) and self.is_time(float(s)):
            return "<time>"
        if _HEX_TIME.fullmatch(s) and self.is_time(int(s, 16) / 1e6):
            return "<time>"  # dup_order: the check's time in microseconds, hex
        if s[:1] in "[{" and s[-1:] in "]}":
            try:  # JSON kept as text: normalize inside, keep it text
                return json.dumps(self.value(json.loads(s)), sort_keys=True)
            except ValueError:
                pass
        for path, mark in self.paths:
            s = s.replace(path, mark)
        s = self.node.sub("<node>", s)
        for pid in self.pids:
            s = re.sub(rf"\b{pid}\b", "<pid>", s)
        s = _STREAM_ID.sub("<time>", _HTTP_DATE.sub("<time>", _ISO.sub("<time>", s)))
        s = _EPOCH.sub(lambda m: "<time>" if self.is_time(float(m.group(0))) else m.group(0), s)
        s = _COMPACT.sub(lambda m: "<time>" if self.is_compact_time(m.group(1)) else m.group(0), s)
        return s.replace(f"~{self.host}.", "~<host>.")

    def value(self, v: Any) -> Any:
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, int | float):
            return "<time>" if self.is_time(v) else v
        if isinstance(v, bytes):
            v = self.binary_times(v)
            try:
                return self.text(v.decode("utf-8"))
            except UnicodeDecodeError:  # escaped, so that ports and times inside are still found
                return "bytes:" + str(self.text(v.decode("utf-8", "backslashreplace")))
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            if set(v) == {"c", "n", "u"}:  # a page's change evidence: seconds watched, by the clock
                v = {**v, "u": "<seconds>" if v["u"] else v["u"], "c": [["<class>", w] for _, w in v["c"]]}
            return {str(self.value(k)): "<run-derived>" if k in RUN_DERIVED and x is not None else self.value(x)
                    for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [self.value(x) for x in v]
        return self.text(repr(v))


def read_store(path: Path, norm: Normalizer) -> dict[str, Any]:
    """Every table of the SQLite store: its schema and its rows (as dicts,
    sorted), every column."""
    if not path.exists():
        return {"missing": True}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out: dict[str, Any] = {}
        for name, sql in db.execute("SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY name"):
            cur = db.execute(f'SELECT * FROM "{name}"')
            cols = [c[0] for c in cur.description]
            rows = [norm.value(dict(zip(cols, row, strict=True))) for row in cur]
            out[name] = {"schema": sql, "rows": sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))}
        return out
    finally:
        db.close()


def read_jsonl(path: Path, norm: Normalizer) -> list[Any]:
    if not path.exists():
        return ["<missing>"]
    return [norm.value(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def read_stats(log: str, norm: Normalizer) -> dict[str, Any]:
    """The stats Scrapy dumps at the end of the crawl log, less ``DROPPED_STATS``."""
    try:
        stats = stats_of(log)
    except RuntimeError:
        return {"<no stats dumped>": True}
    return {k: "<timed>" if k.startswith(TIMED_STATS) else norm.value(v) for k, v in sorted(stats.items())
            if not k.startswith(DROPPED_STATS)}


def log_lines(log: str, norm: Normalizer, levels: tuple[str, ...] = ("WARNING", "ERROR", "CRITICAL")) -> list[str]:
    """The log's records at ``levels``, without their timestamp, in order."""
    out = []
    for line in log.splitlines():
        m = re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[([^\]]+)\] (\w+): (.*)$", line)
        if m and m.group(2) in levels:
            out.append(norm.text(f"[{m.group(1)}] {m.group(2)}: {m.group(3)}"))
    return out


def read_warc(directory: Path, norm: Normalizer) -> dict[str, Any]:
    """Each WARC file's records: type, target, content type, HTTP status,
    payload digest, and the headers that are not ids or dates."""
    from warcio.archiveiterator import ArchiveIterator

    if not directory.exists():
        return {"missing": True}
    files: dict[str, Any] = {}
    for i, f in enumerate(sorted(directory.iterdir())):
        records = []
        with f.open("rb") as stream:
            for rec in ArchiveIterator(stream):
                skip = {"WARC-Record-ID", "WARC-Date", "WARC-Concurrent-To", "WARC-Refers-To", "WARC-Filename",
                        "WARC-Refers-To-Date"}
                if rec.http_headers is not None and rec.http_headers.get_header("Date"):
                    skip.add("WARC-Block-Digest")
                head = {k: norm.text(v) for k, v in rec.rec_headers.headers if k not in skip}
                http = None
                if rec.http_headers is not None:
                    http = [rec.http_headers.protocol, rec.http_headers.statusline,
                            [[k, norm.text(v)] for k, v in rec.http_headers.headers]]
                records.append({"headers": head, "http": http,
                                "payload": len(rec.content_stream().read())})
        files[f"file{i}{''.join(f.suffixes[-2:])}"] = records
    return files


def dump_redis(client: Any, norm: Normalizer) -> dict[str, Any]:
    """Every key (SCAN): its type, whether it expires, and its value dumped
    canonically (hash and set sorted, sorted set by score)."""
    out: dict[str, Any] = {}
    for key in sorted(client.scan_iter(count=1000)):
        kind = client.type(key).decode()
        if kind == "string":
            value: Any = norm.value(client.get(key))
        elif kind == "hash":
            value = dict(sorted((str(norm.value(k)), norm.value(v)) for k, v in client.hgetall(key).items()))
        elif kind == "list":
            value = norm.value(client.lrange(key, 0, -1))
        elif kind == "set":
            value = sorted(str(norm.value(m)) for m in client.smembers(key))
        elif kind == "zset":
            value = [[norm.value(m), norm.value(s)] for m, s in client.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            value = [[norm.value(fields)] for _, fields in client.xrange(key)]
        else:
            value = f"<{kind}>"
        out[str(norm.value(key))] = {"type": kind, "expires": client.ttl(key) >= 0, "value": value}
    return out


HELPERS = frozenset({"shard", "grow"})  # sent in front of other scripts, never alone
# Called on timers or batched by time: their counts vary from run to run.
# (The heartbeat's, the progress sampler's, the scheduler's 0.25 s tick.)
TIMED_COMMANDS = frozenset({"lua:lease", "lua:heartbeat", "lua:beats", "lua:reap", "lua:commit", "HGET {golden}:meta",
                            "HGET {golden}:control", "HGETALL {golden:s*}:stats", "HMGET {golden:s*}:stats",
                            "HGETALL {golden}:control", "HGETALL {golden}:nodes"})


def script_bodies(code: Path) -> dict[str, str]:
    """Each Lua file of the crawler in ``code``: its name -> its code
    without the opening comment lines (what is sent to Redis)."""
    out = {}
    for f in sorted(code.glob("crawler/**/*.lua")):
        lines = f.read_text(encoding="utf-8").splitlines(keepends=True)
        while lines and lines[0].startswith("--"):
            lines.pop(0)
        out[f.stem] = "".join(lines).strip()
    return out


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", '"': '"', "\\": "\\"}


def unescape(arg: str) -> str:
    """An argument as MONITOR shows it (``sdscatrepr``) back to its text."""
    return re.sub(r"\\(x[0-9a-f]{2}|.)", lambda m: chr(int(m.group(1)[1:], 16)) if len(m.group(1)) == 3
                  else _ESCAPES.get(m.group(1), m.group(1)), arg)


def script_names(events: list[tuple[str, list[str]]], bodies: dict[str, str]) -> dict[str, str]:
    """SHA1 -> name of each script the crawl loaded (SCRIPT LOAD): the
    longest Lua file found in it (a shard script is sent behind the
    helpers of ``shard.lua``)."""
    import hashlib

    names = {}
    for origin, args in events:
        if origin == "sent" and [a.upper() for a in args[:2]] == ["SCRIPT", "LOAD"] and len(args) > 2:
            source = unescape(args[2])
            found = [n for n, body in bodies.items() if body and body in source]
            own = [n for n in found if n not in HELPERS] or found
            name = max(own, key=lambda n: len(bodies[n])) if own else "<unknown script>"
            names[hashlib.sha1(source.encode()).hexdigest()] = name
    return names


def command_label(args: list[str], norm: Normalizer, names: dict[str, str]) -> str:
    """A Redis command named by what it is and the keys it touches, ids
    (runs of digits, hex) masked; a script by its Lua file's name:
    ``lua:commit``."""
    name = args[0].upper()
    if name == "EVALSHA" and len(args) > 1:
        return "lua:" + names.get(args[1], "sha:" + args[1][:12])
    if name == "EVAL":
        return "lua:<sent whole>"
    if name == "SCRIPT" and len(args) > 1:
        return f"SCRIPT {args[1].upper()}"
    if len(args) > 1 and name not in ("CLIENT", "INFO", "CONFIG", "HELLO", "PING", "ECHO", "SELECT"):
        return f"{name} {mask(str(norm.text(unescape(args[1]))))}"
    return name


def mask(key: str) -> str:
    """A key by its kind: the shard in its hash tag, and numbers, masked
    (``{golden:s8.2a}:robots:body:127.0.0.1:28961`` -> ``{golden:s*}:robots:body:#.#.#.#:#``)."""
    key = re.sub(r"\{([^:{}]+):([a-z])[0-9a-f.]+\}", r"{\1:\2*}", key)
    return re.sub(r"[0-9a-f]{8,}|\d+", "#", key)


def count_commands(events: list[tuple[str, list[str]]], norm: Normalizer, code: Path) -> dict[str, Any]:
    """The commands the crawl sent, counted by label; a script's entry
    counts its calls and the commands it ran (``lua`` lines MONITOR shows
    after the call). Those called on timers (``TIMED_COMMANDS``) show
    which commands they ran, not how often."""
    names = script_names(events, script_bodies(code))
    out: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    for origin, args in events:
        if not args:
            continue
        if origin == "lua":
            if current is not None:
                lua = current.setdefault("lua", {})
                label = command_label(args, norm, names)
                lua[label] = lua.get(label, 0) + 1
            continue
        label = command_label(args, norm, names)
        entry = out.setdefault(label, {"calls": 0})
        entry["calls"] += 1
        current = entry if label.startswith("lua:") else None
    for label, entry in out.items():
        if label in TIMED_COMMANDS:
            entry["calls"] = "<timed>"
            entry["lua"] = sorted(entry.get("lua", {}))
        elif "lua" in entry:
            entry["lua"] = dict(sorted(entry["lua"].items()))
    return dict(sorted(out.items()))


def drop_revisit_fingerprints(redis: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """A re-crawl's Redis dump with the URL fingerprints it added to the
    ``seen`` sets counted, not listed: a visit's fingerprint hashes its due
    time (``Scheduler._fingerprint``), a time of the run."""
    out, added = {}, 0
    for key, entry in redis.items():
        if ":seen:" not in key or entry["type"] != "set":
            out[key] = entry
            continue
        old = set(before.get(key, {}).get("value", []))
        added += len(set(entry["value"]) - old)
        if old:
            out[key] = {**entry, "value": sorted(old & set(entry["value"]))}
    out["<seen: fingerprints added, keyed by due time>"] = added
    return out
