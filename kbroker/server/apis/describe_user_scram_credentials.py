"""DescribeUserScramCredentials (key 50), v0: each user's SCRAM mechanisms and iteration
counts (never salts or keys). No users (null, or an empty array as librdkafka sends):
every user with a credential, as Kafka's ScramImage.describe. A user
named twice is DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND, as
Kafka answers. Needs DESCRIBE on the cluster when ACLs are on."""

from __future__ import annotations

from collections import Counter

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kbroker.security.scram import MECHANISMS
from kbroker.server.authorization import authorize_cluster
from kbroker.server.request_context import RequestContext

R = DescribeUserScramCredentialsResponse


def handle(ctx: RequestContext,
           request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    if not authorize_cluster(ctx, "DESCRIBE"):
        # on the response and each user, with the exception's message, as Kafka's
        # (librdkafka 2.16 crashes on a null message here)
        code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        return R(throttle_time_ms=0, error_code=code, error_message=message, results=[
            R.DescribeUserScramCredentialsResult(user=u.name, error_code=code, error_message=message,
                                                 credential_infos=[])
            for u in request.users or ()])
    stored = ctx.services.scram_credentials.users()
    if not request.users:
        wanted = sorted(stored)
        counts: Counter[str] = Counter()
    else:
        wanted = list(dict.fromkeys(u.name for u in request.users))
        counts = Counter(u.name for u in request.users)
    results = []
    for user in wanted:
        if counts[user] > 1:
            results.append(R.DescribeUserScramCredentialsResult(
                user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message=f"Cannot describe SCRAM credentials for the same user twice in "
                f"a single request: {user}", credential_infos=[]))
        elif user not in stored:
            results.append(R.DescribeUserScramCredentialsResult(
                user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message=f"Attempt to describe a user credential that does not exist: {user}",
                credential_infos=[]))
        else:
            infos = [R.CredentialInfo(mechanism=MECHANISMS[m][1], iterations=c.iterations)
                     for m, c in sorted(stored[user].items())]
            results.append(R.DescribeUserScramCredentialsResult(
                user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=infos))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
