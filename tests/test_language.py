"""A page's language and alternates (crawler/reading/language.py, the head reader)."""

from __future__ import annotations

import pytest

from crawler.reading.extract import analyze
from crawler.reading.language import link_header_alternates, page_language, parse_languages, primary, tag

EN = ("The harbour was quiet in the early morning, and the fishermen were mending their nets while the gulls "
      "circled above the boats. Later in the day the market opened and people from the villages came to buy "
      "bread, cheese and fresh vegetables from the farms along the river.")
DE = ("Der Hafen war am frühen Morgen still, und die Fischer flickten ihre Netze, während die Möwen über den "
      "Booten kreisten. Später am Tag öffnete der Markt, und die Leute aus den Dörfern kamen, um Brot, Käse und "
      "frisches Gemüse von den Höfen entlang des Flusses zu kaufen.")
FR = ("Le port était calme tôt le matin, et les pêcheurs réparaient leurs filets pendant que les mouettes "
      "tournaient au-dessus des bateaux. Plus tard dans la journée, le marché ouvrait et les gens des villages "
      "venaient acheter du pain, du fromage et des légumes frais des fermes le long de la rivière.")
SQL = "SELECT id, name FROM t WHERE id = 1; INSERT INTO t VALUES (2, 'x'); CREATE INDEX i ON t (name); " * 4


@pytest.mark.parametrize("value, t, p", [
    ("en-GB", "en-gb", "en"), ("zh_Hant", "zh-hant", "zh"), (" DE ", "de", "de"), ("x-default", "x-default", None),
    ("und", "und", None), ("english", None, None), ("", None, None), (None, None, None), ("e", None, None),
    ("en, de", None, "en"),  # Content-Language may list several: the first
])
def test_tags_and_primary_subtags(value, t, p):
    assert (tag(value), primary(value)) == (t, p)


def test_crawl_languages_argument():
    assert parse_languages("en,DE, en,") == ("de", "en")
    with pytest.raises(ValueError, match="'english' is not a language code"):
        parse_languages("en,english")
    with pytest.raises(ValueError, match="'en-GB' is not a language code"):
        parse_languages("en-GB")  # languages are compared by primary subtag


@pytest.mark.parametrize("declared, text, expected", [
    ("en", EN, ("en", "declared")),
    ("de-AT", DE, ("de", "declared")),
    ("de", EN, ("en", "overruled")),  # a template's lang copied to another language's pages
    ("de", EN[:120], ("de", "declared")),  # too short to overrule
    ("en", SQL, ("en", "declared")),  # the identifier is unsure of code: the markup stands
    (None, FR, ("fr", "identified")),
    ("no-such-tag!", DE, ("de", "identified")),
    (None, SQL, (None, "unknown")),
    (None, "short", (None, "unknown")),
])
def test_the_declared_language_is_checked_against_the_text(declared, text, expected):
    assert page_language(declared, text) == expected


def test_the_head_gives_the_declared_language_and_the_alternates():
    page = analyze(f"""<html lang="fr-CA"><head><title>t</title>
        <link rel="alternate" hreflang="de" href="/de/">
        <link rel="alternate stylesheet" href="/s.css">
        <link rel="alternate" hreflang="x-default" href=" https://a.org/ ">
        <link rel="canonical" href="/fr/"></head><body><p>{FR}</p></body></html>""")
    assert page.lang == "fr-CA" and page.canonical == "/fr/"
    assert page.alternates == [("de", "/de/"), ("x-default", "https://a.org/")]
    meta = analyze('<html><head><meta http-equiv="Content-Language" content="de"></head><body>x</body></html>')
    assert meta.lang == "de"


def test_link_header_alternates():
    values = ['<https://a.org/de/>; rel="alternate"; hreflang="de", <https://a.org/>; rel=canonical',
              "<https://a.org/fr/>; rel=alternate; hreflang=fr-CA", '<>; rel="alternate"; hreflang="es"',
              '<https://a.org/x>; rel="alternate"; hreflang="not a tag"']
    assert link_header_alternates(values) == [("de", "https://a.org/de/"), ("fr-ca", "https://a.org/fr/")]


def test_a_sites_declarations_are_trusted_once_they_stood_the_check():
    from crawler.reading.language import SPOT_CHECK, TRUST_AFTER, DeclarationTrust

    trust = DeclarationTrust(max_sites=2)
    for _ in range(TRUST_AFTER - 1):
        assert trust.should_check("a.org")
        trust.record("a.org", True)
    assert trust.should_check("a.org")
    trust.record("a.org", True)
    checks = [trust.should_check("a.org") for _ in range(2 * SPOT_CHECK)]
    assert checks.count(True) == 2 and checks[SPOT_CHECK - 1]  # one in SPOT_CHECK
    trust.record("a.org", False)  # a spot check failed: every page checked again
    assert all(trust.should_check("a.org") for _ in range(5))
    trust.record("b.org", True)
    trust.record("c.org", True)  # bounded: a.org, the least recent, forgotten
    assert trust._sites.keys() == {"b.org", "c.org"}


def test_warm_up_loads_the_model_once_in_a_thread_of_its_own():
    """A worker loads the model while it starts, not on its first page (a
    page half a second slower let a second worker lease the site's next
    URL before that page's links were queued: tests/test_orders.py)."""
    import subprocess
    import sys

    code = ("import threading; from crawler import language as l\n"
            "l.warm_up()\n"
            "[t.join() for t in threading.enumerate() if t.name == 'language-model']\n"
            "loaded = l._load.cache_info()\n"
            "assert l.identifier() is l.identifier()\n"
            "print(loaded.currsize, loaded.misses, l._load.cache_info().misses)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["1", "1", "1"], out.stderr


def test_a_site_identified_alike_is_given_its_language_with_spot_checks():
    from crawler.reading.language import SPOT_CHECK, TRUST_AFTER, IdentificationTrust

    trust = IdentificationTrust(max_sites=2)
    for _ in range(TRUST_AFTER):
        assert trust.language("a.org") is None  # identify the page
        trust.record("a.org", "en")
    given = [trust.language("a.org") for _ in range(2 * SPOT_CHECK)]
    assert given.count(None) == 2 and given[SPOT_CHECK - 1] is None  # one in SPOT_CHECK identified
    assert set(given) == {"en", None}
    trust.record("a.org", "de")  # a spot check says otherwise: every page identified again
    assert all(trust.language("a.org") is None for _ in range(5))
    for _ in range(TRUST_AFTER - 1):
        trust.record("a.org", "de")
    assert trust.language("a.org") == "de"
    trust.record("b.org", "en")
    trust.record("c.org", "en")  # bounded: a.org, the least recent, forgotten
    assert trust._sites.keys() == {"b.org", "c.org"}


def test_the_model_is_decompressed_once_into_the_cache_and_reads_the_same(tmp_path):
    """The first load writes the model's arrays under $XDG_CACHE_HOME; a
    later process reads them and identifies exactly as py3langid's own
    load does; a cache that cannot be written falls back to that load."""
    import os
    import subprocess
    import sys

    code = ("from crawler.reading import language as l\n"
            "from py3langid.langid import MODEL_FILE, LanguageIdentifier\n"
            "own = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)\n"
            "m = l.identifier()\n"
            f"texts = [{EN[:300]!r}, {DE[:300]!r}, {FR[:300]!r}, 'SELECT 1;']\n"
            "assert [m.classify(t) for t in texts] == [own.classify(t) for t in texts]\n"
            "print(l.loaded_from)")
    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert first.returncode == 0 and first.stdout.strip() == "cache", first.stderr
    [made] = (cache / "site-crawler").iterdir()
    assert made.name.startswith("py3langid-") and sorted(p.name for p in made.iterdir()) == [
        "classes.npy", "done", "nextmove.npy", "nextmove_row.npy", "out_feat.npy", "pc.npy", "ptc.npy"]
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0 and again.stdout.strip() == "cache", again.stderr
    (tmp_path / "ro").write_text("a file, not a directory")
    fallback = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={**env, "XDG_CACHE_HOME": str(tmp_path / "ro")})
    assert fallback.returncode == 0 and fallback.stdout.strip() == "package", fallback.stderr
