"""What the cluster allocator last decided, and why: its JSON and text forms, and the
newest ``AllocationDecision`` read back from the decisions topic.

Owned here: :func:`decision_json` (the one JSON form: ``streamtrain cluster status
--json`` and the allocator's ``/cluster`` page), :func:`format_decision` (the text
table), and :func:`latest_decision` (reads the last message of the decisions topic
without joining a group; the allocator need not be running).
"""

from __future__ import annotations

from typing import Any

from streamtrain.config import KafkaSettings
from streamtrain.errors import KafkaError, SchemaError
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.wire import decode

__all__ = ["decision_json", "format_decision", "latest_decision"]

_CLASS_NAMES = {
    pb.ScaleRequest.GUARANTEE: "guarantee",
    pb.ScaleRequest.OPPORTUNISTIC: "opportunistic",
    pb.ScaleRequest.SERVING: "serving",
}


def decision_json(decision: pb.AllocationDecision) -> dict[str, Any]:
    return {
        "decision_id": decision.decision_id,
        "decided_at_ms": decision.decided_at_ms,
        "capacity_workers": decision.capacity_workers,
        "granted_workers": sum(g.granted_workers for g in decision.grants),
        "feasible": decision.feasible,
        "solver": decision.solver,
        "status": decision.status,
        "solve_ms": round(decision.solve_ms, 3),
        "plan_step_s": decision.plan_step_s,
        "jobs": [
            {
                "job": g.job,
                "class": _CLASS_NAMES.get(g.job_class, "unknown"),
                "current_workers": g.current_workers,
                "wanted_workers": g.wanted_workers,
                "granted_workers": g.granted_workers,
                "plan": list(g.plan),
                "reason": g.reason,
                "command_id": g.command_id or None,
            }
            for g in decision.grants
        ],
        "refusals": [
            {
                "job": r.job,
                "request_id": r.request_id,
                "reason": r.reason,
                "refused_at_ms": r.refused_at_ms,
            }
            for r in decision.refusals
        ],
        "notes": list(decision.notes),
    }


def format_decision(decision: pb.AllocationDecision) -> str:
    body = decision_json(decision)
    lines = [
        f"decision {body['decision_id']} at {body['decided_at_ms']} ms: "
        f"{body['granted_workers']} of {body['capacity_workers']} workers granted "
        f"({body['solver'] or '-'}: {body['status']}, {body['solve_ms']:.0f} ms)"
    ]
    header = ("JOB", "CLASS", "CURRENT", "WANTED", "GRANTED", "REASON")
    rows = [header] + [
        (
            j["job"],
            j["class"],
            str(j["current_workers"]),
            str(j["wanted_workers"]),
            str(j["granted_workers"]),
            j["reason"],
        )
        for j in body["jobs"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]))
    for note in body["notes"]:
        lines.append(f"note: {note}")
    for refusal in body["refusals"]:
        lines.append(f"refused {refusal['request_id']} for {refusal['job']!r}: {refusal['reason']}")
    return "\n".join(lines)


def latest_decision(
    kafka: KafkaSettings, topic: str, timeout_s: float = 10.0
) -> pb.AllocationDecision | None:
    """The newest decision on ``topic`` (partition 0), or None if it has none."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        kafka.confluent_config(
            **{"group.id": "streamtrain-cluster-status", "enable.auto.commit": False}
        )
    )
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout_s)
        except KafkaException as exc:
            raise KafkaError(f"cannot read the offsets of {topic!r}: {exc}") from exc
        if high <= low:
            return None
        consumer.assign([TopicPartition(topic, 0, high - 1)])
        message = consumer.poll(timeout_s)
        if message is None:
            raise KafkaError(f"no answer from {topic!r} within {timeout_s:g} s", retriable=True)
        if message.error() is not None:
            raise KafkaError(f"reading {topic!r} failed: {message.error()}")
        value = message.value()
        try:
            return decode(pb.AllocationDecision, value or b"")
        except SchemaError as exc:
            raise KafkaError(f"the newest message on {topic!r} is not a decision: {exc}") from exc
    finally:
        consumer.close()
