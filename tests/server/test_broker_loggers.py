"""Log levels under log4j's names: log4j keys of a config file, `--log-level`, and the
BROKER_LOGGER resource listing the request logger."""

from __future__ import annotations

import argparse
import logging

import pytest

from kbroker.cli import _log_level
from kbroker.common.config_def import ConfigError
from kbroker.config import load_properties_file
from kbroker.server import broker_loggers, request_logger
from kbroker.server.broker_loggers import TRACE, describe, parse_level, take_log4j_levels

# The lines of Kafka 3.9's config/log4j.properties that set levels, and some that do not.
KAFKA_LOG4J = """\
log4j.rootLogger=INFO, stdout, kafkaAppender
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN, requestAppender
log4j.additivity.kafka.request.logger=false
log4j.logger.kafka.network.RequestChannel$=WARN, requestAppender
log4j.logger.state.change.logger=INFO, stateChangeAppender
num.partitions=3
"""


def test_log4j_keys_are_taken_out_of_the_properties(tmp_path: object) -> None:
    path = tmp_path / "server.properties"  # type: ignore[operator]
    path.write_text(KAFKA_LOG4J)
    props = load_properties_file(str(path))
    levels = take_log4j_levels(props)
    assert props == {"num.partitions": "3"}
    assert levels == {"root": logging.INFO, "kafka.request.logger": logging.WARNING,
                      "kafka.network.RequestChannel$": logging.WARNING,
                      "state.change.logger": logging.INFO}


def test_a_bad_level_names_its_key() -> None:
    with pytest.raises(ConfigError, match="log4j.logger.kafka.request.logger"):
        take_log4j_levels({"log4j.logger.kafka.request.logger": "LOUD"})


def test_levels_by_log4j_and_python_names() -> None:
    assert [parse_level(n) for n in ("trace", "DEBUG", "WARN", "warning", "FATAL", "off")] == [
        TRACE, logging.DEBUG, logging.WARNING, logging.WARNING, logging.CRITICAL,
        logging.CRITICAL + 10]
    assert parse_level("LOUD") is None
    assert logging.getLevelName(TRACE) == "TRACE"


def test_command_line_levels() -> None:
    assert _log_level("DEBUG") == ("root", logging.DEBUG)
    assert _log_level("kafka.request.logger=TRACE") == ("kafka.request.logger", TRACE)
    with pytest.raises(argparse.ArgumentTypeError):
        _log_level("kafka.request.logger=LOUD")


def test_the_request_logger_is_a_broker_logger() -> None:
    logger = request_logger.request_logger
    level = logger.level
    try:
        broker_loggers.set_levels({request_logger.LOGGER_NAME: logging.DEBUG})
        [entry] = describe([request_logger.LOGGER_NAME])
        assert entry.value == "DEBUG"
    finally:
        logger.setLevel(level)
