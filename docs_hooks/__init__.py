"""The documentation site's build-time generators (named by ``hooks:`` in mkdocs.yml).

Not part of the installed packages: :mod:`docs_hooks.reference` is loaded by MkDocs from its
file, and writes the reference pages from the code at each build, so none can go stale.
"""
