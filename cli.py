"""Run the formalrope CLI from a checkout: `python cli.py --help`."""

from formal_rope.cli import main

if __name__ == "__main__":
    main()
