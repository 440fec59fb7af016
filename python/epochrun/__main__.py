"""`python -m epochrun inspect DIR`: see epochrun.inspect."""

import sys

from .inspect import main

if len(sys.argv) < 2 or sys.argv[1] != "inspect":
    print("usage: python -m epochrun inspect DIR|FILE [--verify]", file=sys.stderr)
    sys.exit(2)
sys.exit(main(sys.argv[2:]))
