"""Security: who a client is and what it may do, with Kafka's keys and formats.

    settings.py     each listener's security protocol, TLS and SASL settings, from
                    server.properties (listener.name.<l>. overrides as Kafka reads them)
    principal.py    KafkaPrincipal (User:name), the TLS principal (ssl.principal.mapping.rules)
    jaas.py         JAAS config strings (sasl.jaas.config)
    tls.py          an SSLContext from a listener's PEM key and trust stores
    scram.py        SCRAM-SHA-256/512 credentials (RFC 5802/7677), Kafka's stored form
    sasl.py         the server side of PLAIN and SCRAM exchanges
    credentials.py  the SCRAM credential store (a file on a single broker, ZooKeeper's
                    /config/users in cluster mode)
    acl.py          ACL bindings, filters, the operations they imply, matching
    authorizer.py   AclAuthorizer: super.users, allow.everyone.if.no.acl.found, DENY wins
    quotas.py       client quotas: entities, Kafka's precedence and Rate, throttle times

Every comparison of a secret is constant-time (hmac.compare_digest); no password,
salted or not, is ever logged.
"""
