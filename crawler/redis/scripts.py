"""The frontier's Lua scripts, read from ``lua/*.lua`` (package data): every
frontier operation on a shard is one of these, so a crash (of a worker or of
Redis) between two commands leaves nothing half done.

Each script runs on one shard (``crawler/redis/keys.py``): a site shard
(queues, leases, politeness, URL dedup), a duplicate-index shard, or the
crawl-wide keys. ``KEYS`` declares the keys a script touches: a site-shard
script gets the shard's fixed keys as ``KEYS[1..10]`` (in ``SHARD_KEYS``
order) and then the per-call keys the caller knows (seen buckets, queues of
the sites it enqueues, its lease hash). The one exception is a site's queue
key when the site is read from Redis itself (the ready set, a lease): it is
built from the shard's own prefix, so it carries the same hash tag and lies
in the same slot; Redis refuses a script that touches a key of another slot
("non local key"), so this cannot go wrong quietly. The duplicate index's
coarse buckets are the other (``grow.lua``): built from the prefix of the
final bucket's key, which the script is given.

Times are the server's (``TIME``), so workers with skewed clocks still agree
on per-site delays.

The counts that decide when a crawl ends (``queued``, ``leased``,
``delayed`` in each shard's ``stats``) change only through ``move``; a
lease ends only through ``settle``.

A file opens with comment lines saying what the script takes (``KEYS``,
``ARGV``) and returns; they are not sent to Redis, so a script's SHA1 is that
of its code alone (and stays the same when only its notes change). A
site-shard script (``SHARD_SCRIPTS``) is sent behind ``shard.lua``, the
helpers they share.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

__all__ = ["ALL", "SCRIPTS", "SHARD_SCRIPTS", "TEMPLATE_SCRIPTS", "WARC_SCRIPTS", "source"]

SHARD_SCRIPTS = ("COMMIT", "LEASE", "RELEASE", "REAP", "TOUCH", "SEND", "RESERVE", "BACKOFF", "SLOW", "MIRROR", "VIEW", "REMOVE")
ALL = (*SHARD_SCRIPTS, "HEARTBEAT", "FORGET", "BEATS", "EXACT", "BAND", "BAND_UNDO", "RECORD", "GROWN")
# The duplicate index's scripts on grown bucket tables, sent behind ``grow.lua``.
GROW_SCRIPTS = ("BAND", "BAND_UNDO", "RECORD", "GROWN")
# Site templates (crawler/frontier/templates.py, crawler/pagetypes/template.py).
TEMPLATE_SCRIPTS = ("TEMPLATE",)
# The WARC archive index's claims (crawler/warc/digests.py).
WARC_SCRIPTS = ("WARC_CLAIM", "WARC_SETTLE")


def _read(stem: str) -> str:
    """A ``lua/<stem>.lua`` file without its opening comment lines."""
    lines = (files(__package__) / "lua" / f"{stem}.lua").read_text(encoding="utf-8").splitlines(keepends=True)
    start = 0
    while start < len(lines) and lines[start].startswith("--"):
        start += 1
    return "\n" + "".join(lines[start:])


@cache
def source(name: str) -> str:
    """The Lua source of script ``name`` (``COMMIT``, ``TEMPLATE`` ...), as sent to Redis."""
    if name not in ALL and name not in TEMPLATE_SCRIPTS and name not in WARC_SCRIPTS:
        raise KeyError(f"no Lua script {name!r}")
    body = _read(name.lower())
    if name in SHARD_SCRIPTS:
        return _read("shard") + body
    return _read("grow") + body if name in GROW_SCRIPTS else body


# Every script by name: the gateway's registry (crawler/redis/gateway.py).
SCRIPTS = {name: source(name) for name in (*ALL, *TEMPLATE_SCRIPTS, *WARC_SCRIPTS)}
