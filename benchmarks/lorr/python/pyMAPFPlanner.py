"""The start-kit's Python planner: marlm's rule layer for turning robots (see ``marlm_entry``)."""

import MAPF  # noqa: F401 - registers the kit's types (SharedEnvironment) with pybind11
import marlm_entry


class pyMAPFPlanner:
    def __init__(self, env=None):
        self.env = env

    def initialize(self, preprocess_time_limit: int):
        marlm_entry.entry(self.env)
        return True

    def plan(self, time_limit: int):
        return marlm_entry.entry(self.env).plan()
