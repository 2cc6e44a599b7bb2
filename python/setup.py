"""Builds the tcc wheel around libraries CMake already built (bash scripts/build.sh): libtcc.so.0
(the compiler's C API) and libtccrt.so.0 (the runtime) are copied into tcc/_lib/. The build
folder is $TCC_BUILD_DIR, else the repository's build/ beside this folder.

    bash scripts/build.sh && pip install ./python
"""
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
LIBRARIES = ("libtcc.so.0", "libtccrt.so.0")


def build_dir() -> Path:
    given = os.environ.get("TCC_BUILD_DIR")
    return Path(given).resolve() if given else HERE.parent / "build"


class BuildWithLibraries(build_py):
    """Copies the shared libraries into the package (following their version symlinks)."""

    def run(self):
        super().run()
        source = build_dir() / "lib"
        missing = [name for name in LIBRARIES if not (source / name).exists()]
        if missing:
            raise SystemExit(
                f"tcc: {', '.join(missing)} not found in {source}: build tcc first "
                "(bash scripts/build.sh), or point TCC_BUILD_DIR at its build folder")
        target = Path(self.build_lib) / "tcc" / "_lib"
        target.mkdir(parents=True, exist_ok=True)
        for name in LIBRARIES:
            shutil.copy2((source / name).resolve(), target / name)


class BinaryDistribution(Distribution):
    """The wheel carries native libraries: tag it for this platform, not as pure Python."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibraries}, distclass=BinaryDistribution)
