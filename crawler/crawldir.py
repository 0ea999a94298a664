"""Where a crawl keeps its local files, and what it is called.

Settings:

- ``CRAWL_DIR``: directory for the embedded store, the resume state and the
  embedded Redis; default ``.scrapy/crawl`` in the project (outside a
  checkout, as ``site-crawler`` runs: in the current directory).
- ``CRAWL_NAME``: the crawl's name; default the spider's name. Files (and,
  later, Redis keys) are named after it, so two crawls do not meet.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["crawl_dir", "crawl_name"]


def crawl_dir(settings: BaseSettings, create: bool = True) -> Path:
    """The crawl directory, made unless ``create`` is False (an operator
    command looking for a crawl creates nothing)."""
    configured = settings.get("CRAWL_DIR")
    if configured:
        path = Path(configured)
    else:
        from scrapy.exceptions import NotConfigured
        from scrapy.utils.project import data_path

        try:
            path = Path(data_path("crawl"))
        except NotConfigured:  # settings from SCRAPY_SETTINGS_MODULE, no scrapy.cfg (site-crawler)
            path = Path(".scrapy") / "crawl"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def crawl_name(settings: BaseSettings, spider_name: str) -> str:
    # The recrawl spider revisits the crawl the site spider made.
    name = settings.get("CRAWL_NAME") or {"recrawl": "site"}.get(spider_name, spider_name)
    if not name or any(c in str(name) for c in "/\\\0") or str(name) in (".", ".."):
        raise ValueError(f"CRAWL_NAME ({name!r}) must be a plain name without path separators")
    return str(name)
