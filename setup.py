"""Only the package map lives here (pyproject.toml holds the rest).

The repository keeps the domain folds in ``projections/``; they install as ``braidlog.projections``,
so the wheel adds no generic top-level name. Subpackages are found, not listed.
"""

from setuptools import find_packages, setup

PACKAGES = find_packages(include=["braidlog", "braidlog.*"]) + [
    "braidlog.projections" + ("." + sub if sub else "") for sub in ["", *find_packages("projections")]
]

setup(packages=PACKAGES, package_dir={"braidlog.projections": "projections"},
      package_data={"braidlog": ["py.typed"], "braidlog.bench": ["recall_quality.json"]})
