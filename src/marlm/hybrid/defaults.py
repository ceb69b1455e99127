"""Settings the ``marlm`` command shows as option defaults, in a module that imports nothing of
marlm.

``marlm --help`` reads them, so they must not pull in the layers that use them
(:mod:`marlm.hybrid.build` re-exports them). Each is the default of its ``marlm`` option and of
the config field that option sets (:class:`marlm.hybrid.controller.RunConfig`), declared once here.
"""

from typing import Final, TypedDict


class TrainingSettings(TypedDict):
    """Settings of one executor Q-table's training (``marlm train warehouse``)."""

    layout: str
    episodes: int
    max_steps: int
    seed: int


#: Training settings of the policy that ``marlm demo`` uses when no ``--policy`` is given.
DEFAULT_TRAINING: TrainingSettings = {
    "layout": "small",
    "episodes": 60,
    "max_steps": 400,
    "seed": 0,
}

#: The executor ``marlm demo`` uses when no ``--executor`` is given.
DEMO_EXECUTOR: Final = "learned"

#: ``marlm demo --executor``'s help: what each executor is, and what ``learned`` runs where.
EXECUTOR_HELP = (
    "learned (guidance costs as scores: a map's own learned weights where they ship, i.e. the "
    "dense 32x48 warehouse of marlm train warehouse; the hand guidance on small, medium and "
    "rware-tiny, which have none), rl (the tabular Q-table, trained on first use), greedy "
    "(shortest path) or random. The LLM moving every robot (executor llm) runs in marlm compare "
    "--schemes llm_only."
)

#: ``RunConfig.tick_ms`` and ``marlm demo --tick-ms`` at most, in milliseconds: one minute a
#: control step (``1e308`` overflowed the tick's sleep).
MAX_TICK_MS = 60_000

#: The default of ``marlm demo --tick-ms``: 25 control steps a second.
DEMO_TICK_MS = 40.0
#: The default of ``--tick-ms`` in the instructions scenario: its 5 warehouse seconds a step shown
#: 25 times faster. At 40 ms (125 times) a busy 2-core machine reads the notes' instructions
#: after most of their orders were delivered (docs/instructions.md).
INSTRUCTIONS_TICK_MS = 200.0
#: The default of ``marlm demo --plan-deadline`` and ``RunConfig.plan_deadline_s``, in seconds:
#: an assigning model's answer older than this is not applied (the rule has assigned already).
PLAN_DEADLINE_S = 2.0
#: Seconds of warehouse time per control step (``marlm demo --step-seconds``): the notes'
#: worded deadlines and clock times are mapped to steps with it.
STEP_SECONDS = 5.0
