"""A page's language: what its markup declares, checked against its text.
Pure logic, no Scrapy (``crawler/duplicates/variants.py`` applies it in a crawl).

- **Declared**: ``<html lang>`` (or ``xml:lang``), else ``<meta
  http-equiv="Content-Language">``, else the ``Content-Language`` header,
  read as its primary subtag (``en-GB`` -> ``en``; ``zh-Hant`` -> ``zh``).
- **Checked**: the text is identified with ``py3langid`` (a maintained
  fork of langid.py, its model in the wheel, about 0.1 ms a page; the
  identifier focused crawling uses). The declaration stands unless the
  identifier, on at least ``MIN_CHECK_CHARS`` of text, names another
  language with confidence ``OVERRULE_CONFIDENCE`` or more: templates copied
  from one language's site to another's keep ``lang="en"``, while code,
  tables and short pages leave the identifier unsure (a page of SQL
  examples scores 0.25 for English). A page that declares nothing takes
  the identified language when the identifier is at least
  ``GUESS_CONFIDENCE`` sure on ``MIN_GUESS_CHARS`` or more, else none.
- **Trusted sites**: once a site's first ``TRUST_AFTER`` declared pages
  all stood the check, its declarations are trusted and only every
  ``SPOT_CHECK``-th is checked (a check that fails makes the site checked
  again page by page): identification was 19 % of a crawl's CPU when every
  page was checked (bench/profile_crawl.py on the PostgreSQL manual).
- **Sites identified alike**: a site that declares nothing and whose first
  ``TRUST_AFTER`` pages were all identified as one language gives its next
  pages that language ("site"), one in ``SPOT_CHECK`` identified again
  (``IdentificationTrust``). A page of fewer than ``MIN_GUESS_CHARS``
  characters is "unknown" as before.
- **The model** is loaded on the first page that needs it, from its arrays
  decompressed once a machine (``_from_cache``: 0.09 s a worker instead of
  0.85 s).
- **Alternates**: ``<link rel="alternate" hreflang="de" href>`` and the
  same in HTTP ``Link`` headers: language tag (as written, lowercased;
  ``x-default`` kept) -> URL, at most ``MAX_ALTERNATES``.
"""

from __future__ import annotations

import io
import logging
import os
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from py3langid.langid import LanguageIdentifier

__all__ = ["DeclarationTrust", "GUESS_CONFIDENCE", "IdentificationTrust", "MAX_ALTERNATES", "OVERRULE_CONFIDENCE", "identifier", "identify", "link_header_alternates",
           "page_language", "parse_languages", "primary", "tag", "warm_up"]

SAMPLE_CHARS = 600  # 0.23 ms a page; 3,000 took 1.05 ms and decided no differently on 200 manual pages
MIN_GUESS_CHARS = 40
MIN_CHECK_CHARS = 200
OVERRULE_CONFIDENCE = 0.99
GUESS_CONFIDENCE = 0.9
MAX_ALTERNATES = 100
TRUST_AFTER = 20
SPOT_CHECK = 16

logger = logging.getLogger(__name__)

_PRIMARY = re.compile(r"[a-z]{2,3}")
_TAG = re.compile(r"(?:[a-z]{2,3}(?:-[a-z0-9]{1,8})*|x-default)")
_LINK = re.compile(r'<([^>]*)>\s*((?:;\s*[a-zA-Z*-]+\s*=\s*(?:"[^"]*"|[^;,]*)\s*)*)')
_PARAM = re.compile(r';\s*([a-zA-Z*-]+)\s*=\s*("[^"]*"|[^;,]*)')


def tag(value: str | None) -> str | None:
    """A language tag as written (``en-GB``), lowercased, if it is one
    (``x-default`` too); else None."""
    text = (value or "").strip().replace("_", "-").lower()
    return text if len(text) <= 35 and _TAG.fullmatch(text) else None


def primary(value: str | None) -> str | None:
    """The primary language subtag of a tag (``en-GB`` -> ``en``); None for
    no tag, ``x-default``, or ``mul``/``und``/``zxx`` (no one language)."""
    t = tag((value or "").split(",")[0])
    if t is None or t == "x-default":
        return None
    first = t.split("-", 1)[0]
    return first if _PRIMARY.fullmatch(first) and first not in ("mul", "und", "zxx", "mis") else None


def parse_languages(value: str) -> tuple[str, ...]:
    """``-a languages=en,de``: the primary subtags, sorted; ``ValueError``
    naming an entry that is not one."""
    out = set()
    for part in value.split(","):
        if not part.strip():
            continue
        p = primary(part)
        if p is None or p != part.strip().lower():
            raise ValueError(f"{part.strip()!r} is not a language code (ISO 639: en, de, zh, ...)")
        out.add(p)
    return tuple(sorted(out))


_LOADING = threading.Lock()


@lru_cache(maxsize=1)
def _load() -> LanguageIdentifier:
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    global loaded_from
    try:
        model = _from_cache(MODEL_DIR / MODEL_FILE)
        loaded_from = "cache"
    except Exception as exc:  # a py3langid of another layout, a cache that cannot be written: its own load
        logger.debug("py3langid's model not cached (%s); decompressing it", exc)
        model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        loaded_from = "package"
    return model


loaded_from = ""  # where the model came from: "cache" or "package" (py3langid's own load)
_ARRAYS = ("ptc", "pc", "classes", "nextmove", "nextmove_row", "out_feat")


def _from_cache(model: Path) -> LanguageIdentifier:
    """py3langid's model from its arrays decompressed once a machine into
    ``$XDG_CACHE_HOME/site-crawler`` (0.75 of the model's 0.85 s load is
    decompressing its 4.6 MB of LZMA into 68 MB of arrays; a worker reads
    them in about 0.09 s)."""
    import numpy as np
    from py3langid import modelio
    from py3langid.langid import LanguageIdentifier

    stat = model.stat()
    version = _py3langid_version()
    cache = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "site-crawler"
             / f"py3langid-{version}-{stat.st_size}-{stat.st_mtime_ns}")
    if not (cache / "done").exists():
        _write_cache(model, cache)
    arrays = {name: np.load(cache / f"{name}.npy", allow_pickle=False) for name in _ARRAYS}
    to_array = modelio._to_array  # noqa: SLF001 - py3langid's own conversion, as its load_model does it
    return LanguageIdentifier(np.asarray(arrays["ptc"]), np.asarray(arrays["pc"]), arrays["classes"].tolist(),
                              to_array(arrays["nextmove"]), arrays["out_feat"].tolist(), norm_probs=True,
                              tk_row=to_array(arrays["nextmove_row"]))


def _write_cache(model: Path, cache: Path) -> None:
    import lzma
    import tempfile

    import numpy as np

    cache.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=cache.name + ".", dir=cache.parent))
    try:
        with lzma.open(model) as raw, np.load(io.BytesIO(raw.read()), allow_pickle=False) as data:
            if not set(_ARRAYS) <= set(data.files):
                raise ValueError(f"unknown model layout: {sorted(data.files)}")
            for name in _ARRAYS:
                np.save(work / f"{name}.npy", data[name], allow_pickle=False)
        (work / "done").touch()
        try:
            work.rename(cache)  # atomic: another worker's cache, made at the same time, wins alike
        except OSError:
            if not (cache / "done").exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _py3langid_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("py3langid")
    except PackageNotFoundError:
        return "unknown"


def identifier() -> LanguageIdentifier:
    """The model, loaded once a process (about 0.5 s); a caller that comes
    while ``warm_up``'s thread loads it waits for that load."""
    with _LOADING:
        return _load()


def warm_up() -> None:
    """Load the model in a thread of its own while the crawl starts
    (Redis, robots.txt), so that a worker's first page is not half a
    second slower than the rest: with several workers on one site, the
    worker that did not fetch a page could lease the site's next URL
    while the first page, loading the model, had not yet queued its links."""
    threading.Thread(target=identifier, name="language-model", daemon=True).start()


def identify(text: str) -> tuple[str, float] | None:
    """The language of ``text`` and the identifier's confidence (None for
    fewer than ``MIN_GUESS_CHARS`` characters)."""
    sample = text[:SAMPLE_CHARS]
    if len(sample.strip()) < MIN_GUESS_CHARS:
        return None
    lang, confidence = identifier().classify(sample)
    return str(lang), float(confidence)


class DeclarationTrust:
    """Which sites' declared languages have stood the check (see the
    module); bounded to ``max_sites`` sites, the least recent forgotten."""

    def __init__(self, max_sites: int = 10_000) -> None:
        self.max_sites = max_sites
        self._sites: OrderedDict[str, list[int]] = OrderedDict()  # site -> [checked, trusted (0/1), since spot]

    def should_check(self, site: str) -> bool:
        state = self._sites.get(site)
        if state is None or not state[1]:
            return True
        state[2] += 1
        return state[2] % SPOT_CHECK == 0

    def record(self, site: str, stood: bool) -> None:
        state = self._sites.get(site)
        if state is None:
            state = self._sites[site] = [0, 0, 0]
            if len(self._sites) > self.max_sites:
                self._sites.popitem(last=False)
        else:
            self._sites.move_to_end(site)
        if not stood:
            state[0], state[1] = 0, 0
            return
        state[0] += 1
        if state[0] >= TRUST_AFTER:
            state[1] = 1


class IdentificationTrust:
    """Which sites that declare no language have had each page identified
    as one language: after ``TRUST_AFTER`` pages identified alike (and
    none as another), the site's next pages take that language (how
    "site") and only every ``SPOT_CHECK``-th is identified; a page
    identified as another language makes the site identified page by page
    again. Bounded to ``max_sites`` sites, the least recent forgotten.
    (The PostgreSQL manual declares nothing: identifying each of its pages
    was 0.75 ms of a page's 11 ms.)"""

    def __init__(self, max_sites: int = 10_000) -> None:
        self.max_sites = max_sites
        self._sites: OrderedDict[str, list[object]] = OrderedDict()  # site -> [streak, language, since spot]

    def language(self, site: str) -> str | None:
        """The site's language when trusted and this page is not a spot
        check; else None (identify the page)."""
        state = self._sites.get(site)
        if state is None or cast(int, state[0]) < TRUST_AFTER:
            return None
        state[2] = cast(int, state[2]) + 1
        return None if cast(int, state[2]) % SPOT_CHECK == 0 else cast(str, state[1])

    def record(self, site: str, lang: str) -> None:
        """A page of ``site`` identified as ``lang``."""
        state = self._sites.get(site)
        if state is None:
            self._sites[site] = [1, lang, 0]
            if len(self._sites) > self.max_sites:
                self._sites.popitem(last=False)
            return
        self._sites.move_to_end(site)
        if state[1] == lang:
            state[0] = cast(int, state[0]) + 1
        else:
            state[0], state[1], state[2] = 1, lang, 0


def page_language(declared: str | None, text: str, check: bool = True) -> tuple[str | None, str]:
    """The page's language (a primary subtag, or None) and how it was
    settled: "declared" (checked, or not when ``check`` is false: its
    site's declarations are trusted), "overruled" (the text says
    otherwise), "identified" (nothing declared) or "unknown"."""
    said = primary(declared)
    if said is not None and not check:
        return said, "declared"
    found = identify(text)
    if said is not None:
        if (found is not None and found[0] != said and found[1] >= OVERRULE_CONFIDENCE
                and len(text.strip()) >= MIN_CHECK_CHARS):
            return found[0], "overruled"
        return said, "declared"
    if found is not None and found[1] >= GUESS_CONFIDENCE:
        return found[0], "identified"
    return None, "unknown"


def link_header_alternates(values: Iterable[str]) -> list[tuple[str, str]]:
    """(hreflang, target as written) of the ``rel="alternate"`` links with an
    ``hreflang`` in HTTP ``Link`` header values (RFC 8288)."""
    out: list[tuple[str, str]] = []
    for value in values:
        for m in _LINK.finditer(value[:20_000]):
            params = {k.lower(): v.strip().strip('"') for k, v in _PARAM.findall(m.group(2))}
            rels = params.get("rel", "").lower().split()
            lang = tag(params.get("hreflang"))
            if "alternate" in rels and lang is not None and m.group(1).strip():
                out.append((lang, m.group(1).strip()))
                if len(out) >= MAX_ALTERNATES:
                    return out
    return out
