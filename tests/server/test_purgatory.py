"""DelayedOperationPurgatory on a MockTimer: operations complete inside the check that
lets them, once; at their deadline otherwise; checks gathered by a hold run after it, for
the operations watching before them (Kafka's DelayedOperationTest, in kbroker's terms)."""

from __future__ import annotations

from kbroker.utils.purgatory import DelayedOperation, DelayedOperationPurgatory
from kbroker.utils.timer import MockTimer


class Op(DelayedOperation):
    """Completes once `ready` is set; records how it ended in `log`."""

    def __init__(self, name: str, deadline: float, log: list[str], ready: bool = False) -> None:
        super().__init__(deadline)
        self.name, self.log, self.ready, self.tries = name, log, ready, 0

    def try_complete(self) -> bool:
        self.tries += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.log.append(self.name)

    def on_expiration(self) -> None:
        self.log.append(f"{self.name} expired")


def purgatory() -> tuple[DelayedOperationPurgatory, MockTimer]:
    timer = MockTimer()
    return DelayedOperationPurgatory("test", timer), timer


def test_an_operation_that_can_complete_at_once_is_not_watched() -> None:
    p, timer = purgatory()
    log: list[str] = []
    assert p.try_complete_else_watch(Op("now", 60, log, ready=True), ["a"])
    assert log == ["now"] and p.watched == 0 and timer.pending == 0


def test_an_operation_completes_inside_the_check_of_any_of_its_keys_once() -> None:
    p, _timer = purgatory()
    log: list[str] = []
    op = Op("ab", 60, log)
    assert not p.try_complete_else_watch(op, ["a", "b"])
    p.check_and_complete("a")
    assert log == [] and p.watched == 1  # tried, not ready: still watched
    op.ready = True
    p.check_and_complete("b")
    assert log == ["ab"]  # in the check, not later
    p.check_and_complete("a")
    p.check_and_complete("b")
    assert log == ["ab"] and p.watched == 0


def test_an_operation_expires_at_its_deadline_and_is_forgotten() -> None:
    p, timer = purgatory()
    log: list[str] = []
    p.try_complete_else_watch(Op("late", 1.0, log), ["a"])
    timer.advance(0.999)
    assert log == []
    timer.advance(0.001)
    assert log == ["late", "late expired"] and p.watched == 0
    p.check_and_complete("a")
    assert log == ["late", "late expired"]


def test_deadlines_run_in_order_whatever_completed_before() -> None:
    """One timer serves every deadline: a later watch with an earlier deadline runs first,
    and a completed operation does not hold back the others."""
    p, timer = purgatory()
    log: list[str] = []
    ops = {name: Op(name, deadline, log) for name, deadline in
           (("late", 0.2), ("early", 0.01), ("completed", 0.005), ("forced", 0.001), ("middle", 0.05))}
    for name, op in ops.items():
        p.try_complete_else_watch(op, [name])
    ops["completed"].ready = True
    p.check_and_complete("completed")
    ops["forced"].force_complete()
    timer.advance(1)
    assert log == ["completed", "forced", "early", "early expired", "middle", "middle expired",
                   "late", "late expired"]
    assert p.watched == 0 and timer.pending == 0


def test_checks_wait_for_the_outermost_hold() -> None:
    """A Produce of several partitions tries a parked Fetch once, after all its appends."""
    p, _timer = purgatory()
    log: list[str] = []
    ab, b = Op("ab", 60, log, ready=True), Op("b", 60, log, ready=True)
    p.watch(ab, ["a", "b"])
    p.watch(b, ["b"])
    with p.held():
        p.check_and_complete("a")
        with p.held():
            p.check_and_complete("b")
        assert log == []
    assert sorted(log) == ["ab", "b"] and ab.tries == 1 and p.watched == 0


def test_a_held_check_tries_only_the_operations_watching_before_it() -> None:
    """A follower's Fetch that moved the high watermark (a check, held until the end of its
    read) and then parked is not tried for its own move; a later check tries it."""
    p, _timer = purgatory()
    log: list[str] = []
    before, after = Op("before", 60, log, ready=True), Op("after", 60, log, ready=True)
    p.watch(before, ["a"])
    with p.held():
        p.check_and_complete("a")
        p.watch(after, ["a"])
    assert log == ["before"] and p.watched == 1
    with p.held():
        p.check_and_complete("a")
    assert log == ["before", "after"] and p.watched == 0


def test_an_operation_is_not_tried_again_for_what_its_own_try_did() -> None:
    """A parked Fetch re-read inside a check may move the high watermark itself (a follower
    read): that check runs after its try and does not try it again."""
    p, _timer = purgatory()
    log: list[str] = []

    class Moves(Op):
        def try_complete(self) -> bool:
            self.tries += 1
            p.check_and_complete("a")  # what its read changed
            return False
    op = Moves("moves", 60, log)
    p.watch(op, ["a"])
    p.check_and_complete("a")
    assert op.tries == 1 and p.watched == 1
    p.check_and_complete("a")
    assert op.tries == 2


def test_check_and_complete_all_tries_every_watched_operation() -> None:
    p, _timer = purgatory()
    log: list[str] = []
    ops = [Op(name, 60, log, ready=True) for name in "xyz"]
    for op in ops:
        p.watch(op, [op.name])
    p.check_and_complete_all()
    assert sorted(log) == ["x", "y", "z"] and p.watched == 0


def test_a_failing_try_leaves_the_other_operations_running() -> None:
    p, _timer = purgatory()
    log: list[str] = []

    class Broken(Op):
        def try_complete(self) -> bool:
            raise RuntimeError("bug")
    p.watch(Broken("broken", 60, log), ["a"])
    p.watch(Op("fine", 60, log, ready=True), ["a"])
    p.check_and_complete("a")
    assert log == ["fine"] and p.watched == 1
