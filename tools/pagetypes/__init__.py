"""Labelling and training that produce the crawler's page-type models,
``crawler/data/classifier_page.json`` (a page typed alone) and
``crawler/data/classifier.json`` (a page typed with its site's template),
and ``crawler/data/kind.json`` (the page's kind, which a page typed alone
is typed with too).

Commands (from the repository root)::

    python -m tools.pagetypes.sources --out /tmp/pagetypes            # label documentation trees
    python -m tools.pagetypes.page_model --data ../shared/data/pagetypes \\
        --labels labels-all.jsonl --write                            # classifier_page.json
    python -m tools.pagetypes.template_model --trees /tmp/pagetypes ... \\
        --wcxb ../shared/data/pagetypes --write                      # classifier.json
    python -m tools.pagetypes.replay /tmp/folds                       # decision variants on dumped folds
    python -m tools.pagetypes.kind_model --wcxb WCXB_DIR --write      # kind.json (page kinds, lone pages)

Public API, by step:

- Label a tree: ``sources.label(html, generator)`` (one page: ``index``,
  ``info`` or None, from the generator's markup), ``sources.crawl_order``,
  ``sources.build(source, cap)`` and ``sources.write_labels(source, cap,
  out)``; the trees are ``sources.SOURCES`` and the held-out sets
  ``sources.FRESH_SOURCES`` ... ``FRESH12_SOURCES``.
- Read labelled pages into rows (feature vector ``x``, label ``y``):
  ``page_model.load(data, labels)`` (WCXB, page-only features),
  ``template_model.rows_of_wcxb(data)``, ``template_model.rows_of_tree(path)``,
  ``template_model.read_rows(wcxb, trees)``.
- Fit a model: ``fit.fit(xs, ys, rounds, depth, learning_rate, monotone,
  weights)`` (gradient-boosted trees; ``fit.grow_tree``,
  ``fit.tree_values``); ``page_model.choose(rows)`` (size and threshold by
  cross-validation); ``template_model.fitted(rows, FitOptions())`` (fit
  and threshold, ``threshold_by_cv``).
- Write a model: ``page_model.write_model(params, out, trained_on)``,
  ``template_model.write_model(params, out, trained_on)``: the files as
  ``crawler.pagetypes.classify`` reads them, byte for byte as shipped.
- Judge one: ``measure.metrics``, ``measure.held_out``,
  ``measure.meets_target``; ``replay.replay`` types dumped folds again.

Benchmarks (``bench.bench_pagetypes``) import these; the crawler does not:
it reads only the JSON files. Not shipped in the crawler's wheel.
"""
