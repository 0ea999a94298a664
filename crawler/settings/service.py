# The crawler as a service: its HTTP API, the changes it records and the
# events it posts. Settings of crawler.settings, kept in a file of their own.

# --- The HTTP API (scrapy serve, crawler/api/, docs/api.md) ------------------

# API keys, one a line ('#' comments), in a file readable by its owner only;
# more in the environment variable CRAWLER_API_KEYS (comma-separated).
API_KEYS_FILE = None
API_KEY_REQUESTS_PER_MINUTE = 300  # requests a key may make a minute, cluster-wide (0: no limit)
API_KEY_CRAWLS = 2  # crawls and batch scrapes a key may have running at once
API_CRAWL_LIMIT = 10_000  # pages a crawl takes when it names no limit, and the most it may name
API_CRAWL_PROCESSES = 1  # worker processes the server starts for each crawl or batch scrape
API_PAGE_RESULTS = 100  # documents a page of a job's results holds
API_RESULTS_TTL = 86_400.0  # seconds a finished job's results are kept, then purged
API_RESTARTS = 3  # times a job's worker that died with work left is started again
API_SCRAPE_TIMEOUT = 60.0  # seconds a scrape or a map may take unless it asks for less
API_MAP_PAGES = 20  # pages a map fetches for their links, besides reading the sitemaps

# --- Changes (crawler/recrawl/diff.py, scrapy changes, docs/recrawl.md) -------
# Each new, changed, gone or moved version of a page is recorded in the store's
# changes table: the main text's added and removed blocks and a unified diff of
# its Markdown, cut at CHANGES_MAX_DIFF characters.
CHANGES_ENABLED = True
CHANGES_MAX_DIFF = 20_000

# --- Webhooks (crawler/webhooks/, docs/api.md) -----------------------------------
# Events of the crawl (started, each page stored, changed or gone, completed)
# posted to this URL, signed with the secret of WEBHOOK_SECRET_FILE (a file
# readable by its owner only) or of the environment variable
# CRAWLER_WEBHOOK_SECRET; kept in Redis until the receiver takes them.
WEBHOOK_URL = None
WEBHOOK_SECRET_FILE = None
WEBHOOK_EVENTS = None  # "pages" or "batch": page events only, posted by scrapy serve
WEBHOOK_TIMEOUT = 10.0  # seconds a receiver may take to answer a post
WEBHOOK_RETRY_MIN = 1.0  # seconds before a failed post is tried again, doubling ...
WEBHOOK_RETRY_MAX = 300.0  # ... up to this
WEBHOOK_FLUSH_TIMEOUT = 10.0  # seconds a worker that ends waits for its events to go

# --- Pages waiting for the store (crawler/frontier/scheduler.py) ----------------
# Most pages a worker holds downloaded and processed but not yet stored (the
# store slow or away) before it leases nothing more; 0: two STORE_BATCH_SIZEs
# (one being written, the next filling). Their leases are acknowledged only
# once stored: a worker that dies loses them to a second fetch, so the fewer
# the better, as long as the store's batches fill.
FRONTIER_MAX_UNSTORED = 0
