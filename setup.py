"""Build step: the wheel carries the repository's `recipes/` and `tokenizers/` as `curation/data/`.

Both folders stay at the top of the repository (the source of truth); this copies them into the
build tree so `pip install <wheel>` then `curate demo` works without a clone. Editable installs
and source checkouts read them in place (`curation.commands.demo.data_root`). Everything else
lives in pyproject.toml.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in ("recipes", "tokenizers"):
            shutil.copytree(ROOT / name, Path(self.build_lib) / "curation" / "data" / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
