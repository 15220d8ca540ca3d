"""``python -m diffpriv.cli``: the same as the ``diffpriv`` command."""

from diffpriv.cli import main

main()
