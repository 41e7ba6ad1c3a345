"""Leader election rules of the controller (Kafka's PartitionLeaderElectionAlgorithms).
Pure functions: (assignment, ISR, live brokers, ...) -> the new leader and ISR, or None
when no replica may lead.

  offline            the first replica of the assignment that is alive and in the ISR;
                     the ISR keeps its live members. With unclean election allowed and no
                     such replica, the first live replica leads alone (records it lacks are
                     lost: that is what unclean means).
  reassignment       the same, among the target replicas.
  preferred          the first replica of the assignment, if alive and in the ISR.
  controlled         the first replica alive, in the ISR and not shutting down; the
  shutdown           shutting-down brokers leave the ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def offline_leader(replicas: Sequence[int], isr: Sequence[int], live: Collection[int],
                   unclean: bool) -> tuple[int, tuple[int, ...]] | None:
    live_isr = tuple(r for r in isr if r in live)
    for r in replicas:
        if r in live and r in isr:
            return r, live_isr
    if unclean:
        for r in replicas:
            if r in live:
                return r, (r,)
    return None


def reassignment_leader(target: Sequence[int], isr: Sequence[int],
                        live: Collection[int]) -> tuple[int, tuple[int, ...]] | None:
    for r in target:
        if r in live and r in isr:
            return r, tuple(isr)
    return None


def preferred_leader(replicas: Sequence[int], isr: Sequence[int],
                     live: Collection[int]) -> tuple[int, tuple[int, ...]] | None:
    if replicas and replicas[0] in live and replicas[0] in isr:
        return replicas[0], tuple(isr)
    return None


def controlled_shutdown_leader(replicas: Sequence[int], isr: Sequence[int], live: Collection[int],
                               shutting_down: Collection[int]) -> tuple[int, tuple[int, ...]] | None:
    new_isr = tuple(r for r in isr if r not in shutting_down)
    for r in replicas:
        if r in live and r in isr and r not in shutting_down:
            return r, new_isr
    return None
