"""Stores: the embedded SQLite store (default) and MongoDB.

``open_store(settings, crawl_name)`` picks the store from settings:

- ``MONGO_URI`` set: the MongoDB store, database ``MONGO_DATABASE`` (default:
  the crawl's name);
- else ``STORE_PATH``: the SQLite file; default
  ``<CRAWL_DIR>/<crawl name>.sqlite3``.

A crawl creates its store; a command that reads one passes ``create=False``
and gets ``StoreNotFound`` (naming the crawl and where it looked) when there
is none, instead of an empty store made by the typo in its name.

``WriteBuffer`` (``crawler.store.buffer``) writes a crawl's pages to its
store: batches retried through outages, spilled to a file when the crawl
stops before the store is back, and replayed at the next start.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from crawler.store.base import PAGE_FIELDS, Store, StoreUnavailable, short_error
from crawler.store.buffer import WriteBuffer, read_spill
from crawler.store.sqlite import SQLiteStore
from crawler.scope.urls import redact_credentials

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["PAGE_FIELDS", "SQLiteStore", "Store", "StoreNotFound", "StoreUnavailable", "WriteBuffer", "open_store",
           "read_spill", "short_error"]


class StoreNotFound(Exception):
    """The crawl has no store where the settings point: nothing was created."""


def open_store(settings: BaseSettings, crawl_name: str, create: bool = True) -> Store:
    """The crawl's store; with ``create=False``, only if it exists already
    (else ``StoreNotFound``, and no file, directory or database is made)."""
    uri = settings.get("MONGO_URI")
    if uri:
        from crawler.store.mongo import MongoStore

        timeout_ms = int(settings.getfloat("MONGO_TIMEOUT") * 1000)
        database = settings.get("MONGO_DATABASE") or crawl_name
        if not create and not _mongo_has_pages(uri, database, timeout_ms):
            raise StoreNotFound(f"no crawl {crawl_name!r}: MongoDB at {redact_credentials(uri)} has no 'pages' collection "
                                f"in database {database!r}")
        return MongoStore(uri, database, timeout_ms=timeout_ms)
    path = _sqlite_path(settings, crawl_name, create)
    if not create and not path.is_file():
        raise StoreNotFound(f"no crawl {crawl_name!r}: no store file {path}")
    return SQLiteStore(path)


def _sqlite_path(settings: BaseSettings, crawl_name: str, create: bool) -> Path:
    from crawler.crawldir import crawl_dir

    configured = settings.get("STORE_PATH")
    if configured:
        return Path(configured)
    return crawl_dir(settings, create=create) / f"{crawl_name}.sqlite3"  # a look makes no directory


def _mongo_has_pages(uri: str, database: str, timeout_ms: int) -> bool:
    import pymongo
    from pymongo.errors import PyMongoError

    # A client of its own: MongoStore creates its collections and indexes
    # as it opens, which is what must not happen to a crawl that is not there.
    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(
        uri, serverSelectionTimeoutMS=timeout_ms, connectTimeoutMS=timeout_ms)
    try:
        return bool(client[database].list_collection_names(filter={"name": "pages"}))
    except PyMongoError as exc:
        raise StoreUnavailable(f"cannot reach MongoDB at {redact_credentials(uri)} within {timeout_ms / 1000:g} s: "
                               f"{short_error(exc, 300)}") from exc
    finally:
        client.close()
