"""`admit` arms the check's time limit only when the check has to wait: a check that finishes at once is answered
directly, one that waits is cut at the limit (its cleanup runs), and what a waiting check raises or returns after
its waits arrives intact."""

from __future__ import annotations

import asyncio

import orjson
from server_helpers import make_config, pod_review

from gpuclaim.webhook import admit, review


class Checks:
    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.cleaned_up = False
        self.tasks_seen: list[asyncio.Task[object] | None] = []

    async def mutate(self, request: review.Request, ctx: admit.Context) -> admit.Outcome:
        self.tasks_seen.append(asyncio.current_task())
        if self.behaviour == "at-once":
            return admit.Outcome(warnings=(admit.Notice("at-once", "answered at once"),))
        try:
            for _ in range(3):  # several waits: each future goes to the task and back
                await asyncio.sleep(0.01)
                self.tasks_seen.append(asyncio.current_task())
            if self.behaviour == "raise-after-wait":
                raise RuntimeError("after waiting")
            if self.behaviour == "hang":
                await asyncio.sleep(30)
            return admit.Outcome(warnings=(admit.Notice("waited", "answered after waiting"),))
        finally:
            self.cleaned_up = True

    async def validate(self, request: review.Request, ctx: admit.Context) -> admit.Outcome:
        return await self.mutate(request, ctx)


async def _admit(checks: Checks, time_limit: float = 0.5) -> tuple[review.Response, admit.Record]:
    decoded, errors = review.decode(orjson.dumps(pod_review()))
    return await admit.admit("mutate", decoded, errors, checks=checks, ctx=admit.Context(config=make_config()),
                             time_limit=time_limit)


async def test_a_check_that_finishes_at_once_is_answered_in_the_callers_task() -> None:
    checks = Checks("at-once")
    response, record = await _admit(checks)
    assert response.warnings == ("answered at once",) and record.result == "allowed"
    assert checks.tasks_seen == [asyncio.current_task()]


async def test_a_check_that_waits_gets_its_answer_through() -> None:
    checks = Checks("wait")
    response, record = await _admit(checks)
    assert response.warnings == ("answered after waiting",) and record.result == "allowed"
    assert set(checks.tasks_seen) == {asyncio.current_task()} and len(checks.tasks_seen) == 4


async def test_an_error_after_a_wait_is_an_internal_error_answer() -> None:
    checks = Checks("raise-after-wait")
    response, record = await _admit(checks)
    assert record.result == "error" and record.error == "internal error (RuntimeError)"
    assert response.allowed is True and "admitted unchanged" in response.warnings[0]  # mutate: allow by default
    assert checks.cleaned_up


async def test_a_hanging_check_is_cut_at_the_limit_and_cleans_up() -> None:
    checks = Checks("hang")
    loop = asyncio.get_running_loop()
    started = loop.time()
    response, record = await _admit(checks, time_limit=0.2)
    assert response.allowed is True  # mutate: admitted unchanged (webhook.internalErrorPolicy default)
    assert 0.2 <= loop.time() - started < 1.0
    assert record.result == "error" and "did not finish within 0.2s" in (record.error or "")
    assert checks.cleaned_up


async def test_cancelling_the_request_cancels_a_waiting_check() -> None:
    checks = Checks("hang")
    task = asyncio.create_task(_admit(checks, time_limit=10))
    await asyncio.sleep(0.1)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=2)
    assert task in done and task.cancelled()
    assert checks.cleaned_up
