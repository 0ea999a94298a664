"""GC_THRESHOLD: the collector's thresholds while the engine runs, the
objects alive at its start frozen, both undone at its stop; a value that
cannot work refused before anything starts."""

from __future__ import annotations

import gc

import pytest
from scrapy import signals
from scrapy.statscollectors import StatsCollector
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.config import ConfigError, check_settings
from crawler.operations.collector import GarbageCollector, thresholds
from crawler.settings import components


def test_the_extension_is_on_by_default():
    assert components.EXTENSIONS["crawler.operations.collector.GarbageCollector"] == 40


@pytest.mark.parametrize(("value", "counts"), [
    ("100000,50,100", (100000, 50, 100)), (" 700 , 10,10", (700, 10, 10)), ([5000, 7, 9], (5000, 7, 9)),
    ("", None), (None, None),
])
def test_thresholds_read(value, counts):
    assert thresholds(value) == counts


@pytest.mark.parametrize(("value", "complaint"), [
    ("100000,50", "must be three whole numbers, as 100000,50,100"),
    ("a,b,c", "must be three whole numbers, as 100000,50,100"),
    ("1.5,2,3", "must be three whole numbers, as 100000,50,100"),
    ("0,10,10", "must be three numbers of at least 1 (0 would turn the collector off)"),
    ("10,-1,10", "must be three numbers of at least 1 (0 would turn the collector off)"),
])
def test_a_bad_value_is_refused(value, complaint):
    settings = Settings()
    settings.setmodule("crawler.settings")
    settings.set("GC_THRESHOLD", value)
    with pytest.raises(ConfigError) as caught:
        check_settings(settings)
    assert str(caught.value) == f"bad setting: GC_THRESHOLD={value!r} {complaint}"


def test_set_while_the_engine_runs_and_undone_after():
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    assert frozen == 0
    crawler = get_crawler(settings_dict={"GC_THRESHOLD": "5000,7,9"})
    ext = GarbageCollector.from_crawler(crawler)
    kept = object()  # alive at the start: frozen with the rest
    try:
        crawler.signals.send_catch_log(signals.engine_started)
        assert gc.get_threshold() == (5000, 7, 9)
        assert gc.get_freeze_count() > 1000
        crawler.signals.send_catch_log(signals.engine_started)  # once only
        assert gc.get_threshold() == (5000, 7, 9)
    finally:
        crawler.signals.send_catch_log(signals.engine_stopped)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert ext.before is None and kept is not None


def test_empty_keeps_pythons_own_and_still_counts():
    before = gc.get_threshold()
    crawler = get_crawler(settings_dict={"GC_THRESHOLD": ""})
    crawler.stats = StatsCollector(crawler)
    ext = GarbageCollector.from_crawler(crawler)
    try:
        crawler.signals.send_catch_log(signals.engine_started)
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
        gc.collect(0)
        gc.collect(1)
        crawler.signals.send_catch_log(signals.spider_closed)
    finally:
        crawler.signals.send_catch_log(signals.engine_stopped)
    assert crawler.stats.get_value("gc/collections") >= 2  # two asked for, perhaps one of Python's own
    assert 0 <= crawler.stats.get_value("gc/cpu_seconds") < 5
    assert ext._count not in gc.callbacks
    gc.collect(0)
    assert ext.collections == crawler.stats.get_value("gc/collections")  # no longer counting
