"""Files: atomic writes, bounded reads, table export and plots (internal helpers)."""
