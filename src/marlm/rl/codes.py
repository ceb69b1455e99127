"""The codes the compiled GridRace loops share: reward modes, credit families, learners.

Below :mod:`marlm.rl.fast` (the dispatcher), :mod:`marlm.rl.kernels` (the numba kernels) and
:mod:`marlm.rl.aot` (the loops built ahead of time), so the three import it and not each other in a
circle. Reward modes as :func:`marlm.rl.credit.mode_code`.
"""

from __future__ import annotations

SHARED, INDIVIDUAL, MIXED, DIFFERENCE = 0, 1, 2, 3  # DIFFERENCE: counterfactual "stay"
DIFFERENCE_ABSENT, DIFFERENCE_AVERAGE = 4, 5  # counterfactuals "absent" and "average"
PLAIN_CREDIT, COUNTERFACTUAL_CREDIT = 0, 1  # credit families of the compiled loops
IQL, VDN, JAL = 0, 1, 2  # learner codes of race_episodes
