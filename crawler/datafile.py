"""Small files a user writes for a crawl (a topic, URL rules): JSON, or
YAML by the suffix ``.yaml``/``.yml``, read with errors that say where.
Pure logic, no Scrapy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["DataFileError", "read_data_file"]


class DataFileError(ValueError):
    """The file cannot be read or does not parse; the message names it and,
    for YAML, the line and column."""


def read_data_file(path: str | Path, what: str) -> Any:
    """The data in the JSON or YAML file ``path`` (``what``: "topic file",
    "rules file", for the message)."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise DataFileError(f"{what} {str(path)!r}: cannot read it ({exc})") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            # Where PyYAML was (its context: "while scanning a simple key")
            # and where it failed, each with its line and column.
            parts = []
            for context, mark in ((getattr(exc, "context", None), getattr(exc, "context_mark", None)),
                                  (getattr(exc, "problem", None), getattr(exc, "problem_mark", None))):
                if context and mark is not None:
                    parts.append(f"line {mark.line + 1}, column {mark.column + 1}: {context}")
            detail = "; ".join(parts) or str(exc).splitlines()[0]
            raise DataFileError(f"{what} {str(path)!r}: not valid YAML ({detail})") from None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise DataFileError(f"{what} {str(path)!r}: not valid JSON ({exc})") from None
