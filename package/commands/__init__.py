"""The commands of `switchyard` (cli.py): one module per group, one `cmd_NAME(args)` per command.

A command reads its parsed arguments, calls one library function and prints what it returns; it holds no logic a
library caller would need (that lives in the layer it belongs to, where the Python API reaches it too). Errors are
the error family's (switchyard.errors), raised as they are: cli.py maps them to one line and an exit code. To add a
command: its options in cli.py's `build_parser`, its function here, its name in cli.py's `COMMANDS`.
"""
