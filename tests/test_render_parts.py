"""The parts of ``-a render`` that need no browser: the auto rule and the
site memory (``crawler/render/decide.py``), the script cache and the
headers handed to the browser (``router.py``), finding the browser, and
the checks of the argument and the settings."""

from __future__ import annotations

import os

import pytest
from scrapy.http import Response

from crawler.config import ConfigError, check_settings
from crawler.render.browser import BrowserUnavailable, find_browser
from crawler.render.decide import Shape, SiteMemory, looks_scripted, paid_off, shape_of
from crawler.render.router import ScriptCache, browser_headers
from crawler.spiders.arguments import check_arguments
from scrapy.settings import Settings

import crawler.settings as defaults

PROSE = "<p>" + "word " * 400 + "</p>"
LINKS = "".join(f'<a href="/{i}">{i}</a>' for i in range(20))


@pytest.mark.parametrize(("markup", "text", "links", "why"), [
    # No script: nothing would run, however thin the page.
    (b"<html><body><div id='root'></div></body></html>", 0, 0, None),
    (b"<body><div id=\"root\"></div><script src=/a.js></script></body>", 0, 0, "empty app root"),
    (b"<body><div id='app'>  <!-- filled by Vue --> </div><script>x()</script></body>", 10, 0, "empty app root"),
    (b"<body><div id=\"__next\"></div><script src=/n.js></script></body>", 500, 20, "empty app root"),
    (b"<body><app-root></app-root><script src=/main.js></script></body>", 0, 0, "empty app root"),
    # A root element that holds the page (server-side rendered): not empty.
    (b"<body><div id='root'><h1>Title</h1>" + PROSE.encode() + b"</div><script src=/a.js></script></body>",
     2000, 20, None),
    (b"<body><p>Loading</p><script src=/a.js></script></body>", 7, 0, "little text and few links"),
    (b"<body><noscript>Please enable JavaScript</noscript><p>short</p><a href=/x>x</a>"
     b"<script src=/a.js></script></body>", 800, 1, "noscript warning"),
    # javadoc: every page says "JavaScript is disabled" for its search box;
    # an index page of 48 characters and 79 links is not built by scripts.
    (b"<body><noscript><div>JavaScript is disabled on your browser.</div></noscript>" + LINKS.encode() +
     b"<script src=/script.js></script></body>", 48, 79, None),
    # Enough text and links: not scanned for a root or a notice at all.
    (b"<body><div id='root'></div><noscript>enable JavaScript</noscript><script src=/a.js></script></body>",
     1500, 10, None),
    # A documentation page with a search script and a noscript note: enough of its own.
    (b"<body><noscript>Search needs JavaScript</noscript>" + PROSE.encode() + LINKS.encode() +
     b"<script src=/searchtools.js></script></body>", 2000, 20, None),
    (b"<body>" + PROSE.encode() + b"<script>analytics()</script></body>", 2000, 0, None),
])
def test_which_pages_look_built_by_scripts(markup, text, links, why):
    assert looks_scripted(shape_of(markup, text, links)) == why


def test_rendering_paid_off_when_it_brought_text_or_links():
    static = Shape(text_chars=100, links=2, scripts=1)
    assert paid_off(static, Shape(400, 2))  # 300 more characters, 4x
    assert not paid_off(static, Shape(250, 3))  # 150 more, 1 more link
    assert paid_off(static, Shape(100, 5))  # 3 more links
    assert not paid_off(Shape(5000, 10), Shape(5300, 11))  # 300 more, but 6 %: the same page


def test_a_site_is_taken_as_static_once_fewer_than_one_in_probe_renderings_paid():
    memory = SiteMemory(probe=3, size=2)
    assert [memory.record("a.org", False) for _ in range(3)] == [False, False, True]
    assert not memory.worth_rendering("a.org") and memory.counts("a.org") == (3, 0)
    # The first paid (a menu a script writes, new on the first page), no other: static at the fourth.
    assert [memory.record("b.org", p) for p in (True, False, False, False)] == [False, False, False, True]
    assert not memory.worth_rendering("b.org") and memory.counts("b.org") == (4, 1)
    # A site that keeps paying, one in three or more: rendered on. A third
    # site: the least recently used (a.org) is forgotten.
    assert [memory.record("c.org", p) for p in (True, False, True, False, False, True, False)] == [False] * 7
    assert memory.worth_rendering("c.org") and memory.counts("c.org") == (7, 3)
    assert memory.worth_rendering("a.org") and memory.counts("a.org") == (0, 0)


def test_only_links_new_to_the_crawl_make_a_rendering_pay():
    from types import SimpleNamespace

    from scrapy.utils.test import get_crawler

    from crawler.reading.extract import analyze
    from crawler.following.follow import UrlCache
    from crawler.render.service import Renderer

    follower = SimpleNamespace(seen=UrlCache(100))
    renderer = Renderer(get_crawler(settings_dict={"RENDER_AUTO_PROBE": 3}), follower)  # type: ignore[arg-type]
    menu = '<a href="annotated.html">Classes</a><a href="files.html">Files</a><a href="modules.html">Modules</a>'
    static = analyze('<p>T</p><a href="https://www.doxygen.org/">doxygen</a>', "http://s/classT.html")
    rendered = analyze(menu + '<p>T</p><a href="https://www.doxygen.org/">doxygen</a>', "http://s/classT.html")
    assert renderer.new_links("http://s/classT.html", static, rendered) == 3
    follower.seen.add("http://s/annotated.html")  # sent to the frontier by the static crawl, or the first page
    follower.seen.add("http://s/files.html")
    assert renderer.new_links("http://s/classU.html", static, rendered) == 1
    assert renderer.new_links("http://s/classU.html", rendered, rendered) == 0  # nothing the static page lacked


def test_the_script_cache_keeps_whole_scripts_within_its_bytes():
    cache = ScriptCache(limit=800)
    cache.put("http://a/1.js", 200, {"content-type": "application/javascript"}, b"x" * 100)
    cache.put("http://a/big.js", 200, {}, b"x" * 101)  # over limit // 8: never kept
    assert cache.get("http://a/big.js") is None
    for i in range(2, 10):
        cache.put(f"http://a/{i}.js", 200, {}, b"x" * 100)
    # 9 scripts of 100 bytes in 800: the least recently used went.
    assert cache.get("http://a/1.js") is None and cache.get("http://a/9.js") is not None and cache.size == 800


def test_headers_handed_to_the_browser_describe_the_decoded_body():
    response = Response("http://a/", headers={"Content-Encoding": "gzip", "Content-Length": "10",
                                              "Content-Type": "text/html", "Set-Cookie": ["a=1", "b=2"],
                                              "Transfer-Encoding": "chunked"})
    assert browser_headers(response) == {"content-type": "text/html", "set-cookie": "a=1\nb=2"}


def test_finding_the_browser(monkeypatch, tmp_path):
    with pytest.raises(BrowserUnavailable, match=r"^RENDER_BROWSER='/nonexistent/chrome' is not an executable$"):
        find_browser("/nonexistent/chrome")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrowserUnavailable, match=r"apt-get install chromium"):
        find_browser(None)
    exe = tmp_path / "chromium"
    exe.write_text("#!/bin/sh\n")
    os.chmod(exe, 0o755)
    assert find_browser(None) == str(exe)


def test_the_render_argument_and_settings_are_checked():
    with pytest.raises(ConfigError, match=r"^-a render='sometimes' is not one of never, auto, always$"):
        check_arguments("site", ("seeds", "render"), "http://a.org/", render="sometimes")
    settings = Settings()
    settings.setmodule(defaults)
    check_settings(settings)
    for name, value, complaint in [("RENDER_BLOCK", "image,pictures", "'pictures' is not a resource type"),
                                   ("RENDER_TIMEOUT", 0, "must be at least 1"),
                                   ("PDF_MEMORY_MB", 100, "must be at least 256"),
                                   ("RENDER_OTHER_SITES", "maybe", "must be True or False")]:
        bad = settings.copy()
        bad.set(name, value)
        with pytest.raises(ConfigError, match=f"{name}.*{complaint}"):
            check_settings(bad)
