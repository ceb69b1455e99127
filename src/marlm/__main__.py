"""``python -m marlm`` runs the ``marlm`` command."""

from marlm.cli import main

main()
