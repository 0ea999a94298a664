"""Project commands (``scrapy status``, ``seed``, ``stop``, ``graph``) arrive
with the frontier and topology changes."""
