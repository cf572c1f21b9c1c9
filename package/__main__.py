"""`python -m switchyard …`: the command line (switchyard.cli)."""

import sys

from switchyard.cli import main

sys.exit(main())
