"""The acting layer: scores for all five actions of every robot, every control step.

- :mod:`~marlm.hybrid.acting.preferences`: the per-step view, the executor protocol, the
  distance-to-go score and robot priority.
- :mod:`~marlm.hybrid.acting.executor`: greedy, random and tabular Q-learning executors;
  :mod:`~marlm.hybrid.acting.executor_batched` trains the tabular one on batched warehouses.
- :mod:`~marlm.hybrid.acting.guidance`, :mod:`~marlm.hybrid.acting.learned_guidance`: hand-made
  and learned traffic guidance for large maps.
- :mod:`~marlm.hybrid.acting.llm_executor`: the LLM as executor (a baseline that shows why not).
"""
