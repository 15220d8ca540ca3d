"""Deploying a certified table: integer-only sampling (:class:`Sampler`) and a black-box audit
of a sampler against the certificate's privacy claims (:func:`audit`). numpy only."""

from diffpriv.deploy._audit import AuditReport, ClaimAudit, audit
from diffpriv.deploy._sampler import Sampler, SamplerError

__all__ = ["AuditReport", "ClaimAudit", "Sampler", "SamplerError", "audit"]
