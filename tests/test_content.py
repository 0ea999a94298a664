"""The main content (crawler/reading/content.py) of crafted pages, one a way
a page is built: what is kept and what is left out, exactly."""

from __future__ import annotations

from crawler.reading.extract import analyze

PARA = ("This paragraph is part of the page's own story and it carries enough words to count as prose, "
        "well beyond what a menu or a button would ever say on its own. ")


def para(i: int, n: int = 2) -> str:
    return f"<p>Paragraph {i}. " + PARA * n + "</p>"


def main(html: str, url: str = "https://example.org/page") -> str:
    return analyze(html, url).main


def words(text: str) -> list[str]:
    return text.split()


def page(body: str) -> str:
    return f"<html><head><title>T</title></head><body>{body}</body></html>"


NAV = "<nav><ul>" + "".join(f"<li><a href='/s{i}'>Section {i}</a></li>" for i in range(8)) + "</ul></nav>"
FOOTER = "<footer><p>Copyright Example Org, all rights reserved, terms and privacy.</p></footer>"


def test_an_article_without_navigation_footer_sidebar_and_comments():
    html = page(NAV + "<div class='wrap'><article><h1>The title</h1>" + para(1) + para(2) + "</article>"
                "<div class='sidebar'><p>Popular now: something else entirely.</p></div>"
                "<div id='comments' class='comments-area'><div class='comment'><p>Great post! " + PARA
                + "</p></div></div></div>" + FOOTER)
    text = main(html)
    assert text.startswith("The title")
    assert "Paragraph 1." in text and "Paragraph 2." in text
    for gone in ("Section 0", "Popular now", "Great post", "Copyright"):
        assert gone not in text


def test_a_forums_posts_named_comment_are_its_content():
    posts = "".join(f"<article class='post comment'><p>Post {i} says: " + PARA + "</p></article>" for i in range(5))
    text = main(page(NAV + f"<main><h1>A thread</h1>{posts}</main>" + FOOTER))
    assert [w for w in words(text) if w in {"Post"}] == ["Post"] * 5
    assert "Section 0" not in text and "Copyright" not in text


def test_a_listings_items_are_links_and_are_kept():
    items = "".join(f"<li><a href='/story/{i}'>Story number {i} about the harbour and its boats</a></li>"
                    for i in range(12))
    text = main(page(NAV + f"<main><h1>Latest stories</h1><ul class='stories'>{items}</ul></main>" + FOOTER))
    assert all(f"Story number {i} about" in text for i in range(12))
    assert "Section 0" not in text


def test_link_lists_inside_an_article_are_left_out():
    tags = "<ul>" + "".join(f"<li><a href='/tag/{i}'>tag{i}</a></li>" for i in range(10)) + "</ul>"
    text = main(page(f"<article><h1>Title</h1>{para(1, 4)}{tags}{para(2, 4)}</article>"))
    assert "Paragraph 1." in text and "Paragraph 2." in text
    assert "tag3" not in text


def test_page_builder_widgets_are_not_boilerplate_for_their_name():
    widgets = "".join(f"<div class='elementor-widget elementor-widget-text-editor'><div class='elementor-widget-"
                      f"container'>{para(i)}</div></div>" for i in range(4))
    text = main(page(NAV + f"<main class='site-main'>{widgets}</main>" + FOOTER))
    assert all(f"Paragraph {i}." in text for i in range(4))


def test_a_wrapper_named_like_a_sidebar_holding_the_page_is_the_page():
    text = main(page(f"<div class='container sidebar-right'><h1>Title</h1>{para(1)}{para(2)}</div>"))
    assert "Paragraph 1." in text and "Paragraph 2." in text


def test_a_form_wrapping_the_whole_page_is_the_page():
    text = main(page(f"<form id='aspnetForm'>{NAV}<div id='content'>{para(1)}{para(2)}</div>{FOOTER}</form>"))
    assert "Paragraph 1." in text and "Paragraph 2." in text
    assert "Section 0" not in text and "Copyright" not in text


def test_a_collapsed_answer_is_content_a_hidden_menu_is_not():
    faq = "".join(f"<div class='faq'><h3>Question {i}?</h3><div hidden>{para(i)}</div></div>" for i in range(4))
    hidden_menu = "<div style='display: none'><a href='/x'>Hidden menu entry</a> login</div>"
    text = main(page(f"<main>{para(9, 4)}{faq}{hidden_menu}</main>"))
    assert all(f"Paragraph {i}." in text for i in range(4))
    assert "Hidden menu entry" not in text


def test_a_noscript_holding_the_page_is_read():
    posts = "".join(f"<div class='topic-body crawler-post'><p>Reply {i}: " + PARA + "</p></div>" for i in range(4))
    html = page("<section id='splash'>Loading</section><noscript><div id='main-outlet'>" + posts
                + "</div></noscript><noscript>Please enable JavaScript.</noscript>")
    text = main(html)
    assert "Reply 0:" in text and "Reply 3:" in text and "Loading" not in text
    assert "enable JavaScript" not in text


def test_an_empty_shells_footer_is_not_its_content():
    assert main(page("<div id='app'></div>" + FOOTER * 3)) == ""


def test_a_misnested_button_holding_the_page_is_the_page():
    # libxml2 leaves an unclosed <button> open around the rest of the page.
    text = main("<html><body><header><button class='menu'>Menu<div>" + para(1) + para(2) + "</div></body></html>")
    assert "Paragraph 1." in text and "Paragraph 2." in text


def test_text_and_markdown_have_the_same_words():
    html = page(NAV + "<article><h1>Title</h1>" + para(1) + "<ul><li>First item</li><li>Second item</li></ul>"
                "<table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>"
                + para(2) + "</article>" + FOOTER)
    analysis = analyze(html, "https://example.org/page")
    import re
    md_words = re.findall(r"\w+", re.sub(r"\]\([^)]*\)", "]", analysis.markdown))
    assert sorted(md_words) == sorted(re.findall(r"\w+", analysis.main))


def test_no_content_when_asked_not_to():
    analysis = analyze(page(para(1)), "https://example.org/", content=False)
    assert analysis.main == "" and analysis.markdown == ""
    assert "Paragraph 1." in analysis.text


def test_hostile_nesting_does_not_overflow():
    assert "Paragraph 1." in main(page("<div>" * 1500 + para(1) + "</div>" * 1500))
    # Deeper, the parser keeps 2,048 levels and drops the rest: nothing raises.
    assert main(page("<div>" * 20000 + para(1) + "</div>" * 20000)) == ""


def test_a_reply_quoting_the_post_it_answers_keeps_the_words_once():
    first = "The first post asks whether the harbour ferry still runs on Sundays in the winter months."
    html = page(f"<main><div class='post'><p>{first}</p></div><div class='post'><blockquote>{first}</blockquote>"
                "<p>It does, twice a day, from the north pier. " + PARA + "</p></div>"
                "<article><blockquote>A quotation found nowhere else on the page, kept as it is.</blockquote>"
                + para(1) + "</article></main>")
    text = main(html)
    assert text.count("The first post asks") == 1
    assert "It does, twice a day" in text
    assert "A quotation found nowhere else" in text


def test_items_named_alike_but_numbered_are_items_and_buttons_are_not_content():
    # Page builders number each widget in its class; the trails are the page.
    trails = "".join(f"<div class='elementor-element elementor-element-{i:x}7a elementor-cta'><h3>Trail {i}</h3>"
                     f"<p>Trail {i} winds through the pines for five miles and suits riders of every level.</p></div>"
                     for i in range(6))
    html = page(NAV + f"<main><h1>Trails</h1>{trails}<p>" + PARA + "<a class='btn btn-primary' href='/join'>Join "
                "now</a></p></main>" + FOOTER)
    text = main(html)
    assert all(f"Trail {i} winds" in text for i in range(6))
    assert "Join now" not in text


def test_a_paragraph_said_again_word_for_word_is_kept_once():
    promo = "<p>Free delivery on every order over fifty euros, all year round.</p>"
    html = page(f"<main>{promo}{para(1)}{promo}{para(2)}{promo}<ul><li>{promo}</li></ul></main>")
    text = main(html)
    assert text.count("Free delivery on every order") == 1
    assert "Paragraph 1." in text and "Paragraph 2." in text


def test_a_byline_a_disclaimer_and_footnotes_are_left_out_and_an_entry_keeps_its_post_classes():
    # An entry (microformats' "hentry") is named after its tags and author as
    # well ("tag-social", "author-jo"): those are what it is about, not boilerplate.
    entries = "".join(f"<div class='entry hentry tag-social category-news author-jo'><h3>Entry {i}</h3>"
                      f"<p>Entry {i} says what the harbour board decided about the ferry timetable.</p></div>"
                      for i in range(2))
    html = page("<article><h1>The title</h1><div class='post-byline'>By Jo Smith</div>" + para(1)
                + "<p class='affiliate-disclaimer'>We may earn a commission from links on this page.</p>" + para(2)
                + entries + "<section class='footnotes'><ol><li>A note on the second paragraph.</li></ol></section>"
                "</article>")
    body = (PARA * 2).strip()
    said = "says what the harbour board decided about the ferry timetable."
    assert main(html).split("\n") == ["The title", f"Paragraph 1. {body}", f"Paragraph 2. {body}",
                                      "Entry 0", f"Entry 0 {said}", "Entry 1", f"Entry 1 {said}"]


def test_a_section_headed_as_other_things_on_offer_is_left_out():
    # A shop's product page: the description is the content; "Similar
    # items" and "Customers also bought" carousels offer other things. A
    # heading that only mentions such things inside the description stays.
    cards = "".join(f"<li><h4>Lamp {i}</h4><p>A brass lamp with a linen shade, model {i}.</p></li>" for i in range(4))
    html = page("<main><h1>Reading lamp</h1><div class='description'><p>A reading lamp of walnut and brass with a "
                "dimmer in its base, made by hand in Porto. " + PARA + "</p><h2>Compare with similar products</h2>"
                "<p>It gives twice the light of the desk lamp for the same power.</p></div>"
                f"<section><div class='title'><h2>Similar items</h2></div><ul>{cards}</ul></section>"
                "<div><h3>Customers also bought</h3><p>A linen shade in sand, a spare bulb, a walnut stand.</p></div>"
                "</main>")
    assert main(html) == ("Reading lamp\nA reading lamp of walnut and brass with a dimmer in its base, made by hand "
                          "in Porto. " + PARA.strip() + "\nCompare with similar products\nIt gives twice the light of "
                          "the desk lamp for the same power.")


def test_an_article_leaves_out_its_author_box_and_a_list_keeps_each_item_author():
    # Said once or twice, an author's name and box are the article's
    # boilerplate; said for each item, each is the item's own.
    box = ("<div class='author-box'><h4 class='author-name'>Jo Smith</h4>"
           "<p>Jo Smith writes about harbours and ferries for the paper.</p></div>")
    html = page("<article><h1>The title</h1><span class='post-author'>Jo Smith</span>" + para(1) + para(2)
                + box + "</article>")
    body = (PARA * 2).strip()
    assert main(html).split("\n") == ["The title", f"Paragraph 1. {body}", f"Paragraph 2. {body}"]
    posts = "".join(f"<div class='post'><span class='post-author'>Writer {i}</span>" + para(i) + "</div>"
                    for i in range(3))
    assert main(page("<main>" + posts + "</main>")).split("\n") == [
        line for i in range(3) for line in (f"Writer {i}", f"Paragraph {i}. {body}")]
