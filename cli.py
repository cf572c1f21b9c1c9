#!/usr/bin/env python3
"""`python cli.py …` from a checkout: the Switchyard command line, which lives in the package (package/cli.py,
installed as `switchyard.cli`; the `switchyard` command and `python -m switchyard` run the same)."""

import sys

try:
    from switchyard.cli import main
except ModuleNotFoundError as exc:
    if exc.name != "switchyard":
        raise
    print(
        "error: switchyard is not installed in this Python environment: run `bash setup.sh` (or "
        "`pip install -e .`) and use .venv/bin/python",
        file=sys.stderr,
    )
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
