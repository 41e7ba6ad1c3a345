"""The compiled core is what gets imported: no silent pure-Python fallback.

aiokafka once shipped with a missing extension that a silent `except
ImportError` hid (aio-libs/aiokafka#913); these tests fail instead.
"""

from __future__ import annotations

import importlib
import importlib.machinery

import pytest

import kbroker._core


def test_crc32c_is_a_compiled_extension() -> None:
    import kbroker._core.crc32c as crc32c

    assert crc32c.__file__ is not None
    assert crc32c.__file__.endswith(".so")
    assert isinstance(crc32c.__loader__, importlib.machinery.ExtensionFileLoader)


@pytest.mark.parametrize("name", kbroker._core.COMPILED_MODULES)
def test_every_core_module_is_compiled(name: str) -> None:
    module = importlib.import_module(f"kbroker._core.{name}")
    assert module.__file__ is not None
    assert module.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    assert module.__file__.endswith(".so")


def test_a_missing_module_fails_loudly() -> None:
    with pytest.raises(ImportError, match="compiled core is missing"):
        kbroker._core._load("no_such_module")


def test_every_pyx_is_listed_as_a_compiled_module() -> None:
    from pathlib import Path

    core_dir = Path(kbroker._core.__file__).parent
    built = {p.stem for p in core_dir.glob("*.pyx")}
    assert built == set(kbroker._core.COMPILED_MODULES)
