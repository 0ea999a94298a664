"""Per-site sessions: -a sites=sites.yaml (config.py, middleware.py)."""
