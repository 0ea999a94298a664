"""What a crawl of the generated test site (tests/support/mockserver.py, on
127.0.0.1) fetches and stores: ``FETCHED``, every request of the default
crawl (``scrapy crawl site`` from ``/`` with ``TRAP``'s settings), and
``NOT_STORED``, the fetched paths that are not stored as pages."""

from __future__ import annotations

from collections import Counter

TRAP = {"TRAP_MAX_SHAPE_RUN": 3}

ARTICLES = [
    "/news/2024/05/first-article-on-crawling.html",
    "/news/2024/05/second-article-on-politeness.html",
    "/news/2024/06/third-article-on-frontiers.html",
    "/news/2023/12/old-article-about-robots.html",
]
CN = [f"/cn/{e}-{w}.html" for e in ("gbk", "big5", "shift_jis", "euc-jp") for w in ("header", "meta", "none")]
CALENDAR = [f"/calendar?month={m}" for m in range(-3, 4)]
# Everything the default crawl fetches (robots.txt first, /broken.html 4 times).
FETCHED = Counter(
    ["/robots.txt", "/", "/news/", "/docs/", "/cn/", "/missing.html", "/redirect/1",
     "/redirect/2", "/redirect/final.html", "/robots/", "/news/page/2/", "/docs/guide/",
     "/docs/guide/intro-to-the-crawler.html", "/docs/guide/setup-and-install.html",
     "/robots/noindex.html", "/robots/nofollow/", "/robots/header-noindex.html",
     "/robots/from-noindex.html", *ARTICLES, *CN, *CALENDAR]
    + ["/broken.html"] * 4  # RETRY_TIMES = 3
)
NOT_STORED = {"/robots.txt", "/robots/noindex.html", "/robots/header-noindex.html"}
