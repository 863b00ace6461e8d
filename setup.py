"""The package layout, the one part of the build that pyproject.toml cannot say.

The repository keeps its four folders at the top (``jobs/``, ``scheduler/``, ``portals/``,
``migrations/``); installed, they are ``portalq.jobs`` and so on. ``package_dir`` maps each
folder into the namespace, so every file has one path (no links), and the package list is
found from the folders, so a new subpackage needs no edit here. Everything else is in
pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

FOLDERS = ("jobs", "scheduler", "portals", "migrations")

setup(
    package_dir={"portalq": "portalq", **{f"portalq.{f}": f for f in FOLDERS}},
    packages=["portalq"] + [
        f"portalq.{name}" for folder in FOLDERS
        for name in (folder, *(f"{folder}.{sub}" for sub in find_namespace_packages(
            folder, exclude=["*__pycache__*"])))],
)
