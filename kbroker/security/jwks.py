"""The JWKS of an OIDC listener: its keys, read from sasl.oauthbearer.jwks.endpoint.url and
kept fresh, as Kafka's RefreshingHttpsJwks does.

JwksSource owns the current keys (`_keys`: kid -> the usable keys of that id, None for
keys without one). `start()` reads them once (blocking: the broker calls it in an
executor before it serves, and does not start when it fails); then a daemon thread
("kbroker-jwks") reads them again every refresh.ms, and at once when a token names a kid
the set does not hold (at most once a minute per kid, as Kafka's missing-key cache).
A read that fails is retried after retry.backoff.ms, doubling, until the waits passed
retry.backoff.max.ms; a refresh that gives up keeps the keys it had. The thread replaces
`_keys` whole (one reference assignment), so the loop thread's `key_for` reads either set,
never a half-built one, without a lock; `_missing` is the loop thread's.

file:// URLs are read the same way (Kafka reads a file JWKS once; re-reading it lets a
key rotation reach the broker without a restart).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from typing import Any
from urllib.parse import unquote, urlparse

from kbroker.common.config_def import ConfigError
from kbroker.security.oauth_settings import OidcSettings

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0
MISSING_KID_INTERVAL_S = 60.0  # Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
MISSING_KID_MAX = 16
MAX_JWKS_BYTES = 1 << 20
_FAMILIES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}


def parse_jwks(data: bytes) -> dict[str | None, list[tuple[Any, str | None]]]:
    """The signature keys of a JWKS document: kid -> [(key, its alg or None)]; ValueError
    when the document is not a JWKS or holds no usable key."""
    import jwt

    doc = json.loads(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ValueError("not a JWKS document (no \"keys\" array)")
    out: dict[str | None, list[tuple[Any, str | None]]] = {}
    for raw in doc["keys"]:
        if not isinstance(raw, dict) or raw.get("use", "sig") != "sig" \
                or raw.get("kty") not in _FAMILIES.values():
            continue  # encryption keys, and symmetric ones (never trusted to verify)
        try:
            key = jwt.PyJWK.from_dict(raw)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError) as e:
            log.info("JWKS: skipping a key it cannot use (kid %r): %s", raw.get("kid"), e)
            continue
        kid = raw.get("kid") if isinstance(raw.get("kid"), str) else None
        alg = raw.get("alg") if isinstance(raw.get("alg"), str) else None
        out.setdefault(kid, []).append((key, alg))
    if not out:
        raise ValueError("the JWKS holds no usable signature key")
    return out


class JwksSource:
    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        self._keys: dict[str | None, list[tuple[Any, str | None]]] = {}
        self._missing: dict[str, float] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refreshes = 0  # completed reads (tests wait on it)

    # -- the loop thread

    def key_for(self, kid: str | None, alg: str) -> Any:
        """The key verifying a token of this kid and alg, or None (then, for an unknown
        kid, an early refresh is asked for)."""
        keys = self._keys
        candidates = keys.get(kid, []) if kid is not None else [k for ks in keys.values()
                                                                for k in ks]
        family = _FAMILIES.get(alg[:2])
        for key, key_alg in candidates:
            if (key_alg == alg) if key_alg is not None else key.key_type == family:
                return key.key
        if kid is not None and kid not in keys:
            self._expedite(kid)
        return None

    def _expedite(self, kid: str) -> None:
        now = time.monotonic()
        last = self._missing.get(kid[:1000])
        if last is not None and now - last < MISSING_KID_INTERVAL_S:
            return
        if len(self._missing) >= MISSING_KID_MAX:
            self._missing.pop(min(self._missing, key=self._missing.__getitem__))
        self._missing[kid[:1000]] = now
        log.info("JWKS: a token names key id %r, not in the set: refreshing now", kid[:64])
        self._wake.set()

    # -- startup and the refresher thread

    def start(self) -> None:
        """Read the keys (retrying as configured), then start refreshing them; ConfigError
        naming the URL's key when they cannot be read."""
        try:
            self._keys = self._read_with_retries()
        except (OSError, ValueError) as e:
            raise ConfigError(f"{self.settings.key}: cannot read the JWKS from "
                              f"{self.settings.jwks_url}: {e}") from None
        self.refreshes += 1
        self._thread = threading.Thread(target=self._run, name="kbroker-jwks", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop refreshing: the thread ends at once, or after the read it is in (never
        waited for here: close runs on the loop)."""
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.settings.refresh_ms / 1000)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._keys = self._read_with_retries()
                self.refreshes += 1
            except (OSError, ValueError) as e:
                log.warning("JWKS refresh from %s failed, keeping the keys it had: %s",
                            self.settings.jwks_url, e)

    def _read_with_retries(self) -> dict[str | None, list[tuple[Any, str | None]]]:
        wait, waited = self.settings.retry_backoff_ms / 1000, 0.0
        while True:
            try:
                return parse_jwks(self._read())
            except (OSError, ValueError) as e:
                if waited + wait > self.settings.retry_backoff_max_ms / 1000 or self._stop.is_set():
                    raise
                log.info("JWKS read from %s failed (%s); retrying in %.0f ms",
                         self.settings.jwks_url, e, wait * 1000)
            self._stop.wait(wait)
            waited += wait
            wait *= 2

    def _read(self) -> bytes:
        url = self.settings.jwks_url
        parsed = urlparse(url)
        if parsed.scheme.lower() == "file":
            with open(unquote(parsed.path), "rb") as f:
                return f.read(MAX_JWKS_BYTES + 1)[:MAX_JWKS_BYTES]
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:  # noqa: S310
            return bytes(response.read(MAX_JWKS_BYTES))
