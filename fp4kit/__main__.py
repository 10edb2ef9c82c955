"""``python -m fp4kit`` (and the ``fp4kit`` console script): see fp4kit/cli.py."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
