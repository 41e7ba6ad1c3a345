"""What Kafka 4.x's Errors.java adds to the 3.9 error table of ../error-codes.md, and
which codes are retriable.

Source: apache/kafka trunk `clients/src/main/java/org/apache/kafka/common/protocol/Errors.java`
(4.4, the trunk of the message-spec-4x folder). Codes 128-133 came with 4.0-4.1 (KIP-848's
regular expressions, KIP-1102's rebootstrap, KIP-1071 streams groups, KIP-932 share
sessions), 134-136 with 4.4 (DeleteGroups v3, the streams topology description update,
UnregisterController). error-codes.md also lacks 99, which 3.9 has. 4.4 reworded
FENCED_STATE_EPOCH's message (share and streams coordinators both use it).

Retriable: the code's exception class extends RetriableException (Errors.toHtml's
"Retriable" column), read from the exception classes of clients/.../common/errors/.
"""

from __future__ import annotations

ADDED: tuple[tuple[int, str, str], ...] = (
    (99, "POSITION_OUT_OF_RANGE",
     "Requested position is not greater than or equal to zero, and less than the size of the snapshot."),
    (128, "INVALID_REGULAR_EXPRESSION", "The regular expression is not valid."),
    (129, "REBOOTSTRAP_REQUIRED",
     "Client metadata is stale. The client should rebootstrap to obtain new metadata."),
    (130, "STREAMS_INVALID_TOPOLOGY", "The supplied topology is invalid."),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", "The supplied topology epoch is invalid."),
    (132, "STREAMS_TOPOLOGY_FENCED", "The supplied topology epoch is outdated."),
    (133, "SHARE_SESSION_LIMIT_REACHED", "The limit of share sessions has been reached."),
    (134, "GROUP_DELETION_FAILED",
     "DeleteGroups could not complete; see the error message on the per-group result for details."),
    (135, "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED",
     "The broker could not process the topology description update; see the error message for details."),
    (136, "CONTROLLER_ID_NOT_REGISTERED", "The given controller ID was not registered."),
)

REWORDED: dict[int, str] = {
    124: "The coordinator rejected the request because the state epoch did not match.",
}

RETRIABLE: frozenset[int] = frozenset({
    2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83, 84,
    88, 89, 100, 103, 106, 122, 123, 133,
})


def kafka4_rows(rows_39: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """The 3.9 rows with Kafka 4's rewordings and additions, by code."""
    by_code = {code: (code, name, REWORDED.get(code, text)) for code, name, text in rows_39}
    for code, name, text in ADDED:
        if code in by_code and by_code[code][1] != name:
            raise ValueError(f"error code {code}: {by_code[code][1]} in error-codes.md, {name} in Kafka 4")
        by_code[code] = (code, name, text)
    return [by_code[c] for c in sorted(by_code)]
