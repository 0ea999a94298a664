"""Re-crawl: when a stored page is due again, what a visit found, and the next visit's plan."""

# Before the packages (issue 49) this path was the module now at crawler/recrawl/merge.py:
# its names still resolve here for one release, with a DeprecationWarning.


def __getattr__(name: str) -> object:
    import importlib
    import warnings

    module = importlib.import_module("crawler.recrawl.merge")
    if name.startswith("__") or not hasattr(module, name):
        raise AttributeError(f"module 'crawler.recrawl' has no attribute {name!r}")
    warnings.warn(f"crawler.recrawl.{name} moved to crawler.recrawl.merge.{name}; the old path goes in the next release",
                  DeprecationWarning, stacklevel=2)
    return getattr(module, name)
