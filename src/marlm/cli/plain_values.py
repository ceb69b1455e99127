"""Plain option values converted without pydantic (the ``marlm`` command's start-up).

typer (0.2x releases) converts every value of a command's options and arguments, defaults
included, with a pydantic ``TypeAdapter`` built for each parameter when the command runs:
importing pydantic and building those adapters costs about 0.2 s of CPU on each run of a
command, more than the rest of the command line's handling. Most values need nothing of it: a
default that already has the option's type, a decimal number, a path.

:func:`install` makes typer's parameters of type ``bool``, ``str``, ``int``, ``float`` and
``pathlib.Path`` without a custom parser, range (``min``/``max``/``clamp``) or ``path_type``
convert such values directly, to the value typer's own conversion gives (tested value by value
against it): a value of exactly the declared type (for ``Path``, any ``Path``) as it is; for ``int`` a string of decimal
digits (optional ``-``, no leading zero, at most 18 digits); for ``float`` the same with an
optional fraction and exponent (at most two digits); for ``Path`` a non-empty string that
``Path`` keeps as written (no ``//``, trailing ``/`` or ``./``), then typer's own checks of
the path (``exists``, ``readable``, ...). Every other value, and every other parameter, goes
through typer's own conversion, pydantic and its error messages included.

Where typer has no such conversion (releases before it), or builds or calls it otherwise than
this module expects (checked on an ``int`` and a ``Path`` at :func:`install`), :func:`install`
changes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?(?:[eE][-+]?[0-9]{1,2})?")
_UNCHANGED = object()


def plain_value(annotation: type, value: Any) -> Any:
    """``value`` converted to ``annotation`` (``bool``, ``str``, ``int``, ``float`` or ``Path``), as typer
    converts it, where that needs no pydantic; otherwise the module's sentinel ``_UNCHANGED``.

    A ``Path`` returned here still goes through typer's checks of the path (see
    :func:`install`).
    """
    if type(value) is annotation or (annotation is Path and isinstance(value, Path)):
        return value
    if type(value) is not str:
        return _UNCHANGED
    if annotation is int and _INT.fullmatch(value):
        return int(value)
    if annotation is float and _FLOAT.fullmatch(value):
        return float(value)
    if annotation is Path and value and str(Path(value)) == value:
        return Path(value)
    return _UNCHANGED


def install() -> bool:
    """Make typer convert plain values of plain parameters without pydantic (see the module's
    docstring). Returns whether it did (``False``: this typer has no such conversion)."""
    try:
        import typer.core
        from typer._coercion import RuntimeParam
        from typer._param_types import coerce_cli_path
    except ImportError:
        return False
    # typer's hook and our mark on it, by name: older typer releases have no hook to replace
    build = getattr(typer.core, "build_runtime_param", None)
    if build is None or getattr(build, "plain_values", False):  # already replaced: our mark
        return build is not None

    class PlainRuntimeParam(RuntimeParam):
        """Plain values converted here, the others by typer's own runtime parameter."""

        # Set in __init__ past typer's frozen dataclass (object.__setattr__); not its fields.
        _descriptor: Any
        _typer: Any

        def __init__(self, descriptor: Any) -> None:
            super().__init__(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )
            object.__setattr__(self, "_descriptor", descriptor)
            object.__setattr__(self, "_typer", None)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            converted = plain_value(self.annotation, value)
            if converted is _UNCHANGED:
                if self._typer is None:
                    object.__setattr__(self, "_typer", build(self._descriptor))
                return self._typer._coerce_value(value, param=param, ctx=ctx)
            if self.annotation is Path:
                return coerce_cli_path(
                    converted, self.parameter_info, path_type=Path, param=param, ctx=ctx
                )
            return converted

    def build_runtime_param(descriptor: Any) -> Any:
        info = descriptor.parameter_info
        plain = (
            descriptor.annotation in (bool, str, int, float, Path)
            and descriptor.file_annotation is None
            # typer's parameter info has these only for some kinds of option: read by name
            and all(getattr(info, a, None) is None for a in ("parser", "min", "max", "path_type"))
            and not getattr(info, "clamp", False)  # the same: only numeric options have it
        )
        return PlainRuntimeParam(descriptor) if plain else build(descriptor)

    if not _works(PlainRuntimeParam):
        return False
    build_runtime_param.plain_values = True  # type: ignore[attr-defined]
    typer.core.build_runtime_param = build_runtime_param
    return True


def _works(runtime_param: type) -> bool:
    """Whether this typer builds and calls runtime parameters as the ones above expect: an
    ``int`` and a ``Path`` converted (a typer that changed them keeps its own conversion)."""

    class Param:  # what RuntimeParam.coerce reads of a click parameter
        multiple, nargs, name = False, 1, "probe"

    try:
        from typer._coercion import resolve_type_descriptor
        from typer.models import OptionInfo

        return all(
            runtime_param(resolve_type_descriptor(kind, OptionInfo())).coerce(
                text, param=Param(), ctx=None
            )
            == kind(text)
            for kind, text in ((int, "7"), (Path, "marlm-probe"))
        )
    except Exception:  # noqa: BLE001 - any change of typer's internals: leave typer as it is
        return False


__all__ = ["install", "plain_value"]
