"""The published JSON Schema (docs/certificate.schema.json) is the loader's own format: it is
generated from the same key tables, real certificates validate against it, and what the loader
refuses the schema refuses too."""

import json
import pathlib
import re

import jsonschema
import numpy as np
import pytest

import diffpriv as dp
from diffpriv.certification._json_schema import json_schema
from diffpriv.certification._schema import CertificateFormatError, check_certificate

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "docs" / "certificate.schema.json"


def test_the_published_schema_is_the_generated_one():
    assert json.loads(SCHEMA.read_text()) == json_schema()
    jsonschema.Draft202012Validator.check_schema(json_schema())


def certificates():
    X = dp.Domain(("a", "b", "c"), np.arange(3.0)[:, None])
    items = (dp.Item("p", np.array([0.6, 0.4, 0.0])), dp.Item("q", np.array([0.0, 0.4, 0.6])))
    problem = dp.Problem(X, X, 1 - np.eye(3), np.ones(3) / 3, items=items,
                         constraints=(dp.DistP(pairs=((0, 1),), epsilon=1.0), dp.LocalDP(epsilon=2.0),
                                      dp.WassersteinDP(epsilon=2.0, order=2.0)))
    table = np.full((1, 3, 3), 0.2) + 0.4 * np.eye(3)[None]
    return [dp.certify(problem, table, repair=True), dp.certify(problem, table, quantize=53, repair=True)]


@pytest.mark.parametrize("index", [0, 1])
def test_certificates_validate_and_what_the_loader_refuses_the_schema_refuses(index):
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    d = json.loads(certificates()[index].to_json())
    validator.validate(d)
    check_certificate(d)
    for change in (lambda c: c.__setitem__("extra", 1), lambda c: c.pop("repair"),
                   lambda c: c["constraints"][0].__setitem__("ok", "yes"),
                   lambda c: c.__setitem__("quantization", {"bits": "53"}),
                   lambda c: c["repair"].__setitem__("t", None)):
        bad = json.loads(json.dumps(d))
        change(bad)
        assert not validator.is_valid(bad)
        with pytest.raises(CertificateFormatError):
            check_certificate(bad)


@pytest.mark.parametrize(("literal", "where"), [
    ("10" + "0" * 307, None), (str(2**1024 - 2**970 - 1), None), ("-" + "9" * 308, None),
    (str(2**1024), "a[1].b"), ("-" + str(2**1024), "a[1].b"), ("1" + "0" * 400, "a[1].b")])
def test_an_integer_is_refused_exactly_where_no_float64_holds_it(literal, where):
    """The parser flags the integers of 309 digits or more above the largest float; of those, the
    walk names the ones ``float()`` cannot take (``2**1024 − 2**970 − 1`` rounds to the largest
    float and is accepted; ``2**1024`` is not)."""
    from diffpriv._files import FileFormatError, parse_json

    text = f'{{"a": [0, {{"b": {literal}}}]}}'
    if where is None:
        assert float(parse_json(text, "x.json")["a"][1]["b"]) == float(int(literal))
    else:
        with pytest.raises(FileFormatError, match=rf"x\.json: {re.escape(where)}: integer too large"):
            parse_json(text, "x.json")
