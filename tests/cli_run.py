"""Run the real ``marlm`` entry point in process, for CLI tests that check exit codes and errors."""

from __future__ import annotations

import sys


def run_main(argv: list, capsys) -> tuple[int, str]:
    """Run ``marlm *argv`` (each item turned into ``str``) in process with pytest's ``capsys``;
    return ``(exit code, stderr)``."""
    from marlm.cli import main

    old = sys.argv
    sys.argv = ["marlm", *map(str, argv)]
    try:
        main()
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        sys.argv = old
    return code, capsys.readouterr().err
