"""Tools that make the crawler's data files; not part of the crawler, not
in its wheel (``tools.pagetypes``: the page-type models)."""
