"""AlterUserScramCredentials (key 51), v0: add, replace or delete users' SCRAM credentials.

The client salts and hashes (salt, iterations, SaltedPassword); the broker keeps
StoredKey and ServerKey derived from them (kbroker.security.scram), in its credential
store (a file, or ZooKeeper's /config/users in cluster mode). Per user, as Kafka's
ZkAdminManager checks: an unknown mechanism is UNSUPPORTED_SASL_MECHANISM; an empty
name, salt or password, or iterations outside [4096, 16384], UNACCEPTABLE_CREDENTIAL;
a user altered twice for one mechanism, DUPLICATE_RESOURCE; deleting a credential that
does not exist, RESOURCE_NOT_FOUND. A user with any error has none of its operations
applied. Needs ALTER on the cluster when ACLs are on.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from kbroker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
)
from kbroker.server.authorization import authorize_cluster
from kbroker.server.request_context import RequestContext

Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


async def handle(ctx: RequestContext,
                 request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    ops = [(d.name, d.mechanism) for d in request.deletions] + \
          [(u.name, u.mechanism) for u in request.upsertions]
    users = list(dict.fromkeys(name for name, _m in ops))
    if not authorize_cluster(ctx, "ALTER"):
        return _response([Result(user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                 error_message=None) for u in users])
    errors: dict[str, tuple[int, str]] = {}
    for (name, mech), count in Counter(ops).items():
        if count > 1:
            errors.setdefault(name, (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot "
                                     "be altered twice in the same request"))
        if mech not in MECHANISM_BY_TYPE:
            errors.setdefault(name, (ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                     "Unknown SCRAM mechanism"))
        if not name:
            errors.setdefault(name, (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                                     "Username must not be empty"))
    store = ctx.services.scram_credentials
    upserts: dict[str, dict[str, ScramCredential]] = defaultdict(dict)
    deletions: dict[str, set[str]] = defaultdict(set)
    for d in request.deletions:
        if d.name in errors:
            continue
        mech_name = MECHANISM_BY_TYPE[d.mechanism]
        if store.get(d.name, mech_name) is None:
            errors[d.name] = (ErrorCode.RESOURCE_NOT_FOUND,
                              "Attempt to delete a user credential that does not exist")
        deletions[d.name].add(mech_name)
    for u in request.upsertions:
        if u.name in errors:
            continue
        if u.iterations < MIN_ITERATIONS:
            errors[u.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > MAX_ITERATIONS:
            errors[u.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not u.salt or not u.salted_password:
            errors[u.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                              "Credential must have a salt and a salted password")
        else:
            mech_name = MECHANISM_BY_TYPE[u.mechanism]
            upserts[u.name][mech_name] = credential_from_salted_password(
                mech_name, u.salted_password, u.salt, u.iterations)
    results = []
    for user in users:
        if user in errors:
            code, message = errors[user]
            results.append(Result(user=user, error_code=code, error_message=message))
            continue
        try:
            await store.alter(user, upserts.get(user, {}), deletions.get(user, set()))
        except Exception as e:  # ZooKeeper or the file: this user's change is not made
            results.append(Result(user=user, error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                  error_message=f"storing the credential failed: {type(e).__name__}"))
            continue
        results.append(Result(user=user, error_code=ErrorCode.NONE, error_message=None))
    return _response(results)


def _response(results: list[Result]) -> AlterUserScramCredentialsResponse:
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)
