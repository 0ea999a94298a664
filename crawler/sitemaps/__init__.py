"""Sitemaps: found through robots.txt, parsed, their URLs queued like links."""

# Before the packages (issue 49) this path was the module now at crawler/sitemaps/crawl.py:
# its names still resolve here for one release, with a DeprecationWarning.


def __getattr__(name: str) -> object:
    import importlib
    import warnings

    module = importlib.import_module("crawler.sitemaps.crawl")
    if name.startswith("__") or not hasattr(module, name):
        raise AttributeError(f"module 'crawler.sitemaps' has no attribute {name!r}")
    warnings.warn(f"crawler.sitemaps.{name} moved to crawler.sitemaps.crawl.{name}; the old path goes in the next release",
                  DeprecationWarning, stacklevel=2)
    return getattr(module, name)
