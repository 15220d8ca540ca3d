"""Drawing reports from a certified table with integers only.

A certificate whose table is dyadic (:mod:`diffpriv.certification._quantize`: every row integer
counts ``c[y]`` over ``2^k`` summing to exactly ``2^k``) says exactly what a deployment must do:
report ``y`` with probability ``c[y] / 2^k``. :class:`Sampler` does that and nothing else:

* it verifies the certificate first (:func:`diffpriv.certification.verify`, every claim
  recomputed, the problem's digest included) and refuses one that does not hold or is not
  dyadic;
* a draw is a uniform ``k``-bit integer ``r`` from the operating system's CSPRNG
  (``os.urandom``: 8 bytes, the top ``k`` bits) looked up in the row's cumulative counts,
  ``y = min{y : r < C[y]}`` — no floating-point number anywhere, so there is no rounding for a
  floating-point attack on the sampler (Mironov 2012, *On significance of the least significant
  bits for differential privacy*) to exploit, and each ``y`` is drawn with probability exactly
  ``c[y] / 2^k``.

The batched :meth:`Sampler.sample` draws ``n`` reports with one ``os.urandom`` call and one
``np.searchsorted`` (``benchmarks/sampler.py`` measures its throughput).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import numpy as np

__all__ = ["Sampler", "SamplerError"]


class SamplerError(ValueError):
    """The certificate cannot be sampled: it does not verify, or its table is not dyadic."""


class Sampler:
    """Integer-only sampling of a verified, dyadic certificate's table.

    Args:
      certificate: a :class:`diffpriv.certification.Certificate`, its dict form or a path.
      randbytes: the source of uniform random bytes (default ``os.urandom``, the CSPRNG); tests
        may pass a seeded one.
      exact: verify in exact arithmetic too (slower).
      run_utility: run the user utility (Python code) the certificate's objective names, to
        recompute its loss (:func:`diffpriv.certification.verify`); without it such a
        certificate does not verify.

    Raises:
      SamplerError: the certificate does not verify (its first failure named), or its table is
        not integer counts over a power of two (re-certify with ``quantize``; ``diffpriv
        optimize``, ``reference`` and ``evaluate`` write dyadic certificates).

    Example:
      >>> import numpy as np, diffpriv as dp
      >>> X = dp.Domain(("a", "b", "c"))
      >>> problem = dp.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3,
      ...                      constraints=(dp.LocalDP(epsilon=1.0),))
      >>> e = np.exp(0.9)
      >>> table = (np.full((3, 3), 1.0) + (e - 1) * np.eye(3))[None] / (e + 2)
      >>> sampler = dp.Sampler(dp.certify(problem, table, quantize=53))
      >>> reports = sampler.sample("a", 1000)
      >>> reports.shape, set(sampler.labels(reports)) <= {"a", "b", "c"}
      ((1000,), True)
    """

    def __init__(self, certificate, *, randbytes: Callable[[int], bytes] = os.urandom, exact: bool = False,
                 run_utility: bool = False):
        from diffpriv.certification import Certificate, dyadic_counts, verify
        from diffpriv.certification._schema import read_certificate

        if isinstance(certificate, Certificate):
            data = certificate.to_dict(arrays=True)
        elif isinstance(certificate, Mapping):
            data = dict(certificate)
        else:
            data = read_certificate(certificate)  # within the format's limits
        report = verify(data, exact=exact, run_utility=run_utility)
        if not report.ok:
            raise SamplerError(f"the certificate does not verify: {report.failures[0]}")
        bits = (data.get("quantization") or {}).get("bits")
        if bits is None:
            raise SamplerError("the certificate's table is not dyadic (no 'quantization'): re-certify it "
                               "with quantize (dp.certify(..., quantize=53)); diffpriv optimize, reference "
                               "and evaluate write dyadic certificates")
        problem = report.problem
        counts = dyadic_counts(np.asarray(data["table"], dtype=np.float64), bits)
        if counts is None:  # verify checked it; kept as a guard
            raise SamplerError(f"the certificate's table is not counts over 2^{bits}")
        self.problem = problem
        self.bits = int(bits)
        self.cumulative = np.cumsum(counts, axis=-1)  # [S, X, Y] int64, last column 2^bits
        self.inputs = problem.inputs.labels
        self.outputs = np.asarray(problem.outputs.labels, dtype=object)
        self.profiles = tuple(problem.profiles)
        self._randbytes = randbytes

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(n_profiles, n_in, n_out)``."""
        return self.cumulative.shape

    def _index(self, value, labels, what: str) -> int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if 0 <= value < len(labels):
                return int(value)
            raise SamplerError(f"{what}: index {value} out of range (0 … {len(labels) - 1})")
        if value in labels:
            return list(labels).index(value)
        shown = ", ".join(map(str, list(labels)[:8])) + (", …" if len(labels) > 8 else "")
        raise SamplerError(f"{what}: unknown {what.lstrip('-')} {value!r}; expected one of {shown}")

    def uniform(self, n: int) -> np.ndarray:
        """``[n]`` uniform integers in ``[0, 2^bits)``: the top ``bits`` bits of 8 random bytes."""
        words = np.frombuffer(self._randbytes(8 * n), dtype="<u8", count=n)
        return (words >> np.uint64(64 - self.bits)).astype(np.int64)

    def sample(self, input, n: int, *, profile=None) -> np.ndarray:
        """``[n]`` int64 output indices drawn from row ``(profile, input)`` (labels or indices;
        the only profile when ``profile`` is None and there is one)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise SamplerError(f"n: expected a non-negative integer, got {n!r}")
        if profile is None:
            if len(self.profiles) != 1:
                raise SamplerError(f"--profile: the table has {len(self.profiles)} profiles; name one")
            s = 0
        else:
            s = self._index(profile, self.profiles, "--profile")
        x = self._index(input, self.inputs, "--input")
        return np.searchsorted(self.cumulative[s, x], self.uniform(int(n)), side="right")

    def labels(self, indices) -> np.ndarray:
        """The output labels of output indices."""
        return self.outputs[np.asarray(indices, dtype=np.int64)]
