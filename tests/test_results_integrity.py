"""What a notebook can do to a result and what a result may hold: the names a result
prints are text, checked where a result is built (every engine builds one there)."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import InputError


@pytest.fixture(scope="module")
def lending():
    return cf.lending_setting("lending-1").tabular


@pytest.mark.parametrize("bad", [5, 0, "", "  ", ["x"], b"pi"])
def test_a_policy_name_that_is_not_text_is_refused_by_every_engine(lending, bad):
    system = cf.systems.make("lending-1")
    for call in (lambda: cf.decompose(lending, "threshold:0.5", 2, policy_name=bad),
                 lambda: cf.decompose(system, "threshold:0.5", 2, engine="exact",
                                      policy_name=bad),
                 lambda: cf.decompose(system, "threshold:0.5", 2, engine="mc", n=20,
                                      policy_name=bad),
                 lambda: cf.attribute(lending, "threshold:0.5", "never", 2,
                                      policy_name=bad),
                 lambda: cf.attribute(lending, "threshold:0.5", "never", 2,
                                      baseline_name=bad)):
        with pytest.raises(InputError, match="_name: must be the policy's name as non-empty text"):
            call()


def test_a_decomposition_built_directly_checks_its_policy_name(lending):
    dec = cf.decompose(lending, "threshold:0.5", 2, policy_name="mine")
    assert dec.policy_name == "mine" and dec.to_dict()["policy"] == "mine"
    assert cf.decompose(lending, "threshold:0.5", 2).policy_name == "threshold:0.5"
    with pytest.raises(InputError, match="policy_name"):
        cf.Decomposition(**{**{f: getattr(dec, f) for f in dec.__dataclass_fields__},
                            "policy_name": 7})
    assert isinstance(np.asarray(dec.V), np.ndarray)
