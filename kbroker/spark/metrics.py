"""Source progress metrics: how far a query is behind the log end, as Spark's Kafka source.

Spark's Kafka source reports in each micro-batch's progress, per source,
`minOffsetsBehindLatest`, `maxOffsetsBehindLatest` and `avgOffsetsBehindLatest`: over
the partitions, the latest available offset minus the offset the batch consumed up
to (KafkaMicroBatchStream.metrics). pyspark's Python data source API has no way to
put metrics into the progress (a Python stream reader's progress shows `metrics={}`),
but the progress carries both offsets for every source: `endOffset` (consumed up to)
and `latestOffset` (what the source saw as available, from reportLatestOffset). So
the same figures are computed from a progress, while the query runs:

    from kbroker.spark import source_metrics
    source_metrics(query.lastProgress)
    # [{'minOffsetsBehindLatest': '0', 'maxOffsetsBehindLatest': '129',
    #   'avgOffsetsBehindLatest': '103.0'}]

one dict per source of the query, in the order of `progress.sources` (empty for
sources whose offsets are not Spark's Kafka offset JSON, or before the first batch).
Values are strings, as in Spark's map: longs for min and max, a double for avg.
"""

from __future__ import annotations

import json
from typing import Any


def _offsets(value: Any) -> dict[tuple[str, str], int] | None:
    """{"topic": {"partition": offset}} (a JSON string or a dict) as a flat map."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, dict):
        return None
    out = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            return None
        for p, offset in parts.items():
            if not isinstance(offset, int):
                return None
            out[(topic, p)] = offset
    return out


def _field(source: Any, name: str) -> Any:
    return source[name] if isinstance(source, dict) else getattr(source, name, None)


def offsets_behind_latest(end_offset: Any, latest_offset: Any) -> dict[str, str]:
    """Spark's three metrics from one source's endOffset and latestOffset."""
    consumed, latest = _offsets(end_offset), _offsets(latest_offset)
    if not consumed or not latest:
        return {}
    behind = [offset - consumed.get(tp, 0) for tp, offset in latest.items()]
    return {"minOffsetsBehindLatest": str(min(behind)),
            "maxOffsetsBehindLatest": str(max(behind)),
            "avgOffsetsBehindLatest": repr(sum(behind) / len(behind))}


def source_metrics(progress: Any) -> list[dict[str, str]]:
    """The metrics of each source of a StreamingQueryProgress (or its dict form)."""
    if progress is None:
        return []
    sources = _field(progress, "sources") or []
    return [offsets_behind_latest(_field(s, "endOffset"), _field(s, "latestOffset"))
            for s in sources]
