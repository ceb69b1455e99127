"""The acting layer: scores for all five actions of every robot, every control step.

- :mod:`~marlm.hybrid.acting.scores`: the executor protocol, the distance-to-go score.
- :mod:`~marlm.hybrid.acting.executor`: greedy, random and tabular Q-learning executors;
  :mod:`~marlm.hybrid.acting.executor_batched` trains the tabular one on batched warehouses.
- :mod:`~marlm.hybrid.acting.guided_executor`: the learned executor (guided cost-to-go).
- :mod:`~marlm.hybrid.acting.guidance`, :mod:`~marlm.hybrid.acting.learned_guidance`: hand-made
  and learned traffic guidance for large maps.
- :mod:`~marlm.hybrid.acting.dwell`: idle robots drive to their dwell cells.
- :mod:`~marlm.hybrid.acting.llm_executor`: the LLM as executor (a baseline that shows why not).

The step view and the map's tables are on the floor below, :mod:`marlm.hybrid.core`.
"""
