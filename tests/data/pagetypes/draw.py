"""Draw this sample from the full labelled set (see README.md here).

    python -m tests.data.pagetypes.draw /path/to/the/full/pagetypes

Keeps only pages the shipped classifier never saw (the held-out part of the
full set's labels.jsonl, split by tools.pagetypes.measure.held_out's file-name hash):
every held-out index page and as many held-out info pages, drawn with a fixed
seed. Files are copied byte for byte; labels.jsonl keeps the source's lines.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

from tests.data.pagetypes import SAMPLE as HERE
from tools.pagetypes.measure import held_out

SEED = 20261122


def main() -> None:
    source = Path(sys.argv[1])
    lines = (source / "labels.jsonl").read_text().splitlines()
    rows = [(line, json.loads(line)) for line in lines]
    rows = [(line, r) for line, r in rows if held_out(r["file"])]
    index = [(line, r) for line, r in rows if r["label"] == "index"]
    info = [(line, r) for line, r in rows if r["label"] == "info"]
    chosen = {r["file"] for _, r in index + random.Random(SEED).sample(info, len(index))}
    keep = [line for line, r in rows if r["file"] in chosen]  # the source's order
    for old in HERE.glob("*.html.gz"):
        old.unlink()
    for file in sorted(chosen):
        shutil.copyfile(source / file, HERE / file)
    (HERE / "labels.jsonl").write_text("\n".join(keep) + "\n")
    print(f"{len(keep)} pages: {len(index)} index, {len(keep) - len(index)} info")


if __name__ == "__main__":
    main()
