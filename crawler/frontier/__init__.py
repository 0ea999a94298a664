"""The shared Redis frontier: site queues, leases, dedup (see frontier.py)."""

from crawler.frontier.frontier import Frontier, Lease, LinkEntry, fingerprint_slot

__all__ = ["Frontier", "Lease", "LinkEntry", "fingerprint_slot"]
