"""Sphinx configuration of the documentation site (``make docs``; output in ``build/docs/html``).

Why these tools:

* **Sphinx** reads the docstrings (``sphinx.ext.autodoc``), so the API reference is the code's
  own words and cannot drift from it; its Python domain resolves the ``:mod:``/``:class:``/
  ``:func:`` roles the docstrings already use.
* **MyST (myst-nb)**: the hand-written pages are Markdown, like the rest of ``docs/`` and the
  README, and myst-nb renders the Jupyter notebooks natively (with their stored outputs;
  execution is off, ``make reproduce`` runs them).
* **sphinx-argparse** turns each program's ``argparse`` parser into its reference page.
* **furo**: a maintained, accessible theme with a light and a dark mode and no JavaScript
  framework.

The sources are staged: this file lives in ``docs/`` but Sphinx's source directory is
``build/docs/src``, which :func:`sitegen.stage` fills from ``docs/*.md`` plus the generated API,
command-line and notebook pages, so nothing generated enters the repository. Build with::

    make docs        # = python -m sphinx -W --keep-going -c docs build/docs/src build/docs/html

Warnings are errors. Cross-references that do not resolve are not warnings (``nitpicky`` is
off): docstrings name things like ``bytes``, ``simpy.Environment`` or the C extension's types
that no inventory here documents, and listing them would be busywork.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pygments.lexers.special import TextLexer
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.domains.python import PythonDomain

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path[:0] = [str(REPO), str(DOCS / "_ext")]

import sitegen  # noqa: E402

project = "websec-testbed"
author = "the websec-testbed contributors"
copyright = "the websec-testbed contributors, MIT licence"  # noqa: A001

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
]

# MyST: the hand-written pages and the notebooks. Notebooks are never executed here.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "off"
nb_merge_streams = True

# autodoc: members in source order, type hints in the description rather than the signature.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"exclude-members": "__weakref__, __dict__, __init__"}
autoclass_content = "class"
# Docstrings mix Google-style sections (``Args:``, ``Returns:``) with plain reST; napoleon turns
# the sections into fields and leaves the rest alone.
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Command lines are quoted everywhere: ``--load`` must not become an en dash.
smartquotes = False

nitpicky = False
suppress_warnings: list[str] = []

exclude_patterns = ["_build", "**.ipynb_checkpoints"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

html_theme = "furo"
html_title = "websec-testbed"
html_show_sourcelink = False
html_static_path: list[str] = []


def _stage(app: Sphinx, config: Config) -> None:
    """Fill the source directory (the build tree's ``src``) before Sphinx looks for pages."""
    srcdir = Path(app.srcdir).resolve()
    if srcdir == DOCS:
        raise RuntimeError("build with `make docs`: the source directory is build/docs/src, "
                           "staged from docs/ and the code (see docs/conf.py)")
    sitegen.stage(DOCS, REPO, srcdir)


class NearestPythonDomain(PythonDomain):
    """The Python domain with one tie-break for a short name that matches several objects (a
    ``:mod:`.sessions``` or ``:class:`Origin``` in a docstring, or an annotation of a class's
    parameters, which autodoc leaves as written): the match nearest to the referring module —
    the longest common dotted prefix — is meant, if only one is nearest.

    Docstrings name their neighbours briefly: ``Origin`` in ``sslacc_sim.relay`` is
    ``sslacc_sim.endpoints.Origin``, not ``sine.origin.Origin``, and ``.sessions`` in
    ``sslacc_sim.aio.linux.campaign`` is ``sslacc_sim.aio.linux.sessions``. A tie still warns.
    """

    def find_obj(self, env, modname, classname, name, type, searchmode=0):  # type: ignore[no-untyped-def]
        matches = super().find_obj(env, modname, classname, name, type, searchmode)
        if len(matches) > 1 and modname:
            here = modname.split(".")

            def shared(match: tuple[str, object]) -> int:
                there = match[0].split(".")
                return next((i for i, (a, b) in enumerate(zip(here, there, strict=False)) if a != b),
                            min(len(here), len(there)))

            best = max(shared(m) for m in matches)
            nearest = [m for m in matches if shared(m) == best]
            if best > 0 and len(nearest) == 1:
                return nearest
        return matches


def setup(app: Sphinx) -> dict[str, bool]:
    app.add_domain(NearestPythonDomain, override=True)
    # The state-machine pages hold Mermaid diagrams as code blocks; show them as text.
    app.add_lexer("mermaid", TextLexer)
    app.connect("config-inited", _stage)
    return {"parallel_read_safe": True}
