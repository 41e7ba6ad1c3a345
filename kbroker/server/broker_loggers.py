"""The BROKER_LOGGER config resource (type 8): the broker's log levels, read and set
live, as Kafka's `kafka-configs.sh --entity-type broker-loggers` does with log4j.

DescribeConfigs lists the root logger (`root`) and every `kbroker...` Python
logger with its effective level under log4j's names (TRACE, DEBUG, INFO, WARN,
ERROR, FATAL, OFF), source DYNAMIC_BROKER_LOGGER_CONFIG (6). Only
IncrementalAlterConfigs changes them (Kafka 3.9's ConfigAdminManager checks):
SET a level, DELETE to inherit the parent's again; APPEND or SUBTRACT, or
DELETE of the root logger -> INVALID_REQUEST; an unknown logger or level ->
INVALID_CONFIG. Levels are process state, not persisted: a restart resets them.
"""

from __future__ import annotations

import logging
from typing import Any

from kbroker.common.config_def import Type
from kbroker.common.error_code import ErrorCode
from kbroker.server.config_describe import ConfigDescription, ConfigSource
from kbroker.server.topic_admin import AdminError

ROOT = "root"
PREFIX = "kbroker"
SET, DELETE = 0, 1

# log4j level name <-> Python level; TRACE is below DEBUG, OFF above everything.
LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


def level_name(level: int) -> str:
    """The log4j name of the highest level not above `level`."""
    best = "TRACE"
    for name, value in LEVELS.items():
        if value <= level:
            best = name
    return best


def _loggers() -> dict[str, logging.Logger]:
    found = {ROOT: logging.getLogger()}
    for name, obj in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(obj, logging.Logger) and (name == PREFIX or name.startswith(PREFIX + ".")):
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
