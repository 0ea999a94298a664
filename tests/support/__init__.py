"""What the tests share, and what benchmarks may import (tests never import
``bench``): the servers they crawl and the crawls they run.

- ``tests.support.servers``: ``start_server`` runs a test HTTP server as a
  subprocess (``mockserver``: the generated test site, or a directory of
  real pages; ``hostile_server``: the attacks) and returns a ``Server``;
  ``start_secantus``/``stop_secantus``: a MongoDB-protocol server.
- ``tests.support.crawl``: ``crawl_cmd`` and ``run_crawl`` run
  ``scrapy crawl`` as a user would (``CrawlResult``); ``until`` polls;
  ``stop_embedded_redis`` stops embedded Redis servers a crawl left behind.
- ``tests.support.redis_cluster``: a Redis Cluster of ``redis-server``
  processes (``start_cluster``).
- ``tests.support.redis_server``: one ``redis-server`` of a test's own,
  configured as it asks (``start_redis``: ``maxmemory``, its policy).
- ``tests.support.urls_conformance``: the URL conformance corpus
  (``conformance_cases``, ``DEVIATIONS``), read by ``tests/test_urls.py``
  and ``bench/bench_urls.py``.
- ``tests.support.stall``: ``ReactorStall``, an extension that starves a
  worker of CPU (enabled by dotted path in ``EXTENSIONS``).
- ``tests.support.site``: what a crawl of the generated test site fetches
  and stores (``FETCHED``, ``NOT_STORED``, the ``TRAP`` settings).
- ``tests.support.workers``: crawl worker processes on the grid sites
  sharing a frontier (``Worker``, ``RUNNING``, ``EXPECTED``, ``seeds``,
  ``wait_for_requests``, ``fetched``, ``sigkill_scenario``).
- ``tests.support.commands``: the operator's commands on a running crawl
  (``command``, ``status``, ``wait_status``).
- ``tests.support.console``: ``scrapy console`` as a subprocess
  (``ConsoleProcess``) and its page read in a browser (``text``, ``texts``).
- ``tests.support.embedded``: the embedded Redis seen from outside
  (``servers``, ``one_server``, ``assert_gone``, ``read``, ``ENV``).
- ``tests.support.pywb``: pywb, the WARC replay tool, in a virtual
  environment of its own (``pywb_bin``), replaying a crawl's WARC files
  from a collection it indexes or from our CDXJ (``Pywb``).
- ``tests.support.codebase``: the crawler's source read as a whole: its
  modules, their import graph and its circles (``import_graph``,
  ``cycles``), the private Scrapy and protego names a module touches
  (``private_uses``).

Test modules import these helpers from here, never from one another or
from ``tests/conftest.py``, which holds the fixtures built on them
(``server``, ``grid_server``, ``mongo``, ``crawl_dir``, ``browser`` ...),
visible to every test module.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: crawls run from here
