"""mcast-demo's entry point (also ``python -m mcastmember``): the CLI
(``cli.py``), with a Ctrl-C that comes before it has set its own handler,
while Python is still importing it, ending it quietly with status 130, as a
shell reports an interrupt. Kept to nothing but this, so that the window it
cannot cover (Python's own start and the script's first imports) is as
short as it can be."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from .tools.cli import main as run
        return run()
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
