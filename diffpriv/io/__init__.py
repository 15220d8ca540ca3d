"""Table export and plots; the file helpers :func:`atomic_write` and :func:`write_csv`
(:mod:`diffpriv._files`) re-exported."""

from diffpriv._files import atomic_write, write_csv

__all__ = ["atomic_write", "write_csv"]
