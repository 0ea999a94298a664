"""The frontier's request fingerprinter (crawler/frontier/fingerprinter.py):
exactly the bytes the scheduler computed itself before (digests below were
computed the old way: sha1 of the sitemap or revisit key, else Scrapy's
``scrapy.utils.request.fingerprint``), so a crawl started before the change
dedups the same URLs after it."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.utils.test import get_crawler

from crawler import settings as project_settings
from crawler.frontier.fingerprinter import FrontierFingerprinter

URL = "http://a.test/p.html"


@pytest.mark.parametrize("request_, digest", [
    # A sitemap fetch: sha1("sitemap\0<url>"), apart from the page of the URL.
    (Request("http://a.test/sitemap.xml", meta={"sitemap": 0}), "842b39fb5f27944f8451f84ce63f9647821735da"),
    (Request("http://a.test/sitemap.xml", meta={"sitemap": 2, "revisit": 1700000000}),
     "842b39fb5f27944f8451f84ce63f9647821735da"),
    # A re-crawl's GET: sha1("revisit\0<due>\0<url>"); its HEAD adds the method.
    (Request(URL, meta={"revisit": 1700000000}), "81ade5832bd9ca05d4c444323a53eaf010ea2599"),
    (Request(URL, method="HEAD", meta={"revisit": 1700000000}), "371d2f79e038ed4730427e327d42c76614bb5f63"),
    # Everything else: Scrapy's default (a due time that is no int is none).
    (Request(URL), "6907756687456ebfdd973a9f6b88cb9679315103"),
    (Request(URL, meta={"revisit": True}), "6907756687456ebfdd973a9f6b88cb9679315103"),
    (Request(URL, meta={"revisit": "1700000000", "depth": 3}), "6907756687456ebfdd973a9f6b88cb9679315103"),
    (Request(URL, method="HEAD"), "2f66cd501d8ac67542d5c4ed74f6630d56071fee"),
    (Request("http://a.test/p.html?b=2&a=1"), "1160bbad4fb43556bcbe35f6473b764c0e0e18a9"),
])
def test_the_same_bytes_as_the_scheduler_computed(request_, digest):
    assert FrontierFingerprinter().fingerprint(request_).hex() == digest


def test_the_project_settings_make_it_the_crawlers_fingerprinter():
    assert project_settings.REQUEST_FINGERPRINTER_CLASS == "crawler.frontier.fingerprinter.FrontierFingerprinter"
    crawler = get_crawler(settings_dict={"REQUEST_FINGERPRINTER_CLASS": project_settings.REQUEST_FINGERPRINTER_CLASS})
    assert type(crawler.request_fingerprinter) is FrontierFingerprinter
    assert crawler.request_fingerprinter.fingerprint(Request(URL, meta={"revisit": 1700000000})).hex() == \
        "81ade5832bd9ca05d4c444323a53eaf010ea2599"
