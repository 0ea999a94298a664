"""Duplicates and variants: fingerprints (exact hash, SimHash, resemblance sketch), the page check against the cluster's duplicate index, canonical links and language variants."""
