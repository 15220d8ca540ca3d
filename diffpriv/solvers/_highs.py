"""A HiGHS instance that prints nothing.

highspy's ``Highs()`` (1.16) calls into HiGHS while its ``output_flag`` is still on, which writes
HiGHS's banner ("Running HiGHS …") to standard output before any option can be set; a
``diffpriv`` command's output is then interleaved with it. The compiled class underneath
(``highspy._Highs``) takes the option first. What the Python subclass adds (callbacks, the
context manager, the threaded solve for Ctrl-C, off by default) is not used here.
"""

from __future__ import annotations

__all__ = ["quiet_highs"]


def quiet_highs():
    """A new ``Highs`` object with ``output_flag`` off before any other call."""
    import highspy

    h = getattr(highspy, "_Highs", highspy.Highs)()
    h.setOptionValue("output_flag", False)
    return h
