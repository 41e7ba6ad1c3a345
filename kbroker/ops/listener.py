"""OperationsListener: the broker's one HTTP listener for operations (operations.listener).

    GET /metrics          Prometheus text format (kbroker.ops.metrics)
    GET /healthz          200 while the broker process serves: {"status": "alive", ...}
    GET /readyz           200 once ready, else 503, with each check: logs loaded, Kafka
                          listeners bound, registered in ZooKeeper (cluster mode),
                          not shutting down
    GET /                 the web console (kbroker/ops/static), its JSON under /api/
                          (kbroker.ops.console_api) and live figures as server-sent
                          events at /api/live (kbroker.ops.live)

It runs on the broker's own event loop, beside the Kafka listeners, from before the logs
load (so /healthz and /readyz answer during recovery) until after they are closed.
The console is read-only unless operations.write.enable is set (then it creates and
deletes topics and resets a group's offsets through the Kafka APIs: kbroker.ops.console_admin).
Its user signs in as to the Kafka listeners, and sees and does what the broker's
authorizer lets that user see and do (kbroker.ops.console_auth).
A method a path does not take gets 405, an unknown path 404, a malformed request or parameter 400, a request for what does not
exist 404, and the console's data while the broker is not running 503.

The HTTP library is aiohttp (aio-libs): an asyncio-native server that runs on a loop it
is given (AppRunner + TCPSite: no thread, no process, no loop of its own, which is what
"on the broker's own event loop" needs), with llhttp's C parser and bounded request
lines and headers (malformed input is a 400 before any handler runs), streamed
responses for server-sent events, a static file handler that refuses paths out of its
directory, and a release history of a decade under an active organisation. The other
candidates each missed one of these: uvicorn (with Starlette) wants to own the loop's
lifetime and signals; tornado brings its own IOLoop layer; http.server needs a thread of
its own, which would take the GIL from the Kafka listener at unpredictable moments.

What the listener may cost the Kafka listeners is bounded: /metrics gathers its figures
on the loop in steps (kbroker.ops.metrics.STEP partitions at a time), formats the text
on a worker thread, and renders at most once per MIN_SCRAPE_INTERVAL_S (scrapes
meanwhile share that body); the console's JSON is likewise computed at most once a
second per URL (console_api), and the live figures once a second for all streams.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric

from kbroker.ops import console_api, metrics
from kbroker.ops.console_auth import ConsoleAuth
from kbroker.ops.health import health, readiness
from kbroker.ops.live import LiveFigures

if TYPE_CHECKING:
    from kbroker.ops.served_broker import ServedBroker

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
SHUTDOWN_TIMEOUT_S = 2.0
# /metrics is rendered at most this often; scrapes meanwhile get the same body (the
# listener's work is then bounded however many scrapers there are)
MIN_SCRAPE_INTERVAL_S = 1.0


class _Gathered:
    """A collector over families gathered earlier (generate_latest asks for collect())."""

    def __init__(self, *groups: Any) -> None:
        self._groups = groups

    def collect(self) -> list[Metric]:
        out: list[Metric] = []
        for group in self._groups:
            out.extend(group.collect() if hasattr(group, "collect") else group)
        return out


class OperationsListener:
    """See the module docstring. Used from the broker's loop thread only."""

    def __init__(self, broker: ServedBroker, host: str, port: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port  # the bound port once started
        self.live = LiveFigures(broker)
        self.auth = ConsoleAuth(broker)
        self._process = metrics.process_registry()
        self._runner: web.AppRunner | None = None
        self._scrape: asyncio.Future[bytes] | None = None  # the latest /metrics body
        self._scraped_at = 0.0
        self._scraped_phase = broker.phase

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else (self.host or "127.0.0.1")
        return f"http://{host}:{self.port}"

    def application(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024, middlewares=[self.auth.middleware])
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/", self._index)
        app.router.add_get("/login", self._index)  # console_auth's middleware answers it
        app.router.add_get("/api/live", self.live.stream)
        console_api.add_routes(app, self.broker)
        app.router.add_static("/static/", STATIC_DIR, follow_symlinks=False)
        return app

    async def start(self) -> None:
        runner = web.AppRunner(self.application(), access_log=None, handle_signals=False,
                               shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host or None, self.port, reuse_address=True)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        self.live.start()

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        await self.live.stop()  # ends the event streams, so cleanup need not wait for them
        await runner.cleanup()

    # -- handlers

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response(health(self.broker))

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, body = readiness(self.broker)
        return web.json_response(body, status=200 if ready else 503)

    async def _index(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC_DIR / "index.html",
                                headers={"Cache-Control": "no-cache"})

    async def _metrics(self, request: web.Request) -> web.Response:
        loop = asyncio.get_running_loop()
        if (self._scrape is None or loop.time() - self._scraped_at >= MIN_SCRAPE_INTERVAL_S
                or self._scraped_phase is not self.broker.phase):
            self._scraped_at, self._scraped_phase = loop.time(), self.broker.phase
            self._scrape = asyncio.ensure_future(self._render())
        body = await asyncio.shield(self._scrape)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _render(self) -> bytes:
        families = metrics.Families()
        for _ in metrics.collect_steps(self.broker, families):  # on the loop, in steps
            await asyncio.sleep(0)
        gathered = _Gathered(list(families.by_name.values()), self._process)
        return await asyncio.get_running_loop().run_in_executor(None, generate_latest, gathered)
