"""The three layers and their composition: planners (LLM, rules), executors (RL), the rule layer.

- :mod:`marlm.hybrid.planner`, :mod:`~marlm.hybrid.triage_planner`, :mod:`~marlm.hybrid.team_planner`:
  order book in, robot-to-order assignments out.
- :mod:`marlm.hybrid.executor`, :mod:`~marlm.hybrid.executor_batched`,
  :mod:`~marlm.hybrid.llm_executor`: scores for all five actions of every robot, every step, from
  one step view (:mod:`~marlm.hybrid.preferences`).
- :mod:`marlm.hybrid.shield`, :mod:`~marlm.hybrid.wrappers`, :mod:`~marlm.hybrid.pibt`: the rule
  layer chooses the joint move from the scores, with the last word.
- :mod:`marlm.hybrid.controller`: the three in one control loop; :mod:`~marlm.hybrid.render`
  draws its frames.
- :mod:`marlm.hybrid.build`: the parts from plain settings (the CLI's options).

Experiments built from these parts (scheme comparisons, scenarios, replay) live in
:mod:`marlm.experiments`; ``hybrid`` never imports it (nor ``scale`` or ``cli``).
"""
