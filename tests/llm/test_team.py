"""Team: only the coordinator's `done` ends the run (cases 10, 11), contexts stay apart."""

from __future__ import annotations

import json

import pytest

from marlm.errors import InputError
from marlm.llm.team import Role, Team, TeamMessage

TASK = "assign every urgent order, and reply DONE when that is finished"


def msg(recipient, phase, content):
    return json.dumps(
        {"recipient": recipient, "phase": phase, "content": content}, ensure_ascii=False
    )


def by_role(replies: dict[str, list[str]]):
    """A script function: the reply list of the role named in the system prompt."""

    def script(messages):
        system = messages[0]["content"]
        for name, items in replies.items():
            if system.startswith(f"You are the {name} "):
                return items.pop(0)
        raise AssertionError(f"no script for {system[:40]}")

    return script


def two_roles():
    return [
        Role("coordinator", "Rank the urgent orders; your word is final."),
        Role("dispatcher", "Assign a robot to each order the coordinator ranks."),
    ]


def test_task_text_with_done_does_not_stop_the_team(scripted):  # case 10
    replies = {
        "coordinator": [
            msg("dispatcher", "discuss", "DONE? Not yet: urgent orders are O3, O1."),
            msg("dispatcher", "decide", "Final ranking O3, O1. DONE"),
            msg("all", "done", "O3 -> robot 2, O1 -> robot 1"),
        ],
        "dispatcher": [
            msg("coordinator", "discuss", "robot 2 for O3, robot 1 for O1. DONE"),
            msg("coordinator", "execute", "assigned. reply DONE"),
        ],
    }
    model = scripted(by_role(replies))
    r = Team(model, two_roles(), coordinator="coordinator", max_rounds=5).run(TASK)
    assert r.reason == "done"
    assert r.rounds == 3
    assert r.answer == "O3 -> robot 2, O1 -> robot 1"
    assert [(m.sender, m.phase) for m in r.messages] == [
        ("coordinator", "discuss"),
        ("dispatcher", "discuss"),
        ("coordinator", "decide"),
        ("dispatcher", "execute"),
        ("coordinator", "done"),
    ]
    assert len(model.received) == 5


def test_dispatcher_done_and_stop_words_in_any_language_end_nothing(scripted):  # case 11
    replies = {
        "coordinator": [
            msg("dispatcher", "discuss", "任务完成。"),
            msg("dispatcher", "discuss", "Fertig. Terminé. 完了。 DONE."),
            msg("dispatcher", "discuss", "任务完成。"),
        ],
        "dispatcher": [msg("coordinator", "done", "任务完成。")] * 3,
    }
    r = Team(scripted(by_role(replies)), two_roles(), coordinator="coordinator", max_rounds=3).run(
        TASK
    )
    assert r.reason == "max_rounds"
    assert r.answer is None
    assert len(r.messages) == 6
    assert [m.phase for m in r.messages if m.sender == "dispatcher"] == ["done"] * 3


def test_sender_cannot_be_spoofed_and_contexts_are_separate(scripted):
    replies = {
        "coordinator": [
            msg("dispatcher", "discuss", "rank: O1"),
            msg("dispatcher", "done", "final: O1"),
        ],
        "dispatcher": [
            json.dumps(
                {
                    "recipient": "coordinator",
                    "phase": "discuss",
                    "content": "robot 1",
                    "sender": "x",
                }
            ),
            msg("coordinator", "discuss", "robot 1 for O1"),
        ],
    }
    r = Team(scripted(by_role(replies)), two_roles(), coordinator="coordinator").run("orders")
    assert r.reason == "done"
    assert all(m.sender in ("coordinator", "dispatcher") for m in r.messages)
    assert r.events[0].kind == "invalid_reply" and "unexpected field 'sender'" in r.events[0].detail
    coord = "\n".join(m["content"] for m in r.contexts["coordinator"])
    # the dispatcher's rejected reply and its feedback stay in the dispatcher's own context
    assert '"sender"' not in coord
    assert any('"sender"' in m["content"] for m in r.contexts["dispatcher"])


def test_executor_tool_transcript_stays_out_of_coordinator_context(scripted, warehouse):
    secret = "robot 1 at (2, 3), idle"  # the tool's output
    replies = {
        "coordinator": [msg("dispatcher", "execute", "check robot 1"), msg("all", "done", "ok")],
    }
    coordinator_script = by_role(replies)

    def script(messages):
        if messages[0]["content"].startswith("You are the dispatcher"):
            if len(messages) == 2:
                return '{"type": "call_tool", "tool": "robot_status", "args": {"robot": 1}}'
            return '{"type": "finish", "answer": "robot 1 is free"}'
        return coordinator_script(messages)

    roles = [two_roles()[0], Role("dispatcher", "Use tools.", tools=warehouse.registry)]
    r = Team(scripted(script), roles, coordinator="coordinator").run("orders")
    assert r.reason == "done"
    assert r.messages[1] == TeamMessage(
        "dispatcher", "coordinator", "execute", "robot 1 is free", 1
    )
    assert r.tool_runs["dispatcher"][0].n_iter == 1
    coord = "\n".join(m["content"] for m in r.contexts["coordinator"])
    assert "robot 1 is free" in coord and secret not in coord
    assert any(secret in m["content"] for m in r.contexts["dispatcher"])


def test_content_schema_and_validate_hook(scripted):
    ranking = {"type": "array", "items": {"type": "string"}}

    def known(m: TeamMessage):
        unknown = [o for o in m.content if o not in ("O1", "O2")]
        return f"unknown orders {unknown}; use O1, O2" if unknown else None

    roles = [
        Role("coordinator", "Rank.", content_schema=ranking, validate=known),
        Role("dispatcher", "Assign."),
    ]
    replies = {
        "coordinator": [msg("all", "done", ["O9"]), msg("all", "done", ["O2", "O1"])],
        "dispatcher": [],
    }
    model = scripted(by_role(replies))
    r = Team(model, roles, coordinator="coordinator").run("rank")
    assert r.reason == "done" and r.answer == ["O2", "O1"]
    assert "unknown orders ['O9']" in model.received[1][-1]["content"]
    assert model.schemas[0]["properties"]["content"] == ranking


def test_bad_configuration_is_input_error(scripted):
    with pytest.raises(InputError, match="coordinator"):
        Team(scripted([]), two_roles(), coordinator="boss")
    with pytest.raises(InputError, match="two roles"):
        Team(scripted([]), two_roles()[:1], coordinator="coordinator")


def test_real_model_team_follows_the_protocol(embedded_model):
    short = {"type": "string", "maxLength": 24}  # keeps each reply to a few tokens
    roles = [Role(r.name, r.instructions, content_schema=short) for r in two_roles()]
    team = Team(
        embedded_model, roles, coordinator="coordinator", max_rounds=1, max_retry=0, max_tokens=48
    )
    r = team.run("Orders O1 (urgent) and O2. Robots 1 and 2. " + "Reply DONE when finished.")
    # Either ending of the protocol: whether the 135M coordinator sends `done` is its text.
    assert r.reason in {"done", "max_rounds"}
    for m in r.messages:
        assert m.sender in ("coordinator", "dispatcher")
        assert m.phase in ("discuss", "decide", "execute", "done")
        assert m.recipient != m.sender
    if r.reason == "done":
        assert r.messages[-1].sender == "coordinator" and r.messages[-1].phase == "done"
    else:
        assert not any(m.sender == "coordinator" and m.phase == "done" for m in r.messages)
    # only the coordinator's done may have ended the run: nothing after it
    assert sum(1 for m in r.messages if m.sender == "coordinator" and m.phase == "done") <= 1
