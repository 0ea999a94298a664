"""The labelled sample of real pages the tests read (README.md here says
where it comes from and how it was drawn)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).resolve().parent


def labels() -> list[dict[str, Any]]:
    """One row a page: ``file``, ``url``, ``label`` (index/info), ``wcxb_type``."""
    return [json.loads(line) for line in (SAMPLE / "labels.jsonl").read_text().splitlines()]


def body(row: dict[str, Any]) -> bytes:
    """The page's HTML as it was captured."""
    return gzip.decompress((SAMPLE / row["file"]).read_bytes())
