"""``python -m fp4kit`` (and the ``fp4kit`` console script): see fp4kit/cli.py."""
import sys

from . import cli


def main(argv: list[str] | None = None) -> int:
    """The ``fp4kit`` console script (pyproject.toml [project.scripts]): usage says ``fp4kit``."""
    return cli.main(argv, prog="fp4kit")


if __name__ == "__main__":
    sys.exit(cli.main(prog="python -m fp4kit"))
