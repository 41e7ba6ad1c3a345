"""The Broker: one node's lifecycle (Kafka's KafkaServer startup and shutdown): the loop
and its thread, the phases, the listeners, the periodic work, the shutdown order. Its
collaborators (logs, topics, cluster, coordinators, security) are built and wired by
BrokerComponents (broker_components.py).

    with kbroker.Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": tmp}) as b:
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})

Without `log.dirs`, an embedded Broker keeps its logs in a fresh temporary
directory removed by stop(). Each log dir is locked for the broker's life (Kafka's
`.lock`): a second broker on the same dir fails to start, naming it.

`Broker.start()` runs the broker's asyncio loop in a background thread (for
embedding and tests) and returns once the port answers; `serve_forever()` runs
it in the calling thread until `stop()` or SIGTERM/SIGINT (the CLI). There is no
global state: two Brokers in one process are independent.

Threading: everything in BrokerComponents (logs, topic registry) and the server's
connections is used from the broker's loop thread only; `Broker.stop()` hands over to that
thread with call_soon_threadsafe.

The operations HTTP listener (operations.listener: /metrics, /healthz, /readyz, the
console; kbroker.ops) runs on the same loop, from before the logs load to after they are
closed; `phase` (BrokerPhase, Kafka's BrokerState) tells it where the broker is.

Shutdown order (SIGTERM, SIGINT, stop()): stop accepting connections; stop
reading new requests and wake parked Fetches; wait (bounded) for in-flight
responses to be sent; close connections; LogManager.shutdown() (flush,
checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import gc
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kbroker.broker_components import BrokerComponents
from kbroker.config import BrokerConfig, Listener, broker_config
from kbroker.server.broker_phase import BrokerPhase
from kbroker.server.request_services import RequestServices
from kbroker.storage.producer_state import expire_producers
from kbroker.utils.periodic import every
from kbroker.utils.rlimit import open_file_limit
from kbroker.utils.time import SYSTEM_TIME, Time

if TYPE_CHECKING:
    from kbroker.ops.listener import OperationsListener
    from kbroker.server.protocol_trace import TraceSettings
    from kbroker.server.request_metrics import RequestMetrics

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 10.0
PRODUCER_ID_EXPIRATION_CHECK_S = 600.0  # Kafka's producer.id.expiration.check.interval.ms


class Broker:
    """A single kbroker node. See the module docstring."""

    def __init__(
        self,
        config: BrokerConfig | Mapping[str, str] | None = None,
        *,
        time: Time = SYSTEM_TIME,
        trace: TraceSettings | None = None,
        operations_optional: bool = False,
    ) -> None:
        self._temp_log_dir: str | None = None
        if not isinstance(config, BrokerConfig) and not {"log.dirs", "log.dir"} & set(config or {}):
            # Embedded without log.dirs: a fresh directory of its own, removed on stop,
            # never the shared default of `kbroker serve` (another broker may hold it).
            self._temp_log_dir = tempfile.mkdtemp(prefix="kbroker-")
            config = {**(config or {}), "log.dirs": self._temp_log_dir}
        self.config = broker_config(config)
        self.time = time
        self.trace = trace  # the protocol trace (kbroker serve --trace), off unless given
        self.state: BrokerComponents | None = None
        self.services: RequestServices | None = None  # what handlers see, once serving
        self.server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._periodic: list[asyncio.Task[None]] = []
        self.failure: str | None = None  # why the broker stopped by itself, if it did
        self._bound: list[tuple[str, int]] = []
        self.phase = BrokerPhase.NOT_RUNNING
        # kbroker serve: the default operations listener moves to a free port when taken
        self._operations_optional = operations_optional
        self.operations: OperationsListener | None = None  # with operations.listener
        self.request_metrics: RequestMetrics | None = None  # while /metrics is served

    # -- public API

    @property
    def bootstrap_servers(self) -> str:
        """`host:port[,host:port]` of the bound listeners (port 0 resolved), once started."""
        if not self._bound:
            raise RuntimeError("the broker is not started")
        return ",".join(f"{_host_for_url(h)}:{p}" for h, p in self._bound)

    @property
    def port(self) -> int:
        if not self._bound:
            raise RuntimeError("the broker is not started")
        return self._bound[0][1]

    @property
    def running(self) -> bool:
        return self.phase is BrokerPhase.RUNNING

    @property
    def operations_url(self) -> str | None:
        """http://host:port of the operations listener (operations.listener), once bound."""
        return self.operations.url if self.operations is not None else None

    def start(self, timeout: float = 60.0) -> Broker:
        """Start in a background thread; return once the listeners accept connections."""
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._thread_main, name="kbroker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("kbroker did not start in time")
        if self._startup_error is not None:
            self._thread.join()
            self._remove_temp_log_dir()
            raise self._startup_error
        return self

    def serve_forever(self, install_signal_handlers: bool = True) -> None:
        """Run in this thread until stop(), SIGTERM or SIGINT."""
        try:
            asyncio.run(self._run(install_signal_handlers))
        finally:
            self._remove_temp_log_dir()

    def stop(self, timeout: float = 60.0) -> None:
        loop, stop_event = self._loop, self._stop_event
        if loop is not None and stop_event is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop_event.set)
            except RuntimeError:
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if self._thread is None or not self._thread.is_alive():
            self._remove_temp_log_dir()

    def _remove_temp_log_dir(self) -> None:
        if self._temp_log_dir is not None:
            shutil.rmtree(self._temp_log_dir, ignore_errors=True)
            self._temp_log_dir = None

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals

    def _bound_endpoints(self, server: Any) -> list[tuple[str, int]]:
        out = []
        for bl in server.listeners:
            host = bl.host or "127.0.0.1"
            if host in ("0.0.0.0", "::"):
                host = "127.0.0.1"
            out.append((host, bl.port))
        return out

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._run(False))
        except BaseException as e:  # surfaced by start()
            if not self._ready.is_set():
                self._startup_error = e
                self._ready.set()
            else:
                log.exception("kbroker loop failed")

    async def _run(self, install_signal_handlers: bool) -> None:
        from kbroker.server.listener import SocketServer
        from kbroker.server.protocol_trace import ProtocolTrace

        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stop_event = asyncio.Event()
        self.phase = BrokerPhase.STARTING
        await self._start_operations()
        try:
            state = BrokerComponents(self.config, self.time)
        except BaseException:
            await self._stop_operations()
            raise
        self.state = state
        try:
            if state.clustered:
                await state.connect_cluster()
            self.phase = BrokerPhase.RECOVERY
            await loop.run_in_executor(None, state.load_logs)
            state.finish_startup()
            # The logs, segments and topics loaded now live as long as the broker: keep
            # them out of the garbage collector's full passes, which otherwise walk every
            # one of them (hundreds of ms at 100,000 partitions) whenever a large request
            # allocates enough to trigger one.
            gc.freeze()
            trace = ProtocolTrace(self.trace, loop) if self.trace is not None else None
            self.services = state.request_services()
            server = SocketServer(self.services, loop, trace, self.request_metrics)
            self.server = server
            await loop.run_in_executor(None, server.oauth.start)  # OIDC listeners' JWKS
            # A cluster broker serves nobody before it is registered (see listener.py).
            server.start(accepting=state.zk_broker is None)
            state.endpoints.update(_advertised(self.config, server))
            if state.zk_broker is not None:
                await state.start_cluster()
                server.start_accepting()
        except BaseException:
            await state.stop_cluster()
            if self.server is not None:
                self.server.close_all()
            state.shutdown_logs()
            await self._stop_operations()
            raise
        self._bound = self._bound_endpoints(server)
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._stop_event.set)
        def dir_offline(log_dir: str, any_left: bool) -> None:  # on the failing thread
            loop.call_soon_threadsafe(self._log_dir_offline, state, log_dir, any_left)

        state.log_manager.register_dir_offline_handler(dir_offline)
        self._start_periodic(state)
        listening = ", ".join(
            f"{bl.name}://{_host_for_url(bl.bound_host)}:{bl.port}" for bl in server.listeners
        )
        console = f", console at {self.operations.url}" if self.operations is not None else ""
        log.info("kbroker listening on %s (log.dirs=%s)%s", listening,
                 ",".join(self.config.log_dirs), console)
        log.info("open-file limit %d: %d descriptors in use for %d partitions; at most %d "
                 "segments hold open files at once (log.open.segment.files.max)", open_file_limit(),
                 _open_descriptors(), len(state.log_manager.all_logs()),
                 state.log_manager.file_cache.max_open)
        self.phase = BrokerPhase.RUNNING
        self._ready.set()
        try:
            await self._stop_event.wait()
        finally:
            await self._shutdown(state, server)

    def _log_dir_offline(self, state: BrokerComponents, log_dir: str, any_left: bool) -> None:
        state.log_manager.take_dir_offline(log_dir)
        if not any_left and self._stop_event is not None:
            # Kafka halts when every log dir has failed: nothing could be served.
            self.failure = f"every log dir has failed (the last: {log_dir}); shutting down"
            log.error("%s", self.failure)
            self._stop_event.set()

    def _start_periodic(self, state: BrokerComponents) -> None:
        if state.log_manager.cleaner is not None:
            state.log_manager.cleaner.start()
        self._periodic = [
            asyncio.ensure_future(
                every(self.config.log_retention_check_interval_ms / 1000, state.cleanup_logs)
            ),
            asyncio.ensure_future(every(1.0, state.log_manager.flush_dirty_logs)),
            asyncio.ensure_future(every(self.config.log_flush_offset_checkpoint_interval_ms / 1000,
                                         state.log_manager.checkpoint_in_background)),
            asyncio.ensure_future(every(self.config.offsets_retention_check_interval_ms / 1000,
                                         state.group_coordinator.expire_offsets)),
            asyncio.ensure_future(every(PRODUCER_ID_EXPIRATION_CHECK_S, lambda: expire_producers(
                state.log_manager.all_logs().values(), self.time.milliseconds(),
                state.config.producer_id_expiration_ms))),
            asyncio.ensure_future(every(
                self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000,
                state.txn_coordinator.abort_timed_out_transactions)),
            asyncio.ensure_future(every(
                self.config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000,
                state.txn_coordinator.remove_expired_transactional_ids)),
        ]

    async def _start_operations(self) -> None:
        """The operations HTTP listener (operations.listener), first: /healthz and /readyz
        answer while the logs load. A port in use stops the start, naming the key and the
        port, unless this is `kbroker serve`'s default listener: that one then takes a free
        port on the same host (logged). The config records the port bound (that one, or
        the one port 0 picked), so that DescribeConfigs (what `kbroker top
        --bootstrap-server` asks) names it."""
        endpoint = self.config.operations_endpoint
        if endpoint is None:
            return
        from kbroker.ops.listener import OperationsListener
        from kbroker.server.request_metrics import RequestMetrics

        listener = OperationsListener(self, *endpoint)
        try:
            await listener.start()
        except OSError as e:
            if not self._operations_optional or e.errno != errno.EADDRINUSE:
                raise OSError(e.errno, f"operations.listener {endpoint[0]}:{endpoint[1]}: "
                                       f"{e.strerror or e} (set operations.listener to another "
                                       f"host:port, port 0 for a free one)") from e
            listener = OperationsListener(self, endpoint[0], 0)
            await listener.start()
            log.warning("operations listener: %s:%d is taken (another broker?), listening on "
                        "%s instead", *endpoint, listener.url)
        if listener.port != endpoint[1]:  # port 0, or the default's fallback: the port bound
            host = f"[{endpoint[0]}]" if ":" in endpoint[0] else endpoint[0]
            bound = f"{host}:{listener.port}"
            self.config = dataclasses.replace(self.config, operations_listener=bound, props={
                **self.config.props, "operations.listener": bound})
        self.operations = listener
        self.request_metrics = RequestMetrics()
        log.info("operations listener on %s (/metrics, /healthz, /readyz, console at /)",
                 listener.url)

    async def _stop_operations(self) -> None:
        if self.operations is not None:
            await self.operations.stop()

    async def _shutdown(self, state: BrokerComponents, server: Any) -> None:
        log.info("kbroker shutting down")
        if state.zk_broker is not None:  # leaderships move away while we still serve
            self.phase = BrokerPhase.PENDING_CONTROLLED_SHUTDOWN
            await state.zk_broker.controlled_shutdown()
        self.phase = BrokerPhase.SHUTTING_DOWN
        state.begin_shutdown()
        server.stop_accepting()
        for task in self._periodic:
            task.cancel()
        state.replica_manager.delayed_fetch_purgatory.check_and_complete_all()
        state.group_coordinator.shutdown()  # parked JoinGroup/SyncGroup answer NOT_COORDINATOR
        state.txn_coordinator.shutdown()  # markers in flight: completed after the restart
        await server.drain(SHUTDOWN_GRACE_SECONDS)
        server.close_all()
        await state.stop_cluster()
        state.shutdown_logs()
        await self._stop_operations()
        self.phase = BrokerPhase.NOT_RUNNING
        log.info("kbroker stopped")


def _advertised(config: BrokerConfig, server: Any) -> dict[str, tuple[str, int]]:
    """Listener name -> (host, port) clients should use, per advertised.listeners."""
    bound = {bl.name: bl for bl in server.listeners}
    adv: dict[str, Listener] = {a.name: a for a in (config.advertised_listeners or ())}
    out: dict[str, tuple[str, int]] = {}
    for name, bl in bound.items():
        a = adv.get(name)
        host = a.host if a and a.host else bl.host
        port = a.port if a and a.port else bl.port
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
        out[name] = (host, port)
    return out


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host
