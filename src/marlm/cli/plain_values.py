"""Plain option values converted without pydantic (the ``marlm`` command's start-up).

typer (0.2x releases) converts every value of a command's options and arguments, defaults
included, with a pydantic ``TypeAdapter`` built for each parameter when the command runs: about
0.2 s of CPU a run, more than the rest of the command line's handling. Most values need nothing
of it: a default that already has the option's type, a decimal number, a path.

:func:`install` makes typer's parameters of type ``bool``, ``str``, ``int``, ``float``,
``pathlib.Path`` and ``list[str]`` (a repeated option) without a custom parser, range
(``min``/``max``/``clamp``) or ``path_type`` convert such values directly, to the value typer's
own conversion gives (tested value by value against it): a value of exactly the declared type
(for ``Path``, any ``Path``) as it is; for ``int`` a string of decimal digits (optional ``-``,
no leading zero, at most 18 digits); for ``float`` the same with an optional fraction and
exponent (at most two digits); for ``Path`` a non-empty string ``Path`` keeps as written (no
``//``, trailing ``/`` or ``./``), then typer's checks of the path (``exists``, ...); for
``list[str]`` a list or tuple of strings. Every other value and parameter goes through typer's
own conversion, pydantic and its error messages included.

Where typer has no such conversion, or builds or calls it otherwise than expected (checked on an
``int`` and a ``Path`` at :func:`install`), :func:`install` changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typer._coercion import RuntimeParam, TypeDescriptor

    Build = Callable[[TypeDescriptor], RuntimeParam]  # typer's build_runtime_param

_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?(?:[eE][-+]?[0-9]{1,2})?")
_UNCHANGED = object()


def plain_value(annotation: type, value: Any) -> Any:
    """``value`` converted to ``annotation`` (``bool``, ``str``, ``int``, ``float``, ``Path`` or
    ``list[str]``), as typer converts it, where that needs no pydantic; otherwise the module's
    sentinel ``_UNCHANGED``. A ``Path`` still goes through typer's path checks (:func:`install`).
    """
    if annotation == list[str]:  # a repeated option's strings, as pydantic lists them
        ok = isinstance(value, list | tuple) and all(type(v) is str for v in value)
        return list(value) if ok else _UNCHANGED
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


class _PlainValuesHook:
    """typer's ``build_runtime_param`` with plain parameters built by ``plain`` (see the module's
    docstring), the others by ``typers_own``; its class marks typer's hook as replaced."""

    def __init__(self, typers_own: Build, plain: Build) -> None:
        self.typers_own, self.plain = typers_own, plain

    def __call__(self, descriptor: TypeDescriptor) -> RuntimeParam:
        info = descriptor.parameter_info
        plain = (
            descriptor.annotation in (bool, str, int, float, Path, list[str])
            and descriptor.file_annotation is None
            and all(v is None for v in (info.parser, info.min, info.max, info.path_type))
            and not info.clamp
        )
        return self.plain(descriptor) if plain else self.typers_own(descriptor)


def install() -> bool:
    """Make typer convert plain values of plain parameters without pydantic (see the module's
    docstring). Returns whether it did (``False``: this typer has no such conversion, or builds
    or calls it otherwise than this module expects)."""
    try:
        import typer.core
        from typer._coercion import RuntimeParam
        from typer._param_types import coerce_cli_path

        # typer's hook (older typer releases have none to replace: ImportError)
        from typer.core import build_runtime_param as build
    except ImportError:
        return False
    if isinstance(build, _PlainValuesHook):  # already replaced
        return True

    class PlainRuntimeParam(RuntimeParam):
        """Plain values converted here, the others by typer's own runtime parameter."""

        # Set in __init__ past typer's frozen dataclass (object.__setattr__); not its fields.
        _descriptor: TypeDescriptor
        _typer: RuntimeParam | None

        def __init__(self, descriptor: TypeDescriptor) -> None:
            super().__init__(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )
            object.__setattr__(self, "_descriptor", descriptor)
            object.__setattr__(self, "_typer", None)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            converted = plain_value(self.annotation, value)
            if converted is _UNCHANGED:
                own = self._typer
                if own is None:
                    own = build(self._descriptor)
                    object.__setattr__(self, "_typer", own)
                return own._coerce_value(value, param=param, ctx=ctx)
            if self.annotation is Path:
                return coerce_cli_path(
                    converted, self.parameter_info, path_type=Path, param=param, ctx=ctx
                )
            return converted

    hook = _PlainValuesHook(build, PlainRuntimeParam)
    if not _works(hook):
        return False
    typer.core.build_runtime_param = hook
    return True


def _works(build: Callable[..., Any]) -> bool:
    """Whether this typer builds and calls runtime parameters as ``build`` (the hook of
    :func:`install`) expects: an ``int`` and a ``Path`` option converted (a typer that changed
    them keeps its own conversion). Typed loosely: the probe passes a stand-in parameter."""

    class Param:  # what RuntimeParam.coerce reads of a click parameter
        multiple, nargs, name = False, 1, "probe"

    try:
        from typer._coercion import resolve_type_descriptor
        from typer.models import OptionInfo

        return all(
            build(resolve_type_descriptor(kind, OptionInfo())).coerce(text, param=Param(), ctx=None)
            == kind(text)
            for kind, text in ((int, "7"), (Path, "marlm-probe"))
        )
    except Exception:  # noqa: BLE001 - any change of typer's internals: leave typer as it is
        return False


__all__ = ["install", "plain_value"]
