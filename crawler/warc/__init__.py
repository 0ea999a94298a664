"""WARC output (``-s WARC_DIR=DIR``): every fetch archived as WARC/1.1.

- ``records.py``  a fetch's records, built with warcio (pure)
- ``files.py``    a worker's files: names, rotation, ``.open`` and salvage
- ``digests.py``  the cluster's archived payloads (revisits of exact copies)
- ``writer.py``   the writer thread
- ``service.py``  the Scrapy side: extension, downloader middleware, pipeline
- ``cdxj.py``     the crawl's CDXJ index (``scrapy export --cdxj``)

docs/warc.md says what is written and how to replay it.
"""
