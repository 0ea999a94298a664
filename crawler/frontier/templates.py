"""Sites' templates for the whole cluster: which blocks recur on a site's
pages (``crawler/pagetypes/template.py`` says why the page classifier wants them).

Per site, one Redis hash in the site's own shard (``crawler.redis.keys.template_key``):
the number of the site's pages counted and, per block key (48 bits of a
block's text and of whether it sits in navigation markup), how many of them held it. Every worker counts the pages it
types into the same hash, so the evidence is the cluster's, not a worker's.
It is bounded: at most ``TemplatePolicy.max_keys`` counts per site while
the site's first ``TemplatePolicy.pages`` pages are counted (when a page's
keys do not fit, hopeless keys and keys seen once make room; a site still
learned expires a week after its last page); then the script keeps the
template's keys only and counts no more (the hash is frozen, kept). One
script call (``TEMPLATE``, ``crawler/redis/lua/template.lua``) counts a page and returns its evidence:
one round trip per page typed. ``read`` asks for counts without counting
(one round trip when a site's first pages, typed alone, are typed again).

What comes back from Redis is read defensively: anyone who can write to
the crawl's Redis can put anything there. A count that is not a whole
number between 0 and the pages counted, a page count that is not one, a key
of another type: no evidence (the page-only view), never an exception, and
nothing read chooses code, a key or a size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from crawler.redis.keys import template_key
from crawler.pagetypes.template import TemplateEvidence, TemplatePolicy

if TYPE_CHECKING:
    from crawler.redis.gateway import Gateway
    from crawler.redis.keys import Keys

__all__ = ["SiteTemplates", "parse_evidence"]


class SiteTemplates:
    """The cluster's template evidence, through ``gateway``."""

    def __init__(self, gateway: Gateway, keys: Keys, policy: TemplatePolicy | None = None) -> None:
        self.gateway = gateway
        self.keys = keys
        self.policy = policy or TemplatePolicy()

    def key(self, site: str) -> str:
        return template_key(self.keys.site(site), site)

    def call(self, site: str, keys: Sequence[str]) -> tuple[str, list[str], list[Any]]:
        """The script call that counts a page of ``site`` with block keys
        ``keys``: to send alone (``observe``) or with other calls of the
        page in one round trip (the duplicate check's)."""
        p = self.policy
        return ("TEMPLATE", [self.key(site)], [p.pages, p.max_keys, p.min_count, p.share_permille, *keys])

    def evidence(self, raw: Any, keys: Sequence[str]) -> TemplateEvidence | None:
        """What ``call`` answered, as evidence (None: malformed)."""
        return parse_evidence(raw, len(keys), self.policy.pages)

    def observe(self, site: str, keys: Sequence[str]) -> TemplateEvidence | None:
        """Count a page of ``site`` with block keys ``keys`` (while the site
        is learned) and return the evidence for those keys, this page
        included; None when the site's entry is malformed. Raises
        ``redis.RedisError`` when Redis cannot be reached."""
        return self.evidence(self.gateway.run_many([self.call(site, keys)])[0], keys)

    def read(self, site: str, keys: Sequence[str]) -> TemplateEvidence | None:
        """The evidence for ``keys`` as it stands, counting nothing (a
        site's first pages, typed again once its template is known); None
        when the site has no evidence or its entry is malformed. Raises
        ``redis.RedisError`` when Redis cannot be reached."""
        raw = self.gateway.run_many([("HMGET", [self.key(site)], ["#", *keys])], raise_on_error=False)[0]
        if isinstance(raw, redis.ResponseError):
            return None  # not a hash: anyone can write to the crawl's Redis
        if isinstance(raw, Exception):
            raise raw
        return self.evidence(raw, keys)


def _whole(value: Any, most: int) -> int | None:
    """``value`` (bytes, str or int from Redis) as a whole number in
    [0, most], else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        n = value
    elif isinstance(value, (bytes, str)) and 0 < len(value) <= 12:
        text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        if not text.isascii() or not text.isdigit():
            return None
        n = int(text)
    else:
        return None
    return n if 0 <= n <= most else None


def parse_evidence(raw: Any, n_keys: int, max_pages: int) -> TemplateEvidence | None:
    """The script's answer as ``TemplateEvidence``: ``[pages, count, ...]`` with one
    count (or nil) per key asked. Anything else is None (no evidence); a
    count that cannot be one (not a whole number, more than the pages) reads
    as 0: that block is not template."""
    if not isinstance(raw, (list, tuple)) or len(raw) != n_keys + 1:
        return None
    pages = _whole(raw[0], max_pages)
    if pages is None:
        return None
    counts = tuple(0 if v is None else (_whole(v, pages) or 0) for v in raw[1:])
    return TemplateEvidence(pages, counts)
