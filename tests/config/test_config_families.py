"""A constraint family added in one module (this one) is a config kind, an optimizer constraint,
a certified constraint and a CLI kind with nothing else changed: the config's schema is built
from the registry (:mod:`diffpriv.config._schema`)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

import numpy as np
import pytest

import diffpriv as dp
from diffpriv.config import ConfigError, load_config
from diffpriv.problems._checks import SpecError
from diffpriv.problems._constraints import FAMILIES, _row_pairs


@dataclasses.dataclass(frozen=True)
class Chain:
    """ε-DP between consecutive inputs of the domain's order (a toy family for this test)."""

    epsilon: float
    name: str = "chain"
    kind: ClassVar[str] = "chain"

    delta = 0.0

    def check(self, problem, field: str) -> Chain:
        if not isinstance(self.epsilon, float | int) or not self.epsilon >= 0:
            raise SpecError(f"{field}.epsilon: must be >= 0, got {self.epsilon:g}")
        return self

    def pairs(self, problem) -> np.ndarray:
        n = problem.inputs.size
        return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)

    def counts(self, problem) -> tuple[int, int]:
        return (problem.inputs.size - 1) * len(problem.profiles), 0

    def blocks(self, problem, index: int):
        k = problem.inputs.size - 1
        return (_row_pairs(problem, index, self.pairs(problem), np.full(k, float(self.epsilon)),
                           np.ones(k)),)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "epsilon": float(self.epsilon)}

    @classmethod
    def from_dict(cls, d, where: str) -> Chain:
        return cls(epsilon=d["epsilon"], name=d["name"])

    def budget_text(self) -> str:
        return f"ε={self.epsilon:g} between neighbours in order"

    def level_text(self, level: float, epsilon_at_delta: float | None) -> str:
        return f"ε={level:.6g}"


@pytest.fixture
def chain():
    """``Chain`` registered for one test."""
    dp.problems.register_constraint(Chain)
    yield Chain
    FAMILIES.pop(Chain.kind)


TOML = """
[inputs]
labels = ["a", "b", "c", "d", "e"]
coords = [[0.0], [1.0], [2.0], [3.0], [4.0]]

[loss]
kind = "euclidean"

[[constraints]]
kind = "chain"
epsilon = {eps}
"""


def test_a_family_registered_in_one_module_runs_from_a_config(chain, tmp_path, runner):
    from diffpriv.cli import app

    path = tmp_path / "chain.toml"
    path.write_text(TOML.format(eps=0.7))
    problem, _ = load_config(path)
    assert isinstance(problem.constraints[0], Chain) and problem.constraints[0].name == "chain0"

    # the optimum is the one of local DP on the same pairs (the exact LP, independently)
    ldp = dataclasses.replace(problem, constraints=(dp.LocalDP(
        epsilon=0.7, pairs=tuple(map(tuple, Chain(0.7).pairs(problem).tolist()))),))
    optimum = dp.solvers.lp(ldp).value
    result = dp.optimize(problem, method="pdhg", gap_tol=1e-6, steps=50_000)
    cert = dp.certify(problem, result.table, repair=True)
    assert cert.ok and cert.constraints[0].level <= 0.7
    assert cert.loss == pytest.approx(optimum, rel=1e-4)
    assert dp.verify(cert).ok

    out = tmp_path / "out"
    done = runner.invoke(app, ["optimize", str(path), "--out", str(out)])
    assert done.exit_code == 0, done.output
    saved = json.loads((out / "certificate.json").read_text())
    assert saved["problem"]["constraints"][0]["kind"] == "chain"
    checked = runner.invoke(app, ["certify", str(out / "certificate.json"), "--config", str(path)])
    assert checked.exit_code == 0, checked.output


def test_a_registered_family_gets_its_config_errors_from_its_own_fields(chain, tmp_path):
    path = tmp_path / "chain.toml"
    path.write_text(TOML.format(eps=0.7) + "pairs = [[\"a\", \"b\"]]\n")
    with pytest.raises(ConfigError, match=r"^constraints\[0\]\.pairs: chain takes no pairs$"):
        load_config(path)
    path.write_text(TOML.format(eps='"high"'))
    with pytest.raises(ConfigError, match=r"^constraints\[0\]\.epsilon: input should be a valid number"):
        load_config(path)
    path.write_text(TOML.format(eps=-1))
    with pytest.raises(ConfigError, match=r"^constraints\[0\]\.epsilon: must be >= 0, got -1$"):
        load_config(path)


def test_unregistered_kinds_are_refused_by_name(tmp_path):
    path = tmp_path / "chain.toml"
    path.write_text(TOML.format(eps=0.7))
    with pytest.raises(ConfigError, match=r"^constraints\[0\]\.kind: must be 'distp', .* got 'chain'$"):
        load_config(path)
