"""Settings the ``marlm`` command shows as option defaults, in a module that imports nothing.

``marlm --help`` reads them, so they must not pull in the layers that use them
(:mod:`marlm.hybrid.build` re-exports them).
"""

#: Training settings of the policy that ``marlm demo`` uses when no ``--policy`` is given.
DEFAULT_TRAINING = {"layout": "small", "episodes": 60, "max_steps": 400, "seed": 0}
