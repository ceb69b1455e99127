"""Experiments built from the layers: scheme comparisons, scenarios, replay under another scheme.

- :mod:`marlm.experiments.compare`: every scheme (rules, LLM only, RL with and without the
  shield, hybrid, team) on one seeded order stream, one table (``marlm compare``).
- :mod:`marlm.experiments.notes_only`: the notes-only urgency scenario, the rule planner against
  the triage planner (``marlm compare --scenario notes-only``).
- :mod:`marlm.experiments.replay`: a recorded trace replayed under another planner or learned
  from offline (``marlm replay``).
- :mod:`marlm.experiments.demo`: the hybrid warehouse end to end, with its rule counterfactual
  (``marlm demo``); :mod:`marlm.experiments.congested`: its generated congested scenario.
- :mod:`marlm.experiments.warehouse_training`: the warehouse executor trained and compared with
  greedy and random moves (``marlm train warehouse``).
- :mod:`marlm.experiments.training`: the settings of the grid learners' runs that are not a
  learner's config: the deep learners, any PettingZoo env, the LLM reward (``marlm train``).
- :mod:`marlm.experiments.triage_accuracy`: urgency triage accuracy on labelled notes
  (``marlm eval triage``).
- :mod:`marlm.experiments.settings`: the checks the commands' configs share (option bounds,
  files, the rule layer, the ``--llm`` form and server).

Each command's settings are one frozen config made (and checked) before any work; the runner
takes that config and returns a result that formats itself.

This package sits above :mod:`marlm.hybrid`, :mod:`marlm.eval` and :mod:`marlm.scale`; none of
them imports it.
"""
