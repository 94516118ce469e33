"""``python -m powerplane.cli``."""

from powerplane.cli import main

main()
