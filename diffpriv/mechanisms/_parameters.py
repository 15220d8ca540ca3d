"""Checking a mechanism's recorded parameters against the table they build.

``diffpriv evaluate`` records ``meta.mechanism = {"name", "params"}`` in a certificate: a claim
that the table is that mechanism at those parameters. The certifier does not read ``meta``
(:data:`diffpriv.certification.UNCHECKED`); :func:`check_parameters` checks this one claim by
rebuilding the table with the registered builder, as ``evaluate`` certified it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from diffpriv.certification import Certificate
from diffpriv.mechanisms._registry import MECHANISMS

__all__ = ["check_parameters"]


def check_parameters(certificate) -> tuple[bool | None, str]:
    """Whether a certificate's table is the one its recorded mechanism parameters build.

    ``meta.mechanism = {"name", "params"}`` (written by :func:`evaluate`) is a claim about the
    table: the mechanism built with those parameters, certified as :func:`evaluate` did — rows
    cleaned, mixed by the recorded repair ``(t, ν)`` if any, rounded to the recorded
    quantization. It is rebuilt here and compared with the stored table (within ``1e-12``, plus
    two counts of ``2^-bits`` a quantisation round for a repaired dyadic table).

    Returns:
      ``(True, text)`` verified; ``(False, text)`` the parameters do not build this table (a
      false claim); ``(None, text)`` nothing to check (no mechanism recorded) or the table could
      not be rebuilt (the text says why: "parameters not verified").
    """
    from diffpriv.certification import dyadic_counts, quantize
    from diffpriv.certification._certificate import QUANTIZE_ROUNDS
    from diffpriv.certification._safety import sanitize_table
    from diffpriv.problems._json import problem_from_dict

    d = certificate.to_dict(arrays=True) if isinstance(certificate, Certificate) else certificate
    meta = d.get("meta") or {}
    recorded = meta.get("mechanism") if isinstance(meta, Mapping) else None
    if not isinstance(recorded, Mapping):
        return None, "no mechanism recorded"
    name, params = recorded.get("name"), recorded.get("params")
    if name not in MECHANISMS or not isinstance(params, Mapping):
        return None, f"parameters not verified (unknown mechanism {name!r})"
    params = {k: float(v) if v in ("inf", "-inf", "nan") else v for k, v in params.items()}
    try:
        problem = problem_from_dict(d["problem"])
        table = sanitize_table(problem, MECHANISMS[name](problem, **params))
    except Exception as e:  # noqa: BLE001  (any builder failure: the claim is not verified)
        return None, f"parameters not verified ({type(e).__name__}: {e})"
    rep = d.get("repair") or {}
    t = float(rep.get("t", 0.0))
    slack = 1e-12
    if t > 0 and rep.get("nu") is not None:
        table = (1.0 - t) * table + t * np.asarray(rep["nu"], dtype=np.float64)
    bits = (d.get("quantization") or {}).get("bits")
    if bits is not None:
        table = quantize(table, bits)[1]
        slack += 2 * QUANTIZE_ROUNDS * 2.0**-bits if t > 0 else 0.0  # a count a round, either side
    stored = np.asarray(d["table"], dtype=np.float64)
    if stored.shape != table.shape:
        return False, (f"meta.mechanism.params: {name} builds a table of shape {table.shape}, "
                       f"not {stored.shape}")
    gap = float(np.abs(stored - table).max(initial=0.0))
    if bits is not None and t == 0 and dyadic_counts(stored, bits) is not None:
        slack = 0.0  # the same rounding of the same table: identical
    if gap > slack:
        return False, (f"meta.mechanism.params: the table is not {name} at {_shown(params)} "
                       f"(largest difference {gap:.3g})")
    return True, f"the table is {name} at {_shown(params)}"


def _shown(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())
