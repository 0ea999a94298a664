"""Sitemaps: found through robots.txt, parsed, their URLs queued like links.

Before the packages (issue 49) ``crawler.sitemaps`` was the module now at
``crawler/sitemaps/crawl.py``: its names still resolve here for one release,
with a DeprecationWarning."""

from crawler.moved import names_of

__getattr__ = names_of(__name__, "crawl")
