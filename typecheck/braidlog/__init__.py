"""Not a module: mypy's map of the installed package, where ``projections/`` is ``braidlog.projections``.

setuptools installs the repository's ``projections/`` as ``braidlog.projections`` (setup.py), which
mypy cannot follow. pyproject.toml puts this folder on mypy's path after the repository root, so
``braidlog`` is found at the root and ``braidlog.projections`` through the link beside this file.
"""
