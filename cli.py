#!/usr/bin/env python3
"""`python cli.py …` from a checkout: the Switchyard command line, which lives in the package (package/cli.py,
installed as `switchyard.cli`; the `switchyard` command and `python -m switchyard` run the same)."""
import sys

from switchyard.cli import main

if __name__ == "__main__":
    sys.exit(main())
