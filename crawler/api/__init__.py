"""The crawl cluster as a service: an HTTP API in Firecrawl's v2 shapes
(``scrapy serve``; docs/api.md).

- ``keys.py``: API keys and each key's limits;
- ``asks.py``: Firecrawl's request bodies read into what a crawl does;
- ``jobs.py``: the jobs, in Redis;
- ``runner.py``: each job a crawl of the cluster, run by worker processes;
- ``documents.py``: a stored page as a Firecrawl document;
- ``service.py``: what each endpoint does;
- ``server.py``: the HTTP server and its routes;
- ``steps.py``: the chain step that keeps a page's HTML for the jobs that ask.
"""
