"""Sphinx configuration for the skdpsco documentation (``make docs``)."""

import os
import sys
from pathlib import Path

DOC_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(DOC_DIR / "sphinxext"))

import skdpsco  # noqa: E402

project = "skdpsco"
author = "the skdpsco developers"
copyright = "the skdpsco developers"  # noqa: A001
version = release = skdpsco.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "skdpsco_docs",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "benchmarks"]
root_doc = "index"
default_role = "literal"

# -- autodoc / autosummary / numpydoc ----------------------------------------
autosummary_generate = True
autodoc_default_options = {"member-order": "groupwise"}
autodoc_typehints = "none"
numpydoc_show_class_members = False  # the autosummary templates list members
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# No numpydoc_validation_checks: the build checks that docstrings render, not style.

# -- sphinx-gallery ------------------------------------------------------------
EXAMPLES_DIR = DOC_DIR.parent / "examples"
# examples/GALLERY_HEADER.rst is the gallery's index text.
_EXAMPLES_SOURCE = os.path.relpath(EXAMPLES_DIR, DOC_DIR)


def _prune_stale_gallery(examples_dir, gallery_dir="auto_examples"):
    """Remove generated pages of examples that no longer exist.

    sphinx-gallery never deletes the output of a removed or renamed example; its
    stale page (and the computation-time table listing it) would then break the
    ``-W`` build of an incremental ``make docs``.
    """
    (DOC_DIR / "sg_execution_times.rst").unlink(missing_ok=True)
    out = DOC_DIR / gallery_dir
    if not out.is_dir():
        return
    sources = {p.stem for p in (DOC_DIR / examples_dir).glob("*.py")}
    for page in out.glob("*.rst"):
        stem = page.stem
        if stem in ("index", "sg_execution_times") or stem in sources:
            continue
        for path in [*out.glob(stem + ".*"), *out.glob(f"images/**/sphx_glr_{stem}_*")]:
            path.unlink()


_prune_stale_gallery(_EXAMPLES_SOURCE)

sphinx_gallery_conf = {
    "examples_dirs": [_EXAMPLES_SOURCE],
    "gallery_dirs": ["auto_examples"],
    # Only plot_*.py files are executed; showcase.py (``make demo``) and private
    # helpers (_*.py) are not gallery pages at all.
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"(^|[/\\])(_[^/\\]*|showcase)\.py$",
    "doc_module": ("skdpsco",),
    "backreferences_dir": "generated/backreferences",
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "download_all_examples": False,
    # The first callable times each example for the per-example budget below
    # (doc/sphinxext/skdpsco_docs.py); "both" runs it before and after each one.
    "reset_modules": ("skdpsco_docs.time_examples", "matplotlib"),
    "reset_modules_order": "both",
}
# Every example must run within this many seconds (checked at build-finished).
skdpsco_example_time_budget = 60

# -- HTML ------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skdpsco {release}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}
html_show_sourcelink = False
