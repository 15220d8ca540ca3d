"""diffpriv: optimal local obfuscation mechanisms under distribution privacy, certified exactly.

The public face (the rest lives in the subpackages, :mod:`diffpriv.problems`,
:mod:`diffpriv.certification`, :mod:`diffpriv.solvers`, :mod:`diffpriv.mechanisms`,
:mod:`diffpriv.config`, :mod:`diffpriv.deploy`)::

    import diffpriv as dp

    problem, options = dp.load_config("configs/quickstart.toml")  # or dp.Problem(...)
    design = dp.design(problem, **options.kwargs())   # optimize, then certify
    design.certificate.save("certificate.json")
    assert dp.verify("certificate.json").ok           # re-check from scratch
    lp = dp.solvers.lp(problem)                        # the exact optimum (HiGHS)

Specification (numpy): :class:`Problem`, :class:`Domain`, :class:`Item`, the constraint
families :class:`DistP`, :class:`LocalDP`, :class:`ExtendedDP`, :class:`DivergenceDistP`,
:class:`DivergenceDP`, :class:`ExtendedDistP`, :class:`WassersteinDP`, :class:`WassersteinDistP`,
the objectives :class:`ExpectedLoss`, :class:`WorstCaseLoss`, :class:`LargestEntry`,
:class:`TransportLoss`, :class:`EstimationError`, :class:`InformationLoss`, :class:`SinkhornLoss` and
:class:`PythonUtility`
(a differentiable function of the user's; their registries,
blocks and JSON form: :mod:`diffpriv.problems`).
Certification (numpy only, the trusted core): :func:`certify`, :func:`verify`,
:class:`Certificate`. Solving: :func:`optimize` (JAX, loaded on first use; the configurable
:class:`diffpriv.solvers.Optimizer` behind it), :func:`design` (optimize, then certify),
:func:`sweep` (a privacy–utility frontier over one constraint's budget, certified at every
point). Baselines: :func:`evaluate` (:mod:`diffpriv.mechanisms`). What a table or the raw data
leak (vulnerability, leakage, the adversary's error): :func:`leakage`; the privacy of K reports:
:func:`compose`. Deployment: :class:`Sampler`.
"""

from diffpriv._lazy import lazy_getattr

# Every name loads on first use, so that ``import diffpriv.certification`` (the trusted core)
# loads numpy, the problem specification and the measures only: no pydantic, no scipy solver, no
# JAX, no config, solver or CLI module.
_PROBLEMS = ("Problem", "Domain", "Item", "DistP", "LocalDP", "ExtendedDP", "DivergenceDistP",
             "DivergenceDP", "ExtendedDistP", "WassersteinDP", "WassersteinDistP", "ExpectedLoss",
             "WorstCaseLoss", "LargestEntry", "TransportLoss", "EstimationError", "InformationLoss",
             "SinkhornLoss", "PythonUtility")
_LAZY = {
    **{name: f"diffpriv.{name}" for name in
       ("certification", "config", "deploy", "io", "measures", "mechanisms", "problems", "solvers")},
    **dict.fromkeys(_PROBLEMS, "diffpriv.problems"),
    **dict.fromkeys(("Certificate", "certify", "verify"), "diffpriv.certification"),
    "load_config": "diffpriv.config",
    "Sampler": "diffpriv.deploy",
    "evaluate": "diffpriv.mechanisms",
    "leakage": "diffpriv._leakage",
    "compose": "diffpriv._compose",
    "Frontier": "diffpriv._sweep",
    "sweep": "diffpriv._sweep",
    "Design": "diffpriv._design",
    "design": "diffpriv._design",
    "optimize": "diffpriv.solvers._optimizer",
}

__getattr__ = lazy_getattr("diffpriv", _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    # the problem
    "Problem", "Domain", "Item",
    "DistP", "LocalDP", "ExtendedDP", "DivergenceDistP", "DivergenceDP", "ExtendedDistP",
    "WassersteinDP", "WassersteinDistP",
    "ExpectedLoss", "WorstCaseLoss", "LargestEntry", "TransportLoss", "EstimationError", "InformationLoss",
    "PythonUtility", "load_config",
    # solving and certifying
    "optimize", "design", "Design", "sweep", "Frontier", "certify", "verify", "Certificate",
    # baselines and deployment
    "evaluate", "Sampler", "leakage", "compose",
]
