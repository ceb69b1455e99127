"""``marlm train gridworld|race --episodes 1000000000000`` ended in numpy's ``_ArrayMemoryError``
traceback ("Unable to allocate 14.6 TiB ..."): the per-episode logs are allocated up front.
Whether such an allocation fails at once depends on the machine's overcommit policy, so the
error is injected here rather than asked of the kernel."""

from __future__ import annotations

import pytest

from marlm.errors import InputError
from marlm.experiments.tabular import _episodes_in_memory

#: numpy's message (``numpy._core._exceptions._ArrayMemoryError``, a ``MemoryError``).
NUMPY = (
    "Unable to allocate 14.6 TiB for an array with shape (1000000000000, 2) and data type float64"
)


def test_logs_that_do_not_fit_in_memory_are_one_error_naming_episodes():
    with pytest.raises(InputError) as e, _episodes_in_memory(10**12):
        raise MemoryError(NUMPY)
    assert str(e.value).startswith(
        "field '--episodes': the per-episode logs of 1000000000000 episodes do not fit in "
        "memory (Unable to allocate 14.6 TiB for an array with shape (1000000000000, 2)"
    ), e.value
    assert str(e.value).endswith("pass fewer, e.g. --episodes 30000")
