"""``python -m marlm.cli`` runs the ``marlm`` command."""

from marlm.cli import main

main()
