"""tools/console_screenshots makes the manual's console screenshots (docs/operations.md):
one PNG per page, from a broker, a workload and chromium it starts and stops itself."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tools import console_screenshots
from tools.browser import browser_pids

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.timeout(240)]


def test_one_png_per_page(tmp_path: Path) -> None:
    shots = console_screenshots.main(["--out", str(tmp_path / "images"), "--samples", "3"])
    assert [p.name for p in shots] == ["console-overview.png", "console-topics.png",
                                       "console-groups.png", "console-messages.png"]
    for path in shots:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", path
        width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
        assert width == 1280 and height >= 600, (path, width, height)
    assert browser_pids(Path("kbroker-screenshots-")) == []  # its chromium profile: gone
