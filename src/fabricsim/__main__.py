"""`python -m fabricsim` runs the CLI."""

from fabricsim.cli import main

main()
