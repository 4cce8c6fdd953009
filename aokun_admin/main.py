"""`aokun`: the admin command line's entry point (the console script).

`aokun hook ...` runs before every prompt a host sends, and its time is the user's wait
(scripts/bench_hook.py), so this module imports only the hook; every other command's imports
(aokun_admin/commands.py: the store, the services, the parsers of every command) load when
such a command runs.
"""

from __future__ import annotations

import sys

from aokun_admin import hook

# Lazy imports: the admin CLI (aokun_admin/commands.py) only for a command that is no hook.


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if (hook_argv := hook.hook_args(argv)) is not None:
        return hook.main(hook_argv)  # its own parsing and config: a hook never fails its host
    from aokun_admin.commands import main as run_command

    return run_command(argv)


if __name__ == "__main__":
    sys.exit(main())
