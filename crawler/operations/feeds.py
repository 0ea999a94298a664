"""Feed exports (``scrapy crawl site -o/-O FILE``, ``FEEDS``): each page once,
final, with the fields ``scrapy export`` writes.

Scrapy's feed exporter writes every item the pipelines pass, as it passes.
The spider passes some pages twice: a site's first pages, typed alone for
want of its template, are stored again once it is known with their new
type (``crawler/pagetypes/typer.py``), and the pages that named another URL as
their canonical while the site's canonicals were being judged are stored
again without ``dup_of`` when the site turns out to misuse them
(``crawler/duplicates/variants.py``). The store takes the second write as an upsert; a
feed would hold both. So the exporters of the formats Scrapy ships
(``FEED_EXPORTERS`` in ``crawler/settings.py``: json, jsonlines, jsonl,
jl, csv, xml, marshal, pickle) are Scrapy's own with two changes:

- a page is written with the stored fields of ``scrapy export``
  (``crawler.store.base.PAGE_FIELDS``, in that order; the ones only the
  store computes, such as ``history``, ``next_fetch_at`` or ``indegree``,
  are null), not the item's internal ones. A feed's ``fields`` option
  (``FEED_EXPORT_FIELDS``) still picks fields, any of the item's
  (``links`` too) or the stored ones;
- a page still waiting for a second look (``PageItem.pending``) is held
  until it is final (the second look is done, its page no longer kept, or
  the feed is closed at the crawl's end), then written once with its final
  values; the write again of a page (``PageItem.typed_again``) is not
  written. So a site's first pages may come later in the file than the
  pages fetched after them.

A feed holds what this run fetched; ``scrapy export`` holds the whole crawl.
A format of one's own in ``FEED_EXPORTERS`` gets the spider's items as they
are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from scrapy.exporters import (
    CsvItemExporter,
    JsonItemExporter,
    JsonLinesItemExporter,
    MarshalItemExporter,
    PickleItemExporter,
    XmlItemExporter,
)

from crawler.items import PageItem
from crawler.store.base import PAGE_FIELDS

if TYPE_CHECKING:
    from scrapy.exporters import BaseItemExporter

    _Base = BaseItemExporter
else:
    _Base = object

__all__ = ["CsvPageExporter", "JsonLinesPageExporter", "JsonPageExporter", "MarshalPageExporter",
           "PageFeed", "PicklePageExporter", "XmlPageExporter", "shape"]


def shape(item: PageItem, own_fields: bool = False) -> dict[str, Any]:
    """The page as a feed row: the stored fields, or for a feed that picks
    its own fields, every field of the item and the stored ones."""
    if not own_fields:
        return {k: getattr(item, k, None) for k in PAGE_FIELDS}
    return {**dict.fromkeys(PAGE_FIELDS), **item.to_dict()}


class PageFeed(_Base):
    """What the exporters below add to Scrapy's (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Pages waiting for a second look, by identity: the spider sets
        # their final values on these very items.
        self._held: dict[int, PageItem] = {}
        self._own_fields = self.fields_to_export is not None

    def _write(self, item: Any) -> None:
        # The concrete exporter's export_item: the one this is mixed into.
        cast(Any, super()).export_item(item)

    def export_item(self, item: Any) -> None:
        if isinstance(item, PageItem):
            if item.typed_again:
                return  # its first write is the feed's row, final once written
            if item.pending > 0:
                self._held[id(item)] = item
                return
            self._write(shape(item, self._own_fields))
        else:
            self._write(item)
        self._release(final_only=True)

    def _release(self, final_only: bool) -> None:
        if not self._held:
            return
        done = [k for k, it in self._held.items() if not final_only or it.pending <= 0]
        for key in done:
            self._write(shape(self._held.pop(key), self._own_fields))

    def finish_exporting(self) -> None:
        # The crawl is over (or the feed's batch is): a page still waiting
        # keeps the values it was stored with.
        self._release(final_only=False)
        super().finish_exporting()


class JsonPageExporter(PageFeed, JsonItemExporter):
    pass


class JsonLinesPageExporter(PageFeed, JsonLinesItemExporter):
    pass


class CsvPageExporter(PageFeed, CsvItemExporter):
    pass


class XmlPageExporter(PageFeed, XmlItemExporter):
    pass


class MarshalPageExporter(PageFeed, MarshalItemExporter):
    pass


class PicklePageExporter(PageFeed, PickleItemExporter):
    pass

