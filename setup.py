"""Build the Cython core (kbroker/_core) over the plain C in native/.

Build modes, chosen by environment variables:
  (default)            release: -O2 -Wall
  KBROKER_DEBUG=1      Cython annotate + linetrace, -O0 -g, KBROKER_DEBUG macro defined
  KBROKER_SANITIZE=1   ASan + UBSan (-fsanitize=address,undefined); run with
                       LD_PRELOAD=$(gcc -print-file-name=libasan.so)
  KBROKER_NO_CORE=1    no extension at all: scripts/bootstrap's editable install, which
                       then builds the core in place once (`build_ext --inplace`) instead
                       of a second time in pip's temporary build directory

Every kbroker/_core/*.pyx becomes one extension module. Plain C files in native/
are linked into exactly one extension each (NATIVE_SOURCES); other modules reach
them through `cimport` of that module's .pxd, never by compiling them twice.
"""

import os
from glob import glob

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("KBROKER_DEBUG") == "1"
SANITIZE = os.environ.get("KBROKER_SANITIZE") == "1"
NO_CORE = os.environ.get("KBROKER_NO_CORE") == "1"

# extension name -> the native C sources it owns
NATIVE_SOURCES = {
    "kbroker._core.crc32c": ["native/crc32c.c"],
}


def compile_args() -> tuple[list[str], list[str], list[tuple[str, str | None]]]:
    cflags = ["-Wall", "-Wno-unused-function", "-std=gnu11"]
    ldflags: list[str] = []
    macros: list[tuple[str, str | None]] = []
    if DEBUG:
        cflags += ["-O0", "-g3"]
        macros += [("KBROKER_DEBUG", "1"), ("CYTHON_TRACE", "1"), ("CYTHON_TRACE_NOGIL", "1")]
    else:
        cflags += ["-O2"]
    if SANITIZE:
        san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
        cflags += san
        ldflags += san
    return cflags, ldflags, macros


def extensions() -> list[Extension]:
    cflags, ldflags, macros = compile_args()
    exts = []
    for pyx in sorted(glob("kbroker/_core/*.pyx")):
        name = pyx[:-4].replace("/", ".")
        exts.append(
            Extension(
                name,
                [pyx, *NATIVE_SOURCES.get(name, [])],
                include_dirs=["native"],
                extra_compile_args=cflags,
                extra_link_args=ldflags,
                define_macros=macros,
            )
        )
    return cythonize(
        exts,
        language_level=3,
        annotate=DEBUG,
        compiler_directives={
            "boundscheck": DEBUG,
            "wraparound": False,
            "cdivision": True,
            "linetrace": DEBUG,
            "embedsignature": True,
        },
    )


setup(ext_modules=[] if NO_CORE else extensions())
