"""WARC output's Scrapy side (``-s WARC_DIR=DIR``): the service that owns
the writer, the downloader middleware that hands it every fetch, and the
item pipeline that waits for a page's record before the page is stored.

- ``WarcService`` (an extension; ``WarcService.of(crawler)``): on
  ``spider_opened`` it closes the ``.open`` files of workers that are gone
  (``files.salvage``) and starts this worker's writer; on
  ``spider_closed`` it writes what is queued and closes the file.
- ``WarcMiddleware`` (downloader middleware 900: after every middleware
  that sets request headers, before any that decodes the response, so the
  body is the bytes received): robots.txt, sitemaps, pages, redirects, a
  re-crawl's HEAD and 304 alike. A download that ``DOWNLOAD_MAXSIZE`` cuts
  is stopped (Scrapy's ``StopDownload``): at its headers when
  ``Content-Length`` announces it (the headers archived), else at the
  limit (its first bytes archived), with ``WARC-Truncated: length``, and
  then fails as Scrapy's own cut does; a body still arriving at 90 % of its
  download timeout (counted from the download's start, as Scrapy's is) is
  stopped the same way (``WARC-Truncated: time``) and retried as a timeout
  is. A response that had not begun by then is not archived (no bytes came).
- ``WarcPipeline`` (item pipeline 790, before the store): a page is stored
  only once its record is on disk, with its place (``warc_file``,
  ``warc_offset``) and the record's ``warc_date`` and ``warc_digest``. A
  re-crawl's 304 keeps the place of the response it confirms
  (``crawler/recrawl/merge.py``). A writer that failed closes the spider
  (``finish_reason`` ``warc_write_failed``), and so does a directory that
  cannot be set up: the archive is required once asked for. A response
  item without its record is dropped, never stored without it.

Stats: ``warc/responses``, ``warc/revisits`` (identical payloads),
``warc/not_modified`` (a re-crawl's 304s), ``warc/truncated``,
``warc/bytes``, ``warc/files``, ``warc/index_errors``,
``warc/salvaged_files``, ``warc/waits`` (copies that waited for another
worker to write their original: ``digests.py``), ``warc/claims_taken_over``
(payloads claimed by a worker that died, or stalled, before writing them:
archived in full here), ``warc/disk_full`` (spells of a full disk waited
out: the crawl holds, and writes again once there is room).
"""

from __future__ import annotations

import logging
import time
import weakref
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from scrapy import signals
from scrapy.exceptions import (DownloadCancelledError, DownloadTimeoutError, DropItem, IgnoreRequest, NotConfigured,
                               StopDownload)
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer

from crawler.crawldir import crawl_dir, crawl_name
from crawler.redis.client import get_redis
from crawler.redis.keys import Keys
from crawler.requestmeta import (
    DOWNLOAD_LATENCY, DOWNLOAD_MAXSIZE, DOWNLOAD_TIMEOUT, SESSION, SESSION_LOGIN, WARC_ORIGINAL,
)
from crawler.sessions.config import SECRET_NAME
from crawler.warc.digests import ArchiveIndex
from crawler.warc.files import WarcFiles, salvage
from crawler.warc.records import Exchange, NotModified, RecordMaker, digest_ok, http_date_ok, uri_ok
from crawler.warc.writer import WarcWriter, Written

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

__all__ = ["ORIGINAL_META", "WarcMiddleware", "WarcPipeline", "WarcService"]

# Request headers that carry a secret (a proxy's or a site's credentials, a
# session's cookies, an API key: a name the sites file takes for a secret's,
# crawler/sessions/config.py): kept in the WARC request record by name, not
# by value.
_REDACTED = b"[redacted]"


def _secret_header(name: bytes) -> bool:
    return SECRET_NAME.search(name.decode("latin-1")) is not None


logger = logging.getLogger(__name__)

# request.meta of a re-crawl's conditional GET: [uri, WARC-Date, payload
# digest] of the stored page's record, which a 304 revisit names.
ORIGINAL_META = WARC_ORIGINAL  # the registry's name; this one kept for importers
_TIME_SHARE = 0.9  # of the download timeout, after which a body still arriving is cut


class WarcService:
    """The writer of one worker (see the module); idle without WARC_DIR."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        s = crawler.settings
        self.directory = Path(s.get("WARC_DIR")) if s.get("WARC_DIR") else None
        self.max_size = s.getint("WARC_MAX_SIZE")
        self.prefix = s.get("WARC_PREFIX") or ""
        self.maxsize = s.getint("DOWNLOAD_MAXSIZE")
        self.timeout = s.getfloat("DOWNLOAD_TIMEOUT")
        self.writer: WarcWriter | None = None
        self._pending: weakref.WeakKeyDictionary[Any, Future[Written]] = weakref.WeakKeyDictionary()
        self._cut: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._received: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._started: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        self._failed = False
        if self.enabled:
            crawler.signals.connect(self.open, signals.spider_opened)
            crawler.signals.connect(self.close, signals.spider_closed)
            crawler.signals.connect(self._headers, signals.headers_received)
            crawler.signals.connect(self._bytes, signals.bytes_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @classmethod
    def of(cls, crawler: Crawler) -> WarcService:
        """The crawler's WARC service; a clear error if WARC_DIR is set and
        the service is not loaded (the archive is required once asked for)."""
        service = crawler.get_extension(cls)
        if service is None:
            raise RuntimeError("crawler.warc.service.WarcService is not in EXTENSIONS, and WARC_DIR is set "
                               "(see crawler/settings.py)")
        return service

    @classmethod
    def record_of(cls, crawler: Crawler, request: Request | None) -> Future[Written] | None:
        """The pending record of this request's response, if the crawl writes WARC (once: the page's item takes it)."""
        if not crawler.settings.get("WARC_DIR"):
            return None
        return cls.of(crawler).take(request)

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    # -- life --------------------------------------------------------------------------------------
    def open(self, spider: Spider) -> None:
        try:
            self._open(spider)
        except Exception as exc:  # noqa: BLE001 - said, and the crawl stops: never a crawl without its archive
            self._fail(exc)

    def _open(self, spider: Spider) -> None:
        assert self.directory is not None
        s = self.crawler.settings
        name = crawl_name(s, spider.name)
        self.directory.mkdir(parents=True, exist_ok=True)
        salvaged = salvage(self.directory)
        if salvaged:
            self.crawler.stats.set_value("warc/salvaged_files", len(salvaged))
        info = {
            "software": f"site-crawler/{_version()} (Scrapy, warcio)",
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
            "isPartOf": name,
            "operator": s.get("USER_AGENT") or "",
            "http-header-user-agent": s.get("USER_AGENT") or "",
            "robots": "obey" if s.getbool("ROBOTSTXT_OBEY") else "ignore",
        }
        maker = RecordMaker()
        files = WarcFiles(self.directory, self.prefix or name, self.max_size,
                          lambda filename: maker.warcinfo(filename, {**info, "hostname": files.host}))

        def index() -> ArchiveIndex:
            keys = Keys(name, s.getint("FRONTIER_SHARDS"))
            return ArchiveIndex(get_redis(s, crawl_dir(s)), keys, s.getint("DUPEFILTER_BUCKETS"))

        self.writer = WarcWriter(files, index)
        logger.info("WARC: writing %(dir)s/%(prefix)s-*.warc.gz (rotated at %(size)d bytes)",
                    {"dir": self.directory, "prefix": files.prefix, "size": self.max_size})

    def close(self, spider: Spider) -> None:
        writer = self.writer
        if writer is None:
            return
        writer.close()
        c, stats = writer.counts, self.crawler.stats
        for key in ("responses", "revisits", "not_modified", "truncated", "bytes", "index_errors", "waits",
                    "claims_taken_over", "disk_full"):
            stats.set_value(f"warc/{key}", getattr(c, key))
        stats.set_value("warc/files", len(writer.files.closed))

    # -- what the middleware and the pipeline call ----------------------------------------------------
    def _limit(self, request: Request) -> int:
        limit = request.meta.get(DOWNLOAD_MAXSIZE, self.maxsize)
        return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else self.maxsize

    def _headers(self, headers: Any, body_length: int, request: Request, spider: Spider) -> None:
        # The download began when Scrapy's own timeout clock did: download_latency ago (set as the headers came).
        latency = request.meta.get(DOWNLOAD_LATENCY)
        self._started[request] = time.monotonic() - (latency if isinstance(latency, (int, float)) else 0.0)
        limit = self._limit(request)
        if limit and isinstance(body_length, int) and body_length > limit:
            self._cut[request] = "length"
            raise StopDownload(fail=False)

    def _bytes(self, data: bytes, request: Request, spider: Spider) -> None:
        received = self._received.get(request, 0) + len(data)
        self._received[request] = received
        limit = self._limit(request)
        if limit and received > limit:
            self._cut[request] = "length"
            raise StopDownload(fail=False)
        timeout = request.meta.get(DOWNLOAD_TIMEOUT, self.timeout)
        started = self._started.get(request)
        if (started is not None and isinstance(timeout, (int, float)) and timeout > 0
                and time.monotonic() - started > _TIME_SHARE * timeout):
            self._cut[request] = "time"
            raise StopDownload(fail=False)

    def archive(self, request: Request, response: Response) -> str | None:
        """Hand a fetch to the writer; what cut it short (None: whole)."""
        writer = self.writer
        if writer is None:
            self._fail(RuntimeError("the WARC writer did not start"))
            raise IgnoreRequest("WARC output is not writing: the crawl is stopping")
        if writer.error is not None:
            self._fail(writer.error)
        cut = self._cut.pop(request, None)
        self._received.pop(request, None)
        body = response.body
        if cut == "length":
            body = body[: self._limit(request)]
        ip = getattr(response, "ip_address", None)
        session = bool(request.meta.get(SESSION) or request.meta.get(SESSION_LOGIN))  # its cookies are secrets
        ex = Exchange(
            url=response.url, method=request.method,
            request_headers=[(k, _REDACTED if _secret_header(k) else v)
                             for k, vs in request.headers.items() for v in vs],
            # A login's form holds its credentials (crawler/sessions/middleware.py).
            request_body=_REDACTED if request.meta.get(SESSION_LOGIN) else request.body or b"", protocol=getattr(response, "protocol", None) or "HTTP/1.1",
            status=response.status,
            response_headers=[(k, _REDACTED if session and k.lower() == b"set-cookie" else v)
                              for k, vs in response.headers.items() for v in vs],
            body=body, ip=str(ip) if ip is not None else None, fetched_at=time.time(), truncated=cut,
            not_modified=_original(request) if response.status == 304 else None)
        self._pending[request] = writer.submit(ex, dedup=request.method == "GET")
        return cut

    def take(self, request: Request | None) -> Future[Written] | None:
        """The record of this request's response (once: the page's item takes it)."""
        if request is None:
            return None
        future = self._pending.pop(request, None)
        if future is None:
            # A response that reached a callback was archived: no record is a fault, never a page without one.
            future = Future()
            future.set_exception(RuntimeError(f"no WARC record was written for {request.url}"))
        return future

    def _fail(self, exc: BaseException) -> None:
        if self._failed:
            return
        self._failed = True
        logger.error("WARC: cannot write %(dir)s (%(exc)s): stopping the crawl (WARC_DIR is required once set)",
                     {"dir": self.directory, "exc": exc})
        engine = self.crawler.engine
        if engine is not None and engine.spider is not None:
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(engine.close_spider_async(reason="warc_write_failed"))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("site-crawler")
    except PackageNotFoundError:
        return "unknown"


def _original(request: Request) -> NotModified | None:
    """The stored record a 304 confirms, from the re-crawl's request."""
    raw = request.meta.get(WARC_ORIGINAL)
    if (isinstance(raw, list) and len(raw) == 3 and all(isinstance(x, str) for x in raw)
            and uri_ok(raw[0]) and http_date_ok(raw[1]) and digest_ok(raw[2])):
        return NotModified(raw[0], raw[1], raw[2])
    return None


def _service(crawler: Crawler) -> WarcService:
    """The WARC service of a crawl that writes WARC; NotConfigured (the
    component is left out, costing nothing) without WARC_DIR."""
    if not crawler.settings.get("WARC_DIR"):
        raise NotConfigured  # no message: Scrapy logs a WARNING for one, and a feature left off says nothing
    return WarcService.of(crawler)


class WarcMiddleware:
    """Downloader middleware: every fetch to the writer (see the module)."""

    def __init__(self, service: WarcService) -> None:
        self.service = service

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(_service(crawler))

    def process_response(self, request: Request, response: Response,
                         spider: Spider | None = None) -> Response | Request:
        cut = self.service.archive(request, response)
        if cut == "length":
            raise DownloadCancelledError(f"over DOWNLOAD_MAXSIZE: {request.url} (archived its first bytes)")
        if cut == "time":
            # Retried as a timeout is (RetryMiddleware sees no exception raised here).
            from scrapy.downloadermiddlewares.retry import get_retry_request

            crawler_spider = spider or self.service.crawler.spider
            assert crawler_spider is not None
            retry = get_retry_request(request, spider=crawler_spider, reason="body still arriving at the timeout")
            if retry is not None:
                return retry
            raise DownloadTimeoutError(f"body still arriving at {int(_TIME_SHARE * 100)} % of the download timeout: "
                                 f"{request.url} (archived what came)")
        return response


class WarcPipeline:
    """A page is stored once its record is written (see the module)."""

    def __init__(self, service: WarcService) -> None:
        self.service = service

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(_service(crawler))

    async def process_item(self, item: Any) -> Any:
        future = getattr(item, "warc", None)
        if future is None:
            return item
        item.warc = None
        if not future.done():
            from twisted.internet import reactor  # the installed one (imported late: Scrapy installs it)

            d: defer.Deferred[None] = defer.Deferred()
            future.add_done_callback(lambda _: cast(Any, reactor).callFromThread(d.callback, None))
            await maybe_deferred_to_future(d)
        exc = future.exception()
        if exc is not None:
            self.service._fail(exc)
            raise DropItem(f"WARC record not written ({exc}): {getattr(item, 'url', '')} not stored")
        written = future.result()
        if written.kind == "response" or (written.kind == "revisit" and getattr(item, "status", None) != 304):
            item.warc_file, item.warc_offset = written.file, written.offset
            item.warc_date, item.warc_digest = written.date, written.digest
        return item
