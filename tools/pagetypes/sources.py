"""Structure-labelled page types from documentation trees Debian ships.

    python -m tools.pagetypes.sources [--cap 600] [--out /tmp/pagetypes] [--only NAME,...]
        [--fresh | --fresh2 | --fresh3 | --fresh4 | --fresh5 | --fresh6 | --fresh7 | --fresh8
         | --fresh9 | --fresh10 | --fresh11 | --fresh12]

Each source is one documentation tree made by one generator (DocBook,
Sphinx, Doxygen, javadoc, rustdoc, mdBook, texinfo), installed by
``apt-get install --no-install-recommends`` of the package named in
``SOURCES``. The PostgreSQL and Python documentation are not among them:
those are where the crawler is judged, so nothing is trained or tuned on
them. The second held-out set (``FRESH2_SOURCES``, ``--fresh2``) is installed by::

    apt-get install --no-install-recommends python-flask-doc python-sqlalchemy-doc \
        libcppunit-doc libxerces-c-doc libcommons-io-java-doc libjsoup-java-doc \
        libglib2.0-doc maxima-doc

and the third (``FRESH3_SOURCES``, ``--fresh3``) by::

    apt-get install --no-install-recommends libcommons-collections4-java-doc \
        libyaml-snake-java-doc libsfml-doc libbox2d-doc sphinx-doc python-tornado-doc \
        libclutter-1.0-doc mit-scheme-doc

and the fourth (``FRESH4_SOURCES``, ``--fresh4``) by::

    apt-get install --no-install-recommends libcommons-math3-java-doc libjts-java-doc \
        libqwt-doc libirrlicht-doc linux-doc-6.1 python-nipype-doc gcl-doc

and the fifth (``FRESH5_SOURCES``, ``--fresh5``) by::

    apt-get install --no-install-recommends python-pymatgen-doc python-sympy-doc \
        octavia-doc rapidjson-doc libfcml-doc fltk1.3-doc libpdfbox-java-doc \
        evolution-data-server-doc

and the sixth (``FRESH6_SOURCES``, ``--fresh6``) by::

    apt-get install --no-install-recommends buildbot-doc libtango-doc python-ezdxf-doc \
        ironic-doc neutron-doc libjfreechart-java-doc libgda-5.0-doc

and the seventh (``FRESH7_SOURCES``, ``--fresh7``) by::

    apt-get install --no-install-recommends python-celery-doc python-nibabel-doc \
        libapache-poi-java-doc liblogback-java-doc libpqxx-doc libassimp-doc \
        docbook-xsl-doc-html libqmi-glib-doc

and the eighth (``FRESH8_SOURCES``, ``--fresh8``) by::

    apt-get install --no-install-recommends glance-doc cinder-doc libgoffice-0.10-doc \
        libgtksourceview-4-doc flex-doc libh2-java-doc libjsoncpp-doc

and the ninth (``FRESH9_SOURCES``, ``--fresh9``) by::

    apt-get install --no-install-recommends keystone-doc libcommons-codec-java-doc \
        libmm-glib-doc libharfbuzz-doc libcairo2-doc libgeos-doc

and the tenth (``FRESH10_SOURCES``, ``--fresh10``) by::

    apt-get install --no-install-recommends python-openstackclient-doc python-sqlobject-doc \
        libcommons-beanutils-java-doc libbcel-java-doc libcereal-doc libflac-doc \
        libgdata-doc slime

and the eleventh (``FRESH11_SOURCES``, ``--fresh11``) by::

    apt-get install --no-install-recommends designate-doc python-cherrypy3-doc \
        libcommons-jxpath-java-doc libcommons-validator-java-doc libccfits-doc \
        libtelepathy-glib-doc autogen-doc

and the twelfth (``FRESH12_SOURCES``, ``--fresh12``) by::

    apt-get install --no-install-recommends python-pytest-doc python-cryptography-doc \
        libjaxen-java-doc libhtmlcleaner-java-doc liblog4cxx-doc libsoup2.4-doc mailutils-doc

A page's label comes from its generator's markup, not from a person:

- the generator's table-of-contents blocks (a DocBook ``div.toc``, a Sphinx
  ``toctree-wrapper`` or index table, a Doxygen directory, a javadoc
  package or class summary table, a rustdoc item table, a texinfo menu or
  index) hold at least half of the text of the page's content region (the
  page without the generator's navigation header, footer and sidebar): an
  **index** page;
- no more than a tenth of it, and at least 800 characters of text that is
  not link text: an **information** page;
- anything in between (a long page with a local contents box; a short
  stub) has no label and is left out of the figures.

Redirect stubs (``<meta http-equiv="refresh">``) are skipped. Pages are taken
in breadth-first order from the tree's start page, following links inside
the tree, as a crawl of the site would meet them: the first ``--cap`` of
them. Writes one ``<source>.jsonl`` per source to ``--out``: ``url``,
``file``, ``label`` (``index``, ``info`` or null), ``toc_share``, ``prose``.

API: ``label(html, generator)`` labels one page; ``crawl_order(source,
cap)`` lists a tree's pages as a crawl meets them; ``build(source, cap)``
labels a tree (the rows written); ``write_labels(source, cap, out)``
writes them to ``out/<source>.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urldefrag

import lxml.html


@dataclass(frozen=True)
class Source:
    name: str
    package: str  # the Debian package that ships it
    generator: str
    root: str  # the tree's directory
    start: str  # its start page, relative to root


SOURCES = (
    Source("gtk3", "libgtk-3-doc", "docbook", "/usr/share/gtk-doc/html/gtk3", "index.html"),
    Source("gnucash-guide", "gnucash-docs", "docbook", "/usr/share/doc/gnucash-docs/gnucash-guide-en", "index.html"),
    Source("debian-handbook", "debian-handbook", "docbook", "/usr/share/doc/debian-handbook/html/en-US", "index.html"),
    Source("cmake", "cmake-doc", "sphinx", "/usr/share/doc/cmake-data/html", "index.html"),
    Source("django", "python-django-doc", "sphinx", "/usr/share/doc/python-django-doc/html", "index.html"),
    Source("eigen", "libeigen3-doc", "doxygen", "/usr/share/doc/libeigen3-dev/html", "index.html"),
    Source("junit4", "junit4-doc", "javadoc", "/usr/share/doc/junit4/api", "index.html"),
    Source("commons-lang3", "libcommons-lang3-java-doc", "javadoc", "/usr/share/doc/libcommons-lang3-java/api",
           "index.html"),
    Source("rust-std", "rust-doc", "rustdoc", "/usr/share/doc/rust-doc/html/std", "index.html"),
    Source("rust-book", "rust-doc", "mdbook", "/usr/share/doc/rust-doc/html/book", "index.html"),
    Source("octave", "octave-doc", "texinfo", "/usr/share/doc/octave/octave.html", "index.html"),
)

# Trees kept apart from the eleven above: never used to fit, tune or choose
# anything for the classifier (``--fresh``), so that the shipped models can
# be scored on documentation they never saw (python -m bench.bench_pagetypes --trees DIR).
# So were the sets after it, each until it had been scored once and looked
# at; since 21f4d45 the first six (``--fresh`` to ``--fresh6``) are training
# sources too, each measured by leaving it out of the fit; the seventh and
# eighth (``--fresh7``, ``--fresh8``), each scored once with 21f4d45's
# model, joined them for the next fit, and the ninth, tenth and eleventh
# (``--fresh9`` to ``--fresh11``), scored once each, are kept apart, as is
# the twelfth (``--fresh12``), scored once with 9b83b12's model.
FRESH_SOURCES = (
    Source("gnucash-help", "gnucash-docs", "docbook", "/usr/share/doc/gnucash-docs/gnucash-help-en", "index.html"),
    Source("gnucash-guide-ja", "gnucash-docs", "docbook", "/usr/share/doc/gnucash-docs/gnucash-guide-ja",
           "index.html"),
    Source("clang", "clang-15-doc", "sphinx", "/usr/share/doc/clang-15/html", "index.html"),
    Source("llvm", "llvm-15-doc", "sphinx", "/usr/share/doc/llvm-15-doc/html", "index.html"),
    Source("glibmm", "libglibmm-2.68-doc", "doxygen", "/usr/share/doc/libglibmm-2.68-doc/reference/html",
           "index.html"),
    Source("sigc++", "libsigc++-3.0-doc", "doxygen", "/usr/share/doc/libsigc++-3.0-doc/reference/html",
           "index.html"),
    Source("openjdk-base", "openjdk-17-doc", "javadoc", "/usr/share/doc/openjdk-17-jre-headless/api/java.base",
           "module-summary.html"),
)

# A second set kept apart, added on 2026-11-27 (``--fresh2``): these trees were
# labelled before any classifier was measured on them, and are never used to
# fit, tune or choose anything; none of their packages appears in SOURCES or
# FRESH_SOURCES. The Doxygen main pages of xerces-c build their menu with
# JavaScript and link nowhere else, so that tree starts at its class list.
FRESH2_SOURCES = (
    Source("flask", "python-flask-doc", "sphinx", "/usr/share/doc/python-flask-doc/html", "index.html"),
    Source("sqlalchemy", "python-sqlalchemy-doc", "sphinx", "/usr/share/doc/python-sqlalchemy-doc/html",
           "index.html"),
    Source("cppunit", "libcppunit-doc", "doxygen", "/usr/share/doc/libcppunit-doc/html", "index.html"),
    Source("xerces-c", "libxerces-c-doc", "doxygen", "/usr/share/doc/libxerces-c-doc/html/apiDocs-3",
           "annotated.html"),
    Source("commons-io", "libcommons-io-java-doc", "javadoc", "/usr/share/doc/libcommons-io-java/api",
           "index.html"),
    Source("jsoup", "libjsoup-java-doc", "javadoc", "/usr/share/doc/libjsoup-java/api", "index.html"),
    Source("gio", "libglib2.0-doc", "docbook", "/usr/share/gtk-doc/html/gio", "index.html"),
    Source("maxima", "maxima-doc", "texinfo", "/usr/share/doc/maxima-doc/html", "maxima_toc.html"),
)

# A third set kept apart, added on 2026-11-27 (``--fresh3``): these trees were
# labelled before any classifier was measured on them, and are never used to
# fit, tune or choose anything; none of their packages appears in SOURCES,
# FRESH_SOURCES or FRESH2_SOURCES. tornado is built with the Read the Docs
# Sphinx theme, whose sidebar, breadcrumbs and footer are in _NAV; the MIT
# Scheme tree is its reference manual alone (the package's top page is
# hand-written and links each manual also as one single page).
FRESH3_SOURCES = (
    Source("commons-collections4", "libcommons-collections4-java-doc", "javadoc",
           "/usr/share/doc/libcommons-collections4-java/api", "index.html"),
    Source("snakeyaml", "libyaml-snake-java-doc", "javadoc", "/usr/share/doc/libyaml-snake-java/api", "index.html"),
    Source("sfml", "libsfml-doc", "doxygen", "/usr/share/doc/libsfml-dev/html", "index.html"),
    Source("box2d", "libbox2d-doc", "doxygen", "/usr/share/doc/libbox2d-dev/html", "index.html"),
    Source("sphinx", "sphinx-doc", "sphinx", "/usr/share/doc/sphinx-doc/html", "index.html"),
    Source("tornado", "python-tornado-doc", "sphinx", "/usr/share/doc/python-tornado-doc/html", "index.html"),
    Source("clutter", "libclutter-1.0-doc", "docbook", "/usr/share/gtk-doc/html/clutter", "index.html"),
    Source("mit-scheme-ref", "mit-scheme-doc", "texinfo", "/usr/share/doc/mit-scheme-doc/html/mit-scheme-ref",
           "index.html"),
)

# A fourth set kept apart, added on 2026-11-27 (``--fresh4``): nothing was
# fitted, tuned or scored on it before it was written, and it is never used to
# fit, tune or choose anything; none of its packages appears in SOURCES,
# FRESH_SOURCES, FRESH2_SOURCES or FRESH3_SOURCES. commons-math3 is made by
# the older javadoc (HTML 4.01, frames), qwt by an older Doxygen (1.8.14); the
# Linux kernel's documentation uses the Read the Docs Sphinx theme, and nipype's
# theme puts a header of links (``div.header-wrapper``) above the content. The
# GCL tree is its ANSI Common Lisp manual alone.
FRESH4_SOURCES = (
    Source("commons-math3", "libcommons-math3-java-doc", "javadoc", "/usr/share/doc/libcommons-math3-java/api",
           "index.html"),
    Source("jts", "libjts-java-doc", "javadoc", "/usr/share/doc/libjts-java/api", "index.html"),
    Source("qwt", "libqwt-doc", "doxygen", "/usr/share/doc/libqwt-doc/html", "index.html"),
    Source("irrlicht", "libirrlicht-doc", "doxygen", "/usr/share/doc/libirrlicht-dev/html", "index.html"),
    Source("linux", "linux-doc-6.1", "sphinx", "/usr/share/doc/linux-doc-6.1/html", "index.html"),
    Source("nipype", "python-nipype-doc", "sphinx", "/usr/share/doc/python3-nipype/html", "index.html"),
    Source("gcl", "gcl-doc", "texinfo", "/usr/share/doc/gcl-doc/gcl", "index.html"),
)

# A fifth set kept apart, added on 2026-11-27 (``--fresh5``): nothing was
# fitted, tuned or scored on it before it was written, and it is never used to
# fit, tune or choose anything; none of its packages appears in SOURCES or the
# four sets above. pymatgen uses the Read the Docs Sphinx theme, sympy the Furo
# theme and octavia the OpenStack theme (openstackdocstheme), whose sidebars,
# headers and footers are in _NAV; rapidjson is made by Doxygen 1.8.7 with its
# own header, fcml by Doxygen 1.8.18 (its main page builds its menu with
# JavaScript and links nowhere else, so that tree starts at its class list),
# FLTK by Doxygen 1.9.4 with the tree-view sidebar. The evolution-data-server
# tree is gtk-doc's DocBook output.
FRESH5_SOURCES = (
    Source("pymatgen", "python-pymatgen-doc", "sphinx", "/usr/share/doc/python-pymatgen-doc/html", "index.html"),
    Source("sympy", "python-sympy-doc", "sphinx", "/usr/share/doc/python-sympy-doc/html", "index.html"),
    Source("octavia", "octavia-doc", "sphinx", "/usr/share/doc/octavia-doc/html", "index.html"),
    Source("rapidjson", "rapidjson-doc", "doxygen", "/usr/share/doc/rapidjson-doc/html", "index.html"),
    Source("fcml", "libfcml-doc", "doxygen", "/usr/share/doc/libfcml-doc/html", "annotated.html"),
    Source("fltk", "fltk1.3-doc", "doxygen", "/usr/share/doc/fltk1.3-doc/HTML", "index.html"),
    Source("pdfbox", "libpdfbox-java-doc", "javadoc", "/usr/share/doc/libpdfbox-java/api", "index.html"),
    Source("evolution-data-server", "evolution-data-server-doc", "docbook",
           "/usr/share/gtk-doc/html/evolution-data-server", "index.html"),
)

# A sixth set kept apart, added on 2026-11-27 (``--fresh6``): nothing was
# fitted, tuned or scored on it before it was written, and it is never used to
# fit, tune or choose anything; none of its packages appears in SOURCES or the
# five sets above. buildbot, tango and ezdxf use the Read the Docs Sphinx theme
# (a sidebar that expands the current section), ironic and neutron the
# OpenStack theme; jfreechart is made by the JDK 11 javadoc, libgda by gtk-doc
# (DocBook). No label rule was changed for it.
FRESH6_SOURCES = (
    Source("buildbot", "buildbot-doc", "sphinx", "/usr/share/doc/buildbot/html", "index.html"),
    Source("tango", "libtango-doc", "sphinx", "/usr/share/doc/tango/html", "index.html"),
    Source("ezdxf", "python-ezdxf-doc", "sphinx", "/usr/share/doc/python-ezdxf-doc/html", "index.html"),
    Source("ironic", "ironic-doc", "sphinx", "/usr/share/doc/ironic-doc/html", "index.html"),
    Source("neutron", "neutron-doc", "sphinx", "/usr/share/doc/neutron-doc/html", "index.html"),
    Source("jfreechart", "libjfreechart-java-doc", "javadoc", "/usr/share/doc/libjfreechart-java/javadoc",
           "index.html"),
    Source("libgda", "libgda-5.0-doc", "docbook", "/usr/share/gtk-doc/html/libgda-5.0", "index.html"),
)

# A seventh set kept apart, added on 2026-11-27 (``--fresh7``): nothing was
# fitted, tuned or scored on it before it was written, and it is never used to
# fit, tune or choose anything; none of its packages appears in SOURCES or the
# six sets above. celery uses its own Sphinx theme (sphinx_celery), whose
# version banner (``div.deck``) is in _NAV; nibabel a theme on sphinxdoc with a
# banner of logo and title above the related bar, also in _NAV. POI is made by
# the JDK 11 javadoc, logback by the JDK 17 one; libpqxx by Doxygen 1.8.13,
# assimp by Doxygen 1.9.4 (its main page builds its menu with JavaScript and
# links nowhere else, so that tree starts at its class list). The DocBook XSL
# parameter reference is made by the DocBook XSL stylesheets themselves (not
# gtk-doc), libqmi-glib by gtk-doc.
FRESH7_SOURCES = (
    Source("celery", "python-celery-doc", "sphinx", "/usr/share/doc/python-celery-doc/html", "index.html"),
    Source("nibabel", "python-nibabel-doc", "sphinx", "/usr/share/doc/python-nibabel-doc/html", "index.html"),
    Source("poi", "libapache-poi-java-doc", "javadoc", "/usr/share/doc/libapache-poi-java/api", "index.html"),
    Source("logback", "liblogback-java-doc", "javadoc", "/usr/share/doc/liblogback-java/api", "index.html"),
    Source("libpqxx", "libpqxx-doc", "doxygen", "/usr/share/doc/libpqxx-doc/html/Reference", "index.html"),
    Source("assimp", "libassimp-doc", "doxygen", "/usr/share/doc/libassimp-doc/apiref", "annotated.html"),
    Source("docbook-xsl", "docbook-xsl-doc-html", "docbook", "/usr/share/doc/docbook-xsl-doc-html/doc",
           "index.html"),
    Source("libqmi-glib", "libqmi-glib-doc", "docbook", "/usr/share/gtk-doc/html/libqmi-glib", "index.html"),
)

# An eighth set kept apart, added on 2026-11-27 (``--fresh8``): nothing was
# fitted, tuned or scored on it before it was written, and it is never used to
# fit, tune or choose anything; none of its packages appears in SOURCES or the
# seven sets above. glance and cinder use the OpenStack theme (openstackdocstheme;
# most of their index pages are the package pages of their API reference);
# goffice and gtksourceview are made by gtk-doc (DocBook), flex's manual by
# Texinfo 6.8, H2's API by the JDK 11 javadoc and jsoncpp's by
# Doxygen 1.9.1. No label rule was changed for it.
FRESH8_SOURCES = (
    Source("glance", "glance-doc", "sphinx", "/usr/share/doc/glance-doc/html", "index.html"),
    Source("cinder", "cinder-doc", "sphinx", "/usr/share/doc/cinder-doc/html", "index.html"),
    Source("goffice", "libgoffice-0.10-doc", "docbook", "/usr/share/doc/goffice/html/goffice-0.10", "index.html"),
    Source("gtksourceview", "libgtksourceview-4-doc", "docbook", "/usr/share/gtk-doc/html/gtksourceview-4.0",
           "index.html"),
    Source("flex", "flex-doc", "texinfo", "/usr/share/doc/flex-doc/html", "index.html"),
    Source("h2", "libh2-java-doc", "javadoc", "/usr/share/doc/libh2-java/api", "index.html"),
    Source("jsoncpp", "libjsoncpp-doc", "doxygen", "/usr/share/doc/libjsoncpp-doc", "index.html"),
)

# A ninth set kept apart, added on 2026-11-27 (``--fresh9``): nothing was
# fitted, tuned or scored on it before it was written, and it is never used to
# fit, tune or choose anything; none of its packages appears in SOURCES or the
# eight sets above. keystone uses the OpenStack theme (openstackdocstheme; most
# of its index pages are the package pages of its API reference); the Commons
# Codec API is made by a JDK 9-11 javadoc (its markup says so: typeSummary
# tables); libmm-glib and harfbuzz by gtk-doc 1.33 and cairo by gtk-doc 1.27
# (DocBook); GEOS's API by Doxygen 1.9.4 (most of its index pages are class
# member lists). No label rule was changed for it.
FRESH9_SOURCES = (
    Source("keystone", "keystone-doc", "sphinx", "/usr/share/doc/keystone-doc/html", "index.html"),
    Source("commons-codec", "libcommons-codec-java-doc", "javadoc", "/usr/share/doc/libcommons-codec-java/api",
           "index.html"),
    Source("libmm-glib", "libmm-glib-doc", "docbook", "/usr/share/gtk-doc/html/libmm-glib", "index.html"),
    Source("harfbuzz", "libharfbuzz-doc", "docbook", "/usr/share/gtk-doc/html/harfbuzz", "index.html"),
    Source("cairo", "libcairo2-doc", "docbook", "/usr/share/gtk-doc/html/cairo", "index.html"),
    Source("geos", "libgeos-doc", "doxygen", "/usr/share/doc/libgeos-dev/html", "index.html"),
)

# A tenth set kept apart, added on 2026-11-27 (``--fresh10``): labelled before
# any model typed a page of it; nothing was fitted, tuned or scored on it
# before it was written, and it is never used to fit, tune or choose anything;
# none of its packages appears in SOURCES or the nine sets above.
# openstackclient uses the OpenStack theme (openstackdocstheme; most of its
# index pages are the package pages of its API reference), SQLObject the
# bizstyle Sphinx theme; the Commons BeanUtils API is made by a JDK 17 javadoc
# (flex-box markup), BCEL's by a JDK 9-11 one (fixedNav markup); cereal's and
# libFLAC's APIs by Doxygen 1.9.4 (most of their index pages are class member
# lists); libgdata by gtk-doc 1.33 (DocBook); the SLIME manual by Texinfo 6.8.
# No label rule was changed for it.
FRESH10_SOURCES = (
    Source("openstackclient", "python-openstackclient-doc", "sphinx",
           "/usr/share/doc/python-openstackclient-doc/html", "index.html"),
    Source("sqlobject", "python-sqlobject-doc", "sphinx", "/usr/share/doc/python-sqlobject-doc/html", "index.html"),
    Source("beanutils", "libcommons-beanutils-java-doc", "javadoc",
           "/usr/share/doc/libcommons-beanutils-java/api", "index.html"),
    Source("bcel", "libbcel-java-doc", "javadoc", "/usr/share/doc/libbcel-java/api", "index.html"),
    Source("cereal", "libcereal-doc", "doxygen", "/usr/share/doc/libcereal-dev/html", "index.html"),
    Source("flac", "libflac-doc", "doxygen", "/usr/share/doc/libflac-doc/api", "index.html"),
    Source("gdata", "libgdata-doc", "docbook", "/usr/share/gtk-doc/html/gdata", "index.html"),
    Source("slime", "slime", "texinfo", "/usr/share/doc/slime/html", "index.html"),
)

# An eleventh set kept apart, added on 2026-11-27 (``--fresh11``): labelled
# before any model typed a page of it; nothing was fitted, tuned or scored on
# it before it was written, and it is never used to fit, tune or choose
# anything; none of its packages appears in SOURCES or the ten sets above.
# designate uses the OpenStack theme (openstackdocstheme). CherryPy uses the
# alabaster Sphinx theme. The Commons JXPath API is made by a JDK 9-11 javadoc
# (fixedNav markup). The Commons Validator API is made by a JDK 17 javadoc
# (flex-box markup). CCfits's API is made by Doxygen 1.9.1 (most of its index
# pages are class member lists). telepathy-glib is made by gtk-doc 1.33
# (DocBook). The AutoGen manual is made by Texinfo 6.8. No label rule was
# changed for it.
FRESH11_SOURCES = (
    Source("designate", "designate-doc", "sphinx", "/usr/share/doc/designate-doc/html", "index.html"),
    Source("cherrypy", "python-cherrypy3-doc", "sphinx", "/usr/share/doc/python-cherrypy3-doc/html", "index.html"),
    Source("commons-jxpath", "libcommons-jxpath-java-doc", "javadoc", "/usr/share/doc/libcommons-jxpath-java/api",
           "index.html"),
    Source("commons-validator", "libcommons-validator-java-doc", "javadoc",
           "/usr/share/doc/libcommons-validator-java/api", "index.html"),
    Source("ccfits", "libccfits-doc", "doxygen", "/usr/share/doc/libccfits-dev/html", "index.html"),
    Source("telepathy-glib", "libtelepathy-glib-doc", "docbook",
           "/usr/share/doc/libtelepathy-glib-doc/telepathy-glib", "index.html"),
    Source("autogen", "autogen-doc", "texinfo", "/usr/share/doc/autogen/autogen.html", "index.html"),
)

# A twelfth set kept apart, added on 2026-11-27 (``--fresh12``): labelled
# before any model typed a page of it; nothing was fitted, tuned or scored on
# it before it was written, and it is never used to fit, tune or choose
# anything; none of its packages appears in SOURCES or the eleven sets above.
# pytest uses the flask Sphinx theme (a sphinxsidebar and related bar), the
# cryptography documentation the Read the Docs theme. The Jaxen API is made by
# a JDK 9-11 javadoc (fixedNav markup), the HtmlCleaner API by a JDK 17
# javadoc (flex-box markup). log4cxx's API is made by Doxygen 1.9.4. libsoup
# 2.4 is made by gtk-doc 1.33 (DocBook). The GNU Mailutils manual is made by
# Texinfo 6.8. No label rule was changed for it.
FRESH12_SOURCES = (
    Source("pytest", "python-pytest-doc", "sphinx", "/usr/share/doc/python-pytest-doc/html", "index.html"),
    Source("cryptography", "python-cryptography-doc", "sphinx", "/usr/share/doc/python-cryptography-doc/html",
           "index.html"),
    Source("jaxen", "libjaxen-java-doc", "javadoc", "/usr/share/doc/libjaxen-java/apidocs", "index.html"),
    Source("htmlcleaner", "libhtmlcleaner-java-doc", "javadoc", "/usr/share/doc/libhtmlcleaner-java/api",
           "index.html"),
    Source("log4cxx", "liblog4cxx-doc", "doxygen", "/usr/share/doc/liblog4cxx-doc/html", "index.html"),
    Source("libsoup", "libsoup2.4-doc", "docbook", "/usr/share/gtk-doc/html/libsoup-2.4", "index.html"),
    Source("mailutils", "mailutils-doc", "texinfo", "/usr/share/doc/mailutils/mailutils.html", "index.html"),
)

# The generator's navigation around the content (dropped before measuring).
_NAV = {
    "docbook": ["//div[@class='navheader']", "//div[@class='navfooter']", "//table[@class='navigation']",
                "//div[@class='footer']", "//ul[contains(@class,'docnav')]", "//div[@class='banner']"],
    "sphinx": ["//div[contains(@class,'sphinxsidebar')]", "//div[@class='related']", "//div[@class='footer']",
               "//div[@class='nav']", "//div[@id='hd']", "//div[@id='ft']", "//div[@class='global-nav']",
               # the zzzeeksphinx theme's header, sidebar, narrow-screen menu and footer
               "//div[@id='docs-top-navigation-container']", "//div[@id='fixed-sidebar']",
               "//div[@id='docs-narrow-top-navigation']", "//div[@id='docs-bottom-navigation']",
               # the Read the Docs theme's sidebar, narrow-screen bar, breadcrumbs and footer
               "//nav[contains(@class,'wy-nav-side')]", "//nav[contains(@class,'wy-nav-top')]",
               "//div[@role='navigation'][ul[contains(@class,'wy-breadcrumbs')]]",
               "//div[contains(@class,'rst-content')]/footer",
               # the nipype theme's header of links
               "//div[@class='header-wrapper']",
               # the Furo theme's sidebar, page-contents drawer, narrow-screen header, icons (and the
               # titles of its sprite of them) and footer
               "//aside[contains(@class,'sidebar-drawer')]", "//aside[contains(@class,'toc-drawer')]",
               "//body/svg[symbol]",
               "//header[contains(@class,'mobile-header')]", "//div[contains(@class,'content-icon-container')]",
               "//label[contains(@class,'overlay')]", "//a[contains(@class,'back-to-top')]",
               "//div[@class='content']/footer[div[contains(@class,'related-pages')]]",
               # the OpenStack theme's navigation bar, sidebar, by-lines, licence and footer
               "//body/nav[contains(@class,'navbar')]", "//div[contains(concat(' ',@class,' '),' docs-sidebar ')]",
               "//div[contains(@class,'docs-byline')]", "//div[contains(@class,'docs-license')]",
               "//div[contains(@class,'docs-actions-wrapper')]", "//footer[div/div[contains(@class,'footer-links')]]",
               # the celery theme's version banner and nibabel's banner of logo and title
               "//div[@class='deck']", "//body/div[@class='row'][div[@class='column']/img[@class='logo']]"],
    "doxygen": ["//div[@id='top']", "//div[@id='side-nav']", "//div[@id='nav-path']", "//div[@class='navpath']",
                "//hr[@class='footer']/following-sibling::*", "//address",
                # a footer line left outside its nav-path box (irrlicht's footer template)
                "//li[@class='footer']"],
    "javadoc": ["//div[@class='topNav']", "//div[@class='bottomNav']", "//div[@class='subNav']",
                "//div[contains(@class,'top-nav')]", "//div[contains(@class,'sub-nav')]", "//footer",
                "//div[@class='fixedNav']", "//div[@class='flex-header']"],
    "rustdoc": ["//nav", "//div[contains(@class,'sidebar')]", "//div[contains(@class,'search-container')]"],
    "mdbook": ["//nav", "//div[contains(@class,'sidebar')]", "//div[@id='menu-bar']",
               "//div[contains(@class,'menu-bar')]"],
    "texinfo": ["//div[@class='header']", "//div[@class='nav-panel']", "//hr"],
}
_TOC = {
    "docbook": "//div[contains(concat(' ',@class,' '),' toc ')] | //dl[@class='toc'] | //div[@class='index']"
               " | //div[starts-with(@class,'list-of-')]",
    "sphinx": "//div[contains(@class,'toctree-wrapper')] | //table[contains(@class,'indextable')]"
              " | //table[contains(@class,'modindextable')] | //div[contains(@class,'genindex-jumpbox')]"
              " | //div[contains(@class,'contents') and contains(@class,'topic')] | //nav[@id='contents']",
    "doxygen": "//table[@class='directory'] | //div[@class='directory'] | //div[@class='classindex']"
               " | //table[@class='classindex'] | //div[@class='qindex']",
    "javadoc": "//table[contains(@class,'typeSummary') or contains(@class,'overviewSummary')"
               " or contains(@class,'packagesSummary') or contains(@class,'useSummary')]"
               " | //div[contains(@class,'type-summary')] | //section[contains(@class,'class-summary')]"
               " | //section[contains(@class,'package-summary')] | //section[@id='all-classes']"
               " | //div[@id='all-packages-table'] | //div[@id='all-classes-table']"
               " | //section[contains(@class,'packages')] | //div[@class='indexContainer']"
               " | //dl[contains(@class,'index')] | //div[@class='allClassesContainer']"
               " | //div[@id='class-summary'] | //div[@id='related-package-summary']"
               " | //section[contains(@class,'hierarchy')] | //div[contains(@class,'use-summary')]"
               " | //section[contains(@class,'class-uses') or contains(@class,'package-uses')]"
               " | //section[@role='region'][h2[contains(@title,'Hierarchy')]]"
               " | //div[@class='contentContainer']/dl[not(@class)]"
               # the older javadoc's class and package hierarchy trees
               " | //div[@class='contentContainer']/ul[preceding-sibling::h2[contains(@title,'Hierarchy')]]",
    "rustdoc": "//div[contains(@class,'item-table')] | //ul[contains(@class,'all-items')]"
               " | //ul[contains(@class,' docblock')]"
               " | //div[contains(@class,'item-list')]",
    "mdbook": "//main//ol[@class='chapter']",
    "texinfo": "//table[@class='menu'] | //ul[contains(@class,'section-toc')] | //ul[@class='mini-toc']"
               " | //div[@class='contents'] | //table[starts-with(@class,'index-')]"
               " | //table[contains(@class,'-entries-printindex')]",
}

_REFRESH = re.compile(rb"<meta[^>]+http-equiv=[\"']?refresh", re.I)
_WS = re.compile(r"\s+")
INDEX_SHARE = 0.5
INFO_SHARE = 0.1
INFO_PROSE = 800


def _text(el: object) -> str:
    return _WS.sub(" ", "".join(el.itertext())).strip()  # type: ignore[attr-defined]


def label(html: bytes, generator: str) -> tuple[str | None, float, int]:
    """(label, share of the content region's text in TOC blocks, characters
    of text outside links and TOC blocks)."""
    doc = lxml.html.document_fromstring(html)
    for bad in doc.xpath("//script | //style | //noscript"):
        bad.drop_tree()
    for xp in _NAV[generator]:
        for el in doc.xpath(xp):
            if el.getparent() is not None:
                el.drop_tree()
    body = doc.find("body")
    if body is None:
        return None, 0.0, 0
    total = len(_text(body))
    if not total:
        return None, 0.0, 0
    tocs = doc.xpath(_TOC[generator])
    outer = [t for t in tocs if not any(a in tocs for a in t.iterancestors())]
    toc = sum(len(_text(t)) for t in outer)
    for t in outer:
        t.drop_tree()
    links = sum(len(_text(a)) for a in body.iter("a"))
    prose = len(_text(body)) - links
    share = min(toc / total, 1.0)
    if share >= INDEX_SHARE:
        return "index", share, prose
    if share <= INFO_SHARE and prose >= INFO_PROSE:
        return "info", share, prose
    return None, share, prose


def crawl_order(src: Source, cap: int) -> list[Path]:
    """The tree's HTML pages in breadth-first order from its start page."""
    root = Path(src.root).resolve()
    start = (root / src.start).resolve()
    seen = {start}
    queue = deque([start])
    out: list[Path] = []
    href = re.compile(rb"""<a\s[^>]*?href\s*=\s*["']([^"'#?]+)""", re.I)
    while queue and len(out) < cap:
        path = queue.popleft()
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if _REFRESH.search(data[:4000]):
            continue
        out.append(path)
        for m in href.finditer(data):
            ref = unquote(urldefrag(m.group(1).decode("utf-8", "replace"))[0])
            if not ref.endswith((".html", ".htm")) or "://" in ref or ref.startswith("/"):
                continue
            nxt = (path.parent / ref).resolve()
            if nxt in seen or root not in nxt.parents or "_modules" in nxt.parts or "_sources" in nxt.parts:
                continue
            if nxt.is_file():
                seen.add(nxt)
                queue.append(nxt)
    return out


def url_of(src: Source, path: Path) -> str:
    return f"http://{src.name}.docs.test/" + str(path.relative_to(Path(src.root).resolve()))


def build(src: Source, cap: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for path in crawl_order(src, cap):
        lab, share, prose = label(path.read_bytes(), src.generator)
        rows.append({"url": url_of(src, path), "file": str(path), "label": lab,
                     "toc_share": round(share, 3), "prose": prose})
    return rows


def write_labels(src: Source, cap: int, out: Path) -> list[dict[str, object]]:
    """Label ``src``'s first ``cap`` pages into ``out/<name>.jsonl``; the rows."""
    rows = build(src, cap)
    with (out / f"{src.name}.jsonl").open("w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cap", type=int, default=600, help="pages per source, in breadth-first order")
    ap.add_argument("--out", type=Path, default=Path("/tmp/pagetypes"))
    ap.add_argument("--only", default="", help="comma-separated source names")
    sets = ap.add_mutually_exclusive_group()
    kept_apart = (FRESH_SOURCES, FRESH2_SOURCES, FRESH3_SOURCES, FRESH4_SOURCES, FRESH5_SOURCES, FRESH6_SOURCES,
                  FRESH7_SOURCES, FRESH8_SOURCES, FRESH9_SOURCES, FRESH10_SOURCES, FRESH11_SOURCES, FRESH12_SOURCES)
    for n in range(1, len(kept_apart) + 1):
        suffix = "" if n == 1 else str(n)
        sets.add_argument(f"--fresh{suffix}", dest="fresh", action="store_const", const=n, default=0,
                          help=f"held-out set {n} (FRESH{suffix}_SOURCES) instead")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    only = {s for s in args.only.split(",") if s}
    sources = kept_apart[args.fresh - 1] if args.fresh else SOURCES
    for src in sources:
        if only and src.name not in only:
            continue
        if not (Path(src.root) / src.start).is_file():
            print(f"{src.name}: {src.root}/{src.start} missing: apt-get install {src.package}", file=sys.stderr)
            continue
        rows = write_labels(src, args.cap, args.out)
        n_index = sum(1 for r in rows if r["label"] == "index")
        n_info = sum(1 for r in rows if r["label"] == "info")
        print(f"{src.name:16} {src.generator:8} pages {len(rows):4}  index {n_index:4}  info {n_info:4}  "
              f"unlabelled {len(rows) - n_index - n_info:4}")


if __name__ == "__main__":
    main()
