"""A utility of the user's own: any JAX-differentiable function of the table, minimised by the
gradient search (:mod:`diffpriv.solvers._gradient`), its privacy certified exactly as everywhere.

**The signature.** ``fn(table, arrays) -> scalar``: ``table`` the mechanism ``[S, X, Y]`` (rows
summing to 1), ``arrays`` a :class:`UtilityArrays` of the problem's arrays (``prior [S, X]``,
``loss [X, Y]``, ``population [X]``), both ``jax.Array`` in float64; the function returns the
value to *minimise* (a loss: minus a utility). It is traced by JAX (``jax.numpy`` in place of
``numpy``, no Python branching on the table's values) and must have a gradient.

It is named in a config as ``objective = { kind = "python", file = "utility.py", function =
"loss" }`` (the file relative to the config) or given to :func:`diffpriv.design` as
``utility=fn``. Either is checked when the problem is built, at the uniform table and a random
one: the function takes ``(table, arrays)``, returns one finite real number, and JAX
differentiates it to a finite gradient that is not zero at both; else a one-line
:class:`~diffpriv.problems.SpecError`.

The certificate's privacy check is numpy's as always; the objective's value it reports is the
function's, called in float64 at the certified table (JAX is loaded for that alone).

**Code named in a file is run only where the user asked for it.** A problem read from JSON (a
certificate, whoever wrote it) names the file but does not run it unless :func:`running_utilities`
is on: the user's own config (:func:`diffpriv.config.config_from_dict`), :func:`diffpriv.design`,
:func:`diffpriv.sweep`, :func:`diffpriv.certify` (all given the caller's own problem) and ``diffpriv
certify --run-utility`` / ``dp.verify(..., run_utility=True)`` turn it on. Elsewhere the utility is
*not loaded*: the table, the privacy claims and every other command work as always, and computing the
objective's value says in one line what to pass.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import importlib.util
import inspect
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np

from diffpriv.problems._checks import SpecError
from diffpriv.problems._objectives import Objective, register_objective

__all__ = ["PythonUtility", "UtilityArrays", "running_utilities", "runs_utilities", "scalar_value",
           "utility_arrays"]

_RUN = contextvars.ContextVar("diffpriv_run_utilities", default=False)
_FROM_JSON = contextvars.ContextVar("diffpriv_utility_from_json", default=False)


@contextlib.contextmanager
def running_utilities(allowed: bool = True):
    """Within it, a user utility read from JSON is loaded and run (module docstring)."""
    token = _RUN.set(bool(allowed) or _RUN.get())
    try:
        yield
    finally:
        _RUN.reset(token)


def runs_utilities(fn):
    """``fn`` run within :func:`running_utilities`: an entry point that takes the caller's own
    problem (:func:`diffpriv.design`, :func:`diffpriv.sweep`, :func:`diffpriv.certify`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with running_utilities():
            return fn(*args, **kwargs)

    return wrapper


class UtilityArrays(NamedTuple):
    """The problem's arrays a user utility sees (float64 ``jax.Array`` in the search)."""

    prior: Any
    """``[S, X]``: the joint prior of profile and input."""
    loss: Any
    """``[X, Y]``: the loss of reporting ``y`` for ``x``."""
    population: Any
    """``[X]``: the population's input law ``Σ_s prior[s, x]``."""


def utility_arrays(problem) -> UtilityArrays:
    """``problem``'s :class:`UtilityArrays` as numpy float64 arrays."""
    prior = np.asarray(problem.prior, np.float64)
    return UtilityArrays(prior, np.asarray(problem.loss, np.float64), prior.sum(axis=0))


def _load(file: str, function: str):
    """The function ``function`` defined in the Python file ``file``; a one-line :class:`SpecError`
    where the file is missing, fails to run, or defines no such function."""
    path = Path(file)
    if not path.is_file():
        raise SpecError(f"objective.file: no Python file {file!r}")
    name = "diffpriv_utility_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 — the user's file: any failure is reported in one line
        raise SpecError(f"objective.file: {file!r} failed to run: {type(e).__name__}: "
                        f"{_first_line(e)}") from None
    fn = getattr(module, function, None)
    if not callable(fn):
        raise SpecError(f"objective.function: {file!r} defines no function {function!r}")
    return fn


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else "(no message)"


@register_objective
@dataclasses.dataclass(frozen=True, eq=False)
class PythonUtility(Objective):
    """The user's own differentiable utility (module docstring): ``function`` of the Python file
    ``file``, or a function given directly (:meth:`of`). Assumed non-convex: no bound is stated.
    Compared by identity, so that each function compiles its own search."""

    kind: ClassVar[str] = "python"
    text: ClassVar[str] = "user utility"
    epigraph: ClassVar[str] = ""
    smooth: ClassVar[bool] = True
    convex: ClassVar[bool] = False
    file: str = ""
    function: str = "loss"

    def __post_init__(self):
        for field, value in (("file", self.file), ("function", self.function)):
            if not isinstance(value, str) or not value:
                raise SpecError(f"objective.{field}: must be a non-empty string, got {value!r}")
        if not hasattr(self, "fn"):
            load = _RUN.get() or not _FROM_JSON.get()
            object.__setattr__(self, "fn", _load(self.file, self.function) if load else None)
        if self.fn is not None:
            _check_signature(self.fn, self.function)
        object.__setattr__(self, "_checked", set())

    @classmethod
    def from_json(cls, value: Any, where: str) -> PythonUtility:
        token = _FROM_JSON.set(True)
        try:
            return super().from_json(value, where)
        finally:
            _FROM_JSON.reset(token)

    @property
    def loaded(self) -> bool:
        """Whether the function is at hand (module docstring: read from JSON, it may not be)."""
        return self.fn is not None

    @classmethod
    def of(cls, fn) -> PythonUtility:
        """The utility ``fn`` itself (``dp.design(problem, utility=fn)``); its file and name are
        recorded so that a certificate can find it again (a lambda or a nested function cannot
        be found so: :meth:`value` then needs the same object)."""
        if not callable(fn):
            raise SpecError(f"utility: must be a function fn(table, arrays), got {type(fn).__name__}")
        try:
            file = inspect.getsourcefile(fn) or ""
        except TypeError:
            file = ""
        out = object.__new__(cls)
        object.__setattr__(out, "fn", fn)
        object.__setattr__(out, "file", file or "<unknown>")
        object.__setattr__(out, "function", getattr(fn, "__qualname__", "") or "<unknown>")
        _check_signature(fn, out.function)
        object.__setattr__(out, "_checked", set())
        return out

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "file": self.file, "function": self.function}

    def check(self, problem) -> None:
        """Refuses in one line a function that does not return one finite real number or that JAX
        cannot differentiate (module docstring); once per problem shape."""
        if self.fn is None or problem.shape in self._checked:
            return
        import jax
        import jax.numpy as jnp

        ns, nx, ny = problem.shape
        rng = np.random.default_rng(0)
        tables = {"the uniform": np.full(problem.shape, 1.0 / ny),
                  "a random": rng.dirichlet(np.ones(ny), size=(ns, nx))}
        name = self.function
        moved = False
        with jax.enable_x64(True):
            arrays = UtilityArrays(*(jnp.asarray(v) for v in utility_arrays(problem)))
            value_and_grad = jax.value_and_grad(lambda t: scalar_value(self.fn(t, arrays)))
            for where, table in tables.items():
                try:
                    value, grad = value_and_grad(jnp.asarray(table))
                except _NotScalar as e:
                    raise SpecError(f"objective.function: {name} must return one real number, {e}") from None
                except Exception as e:  # noqa: BLE001 — the user's function: reported in one line
                    raise SpecError(f"objective.function: JAX cannot differentiate {name}: "
                                    f"{type(e).__name__}: {_first_line(e)}") from None
                if not np.isfinite(float(value)):
                    raise SpecError(f"objective.function: {name} is {float(value)} at {where} table")
                if not np.all(np.isfinite(np.asarray(grad))):
                    raise SpecError(f"objective.function: {name}'s gradient is not finite at {where} table")
                moved = moved or bool(np.any(np.asarray(grad) != 0))
        if not moved:
            raise SpecError(f"objective.function: {name}'s gradient is 0 at the uniform table and at a "
                            "random one: not differentiable (rounding, argmax, comparisons?)")
        self._checked.add(problem.shape)

    def value(self, problem, table: np.ndarray) -> float:
        if self.fn is None:
            raise SpecError(f"objective: a user utility, {self.function} in {self.file}, is code that "
                            "diffpriv runs only when told to (--run-utility for certify, export, sample "
                            "and audit; dp.verify(..., run_utility=True))")
        import jax
        import jax.numpy as jnp

        with jax.enable_x64(True):
            arrays = UtilityArrays(*(jnp.asarray(v) for v in utility_arrays(problem)))
            return float(scalar_value(self.fn(jnp.asarray(np.asarray(table, np.float64)), arrays)))


class _NotScalar(TypeError):
    pass


def scalar_value(value):
    """``value`` as a 0-d real array; :class:`_NotScalar` where it is not one real number."""
    import jax.numpy as jnp

    shape = getattr(value, "shape", None)
    if isinstance(value, bool) or not (isinstance(value, int | float) or shape is not None):
        raise _NotScalar(f"got {type(value).__name__}")
    value = jnp.asarray(value)
    if value.size != 1:
        raise _NotScalar(f"got an array of shape {tuple(value.shape)}")
    if not jnp.issubdtype(value.dtype, jnp.floating):
        raise _NotScalar(f"got {value.dtype} (a float is needed for a gradient)")
    return value.reshape(())


def _check_signature(fn, name: str) -> None:
    """A one-line :class:`SpecError` where ``fn`` cannot be called as ``fn(table, arrays)``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # (a builtin or C function: its call will tell)
    try:
        sig.bind(None, None)
    except TypeError:
        raise SpecError(f"objective.function: {name} must take (table, arrays), it takes {sig}") from None
