"""What the page classifier reads of a page's blocks (``page_figures``),
and a page's abstract. Pure logic, no Scrapy: ``crawler.reading.extract``
computes them in its one pass.

No settings, no stats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawler.reading.extract import Block

__all__ = ["abstract", "page_figures"]

LONG_BLOCK = 150  # characters of non-link text that make a block a "paragraph"


def abstract(description: str, text: str, limit: int = 300) -> str:
    if len(description) >= 40:
        source = description
    else:
        source = text.replace("\n", " ")
    if len(source) <= limit:
        return source
    cut = source.rfind(" ", 0, limit)
    return source[: cut if cut > limit // 2 else limit].rstrip() + "…"


def page_figures(blocks: list[Block], main_chars: int, counts: dict[str, int],
              n_links: int) -> dict[str, float]:
    text_chars = sum(len(b.text) for b in blocks)
    link_chars = sum(b.link_chars for b in blocks)
    own = [len(b.text) - b.link_chars for b in blocks]
    long_blocks = [b for b, n in zip(blocks, own) if n >= LONG_BLOCK and b.link_chars * 3 < len(b.text)]
    linky_blocks = sum(1 for b in blocks if b.link_chars * 2 >= len(b.text))
    # Longest run of prose: consecutive link-poor blocks; a link-heavy block
    # (a teaser title, a menu) ends the run. Articles have one long run,
    # listings many short ones.
    run = best_run = 0
    for b in blocks:
        if b.link_chars * 5 < len(b.text) and not b.boiler:
            run += len(b.text) - b.link_chars
            best_run = max(best_run, run)
        elif len(b.text) >= 30 or b.link_chars:
            run = 0
    return {
        "text_chars": float(text_chars),
        "link_chars": float(link_chars),
        "link_density": link_chars / text_chars if text_chars else 1.0,
        "n_links": float(n_links),
        "longest_block": float(max(own, default=0)),
        "n_long_blocks": float(len(long_blocks)),
        "long_chars": float(sum(len(b.text) for b in long_blocks)),
        "main_chars": float(main_chars),
        "n_blocks": float(len(blocks)),
        "linky_block_share": linky_blocks / len(blocks) if blocks else 1.0,
        "n_article": float(counts.get("article", 0)),
        "n_time": float(counts.get("time", 0)),
        "n_img": float(counts.get("img", 0)),
        "n_heading_links": float(counts.get("heading_link", 0)),
        "n_h1": float(counts.get("h1", 0)),
        "n_li": float(counts.get("li", 0)),
        "n_input": float(counts.get("input", 0)),
        "h1_before_para": float(counts.get("h1_before_para", 0)),
        "n_cart": float(counts.get("cart", 0)),
        "n_price": float(counts.get("price", 0)),
        "max_repeat": float(counts.get("repeat", 0)),
        "best_run": float(best_run),
    }
