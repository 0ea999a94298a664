"""The shared Redis frontier: site queues, leases, dedup, politeness,
control and views, one module a concern (``frontier.py`` lists them), over
the Redis gateway of ``crawler/redis/``."""

from crawler.frontier.frontier import Frontier, Lease, LinkEntry, fingerprint_slot

__all__ = ["Frontier", "Lease", "LinkEntry", "fingerprint_slot"]
