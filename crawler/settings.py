# Every default of the crawler, in one place. Scrapy's own settings keep their
# meaning; ours are prefixed by area (FRONTIER_, CLASSIFIER_, STORE_, TRAP_ ...).
# docs/reference.md describes each one; override any with -s NAME=VALUE.

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
COMMANDS_MODULE = "crawler.commands"

# --- Identity and politeness -------------------------------------------------
# Crawl responsibly: say who you are and where to complain. Replace the URL
# with a page that names the operator before crawling other people's sites.
USER_AGENT = "site-crawler/0.1 (+https://example.invalid/crawler-contact)"
ROBOTSTXT_OBEY = True
# robots.txt gets a short timeout and one retry: a robots.txt that stalls or
# fails must not hold the site's requests for DOWNLOAD_TIMEOUT x retries.
# When it cannot be had (timeout, network error, 5xx) the site is crawled as
# if it had none, and robotstxt/unavailable is counted.
ROBOTSTXT_DOWNLOAD_TIMEOUT = 10
ROBOTSTXT_MAX_RETRY_TIMES = 1
# One request at a time per site, one second apart (Scrapy's project template).
DOWNLOAD_DELAY = 1.0
CONCURRENT_REQUESTS_PER_DOMAIN = 1
CONCURRENT_REQUESTS = 16
# Cookies turn some sites into endless session-id URLs and a crawler does not
# need them to read public pages.
COOKIES_ENABLED = False

# --- Safety --------------------------------------------------------------------
# Scrapy 2.19 otherwise starts, in every crawl, an HTTP endpoint on localhost
# that runs Python code sent to it.
REMOTE_CONTROL_ENABLED = False
TELNETCONSOLE_ENABLED = False
# Huge or endless responses are cut off: pages over 16 MiB are dropped (and
# recorded as errors), a stalled server times out after 30 s.
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024
DOWNLOAD_TIMEOUT = 30
REDIRECT_MAX_TIMES = 10
URLLENGTH_LIMIT = 2083

# --- Order: breadth-first --------------------------------------------------------
DEPTH_LIMIT = 0  # 0 = no limit; the per-site cap and the trap guard bound a crawl
DEPTH_PRIORITY = 1
SCHEDULER_DISK_QUEUE = "scrapy.squeues.PickleFifoDiskQueue"
SCHEDULER_MEMORY_QUEUE = "scrapy.squeues.FifoMemoryQueue"

# --- Crawl identity and files ----------------------------------------------------
CRAWL_NAME = None  # default: the spider's name
CRAWL_DIR = None  # default: .scrapy/crawl inside the project
# Keep the scheduler's queue and seen-set under CRAWL_DIR (Scrapy's JOBDIR) so
# that Ctrl-C and the same command again resumes the crawl. An explicit
# JOBDIR wins.
FRONTIER_RESUME = True

# --- Scope and caps ---------------------------------------------------------------
FRONTIER_MAX_PAGES_PER_SITE = 100_000  # URLs scheduled per site; 0 = no cap
# Spider-trap guard (crawler.middlewares.TrapGuardMiddleware): a chain of links
# between URLs of the same shape (same path with digits masked, same query
# keys: calendars, endless "next" pages) is cut after this many steps ...
TRAP_MAX_SHAPE_RUN = 30
# ... and a path repeating one segment this many times (/a/b/a/b/a/b) is dropped.
TRAP_MAX_REPEATED_SEGMENT = 3

# --- Classifier ---------------------------------------------------------------------
# Score (0..1) from which a page counts as an index page; None = the trained
# model's own threshold (chosen for high index recall).
CLASSIFIER_THRESHOLD = None

# --- Store -------------------------------------------------------------------------------
STORE_PATH = None  # default: <CRAWL_DIR>/<CRAWL_NAME>.sqlite3
STORE_BATCH_SIZE = 100  # pages per transaction
STORE_FLUSH_INTERVAL = 1.0  # seconds; a partial batch is written after this long
# Stored main text is cut at this many characters (the page itself is capped
# by DOWNLOAD_MAXSIZE).
STORE_MAX_TEXT_CHARS = 1_000_000

SPIDER_MIDDLEWARES = {
    "crawler.middlewares.TrapGuardMiddleware": 850,
}
DOWNLOADER_MIDDLEWARES = {
    "crawler.middlewares.RobotsTxtGuardMiddleware": 90,
}
ITEM_PIPELINES = {
    "crawler.pipelines.StorePipeline": 800,
}

FEED_EXPORT_ENCODING = "utf-8"
LOG_LEVEL = "INFO"
