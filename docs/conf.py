"""Sphinx configuration of mcastmember's documentation.

Build it with ``pip install '.[docs]'`` and
``sphinx-build -W --keep-going -b html docs <output folder>``. The API pages
document the installed package (so ``pip install`` it first); the guide
pages hold their own text (README.md is the short front page that links here).
"""

import mcastmember

project = "mcastmember"
author = "mcastmember contributors"
copyright = author
release = version = mcastmember.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
]
# Markdown pages (MyST) for the guides, reStructuredText for the API pages.
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]
# Headings get anchors (#members-and-events), for links between pages.
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True}
# The fronts take some forty keyword settings: one per line.
maximum_signature_line_length = 88

html_theme = "alabaster"
# Wide enough for the code (lines of up to 99 characters) and the tables.
html_theme_options = {"page_width": "1240px", "sidebar_width": "220px",
                      "code_font_size": "0.8em"}
html_title = f"mcastmember {release}"
html_static_path = []
html_show_sourcelink = False


def _list_settings(app, what, name, obj, options, lines):
    """Settings is a TypedDict: its keys are annotations, and one of them,
    ``keys``, is also dict's method, so autodoc would leave it out. List
    every key with its type from the annotations instead."""
    if name != "mcastmember.tribes.engine.config.Settings":
        return
    lines += ["", "Keys (all optional):", ""]
    for key, kind in obj.__annotations__.items():
        # strings under ``from __future__ import annotations`` (ForwardRefs
        # in a TypedDict before Python 3.14)
        text = getattr(kind, "__forward_arg__", kind)
        if not isinstance(text, str):
            text = getattr(kind, "__name__", repr(kind))
        lines.append(f"- ``{key}``: ``{text}``")
    lines.append("")


def setup(app):
    app.connect("autodoc-process-docstring", _list_settings)
