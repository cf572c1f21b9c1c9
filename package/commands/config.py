"""config show: the resolved config, as YAML or JSON."""

from __future__ import annotations

import json

from switchyard.commands.common import load_config


def cmd_config(args) -> int:
    from switchyard.configs.loader import config_to_dict

    data = config_to_dict(load_config(args))
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        import yaml

        print(yaml.safe_dump(data, sort_keys=False), end="")
    return 0
