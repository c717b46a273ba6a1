"""``python -m synthesizer.bench <what>``: benchmarks that print figures."""

from __future__ import annotations

import sys

from . import attention

COMMANDS = {"attention": attention.main}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        sys.exit(f"usage: python -m synthesizer.bench {{{'|'.join(COMMANDS)}}} [options]  (--help after the name for options)")
    COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    main()
