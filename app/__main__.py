import sys


def run() -> int:
    """`history ...` searches the timeline; everything else is the assistant's CLI."""
    if sys.argv[1:2] == ["history"]:
        from app.history import main as history

        return history(sys.argv[2:])
    from app.cli import main

    return main()


sys.exit(run())
