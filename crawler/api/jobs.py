"""The API's jobs, kept in Redis so that any API server of the cluster (and
this one after a restart) knows them.

Keys, all under the hash tag ``{api}`` (one slot of a Redis Cluster):

- ``{api}:job:ID``: the job, one JSON object (``Job``): never pickled, and
  nothing in it chooses code: a job's crawl command is built by the server
  from the job's checked fields;
- ``{api}:jobs``: a sorted set of job ids by creation time;
- ``{api}:job:ID:order`` and ``{api}:job:ID:listed``: the job's results in
  the order they were found stored, each URL once (``append_results``):
  results are paged by position in this list, so that a client paging
  while the crawl goes on gets each page once.

A job's crawl is named ``api-ID`` (``CRAWL_NAME``): its frontier, store and
status are those of any crawl (``scrapy status -s CRAWL_NAME=api-ID``).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ACTIVE", "Job", "JobBook", "crawl_name", "tracked_name"]

# Firecrawl's statuses: a job is "scraping" until it ends as one of the others.
ACTIVE = "scraping"
ENDED = ("completed", "failed", "cancelled")
PREFIX = "api-"
TRACKED = re.compile(r"api-track-[0-9a-f]{24}")

_APPEND = """
local n = 0
for i, url in ipairs(ARGV) do
  if redis.call('SADD', KEYS[1], url) == 1 then
    redis.call('RPUSH', KEYS[2], url)
    n = n + 1
  end
end
return n
"""


def crawl_name(job_id: str) -> str:
    return PREFIX + job_id


def tracked_name(key: str, kind: str, url: str, tag: str) -> str:
    """The crawl a key's change tracking of ``url`` (by ``tag``) keeps."""
    digest = hashlib.sha256("\n".join((key, kind, url, tag)).encode("utf-8")).hexdigest()[:24]
    return f"{PREFIX}track-{digest}"


@dataclass
class Job:
    id: str
    kind: str  # crawl, batch, scrape, map
    key: str  # the key's id (crawler/api/keys.py), never the key
    created: float
    urls: list[str]
    formats: list[str]
    args: dict[str, str] = field(default_factory=dict)  # -a arguments of its crawl
    settings: dict[str, Any] = field(default_factory=dict)  # -s settings of its crawl
    status: str = ACTIVE
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    finished: float | None = None
    expires: float | None = None
    host: str = ""
    pids: list[int] = field(default_factory=list)
    restarts: int = 0
    cancelled: bool = False
    webhook: dict[str, Any] | None = None
    invalid: list[str] = field(default_factory=list)
    links: bool = True  # False: no link followed (sitemap "only"; scrapes)
    limit: int = 0  # a crawl's pages at most (0: none)
    # changeTracking: the crawl kept from one job to the next (tracked_name),
    # its first job a crawl, the next ones re-crawls of it.
    tracked: str = ""
    spider: str = "site"
    track_diff: bool = False

    @property
    def crawl(self) -> str:
        return self.tracked or crawl_name(self.id)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Job | None:
        """The job a Redis value holds; None for one that is not a job (a
        bad entry loses nothing else: it is skipped)."""
        try:
            raw = json.loads(text)
            names = set(cls.__dataclass_fields__)
            if not isinstance(raw, dict) or not {"id", "kind", "key", "created", "urls", "formats"} <= set(raw):
                return None
            job = cls(**{k: v for k, v in raw.items() if k in names})
        except (ValueError, TypeError):
            return None
        if not isinstance(job.id, str) or not job.id.replace("-", "").isalnum():
            return None
        if job.tracked and not (isinstance(job.tracked, str) and TRACKED.fullmatch(job.tracked)):
            return None  # a crawl name a job could not have made
        return job


class JobBook:
    def __init__(self, client: Any) -> None:
        self.client = client
        self._append = client.register_script(_APPEND)

    @staticmethod
    def new_id() -> str:
        return str(uuid.uuid4())

    def _key(self, job_id: str, part: str = "") -> str:
        return f"{{api}}:job:{job_id}{part}"

    def save(self, job: Job) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.set(self._key(job.id), job.to_json())
        pipe.zadd("{api}:jobs", {job.id: job.created})
        pipe.execute()

    def get(self, job_id: str) -> Job | None:
        if not job_id.replace("-", "").isalnum() or len(job_id) > 64:
            return None
        value = self.client.get(self._key(job_id))
        return Job.from_json(value) if value is not None else None

    def all(self) -> list[Job]:
        ids = [i.decode() if isinstance(i, bytes) else str(i) for i in self.client.zrange("{api}:jobs", 0, -1)]
        jobs = []
        for job_id in ids:
            job = self.get(job_id)
            if job is not None:
                jobs.append(job)
        return jobs

    def running(self, key: str | None = None, kinds: tuple[str, ...] = ("crawl", "batch")) -> list[Job]:
        return [j for j in self.all() if j.status == ACTIVE and j.kind in kinds and (key is None or j.key == key)]

    def update(self, job_id: str, **changes: Any) -> Job | None:
        """Change fields of a stored job (read, changed, written: one
        server owns a running job's fields, a cancel sets its own)."""
        job = self.get(job_id)
        if job is None:
            return None
        for name, value in changes.items():
            setattr(job, name, value)
        self.client.set(self._key(job.id), job.to_json())
        return job

    def append_results(self, job_id: str, urls: list[str]) -> int:
        if not urls:
            return 0
        total = 0
        for start in range(0, len(urls), 1000):
            total += int(self._append(keys=[self._key(job_id, ":listed"), self._key(job_id, ":order")],
                                      args=urls[start:start + 1000]))
        return total

    def results(self, job_id: str, start: int, count: int) -> list[str]:
        raw = self.client.lrange(self._key(job_id, ":order"), start, start + count - 1)
        return [u.decode() if isinstance(u, bytes) else str(u) for u in raw]

    def result_count(self, job_id: str) -> int:
        return int(self.client.llen(self._key(job_id, ":order")))

    def listed(self, job_id: str) -> set[str]:
        return {u.decode() if isinstance(u, bytes) else str(u)
                for u in self.client.smembers(self._key(job_id, ":listed"))}

    def forget(self, job_id: str) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self._key(job_id), self._key(job_id, ":order"), self._key(job_id, ":listed"))
        pipe.zrem("{api}:jobs", job_id)
        pipe.execute()


def now() -> float:
    return time.time()
