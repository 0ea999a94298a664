"""What a fetch of a page already stored does to its record: the re-crawl's
bookkeeping, pure (no Scrapy, no Redis), run by the store's writer thread
just before a batch is written (``crawler.store.WriteBuffer``'s ``prepare``).

A page the spider fetched for the first time starts its schedule
(``first_visit``): one history entry "new", ``next_fetch_at`` a default
interval later. A page fetched again (``PageItem.revisit`` set by the
``recrawl`` spider) is merged with what the store holds (``Revisits``):

=====================  =========================================================
response               outcome and what is written
=====================  =========================================================
304 Not Modified       ``unchanged``: the stored version stays, the validators
                       the 304 carries replace the old ones
200, same content      ``unchanged`` (same content hash and out-links)
200, SimHash distance  ``trivial``: reformatted; the new version is written,
<= max distance        ``changed_at`` stays
200, otherwise         ``changed``: the new version, ``changed_at`` = now
404 / 410              ``gone``: the stored version stays until the
                       ``gone_after``-th 404/410 in a row, then state D
301 / 308              ``moved``: state D, its one out-link the new URL (which
                       the spider queues like any link)
anything else          ``error`` (timeouts, 5xx, 302/303/307): no evidence of
                       change either way; the stored version stays
=====================  =========================================================

Every outcome is appended to the page's bounded ``history``
(``crawler.recrawl.change.Visit``), and every interval between two visits that saw
the content to its ``evidence`` (``crawler.recrawl.change.ChangeEvidence``: all visits
in bounded space, older ones fading); the change rate is estimated from the
evidence, with the crawl's other pages as the prior, and the next interval
follows (``crawler.recrawl.plan.Plan``, refreshed by the caller). A merge is
idempotent: a batch written again after a partial failure finds its own
fetch already in the store and writes that record unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from crawler.recrawl.change import ChangeEvidence, Policy, Visit, append, compare, observe
from crawler.recrawl.diff import CHANGE_KEY, change
from crawler.recrawl.plan import Plan, RateModel, importance_weight
from crawler.store.base import OUTCOME_KEY

__all__ = ["OUTCOME_KEY", "Revisits", "evidence_of", "first_visit", "visits"]


# Fields a 304 or an error leaves as they were (the stored version stands).
_KEPT = ("depth", "status", "page_type", "title", "text", "abstract", "simhash", "content_hash", "dup_of",
         "encoding", "referer", "etag", "last_modified", "changed_at", "error", "content_length", "canonical",
         # the response record the stored version came from (a 304's revisit names it)
         "warc_file", "warc_offset", "warc_date", "warc_digest")


def visits(raw: Any) -> list[Visit]:
    """A stored ``history`` as visits, entries that are not one left out."""
    if not isinstance(raw, list):
        return []
    return [v for v in (Visit.from_json(x) for x in raw) if v is not None]


def evidence_of(page: dict[str, Any]) -> ChangeEvidence:
    """A stored page's ``evidence``; from its ``history`` where it has none
    (stored before evidence was kept) or it is not one (edited by hand)."""
    return ChangeEvidence.from_json(page.get("evidence")) or ChangeEvidence.of(visits(page.get("history")))


def first_visit(page: dict[str, Any], policy: Policy) -> None:
    """Start the schedule of a page fetched for the first time (in place)."""
    at = float(page.get("fetched_at") or 0.0)
    page["history"] = [Visit(at, "new", None).to_json()]
    page["evidence"] = ChangeEvidence().to_json()
    page["gone_count"] = 0
    page["change_rate"] = None
    if page.get("state") == "C":
        page["changed_at"] = at
        page["revisit_interval"] = policy.default_interval
        page["next_fetch_at"] = at + policy.default_interval
    else:
        page["revisit_interval"] = page["next_fetch_at"] = None


class Revisits:
    """Merges re-fetched pages with their stored versions (see the module)."""

    def __init__(self, policy: Policy, gone_after: int = 2, plan: Callable[[], Plan] | None = None,
                 importance: bool = False, changes: bool = True, max_diff: int = 20_000) -> None:
        self.policy = policy
        # Each new, changed, gone or moved version's change goes with it to the
        # store (crawler/recrawl/diff.py); CHANGES_ENABLED, CHANGES_MAX_DIFF.
        self.changes = changes
        self.max_diff = max_diff
        self.importance = importance  # the budget weighs pages by importance_weight (REVISIT_IMPORTANCE)
        self.gone_after = max(1, gone_after)
        default = Plan(RateModel())
        self.plan: Callable[[], Plan] = plan or (lambda: default)

    def __call__(self, read: Callable[[Sequence[str]], dict[str, dict[str, Any]]],
                 batch: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The batch as it is to be written: re-fetched pages merged with what
        ``read`` (the store's ``revisit_state``) returns for them."""
        urls = [p["url"] for p in batch if p.get("revisit") and "_sitemap" not in p]
        stored = read(urls) if urls else {}
        plan = self.plan() if urls else None
        out = []
        for p in batch:
            if "_sitemap" in p:  # a sitemap's listing (crawler/sitemaps/crawl.py), not a page
                out.append(p)
            elif p.get("revisit"):
                out.append(self.merge(stored.get(p["url"]), p, plan))
            else:
                page = dict(p)
                first_visit(page, self.policy)
                self._note(page, "new", None)
                out.append(page)
        return out

    def _note(self, page: dict[str, Any], kind: str, old: dict[str, Any] | None) -> None:
        if self.changes and (kind != "new" or page.get("state") == "C"):
            page[CHANGE_KEY] = change(kind, page, old, self.max_diff)

    def merge(self, old: dict[str, Any] | None, new: dict[str, Any], plan: Plan | None = None) -> dict[str, Any]:
        page = dict(new)
        page.pop("revisit", None)
        at = float(new.get("fetched_at") or 0.0)
        if old is None or old.get("state") != "C":
            # Nothing (or no longer a page) to compare with: a first visit.
            first_visit(page, self.policy)
            page[OUTCOME_KEY] = ["fetched", "new"]
            self._note(page, "new", None)
            return page
        if old.get("fetched_at") == new.get("fetched_at"):
            # This very fetch was written already (a batch retried).
            page = {k: v for k, v in old.items() if k != "links"}
            page["links"] = None
            return page
        outcome, distance = self._outcome(old, new)
        before = visits(old.get("history"))
        visit = Visit(at, outcome, distance)
        history = append(before, visit, self.policy)
        evidence = observe(evidence_of(old), before, visit, self.policy.evidence)
        gone = int(old.get("gone_count") or 0)
        if outcome in ("gone",):
            gone += 1
        elif outcome != "error":
            gone = 0
        if outcome in ("unchanged", "gone", "error"):
            # The stored version stands; a 304's validators are the newest.
            kept = {k: old.get(k) for k in _KEPT}
            if outcome == "unchanged" and new.get("status") == 304:
                kept["etag"] = new.get("etag") or old.get("etag")
                kept["last_modified"] = new.get("last_modified") or old.get("last_modified")
            page.update(kept)
            page["state"] = "C"
            page["links"] = None  # the stored out-links stay
            page.pop("mirror_of", None)
        elif outcome == "changed":
            page["changed_at"] = at
        else:  # trivial: the new version, the page did not really change
            page["changed_at"] = old.get("changed_at")
        for name in ("topic_score", "on_topic"):
            # A re-crawl scores no topic: a focused crawl's score of the page
            # stands (as of the version that crawl stored).
            if page.get(name) is None:
                page[name] = old.get(name)
        weight = importance_weight(old.get("indegree"), old.get("mirror_degree")) if self.importance else 1.0
        rate, interval = (plan or self.plan()).schedule(evidence, self.policy, weight)
        page.update(history=[v.to_json() for v in history], evidence=evidence.to_json(), gone_count=gone,
                    change_rate=rate,
                    revisit_interval=interval, next_fetch_at=at + interval)
        if outcome == "gone" and gone >= self.gone_after:
            page.update(state="D", status=new.get("status"), next_fetch_at=None,
                        error=f"gone: HTTP {new.get('status')} on {gone} visit{'s' if gone > 1 else ''} in a row")
        elif outcome == "moved":
            page.update(state="D", next_fetch_at=None, error=f"moved permanently to {new['links'][0]['url']}")
        page[OUTCOME_KEY] = ["fetched", outcome] + (["not_modified"] if new.get("status") == 304 else [])
        if outcome == "changed":
            self._note(page, "changed", old)
        elif page.get("state") == "D" and outcome in ("gone", "moved"):
            self._note(page, outcome, old)
        return page

    def _outcome(self, old: dict[str, Any], new: dict[str, Any]) -> tuple[str, int | None]:
        status = new.get("status")
        if status == 304:
            return "unchanged", None
        if status in (404, 410):
            return "gone", None
        if status in (301, 308) and new.get("links") and new.get("state") == "C":
            return "moved", None
        if new.get("state") != "C" or status is None or not 200 <= int(status) < 300:
            return "error", None
        outcome, distance = compare(_int(old.get("simhash")), _int(new.get("simhash")),
                                    old.get("content_hash"), new.get("content_hash"), self.policy.max_distance)
        old_links = set(old.get("links") or ())
        new_links = {link["url"] for link in new.get("links") or ()}
        if outcome != "changed" and old_links != new_links:
            outcome = "changed"  # same words, other links: new pages to find
        return outcome, distance


def _int(value: Any) -> int | None:
    """A stored SimHash (a signed 64-bit integer) as the unsigned one."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value & 0xFFFF_FFFF_FFFF_FFFF
