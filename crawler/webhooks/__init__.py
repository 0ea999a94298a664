"""A crawl's events posted to a webhook: kept in Redis until delivered, in
order, at least once, signed (``events.py``, ``delivery.py``,
``extension.py``; docs/api.md, "Webhooks")."""
