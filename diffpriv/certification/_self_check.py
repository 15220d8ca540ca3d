"""What a freshly made certificate must pass before diffpriv writes it.

:func:`~diffpriv.certification.certify` computes every level itself, with the code
:func:`~diffpriv.certification.verify` runs, so its levels and ``ok`` agree with a re-check by
construction. What it records from elsewhere does not: the optimizer's lower bound
(``meta.optimizer.lower_bound``), the repair's ``(t, ν)`` composed over quantisation rounds, the
dyadic table. :func:`self_check` runs :func:`verify`'s checks of exactly those on the
certificate as it would be read back, in a fraction of a re-check's time (no level is
recomputed), so that nothing diffpriv writes fails its own ``certify``.
"""

from __future__ import annotations

from diffpriv.certification._arrays import as_read
from diffpriv.certification._certificate import Certificate
from diffpriv.certification._verify import _check_lower_bound, _check_quantization, _check_repair
from diffpriv.problems._json import problem_from_dict

__all__ = ["SelfCheckError", "self_check", "require_self_check"]


class SelfCheckError(ValueError):
    """A certificate diffpriv made would fail its own ``certify`` (a bug: nothing is written)."""


def self_check(cert: Certificate) -> list[str]:
    """The failures :func:`verify` would report of ``cert``'s recorded bound, repair and
    quantisation (``[]``: none)."""
    d = cert.to_dict(arrays=True)
    problem = problem_from_dict(as_read({"problem": d["problem"]})["problem"])
    fail = _check_repair(d, problem, cert.table) + _check_quantization(d, cert.table)
    if cert.ok:
        fail += _check_lower_bound(d, float(cert.loss))
    return fail


def require_self_check(cert: Certificate) -> None:
    """Raises :class:`SelfCheckError` (one line) when :func:`self_check` finds a failure."""
    fail = self_check(cert)
    if fail:
        raise SelfCheckError(f"internal: the certificate would fail its own certify ({fail[0]}); "
                             "nothing written")
