"""JAAS configuration strings, as Kafka's `sasl.jaas.config` carries them.

    <LoginModule class> <required|requisite|sufficient|optional> [<key>=<value> ...];

A value is a bare word or a double-quoted string (backslash escapes the next
character). Kafka's listener configs hold exactly one login module; its options
(`username`, `password`, PLAIN's `user_<name>`) are what the broker reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbroker.common.config_def import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(")((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


@dataclass(frozen=True)
class JaasModule:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options hold passwords: never shown
        return f"JaasModule({self.login_module!r}, {self.flag!r}, {len(self.options)} options)"


def _tokens(key: str, text: str) -> list[str]:
    out, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ConfigError(f"Invalid value for configuration {key}: cannot parse the JAAS "
                              f"configuration at character {pos}")
        if m.group(1):
            out.append("\0" + re.sub(r"\\(.)", r"\1", m.group(2)))  # quoted: never a symbol
        else:
            out.append(m.group(3) or m.group(4) or m.group(5))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def parse_jaas(key: str, text: str) -> JaasModule:
    """The one login module of a `sasl.jaas.config` value; ConfigError naming `key`
    (never quoting the value, which holds passwords) when it is not one."""
    tokens = _tokens(key, text)
    modules = []
    i = 0
    while i < len(tokens):
        if len(tokens) - i < 3:
            raise ConfigError(f"Invalid value for configuration {key}: a login module needs "
                              "a class, a control flag and a closing ';'")
        module, flag = tokens[i].lstrip("\0"), tokens[i + 1].lstrip("\0").lower()
        if flag not in _FLAGS:
            raise ConfigError(f"Invalid value for configuration {key}: login module control "
                              f"flag is not available in the JAAS config ({flag!r})")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ";":
            if i + 2 >= len(tokens) or tokens[i + 1] != "=" or tokens[i + 2] in ("=", ";"):
                raise ConfigError(f"Invalid value for configuration {key}: expected "
                                  "key=value options before ';'")
            options[tokens[i].lstrip("\0")] = tokens[i + 2].lstrip("\0")
            i += 3
        if i >= len(tokens):
            raise ConfigError(f"Invalid value for configuration {key}: the login module "
                              "is not closed with ';'")
        i += 1
        modules.append(JaasModule(module, flag, options))
    if len(modules) != 1:
        raise ConfigError(f"Invalid value for configuration {key}: JAAS config property "
                          f"contains {len(modules)} login modules, should be 1 module")
    return modules[0]
