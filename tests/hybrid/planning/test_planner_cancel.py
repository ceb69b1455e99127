"""The end of a run cancels the planner's model call in flight (backend case 7, controller side)."""

from __future__ import annotations

import threading
import time

from marlm.hybrid.planning.planner import LLMPlanner, Snapshot
from marlm.hybrid.planning.worker import AsyncPlanner
from marlm.llm.backends import OpenAICompatible


class Ord:
    def __init__(self, id: str, note: str) -> None:
        self.id, self.note = id, note
        self.priority, self.deadline, self.shelf, self.arrival = "normal", 300, "A1", 0


def snapshot() -> Snapshot:
    orders = tuple(Ord(f"o{i}", "Restock the shelf before the next shift.") for i in range(4))
    idle = ("r0", "r1", "r2")
    return Snapshot(5, orders, idle, {(r, o.id): 3 for r in idle for o in orders})


def test_closing_an_async_planner_cancels_its_model_call_and_the_model_stays_usable(
    embedded_model,
):
    planner = LLMPlanner(embedded_model, max_tokens=400)
    ap = AsyncPlanner(planner)
    assert ap.submit(snapshot())
    for _ in range(4000):  # bounded: until the worker's call holds the model
        if embedded_model.lock.locked() or not ap.busy:
            break
        time.sleep(0.005)
    assert ap.close(timeout_s=60) is True  # the worker ended: no call of this run runs on
    assert not ap.busy
    # the next run's planner (another thread) uses the same model as before
    assert embedded_model.chat([{"role": "user", "content": "Hi"}], max_tokens=2).text is not None
    assert embedded_model.breaker.state().failures == 0


def test_an_http_call_that_cannot_be_interrupted_is_not_waited_for(fault_server):
    model = OpenAICompatible(fault_server.base("hang~cancel"), timeout_s=300, max_retries=0)
    ap = AsyncPlanner(LLMPlanner(model))
    assert ap.submit(snapshot())
    for _ in range(2000):  # bounded: until the request is on the wire
        if fault_server.count("hang~cancel") == 1:
            break
        time.sleep(0.005)
    done = threading.Event()
    ended: list[bool] = []

    def close() -> None:
        ended.append(ap.close(timeout_s=600))
        done.set()

    threading.Thread(target=close, daemon=True).start()
    # close() gives up after the HTTP cancel's 1 s cap, not the 300 s call timeout nor 600 s
    assert done.wait(120), "close() waited for a silent server"
    assert ended == [False] and not ap.busy
