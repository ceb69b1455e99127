"""The planning layer: order book in, robot-to-order assignments out, off the control thread.

- :mod:`~marlm.hybrid.planning.planner`: the plan, the planner protocol, the rule planner and the
  LLM planner (an LLM with the rule as its fallback).
- :mod:`~marlm.hybrid.planning.triage`: the LLM reads urgency from the notes, the rule assigns.
- :mod:`~marlm.hybrid.planning.team`: a coordinator ranks orders, a dispatcher assigns robots.
- :mod:`~marlm.hybrid.planning.scheduler`: when the planner runs (asynchronous, deadlines), the
  call records, idle time by cause.
- :mod:`~marlm.hybrid.planning.worker`: the planner's worker thread, one request at a time, an
  answer whatever the planner does.
- :mod:`~marlm.hybrid.planning.dwell`: where idle robots wait, and a reserve robot for urgent work
  (the drive there is the acting layer's, :mod:`marlm.hybrid.acting.dwell`).
"""
