"""``python -m synthesizer ...`` (and ``torchrun -m synthesizer train ...``): the command line."""

from .cli import main

if __name__ == "__main__":
    main()
