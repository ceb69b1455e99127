"""The three layers and their composition, one sub-package per layer.

- :mod:`marlm.hybrid.core`: the floor under the layers (the step view, actions, the map's tables);
  each layer imports it and never a sibling layer.
- :mod:`marlm.hybrid.planning`: order book in, robot-to-order assignments out (LLM, rules).
- :mod:`marlm.hybrid.acting`: scores for all five actions of every robot, every step.
- :mod:`marlm.hybrid.rules`: the rule layer chooses the joint move from the scores.
- :mod:`marlm.hybrid.controller`: the three in one control loop; :mod:`~marlm.hybrid.render`
  draws its frames; :mod:`~marlm.hybrid.evaluate`: an executor scored under a rule layer;
  :mod:`~marlm.hybrid.simulator`: the guidance simulator (PIBT over guided scores, no env).
- :mod:`marlm.hybrid.build`, :mod:`~marlm.hybrid.defaults`: the parts from plain settings (the
  CLI's options).

Experiments built from these parts (scheme comparisons, scenarios, replay) live in
:mod:`marlm.experiments`; ``hybrid`` never imports it (nor ``scale`` or ``cli``).
"""
