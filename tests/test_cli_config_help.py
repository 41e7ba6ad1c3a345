"""`kbroker serve --help-config` lists the one table of keys; `--help` points to it."""

from __future__ import annotations

import pytest

from kbroker.cli import main
from kbroker.common.configs import ACCEPTED_WITHOUT_EFFECT, BROKER_CONFIGS, TOPIC_CONFIGS


def test_help_config_lists_every_key_from_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help-config"]) == 0
    out = capsys.readouterr().out
    lines = set(out.splitlines())
    for name in [*BROKER_CONFIGS.names(), *TOPIC_CONFIGS.names(), *ACCEPTED_WITHOUT_EFFECT]:
        assert name in lines, name
    broker_part, topic_part = out.split("\nTopic configs")
    assert "log.segment.bytes\n    Roll a new segment file" in broker_part
    assert "(int; default 1073741824; valid values [14,...]; broker default log.segment.bytes)" in (
        topic_part)


def test_serve_help_points_to_help_config(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "--help-config" in capsys.readouterr().out
