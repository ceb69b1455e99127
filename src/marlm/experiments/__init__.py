"""Experiments built from the layers: scheme comparisons, scenarios, replay under another scheme.

- :mod:`marlm.experiments.compare`: every scheme (rules, LLM only, RL with and without the
  shield, hybrid, team) on one seeded order stream, one table (``marlm compare``).
- :mod:`marlm.experiments.notes_only`: the notes-only urgency scenario, the rule planner against
  the triage planner (``marlm compare --scenario notes-only``).
- :mod:`marlm.experiments.replay`: a recorded trace replayed under another planner or learned
  from offline (``marlm replay``).

This package sits above :mod:`marlm.hybrid`, :mod:`marlm.eval` and :mod:`marlm.scale`; none of
them imports it.
"""
