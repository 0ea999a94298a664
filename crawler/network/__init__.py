"""Network policy: which addresses the crawler may connect to, enforced at DNS and at request time."""
