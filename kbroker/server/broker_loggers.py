"""The broker's log levels under log4j's names: set at startup (`kbroker serve
--log-level`, log4j keys in the config file) and read and set live through the
BROKER_LOGGER config resource (type 8), as Kafka's `kafka-configs.sh --entity-type
broker-loggers` does with log4j.

Levels are log4j's (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF); TRACE is Python
level 5, registered under that name. At startup, as in Kafka's log4j.properties:

    log4j.rootLogger=INFO, stdout                the root logger's level (appenders ignored)
    log4j.logger.kafka.request.logger=DEBUG      one logger's level
    log4j.appender.*, log4j.additivity.*, ...    accepted and ignored (kbroker logs to stderr)

DescribeConfigs lists the root logger (`root`) and every `kbroker...` and `kafka...`
Python logger (kafka.request.logger: kbroker.server.request_logger) with its
effective level, source DYNAMIC_BROKER_LOGGER_CONFIG (6). Only
IncrementalAlterConfigs changes them (Kafka 3.9's ConfigAdminManager checks):
SET a level, DELETE to inherit the parent's again; APPEND or SUBTRACT, or
DELETE of the root logger -> INVALID_REQUEST; an unknown logger or level ->
INVALID_CONFIG. Levels are process state, not persisted: a restart resets them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

from kbroker.common.config_def import ConfigError, Type
from kbroker.common.error_code import ErrorCode
from kbroker.server.config_describe import ConfigDescription, ConfigSource
from kbroker.server.topic_admin import AdminError

ROOT = "root"
PREFIXES = ("kbroker", "kafka")
LOG4J_ROOT = "log4j.rootLogger"
LOG4J_LOGGER = "log4j.logger."
SET, DELETE = 0, 1

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
# log4j level name <-> Python level; TRACE is below DEBUG, OFF above everything.
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}
_PYTHON_NAMES = {"WARNING": logging.WARNING, "CRITICAL": logging.CRITICAL}


def level_name(level: int) -> str:
    """The log4j name of the highest level not above `level`."""
    best = "TRACE"
    for name, value in LEVELS.items():
        if value <= level:
            best = name
    return best


def parse_level(text: str) -> int | None:
    """A log4j level name (or Python's WARNING / CRITICAL), any case; None if unknown."""
    name = text.strip().upper()
    return LEVELS.get(name, _PYTHON_NAMES.get(name))


def take_log4j_levels(props: MutableMapping[str, str]) -> dict[str, int]:
    """Remove the log4j.* keys from server.properties-style `props`; return the levels
    they set by logger name ("root" for log4j.rootLogger)."""
    levels = {}
    for key in [k for k in props if k.startswith("log4j.")]:
        value = props.pop(key)
        if key == LOG4J_ROOT:
            name = ROOT
        elif key.startswith(LOG4J_LOGGER):
            name = key[len(LOG4J_LOGGER):]
        else:
            continue  # appenders, layouts, additivity: kbroker logs to stderr
        level = parse_level(value.split(",")[0])
        if level is None or not name:
            raise ConfigError(f"Invalid value {value} for configuration {key}: the level must "
                              f"be one of {', '.join(LEVELS)}")
        levels[name] = level
    return levels


def set_levels(levels: Mapping[str, int]) -> None:
    for name, level in levels.items():
        logging.getLogger(None if name == ROOT else name).setLevel(level)


def _loggers() -> dict[str, logging.Logger]:
    found = {ROOT: logging.getLogger()}
    for name, obj in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(obj, logging.Logger) and any(
                name == p or name.startswith(p + ".") for p in PREFIXES):
            found[name] = obj
    return found


def describe(keys: list[str] | None) -> list[ConfigDescription]:
    loggers = _loggers()
    names = sorted(loggers) if keys is None else [k for k in keys if k in loggers]
    return [
        ConfigDescription(
            name=name,
            value=level_name(loggers[name].getEffectiveLevel()),
            source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            synonyms=(),
            config_type=Type.STRING,
            read_only=False,
            documentation=None,
        )
        for name in names
    ]


def alter(ops: list[Any], incremental: bool, validate_only: bool) -> None:
    """Check every operation, then (unless validate_only) apply them all."""
    if not incremental:
        raise AdminError(ErrorCode.INVALID_REQUEST,
                         "BROKER_LOGGER levels are changed with IncrementalAlterConfigs only.")
    loggers = _loggers()
    changes: list[tuple[logging.Logger, int]] = []
    for op in ops:
        if op.config_operation not in (SET, DELETE):
            raise AdminError(ErrorCode.INVALID_REQUEST,
                             f"{op.name}: only SET and DELETE apply to BROKER_LOGGER resources.")
        logger = loggers.get(op.name)
        if logger is None:
            raise AdminError(ErrorCode.INVALID_CONFIG, f"Logger {op.name} does not exist!")
        if op.config_operation == DELETE:
            if op.name == ROOT:
                raise AdminError(ErrorCode.INVALID_REQUEST,
                                 "Removing the log level of the root logger is not allowed")
            changes.append((logger, logging.NOTSET))
            continue
        level = LEVELS.get((op.value or "").upper())
        if level is None:
            raise AdminError(
                ErrorCode.INVALID_CONFIG,
                f"Cannot set the log level of {op.name} to {op.value} as it is not a supported "
                f"log level. Valid log4j levels are {', '.join(LEVELS)}",
            )
        changes.append((logger, level))
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(level)
