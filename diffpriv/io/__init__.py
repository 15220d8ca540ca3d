"""Files: atomic writes, bounded reads, table export and plots."""

from diffpriv._files import atomic_write, write_csv

__all__ = ["atomic_write", "write_csv"]
