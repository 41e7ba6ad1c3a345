"""Principals: who a connection is, as Kafka's KafkaPrincipal (`User:alice`).

PLAINTEXT connections are User:ANONYMOUS; SASL ones User:<authenticated name>; SSL
ones User:<mapped distinguished name> of the client certificate, or ANONYMOUS when
the client gave none (ssl.client.auth=none or requested).

The distinguished name is Java's X500Principal.getName(RFC2253): the subject's RDNs
most specific first (`CN=alice,OU=eng,O=example,C=US`), values escaped per RFC 2253.
`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper): a comma-separated list of
`RULE:pattern/replacement/[L|U]` (the pattern must match the whole name; `$1` in the
replacement is a group; L / U lower or upper case the result) and `DEFAULT` (the name
as it is); the first rule that applies wins; none: authentication fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kbroker.common.config_def import ConfigError


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`Type:name`; ValueError when there is no type."""
        ptype, sep, name = text.partition(":")
        if not sep or not ptype:
            raise ValueError(f"principal {text!r} is not of the form Type:name")
        return cls(ptype, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
WILDCARD_PRINCIPAL = "User:*"

# Python's names of X.509 attributes -> RFC 2253 keywords (Java names no others)
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L",
             "stateOrProvinceName": "ST", "organizationName": "O",
             "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
# other attributes Java writes by OID
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5",
         "title": "2.5.4.12", "surname": "2.5.4.4", "givenName": "2.5.4.42"}


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def rfc2253(subject: Any) -> str:
    """The distinguished name of a certificate subject as `ssl.getpeercert()` gives it."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for attr, value in rdn:
            if attr in _KEYWORDS:
                parts.append(f"{_KEYWORDS[attr]}={_escape(value)}")
            else:
                oid = _OIDS.get(attr, attr)
                parts.append(f"{oid}=#{_ia5(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def _ia5(value: str) -> str:
    data = value.encode()
    return (bytes([0x16, len(data)]) + data).hex() if len(data) < 128 else data.hex()


@dataclass(frozen=True)
class _Rule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.default:
            return name
        assert self.pattern is not None
        if not self.pattern.fullmatch(name):
            return None
        out = self.pattern.sub(_java_replacement(self.replacement), name, count=1)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _java_replacement(text: str) -> Any:
    def expand(m: re.Match[str]) -> str:
        out, i = [], 0
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
            elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
                out.append(m.group(int(text[i + 1])) or "")
                i += 2
            else:
                out.append(c)
                i += 1
        return "".join(out)
    return expand


@dataclass(frozen=True)
class PrincipalRules:
    rules: tuple[_Rule, ...]

    def map(self, dn: str) -> str | None:
        for rule in self.rules:
            out = rule.apply(dn)
            if out is not None:
                return out
        return None


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


def parse_principal_rules(key: str, text: str) -> PrincipalRules:
    rules, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if not m or m.end() == pos:
            raise ConfigError(f"Invalid value {text} for configuration {key}: invalid rule "
                              f"at character {pos}")
        if m.group(1):
            rules.append(_Rule(True))
        else:
            try:
                pattern = re.compile(m.group(2))
            except re.error as e:
                raise ConfigError(f"Invalid value {text} for configuration {key}: {e}") from None
            rules.append(_Rule(False, pattern, m.group(3), m.group(4)))
        pos = m.end()
    if not rules:
        raise ConfigError(f"Invalid value {text!r} for configuration {key}: no rule")
    return PrincipalRules(tuple(rules))
