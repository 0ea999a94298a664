"""Re-crawl: when a stored page is due again, what a visit found, and the next visit's plan.

Before the packages (issue 49) ``crawler.recrawl`` was the module now at
``crawler/recrawl/merge.py``: its names still resolve here for one release,
with a DeprecationWarning."""

from crawler.moved import names_of

__getattr__ = names_of(__name__, "merge")
