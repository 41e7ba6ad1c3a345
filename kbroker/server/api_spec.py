"""ApiSpec: one implemented API as the dispatcher and ApiVersions see it (its key, the
versions handled, its handler and, where the response has per-item error codes, the
function that answers a refused request). The tables themselves are
`server/api_table.py`'s; this module holds only the shape, so that what a table is made
of is known below the handlers that fill it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kbroker.protocol.api_key import ApiKey
from kbroker.server.request_context import RequestContext

Handler = Callable[[RequestContext, Any], Any | Awaitable[Any]]
ErrorResponse = Callable[[Any, int, int], Any]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: ApiKey
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorResponse | None = None
