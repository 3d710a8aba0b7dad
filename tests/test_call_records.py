"""The task-free parts of a pending call: the deadline queue and admission's hand-over."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing

from broker.core.admission import Admission, Busy
from broker.core.calls import DeadlineQueue


@attrs.define(eq=False)
class FakeCall:
    """What the deadline queue reads of a call."""

    name: str
    gives_up_at: float
    done: bool = False

    def __lt__(self, other: FakeCall) -> bool:  # the heap holds the calls themselves, as Call does
        return self.gives_up_at < other.gives_up_at


async def test_deadline_queue_expires_in_deadline_order_and_skips_ended_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    expired: list[tuple[str, float]] = []
    queue = DeadlineQueue(lambda call: expired.append((call.name, trio.current_time())))
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(queue.run)
        await trio.testing.wait_all_tasks_blocked()
        late = FakeCall("late", start + 10)
        queue.add(late)  # type: ignore[arg-type]
        await trio.sleep(1)
        # An earlier deadline added while the queue sleeps towards a later one wakes it sooner.
        queue.add(FakeCall("early", start + 3))  # type: ignore[arg-type]
        ended = FakeCall("ended", start + 5)
        queue.add(ended)  # type: ignore[arg-type]
        ended.done = True  # ended before its deadline: never expired
        await trio.sleep(20)
        nursery.cancel_scope.cancel()
    assert [(name, round(at - start, 6)) for name, at in expired] == [("early", 3.0), ("late", 10.0)]


async def test_deadline_queue_compacts_ended_calls(autojump_clock: trio.testing.MockClock) -> None:
    queue = DeadlineQueue(lambda call: None)
    far = trio.current_time() + 3600
    live = [FakeCall("live", far) for _ in range(10)]
    for call in live:
        queue.add(call)  # type: ignore[arg-type]
    for _ in range(10_000):  # a steady stream of calls that end long before their deadline
        call = FakeCall("quick", far)
        queue.add(call)  # type: ignore[arg-type]
        call.done = True
    assert len(queue) <= 2 * 64 + 1  # bounded by twice the live calls (and a small floor)


def test_admission_hands_slots_over_in_order_without_recursion() -> None:
    admission = Admission(limit=1, max_queue=10_000)
    order: list[int] = []

    def waiter(number: int) -> Any:
        def granted() -> None:
            order.append(number)
            admission.leave(trio.current_time())  # ends at once, as a call to a vanished app does

        return granted

    async def main() -> None:
        assert admission.enter(lambda: None)  # the slot is taken
        for number in range(5000):
            assert not admission.enter(waiter(number))
        admission.leave(trio.current_time())  # 5,000 hand-overs, none of them nested

    trio.run(main)
    assert order == list(range(5000))
    assert admission.active == 0 and admission.waiting == 0


def test_admission_refuses_past_its_queue_and_forgets_withdrawn_waiters() -> None:
    admission = Admission(limit=1, max_queue=2)
    granted: list[str] = []
    first, second = (lambda: granted.append("first")), (lambda: granted.append("second"))
    assert admission.enter(lambda: None)
    assert not admission.enter(first)
    assert not admission.enter(second)
    try:
        admission.enter(lambda: None)
    except Busy as busy:
        assert busy.queued == 2 and busy.retry_after_ms >= 100
    else:
        raise AssertionError("a full queue must refuse")
    admission.withdraw(first)  # its deadline passed while it waited

    async def main() -> None:
        admission.leave(trio.current_time())

    trio.run(main)
    assert granted == ["second"]
