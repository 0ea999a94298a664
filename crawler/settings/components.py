"""The components Scrapy loads for this crawler, by dotted path and place:
extensions, spider and downloader middlewares, item pipelines, the steps of
a page's chain and the feed exporters. ``crawler/settings.py`` (the settings
module Scrapy reads, ``SCRAPY_SETTINGS_MODULE``) imports every name here, so
``scrapy settings --get EXTENSIONS`` and ``-s`` overrides work as for any
setting; the values an operator tunes are there, each with its default and
what it does."""

from scrapy.settings import default_settings as _scrapy_defaults

EXTENSIONS = {
    # Checks every setting before anything starts (crawler/config.py).
    "crawler.config.SettingsCheck": 0,
    # The frontier: the Redis client, the lease book, the heartbeat
    # (crawler/frontier/service.py). Required.
    "crawler.frontier.service.FrontierService": 10,
    # Progress lines in the log (PROGRESS_INTERVAL) and Prometheus metrics
    # (PROMETHEUS_PORT): crawler/operations/progress.py.
    "crawler.operations.progress.Progress": 20,
    # WARC output (WARC_DIR): the writer thread (crawler/warc/service.py).
    "crawler.warc.service.WarcService": 30,
    # Python's garbage collector run less often (GC_THRESHOLD):
    # crawler/operations/collector.py.
    "crawler.operations.collector.GarbageCollector": 40,
    # Events posted to WEBHOOK_URL: crawler/webhooks/extension.py.
    "crawler.webhooks.extension.Webhooks": 50,
}
# Scrapy's own extensions but the remote control and the telnet console (see
# REMOTE_CONTROL_ENABLED above): out of the base list rather than set to None
# in EXTENSIONS, where Scrapy would still import them to read the key.
# Scrapy's CloseSpider is ours (crawler/operations/pagecount.py): CLOSESPIDER_PAGECOUNT
# counts pages stored, exactly, not responses.
EXTENSIONS_BASE = {"crawler.operations.pagecount.CloseSpider" if k == "scrapy.extensions.closespider.CloseSpider" else k: v
                   for k, v in _scrapy_defaults.EXTENSIONS_BASE.items()
                   if k not in ("scrapy.extensions.remote_control.RemoteControl",
                                "scrapy.extensions.telnet.TelnetConsole")}
SPIDER_MIDDLEWARES = {
    # The spider keeps depth itself (DEPTH_LIMIT as usual): a redirect it
    # follows through the frontier is not one more level.
    "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
    "crawler.middlewares.TrapGuardMiddleware": 850,
}
# The spider yields retries of pages the browser failed (get_retry_request,
# crawler/render/service.py): their retry_times is the count, on purpose.
META_COPY_WARN_SKIP_KEYS = ["retry_times"]
DOWNLOADER_MIDDLEWARES = {
    # Before robots.txt handling (90, 100), whose own requests pass through it
    # too; after Scrapy's OffsiteMiddleware (50), which drops requests without
    # a DNS lookup.
    "crawler.network.guard.NetworkGuardMiddleware": 80,
    "crawler.middlewares.RobotsTxtGuardMiddleware": 90,
    # robots.txt shared by the cluster, with Crawl-delay, instead of Scrapy's.
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "crawler.frontier.robots.ClusterRobotsTxtMiddleware": 100,
    # Sees 429/503/timeouts before RetryMiddleware (550) turns them into retries.
    "crawler.middlewares.SiteBackoffMiddleware": 560,
    # -a sites: a site's headers, cookies and login (crawler/sessions/), before
    # the proxies and the WARC writer see the request.
    "crawler.sessions.middleware.SessionMiddleware": 700,
    # PROXY_LIST: each site's proxy, set before HttpProxyMiddleware (750) reads
    # it; sees each outcome before RetryMiddleware (550).
    "crawler.network.proxies.ProxyPoolMiddleware": 740,
    # Last before the download handler: the gap between two requests to a
    # site, at the wire, for the whole cluster.
    "crawler.middlewares.SendSpacingMiddleware": 950,
    # WARC output: every fetch as it came, before HttpCompressionMiddleware
    # (590) decodes it, after every middleware that sets request headers.
    "crawler.warc.service.WarcMiddleware": 900,
}
ITEM_PIPELINES = {
    # A page is stored once its WARC record is written (WARC_DIR).
    "crawler.warc.service.WarcPipeline": 790,
    "crawler.pipelines.StorePipeline": 800,
}

# --- A page's chain of steps (crawler/chain/) ---------------------------------------
# Every response passes through these steps in order (lowest first), as items
# pass through ITEM_PIPELINES. Add a step of your own in PAGE_STEPS (a class
# path and its place: 950 runs after the page is typed, before it is stored);
# a base step set to None there is taken out. docs/crawling.md, "Your own steps".
PAGE_STEPS: dict[str, int | None] = {}
PAGE_STEPS_BASE = {
    "crawler.chain.visit.Visit": 100,  # a re-crawl's 304; the URL marked fetched
    "crawler.chain.redirect.Redirect": 200,  # 3xx: the hop, and the source stored
    "crawler.chain.decode.Decode": 300,  # PDF, HTML or another document; HTML to text
    "crawler.chain.parse.Parse": 400,  # the tree and its analysis (crawler/reading/extract.py)
    "crawler.chain.render.Render": 500,  # -a render: the DOM after scripts
    "crawler.chain.blocked.Blocked": 550,  # a bot wall (access denied, captcha): retried, not stored
    "crawler.chain.read.Read": 600,  # text, links, head onto the record (a PDF's too)
    "crawler.chain.content.Content": 610,  # the main content: text and Markdown
    "crawler.chain.metadata.Metadata": 620,  # JSON-LD, microdata, RDFa, OpenGraph onto the record
    "crawler.chain.focus.Focus": 650,  # -a topic: the page's topic score
    "crawler.chain.check.Check": 700,  # duplicate + template count, one round trip
    "crawler.chain.kind.Kind": 750,  # article, forum, product, collection, listing, documentation ...
    "crawler.chain.classify.Classify": 800,  # index or information page
    "crawler.chain.variants.Variants": 900,  # canonical copy? language?
    "crawler.chain.store.Store": 1000,  # yielded to the pipelines; first pages typed again
    "crawler.chain.follow.Follow": 1100,  # links to the frontier
}

FEED_EXPORT_ENCODING = "utf-8"
# Feed exports (-o/-O, FEEDS) of each format Scrapy ships: each page once,
# final, with the fields `scrapy export` writes (crawler/operations/feeds.py).
FEED_EXPORTERS = {
    "json": "crawler.operations.feeds.JsonPageExporter",
    "jsonlines": "crawler.operations.feeds.JsonLinesPageExporter",
    "jsonl": "crawler.operations.feeds.JsonLinesPageExporter",
    "jl": "crawler.operations.feeds.JsonLinesPageExporter",
    "csv": "crawler.operations.feeds.CsvPageExporter",
    "xml": "crawler.operations.feeds.XmlPageExporter",
    "marshal": "crawler.operations.feeds.MarshalPageExporter",
    "pickle": "crawler.operations.feeds.PicklePageExporter",
}
