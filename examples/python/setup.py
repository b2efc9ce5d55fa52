"""Installs memq.py with the C library it binds, built by cargo from this workspace.

``pip install examples/python`` runs ``cargo build --release -p memq-ffi`` and puts
``libmemq.so`` into a ``memq_native`` directory beside ``memq.py``, where the module looks
first. With ``MEMQ_LIB`` set at install time, that library is copied instead of building
one (a CI that built it already, a cross build). ``CARGO_TARGET_DIR`` is honoured. The
wheel holds a native library, so it is tagged for this platform.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
WORKSPACE = os.path.dirname(os.path.dirname(HERE))
LIBRARY = "libmemq.so"


def built_library():
    given = os.environ.get("MEMQ_LIB")
    if given:
        return given
    manifest = os.path.join(WORKSPACE, "Cargo.toml")
    if not os.path.exists(manifest):
        raise SystemExit(
            f"memq: no Cargo workspace at {WORKSPACE} to build libmemq from; "
            "set MEMQ_LIB to a built libmemq.so"
        )
    cargo = ["cargo", "build", "--release", "-p", "memq-ffi", "--manifest-path", manifest]
    subprocess.run(cargo, check=True)
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(WORKSPACE, "target")
    return os.path.join(target, "release", LIBRARY)


class BuildWithLibrary(build_py):
    """The usual build, plus memq_native/libmemq.so."""

    def run(self):
        super().run()
        native = os.path.join(self.build_lib, "memq_native")
        os.makedirs(native, exist_ok=True)
        shutil.copyfile(built_library(), os.path.join(native, LIBRARY))
        with open(os.path.join(native, "__init__.py"), "w") as f:
            f.write('"""libmemq.so, built for this install of memq."""\n')


class NativeDistribution(Distribution):
    """A wheel with a native library in it is not pure Python."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=NativeDistribution)
