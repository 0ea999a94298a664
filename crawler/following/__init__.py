"""Following links: the follow policy, a focused crawl's topic and link priorities, importance order."""
