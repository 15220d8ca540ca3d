"""Strict test settings: float64 everywhere, warnings are errors (pyproject), a PRNG key fixture."""

import os

os.environ.setdefault("JAX_ENABLE_X64", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["DIFFPRIV_COMPILE_CACHE"] = "off"  # the CLI's cache stays out of the tests (one turns it on)

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)


@pytest.fixture
def runner():
    """A typer ``CliRunner`` for the ``diffpriv`` command line (stdout and stderr kept apart)."""
    from typer.testing import CliRunner

    return CliRunner()
