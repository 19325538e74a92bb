"""`python -m evalstream.stream.dashboards [--out DIR] [--datasource-uid UID] [--check]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalstream.stream.dashboards.board import DATASOURCE_UID
from evalstream.stream.dashboards.generate import generate, write

DEFAULT_OUT = Path("deploy/grafana/dashboards")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evalstream.stream.dashboards", description=__doc__
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument(
        "--datasource-uid",
        default=DATASOURCE_UID,
        help="uid of the Prometheus datasource the panels query",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the files differ from the code"
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = [
            name
            for name, text in generate(args.datasource_uid).items()
            if not (args.out / name).exists()
            or (args.out / name).read_text(encoding="utf-8") != text
        ]
        for name in stale:
            print(
                f"{args.out / name} is stale: run python -m evalstream.stream.dashboards",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path in write(args.out, args.datasource_uid):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
