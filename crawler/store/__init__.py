"""Stores: the embedded SQLite store (default) and MongoDB.

``open_store(settings, crawl_name)`` picks the store from settings:

- ``MONGO_URI`` set: the MongoDB store, database ``MONGO_DATABASE`` (default:
  the crawl's name);
- else ``STORE_PATH``: the SQLite file; default
  ``<CRAWL_DIR>/<crawl name>.sqlite3``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawler.store.base import PAGE_FIELDS, Store, StoreUnavailable, short_error
from crawler.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["PAGE_FIELDS", "SQLiteStore", "Store", "StoreUnavailable", "open_store", "short_error"]


def open_store(settings: BaseSettings, crawl_name: str) -> Store:
    from crawler.crawldir import crawl_dir

    uri = settings.get("MONGO_URI")
    if uri:
        from crawler.store.mongo import MongoStore

        timeout_ms = int(settings.getfloat("MONGO_TIMEOUT", 10.0) * 1000)
        return MongoStore(uri, settings.get("MONGO_DATABASE") or crawl_name, timeout_ms=timeout_ms)
    path = settings.get("STORE_PATH") or str(crawl_dir(settings) / f"{crawl_name}.sqlite3")
    return SQLiteStore(path)
