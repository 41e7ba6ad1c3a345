"""The network server: listeners, connections, in-order responses, API dispatch.

    listener.py         SocketServer: listening sockets (add_reader), max.connections,
                        the idle sweep (connections.max.idle.ms), graceful drain
    connection.py       Connection: length-prefixed frames on a raw non-blocking socket,
                        header decode, dispatch through api_table, responses in request order
    response_writer.py  ResponseWriter: bytes parts with sendmsg, FileSlice parts with
                        os.sendfile; backpressure by queued bytes
    tls_transport.py    TlsChannel (an SSLObject over memory BIOs) and TlsResponseWriter
                        (slices read and encrypted in pieces) for SSL / SASL_SSL listeners
    authenticator.py    SaslAuthenticator: SaslHandshake / SaslAuthenticate states, raw v0
                        tokens, re-authentication, the principal
    authorization.py    every API's ACL checks: whole-request ones the connection makes,
                        helpers for the per-item ones handlers make
    api_table.py        API_TABLE {api_key: ApiSpec(min, max, handler, error_response)}:
                        the only source of ApiVersions, so advertised == handled
    apis/<name>.py      one module per API (family): handle(ctx, request) -> response |
                        None | CLOSE_CONNECTION | awaitable of those; optional
                        error_response(request, version, error_code)
    request_context.py  RequestContext: the broker state, version, client id, listener,
                        principal
    request_logger.py   RequestLog: Kafka's kafka.request.logger ("Completed request" at
                        DEBUG, bodies at TRACE) and, with --trace, the protocol trace
    protocol_trace.py   ProtocolTrace: every request and response as JSON lines, rotated
    request_json.py     messages as JSON values, a response's error codes and messages
    broker_loggers.py   log levels under log4j's names: --log-level, log4j keys,
                        the BROKER_LOGGER config resource

Adding an API: write apis/<name>.py with `handle` (and `error_response` when the
response has per-item error codes), then add one `_spec(ApiKey.X, min, max, module)`
line to API_TABLE, and its authorization check (authorization.py: REQUEST_CHECKS, or
HANDLER_CHECKED with the checks in the handler; otherwise it needs ALTER on the
cluster when ACLs are on). Handlers run on the broker's event loop thread; a handler that
changes state must do so before its first `await` (requests on one connection are
dispatched in order; only their responses wait for each other).
"""
