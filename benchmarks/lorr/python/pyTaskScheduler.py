"""The start-kit's Python scheduler: marlm's errand scheduler (see ``marlm_entry``)."""

import MAPF  # noqa: F401 - registers the kit's types (SharedEnvironment) with pybind11
import marlm_entry


class pyTaskScheduler:
    def __init__(self, env):
        self.env = env

    def initialize(self, preprocess_time_limit: int):
        marlm_entry.entry(self.env)
        return True

    def plan(self, time_limit: int):
        return marlm_entry.entry(self.env).schedule()
