"""``broker.mcp.updates.UpdateThrottle``: one session's ``resources/updated``, folded per URI per window."""

from __future__ import annotations

import trio
import trio.testing

from broker.mcp.updates import UPDATE_WINDOW, UpdateThrottle


async def test_each_uri_has_its_own_window_and_its_last_update_comes_at_the_end(
        autojump_clock: trio.testing.MockClock) -> None:
    sent: list[tuple[float, str]] = []
    async with trio.open_nursery() as nursery:
        throttle = UpdateThrottle(lambda uri: sent.append((trio.current_time(), uri)),
                                  lambda: nursery.start_soon(throttle.run))
        start = trio.current_time()
        assert throttle.offer("a")  # at once
        await trio.sleep(UPDATE_WINDOW / 2)
        assert throttle.offer("b")  # another URI: its own window, at once
        for _ in range(1000):
            assert not throttle.offer("a")  # folded
            assert not throttle.offer("b")
        await trio.sleep(UPDATE_WINDOW * 2)
        # One each at its window's end; nothing since.
        assert sent == [(start, "a"), (start + UPDATE_WINDOW / 2, "b"),
                        (start + UPDATE_WINDOW, "a"), (start + UPDATE_WINDOW * 1.5, "b")]
        assert throttle.offer("a")  # a quiet URI is sent at once again
        nursery.cancel_scope.cancel()


async def test_a_uri_held_behind_a_later_one_is_not_late(autojump_clock: trio.testing.MockClock) -> None:
    sent: list[tuple[float, str]] = []
    async with trio.open_nursery() as nursery:
        throttle = UpdateThrottle(lambda uri: sent.append((trio.current_time(), uri)),
                                  lambda: nursery.start_soon(throttle.run))
        start = trio.current_time()
        throttle.offer("early")
        await trio.sleep(UPDATE_WINDOW / 2)
        throttle.offer("late")
        throttle.offer("late")  # held first: due at start + 1.5 windows
        await trio.sleep(0)
        throttle.offer("early")  # held second, but due sooner: at start + 1 window
        await trio.sleep(UPDATE_WINDOW * 2)
        assert sent[2:] == [(start + UPDATE_WINDOW, "early"), (start + UPDATE_WINDOW * 1.5, "late")]
        nursery.cancel_scope.cancel()


async def test_what_it_remembers_stays_bounded(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        throttle = UpdateThrottle(lambda uri: None, lambda: nursery.start_soon(throttle.run))
        for round_ in range(5):
            for i in range(1000):
                throttle.offer(f"uri-{round_}-{i}")  # each once: all sent at once
            await trio.sleep(UPDATE_WINDOW * 2)
        assert len(throttle._open_until) <= 2048  # noqa: SLF001 - closed windows are forgotten
        nursery.cancel_scope.cancel()
