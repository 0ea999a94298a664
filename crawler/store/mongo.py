"""The MongoDB store (pymongo), the same interface as the embedded one.

Settings: ``MONGO_URI`` selects it, ``MONGO_DATABASE`` names the database
(default: the crawl's name).

Collections ``pages``, ``links``, ``sites`` with unique indexes created when
the store opens, before any write (without them every upsert scans the
collection). Writes are unordered bulk upserts: idempotent, and one bad
document does not stop the batch. A page's ``inlinks`` array is kept with
``$addToSet``/``$pull`` as links come and go, at most ``INLINKS_KEPT``
URLs of them; the whole set is in ``links`` (``inlinks()`` reads it there).
A link target not stored yet exists as a stub without ``state`` (hidden
from reads) until it is crawled.
Errors propagate; ``transient`` tells the pipeline which to retry (MongoDB
away, stepping down, timing out) and which a page will never get past.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import pymongo
from pymongo import UpdateOne
from pymongo.errors import (BulkWriteError, ConnectionFailure, ExecutionTimeout, OperationFailure,
                            PyMongoError, WaitQueueTimeoutError, WriteConcernError)

from crawler.recrawl.diff import CHANGE_KEY
from crawler.store.base import (KEPT_FIELDS, PAGE_FIELDS, REVISIT_FIELDS, SITE_FIELDS, SITEMAP_KEY, Store,
                                StoreUnavailable, short_error, sitemap_entries, sitemap_update)
from crawler.scope.urls import redact_credentials, url_site

__all__ = ["MongoStore"]

_STORED = {"state": {"$exists": True}}

# In-link URLs kept in a page's document. A page every other page links to
# (a site's logo, its home page) would otherwise pass MongoDB's 16 MB
# document limit at about 240,000 in-links, and from then on every batch
# with a page linking to it would be refused.
INLINKS_KEPT = 10_000

# Server error codes that go away by themselves: shutdown, step-down, network,
# time limits, and duplicate keys (two workers upserting one URL at once).
_TRANSIENT_CODES = frozenset({6, 7, 50, 89, 91, 189, 262, 9001, 10107, 11000, 11600, 11602,
                              13435, 13436})


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, (ConnectionFailure, WaitQueueTimeoutError, ExecutionTimeout,
                        WriteConcernError, OSError)):
        return True
    if isinstance(exc, PyMongoError) and (exc.has_error_label("RetryableWriteError")
                                          or exc.has_error_label("TransientTransactionError")):
        return True
    if isinstance(exc, BulkWriteError):
        errors = exc.details.get("writeErrors") or []
        return all(e.get("code") in _TRANSIENT_CODES for e in errors)
    if isinstance(exc, OperationFailure):
        return exc.code in _TRANSIENT_CODES
    return False


class MongoStore(Store):
    def __init__(self, uri: str, database: str, timeout_ms: int = 10_000) -> None:
        self.client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            uri, serverSelectionTimeoutMS=timeout_ms, connectTimeoutMS=timeout_ms)
        try:
            self.client.admin.command("ping")  # a bad address fails here, at once
        except PyMongoError as exc:
            self.client.close()
            where = redact_credentials(uri)  # no password in logs
            raise StoreUnavailable(f"cannot reach MongoDB at {where} within {timeout_ms / 1000:g} s: "
                                   f"{short_error(exc, 300)}") from exc
        self.where = redact_credentials(uri)
        self.db = self.client[database]
        self.pages = self.db["pages"]
        self.inlinks_kept = INLINKS_KEPT
        self.links = self.db["links"]
        self.sites_ = self.db["sites"]
        # What the crawl's sitemaps list (crawler/sitemaps/crawl.py): _id the URL.
        self.sitemap_urls = self.db["sitemap_urls"]
        # What changed (crawler/recrawl/diff.py), by the time of each version.
        self.changes_ = self.db["changes"]
        self.changes_.create_index("at")
        self.pages.create_index("url", unique=True)
        self.pages.create_index([("site", 1), ("state", 1)])
        self.links.create_index([("src", 1), ("dst", 1)], unique=True)
        self.links.create_index("dst")
        self.sites_.create_index("site", unique=True)
        self.pages.create_index("next_fetch_at")

    def transient(self, exc: BaseException) -> bool:
        return _transient(exc)

    def write(self, pages: Sequence[dict[str, Any]]) -> None:
        listed = sitemap_entries([p for p in pages if SITEMAP_KEY in p])
        # A page given twice in a batch (stored again once typed again or put
        # right: crawler/pagetypes/typer.py, crawler/duplicates/variants.py) is written as its
        # last version: the bulk writes below are unordered.
        changes = [p[CHANGE_KEY] for p in pages if p.get(CHANGE_KEY)]
        pages = list({p["url"]: p for p in pages if SITEMAP_KEY not in p}.values())
        if changes:  # _id: the URL and the version's time, so a batch written again keeps each once
            self.changes_.bulk_write([pymongo.ReplaceOne({"_id": f"{c['at']!r} {c['url']}"}, c, upsert=True)
                                      for c in changes], ordered=False)
        if listed:
            self.sitemap_urls.bulk_write([pymongo.ReplaceOne({"_id": url}, {"lastmod": lastmod, "changefreq": freq,
                                                                            "sitemap": sitemap}, upsert=True)
                                          for url, lastmod, freq, sitemap in listed], ordered=False)
        if not pages:
            self._apply_sitemaps([e[0] for e in listed])
            return
        now = time.time()
        # A page whose ``links`` is None keeps its stored out-links (a re-crawl
        # that found it unchanged).
        urls = [p["url"] for p in pages if p.get("links") is not None]
        old: dict[str, dict[str, str]] = defaultdict(dict)
        for link in self.links.find({"src": {"$in": urls}}, {"_id": 0, "src": 1, "dst": 1, "anchor": 1}):
            old[link["src"]][link["dst"]] = link.get("anchor") or ""
        page_ops = [UpdateOne({"url": p["url"]}, {"$set": {
                        **{f: p.get(f) for f in PAGE_FIELDS if f not in KEPT_FIELDS},
                        **({} if p.get("links") is None else
                           {"nlinks": len({link["url"] for link in p.get("links") or ()})})}}, upsert=True)
                    for p in pages]
        link_ops: list[Any] = []
        stub_ops: list[Any] = []  # every new link's target exists before its in-link is added
        inlink_ops: list[Any] = []
        new_sites: dict[str, tuple[float, str | None]] = {}
        for p in pages:
            new_sites.setdefault(p["site"], (p.get("fetched_at") or now, None))
            if p.get("links") is None:
                continue
            dsts = {}
            for link in p.get("links") or ():
                dsts[link["url"]] = link.get("anchor") or ""
                new_sites.setdefault(url_site(link["url"]), (p.get("fetched_at") or now, p["url"]))
            before = old.get(p["url"], {})
            for dst, anchor in dsts.items():
                if dst not in before:
                    stub_ops.append(UpdateOne({"url": dst}, {"$setOnInsert": {"inlinks": []}}, upsert=True))
                    inlink_ops.append(UpdateOne({"url": dst, f"inlinks.{self.inlinks_kept - 1}": {"$exists": False}},
                                                {"$addToSet": {"inlinks": p["url"]}}))
                elif before[dst] == anchor:
                    continue  # a re-crawl that finds the same link writes nothing
                link_ops.append(UpdateOne({"src": p["url"], "dst": dst}, {"$set": {"anchor": anchor}}, upsert=True))
            for gone in set(before) - set(dsts):
                link_ops.append(pymongo.DeleteOne({"src": p["url"], "dst": gone}))
                inlink_ops.append(UpdateOne({"url": gone}, {"$pull": {"inlinks": p["url"]}}))
        self.pages.bulk_write(page_ops, ordered=False)
        self._apply_sitemaps([p["url"] for p in pages] + [e[0] for e in listed])
        # In-links before edges: an edge in ``links`` means its in-link was
        # written, so a batch retried after a partial failure may skip the
        # edges it finds (the first attempt's in-links are in place).
        if stub_ops:
            self.pages.bulk_write(stub_ops, ordered=False)
        if inlink_ops:
            self.pages.bulk_write(inlink_ops, ordered=False)
        if link_ops:
            self.links.bulk_write(link_ops, ordered=False)
        site_ops = [UpdateOne({"site": s}, {"$setOnInsert": {"first_seen": t, "discovered_from": src,
                                                             "pages": 0, "links": 0, "errors": 0}}, upsert=True)
                    for s, (t, src) in new_sites.items()]
        self.sites_.bulk_write(site_ops, ordered=False)
        # Counted again rather than incremented: a batch retried after a
        # partial failure still leaves the right numbers.
        mirrors = {p["site"]: p["mirror_of"] for p in pages if p.get("mirror_of")}
        for site in sorted({p["site"] for p in pages}):
            counts: dict[str, Any] = {"pages": 0, "errors": 0, "links": 0}
            if site in mirrors:
                counts["mirror_of"] = mirrors[site]
            for row in self.pages.aggregate([
                    {"$match": {"site": site, **_STORED}},
                    {"$group": {"_id": "$state", "n": {"$sum": 1}, "links": {"$sum": "$nlinks"}}}]):
                counts["links"] += int(row.get("links") or 0)
                if row["_id"] == "C":
                    counts["pages"] = int(row["n"])
                elif row["_id"] == "E":
                    counts["errors"] = int(row["n"])
            self.sites_.update_one({"site": site}, {"$set": counts})

    def _apply_sitemaps(self, urls: list[str]) -> None:
        """The sitemap fields of the stored pages among ``urls`` that a
        listing names (written after the page, or before it)."""
        if not urls:
            return
        listed = {d["_id"]: d for d in self.sitemap_urls.find({"_id": {"$in": list(dict.fromkeys(urls))}})}
        if not listed:
            return
        ops = []
        for doc in self.pages.find({"url": {"$in": list(listed)}, **_STORED},
                                   {"_id": 0, "url": 1, "state": 1, "history": 1, "fetched_at": 1}):
            entry = listed[doc["url"]]
            fields: dict[str, Any] = {"in_sitemap": True, "lastmod": entry.get("lastmod"),
                                      "changefreq": entry.get("changefreq")}
            interval = sitemap_update(doc.get("state"), doc.get("history"), doc.get("fetched_at"),
                                      entry.get("lastmod"), entry.get("changefreq"))
            if interval is not None:
                fields.update(revisit_interval=interval, next_fetch_at=float(doc["fetched_at"]) + interval)
            ops.append(UpdateOne({"url": doc["url"]}, {"$set": fields}))
        if ops:
            self.pages.bulk_write(ops, ordered=False)

    @staticmethod
    def _page(doc: dict[str, Any]) -> dict[str, Any]:
        page = {f: doc.get(f) for f in PAGE_FIELDS}
        page["in_sitemap"] = bool(page["in_sitemap"])
        if not isinstance(page["history"], list):
            page["history"] = []
        return page

    def get_page(self, url: str) -> dict[str, Any] | None:
        doc = self.pages.find_one({"url": url, **_STORED})
        if doc is None:
            return None
        page = self._page(doc)
        page["inlinks"] = self.inlinks(url)
        return page

    def iter_pages(self, site: str | None = None) -> Iterator[dict[str, Any]]:
        query: dict[str, Any] = dict(_STORED)
        if site is not None:
            query["site"] = site
        for doc in self.pages.find(query).sort("url", 1):
            yield self._page(doc)

    def stored_urls(self, statuses: tuple[int, int] = (200, 299), since: float | None = None) -> list[str]:
        # _id: a page's document is made when it is first stored or first
        # linked to; the order of first storing is kept by the API's own list.
        query: dict[str, Any] = {"state": "C", "status": {"$gte": statuses[0], "$lte": statuses[1]}}
        if since is not None:
            query["fetched_at"] = {"$gte": since}
        docs = self.pages.find(query, {"_id": 1, "url": 1}).sort("_id", 1)
        return [d["url"] for d in docs]

    def changes(self, since: float, until: float | None = None, site: str | None = None) -> list[dict[str, Any]]:
        query: dict[str, Any] = {"at": {"$gte": since, "$lt": until if until is not None else float("inf")}}
        if site:
            query["site"] = site
        return list(self.changes_.find(query, {"_id": 0}).sort([("at", 1), ("url", 1)]))

    def listed_urls(self) -> list[str]:
        return sorted(str(d["_id"]) for d in self.sitemap_urls.find({}, {"_id": 1}))

    def inlinks(self, url: str) -> list[str]:
        return sorted(d["src"] for d in self.links.find({"dst": url}, {"_id": 0, "src": 1}))

    def outlinks(self, url: str) -> list[dict[str, str]]:
        docs = self.links.find({"src": url}, {"_id": 0, "dst": 1, "anchor": 1})
        return sorted(({"url": d["dst"], "anchor": d.get("anchor", "")} for d in docs), key=lambda x: x["url"])

    def iter_links(self, site: str | None = None) -> Iterator[dict[str, str]]:
        query: dict[str, Any] = {}
        if site is not None:
            query = {"src": {"$in": [p["url"] for p in self.iter_pages(site)]}}
        for d in self.links.find(query, {"_id": 0}).sort([("src", 1), ("dst", 1)]):
            yield {"src": d["src"], "dst": d["dst"], "anchor": d.get("anchor", "")}

    def sites(self) -> list[dict[str, Any]]:
        return [{k: d.get(k) for k in SITE_FIELDS}
                for d in self.sites_.find({}, {"_id": 0}).sort("site", 1)]

    def count_pages(self, site: str | None = None, state: str | None = None) -> int:
        query: dict[str, Any] = dict(_STORED)
        if site is not None:
            query["site"] = site
        if state is not None:
            query["state"] = state
        return int(self.pages.count_documents(query))

    def revisit_state(self, urls: Sequence[str]) -> dict[str, dict[str, Any]]:
        unique = list(dict.fromkeys(urls))
        out: dict[str, dict[str, Any]] = {}
        for doc in self.pages.find({"url": {"$in": unique}, **_STORED}, {"_id": 0}):
            page = {f: doc.get(f) for f in REVISIT_FIELDS}
            page["links"] = []
            out[str(page["url"])] = page
        for link in self.links.find({"src": {"$in": list(out)}}, {"_id": 0, "src": 1, "dst": 1}):
            out[str(link["src"])]["links"].append(link["dst"])
        return out

    @staticmethod
    def _due_query(now: float, default_interval: float, site: str | None, every: bool) -> dict[str, Any]:
        # Pages stored before next_fetch_at existed are due a default
        # interval after their fetch ($or rather than $expr: plain queries).
        query: dict[str, Any] = {"state": "C"}
        if not every:
            query["$or"] = [{"next_fetch_at": {"$lte": now}},
                            {"next_fetch_at": None, "fetched_at": {"$lte": now - default_interval}}]
        if site is not None:
            query["site"] = site
        return query

    def due(self, now: float, default_interval: float, site: str | None = None, limit: int = 0,
            every: bool = False) -> Iterator[dict[str, Any]]:
        fields = {"_id": 0, "url": 1, "site": 1, "depth": 1, "etag": 1, "last_modified": 1,
                  "next_fetch_at": 1, "fetched_at": 1, "change_rate": 1, "content_length": 1,
                  "warc_date": 1, "warc_digest": 1, "dup_order": 1}
        cursor = self.pages.find(self._due_query(now, default_interval, site, every), fields).sort(
            [("next_fetch_at", 1), ("url", 1)])
        if limit > 0:
            cursor = cursor.limit(limit)
        for d in cursor:
            due = d.get("next_fetch_at")
            if due is None:
                due = (d.get("fetched_at") or 0) + default_interval
            yield {"url": d["url"], "site": d.get("site"), "depth": d.get("depth"), "etag": d.get("etag"),
                   "last_modified": d.get("last_modified"), "next_fetch_at": due,
                   "fetched_at": d.get("fetched_at"), "change_rate": d.get("change_rate"),
                   "content_length": d.get("content_length"), "warc_date": d.get("warc_date"),
                   "warc_digest": d.get("warc_digest"), "dup_order": d.get("dup_order")}

    def revisit_sample(self, size: int) -> tuple[int, list[dict[str, Any]]]:
        total = int(self.pages.count_documents({"state": "C"}))
        if size <= 0 or total == 0:
            return total, []
        # Projected first: $sample then shuffles small records, not whole pages.
        docs = self.pages.aggregate([{"$match": {"state": "C"}},
                                     {"$project": {"_id": 0, "evidence": 1, "history": 1, "indegree": 1,
                                                   "mirror_degree": 1}},
                                     {"$sample": {"size": size}}])
        return total, [{"evidence": d.get("evidence"), "history": d.get("history"), "indegree": d.get("indegree"),
                        "mirror_degree": d.get("mirror_degree")} for d in docs]

    def compute_degrees(self) -> None:
        indegree = {d["_id"]: d["n"] for d in self.links.aggregate([{"$group": {"_id": "$dst", "n": {"$sum": 1}}}])}
        mirrors = {d["_id"]: d["n"] for d in self.pages.aggregate([
            {"$match": {"dup_of": {"$type": "string"}, **_STORED}}, {"$group": {"_id": "$dup_of", "n": {"$sum": 1}}}])}
        ops = [UpdateOne({"_id": d["_id"]}, {"$set": {"indegree": indegree.get(d["url"], 0),
                                                      "mirror_degree": mirrors.get(d["url"], 0)}})
               for d in self.pages.find(_STORED, {"_id": 1, "url": 1})]
        for start in range(0, len(ops), 1000):
            self.pages.bulk_write(ops[start:start + 1000], ordered=False)

    def count_due(self, now: float, default_interval: float, site: str | None = None) -> int:
        return int(self.pages.count_documents(self._due_query(now, default_interval, site, False)))

    def describe(self) -> str:
        return f"MongoDB at {self.where}, database {self.db.name}"

    def close(self) -> None:
        self.client.close()
