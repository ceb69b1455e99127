"""A step handed to a tabular learner without a value for an agent that acted: one clear error
naming the agent and the missing field, raised before any table changes (a bare ``KeyError``
before)."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.rl.ctde import JointActionLearners, VDNLearner
from marlm.rl.independent import IndependentQLearners
from marlm.rl.qlearning import StepError

AGENTS = ["agent_0", "agent_1"]
STEP = {
    "obs": {"agent_0": 1, "agent_1": 2},
    "actions": {"agent_0": 3, "agent_1": 4},
    "rewards": {"agent_0": 1.0, "agent_1": 0.5},
    "next_obs": {"agent_0": 2, "agent_1": 3},
    "terminated": {"agent_0": False, "agent_1": True},
}


def _update(learner, step):
    args = (step["obs"], step["actions"], step["rewards"], step["next_obs"], step["terminated"])
    if isinstance(learner, VDNLearner):
        args = (step["obs"], step["actions"], 1.5, step["next_obs"], step["terminated"])
    extra = {"stay": 0} if isinstance(learner, JointActionLearners) else {}
    return learner.update(*args, alpha=0.5, gamma=0.9, **extra)


LEARNERS = {
    "iql": lambda: IndependentQLearners(AGENTS, 5, 5),
    "vdn": lambda: VDNLearner(AGENTS, 5, 5),
    "jal": lambda: JointActionLearners(AGENTS, 5, 5),
}
MISSING = {
    "iql": ["obs", "rewards", "next_obs", "terminated"],
    "vdn": ["obs", "next_obs", "terminated"],
    "jal": ["obs", "rewards", "next_obs", "terminated"],
}


@pytest.mark.parametrize("kind, field", [(k, f) for k, fields in MISSING.items() for f in fields])
def test_a_step_without_a_value_for_an_acting_agent_names_it(kind, field):
    learner = LEARNERS[kind]()
    before = learner.q.copy()
    step = {**STEP, field: {"agent_0": STEP[field]["agent_0"]}}
    with pytest.raises(StepError) as caught:
        _update(learner, step)
    name = type(learner).__name__
    assert str(caught.value) == (
        f"{name}.update: agent 'agent_1' acted but {field} has no value for it (it has: "
        f"'agent_0'); pass {field}['agent_1'] for every agent in actions"
    )
    assert isinstance(caught.value, ValueError) and not isinstance(caught.value, KeyError)
    np.testing.assert_array_equal(learner.q, before)


@pytest.mark.parametrize("kind", list(LEARNERS))
def test_a_finished_agent_without_values_is_fine(kind):
    # An agent that did not act (it finished) needs no values: the step is learned as before.
    learner = LEARNERS[kind]()
    one = {k: {"agent_0": v["agent_0"]} for k, v in STEP.items()}
    _update(learner, one)
    assert np.count_nonzero(learner.q) == 1
