"""A worker's start waits for Redis instead of closing (crawler/redis/waiting.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis

from crawler.redis.waiting import until_answered


def test_a_call_redis_fails_is_run_again_until_it_answers_and_said_once(caplog):
    calls: list[int] = []
    pauses: list[int] = []

    def settle() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise redis.exceptions.ClusterDownError("The cluster is down")
        return "index"

    async def pause() -> None:
        pauses.append(1)

    with caplog.at_level(logging.INFO, logger="crawler.redis.waiting"):
        assert asyncio.run(until_answered(settle, "the crawl's choices", pause=pause)) == "index"
    assert (len(calls), len(pauses)) == (3, 2)
    assert [r.getMessage() for r in caplog.records] == [
        "Redis unavailable while reading the crawl's choices (The cluster is down); waiting for it",
        "Redis is back: the crawl's choices read after 3 tries"]


def test_another_error_is_not_waited_for():
    def broken() -> None:
        raise ValueError("a bug, not an outage")

    async def pause() -> None:
        raise AssertionError("not to wait")

    with pytest.raises(ValueError):
        asyncio.run(until_answered(broken, "x", pause=pause))
