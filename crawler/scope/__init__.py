"""URLs and scope: the crawler's URL normal form, URL rules, traps, seeds."""
