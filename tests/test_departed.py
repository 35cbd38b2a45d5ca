"""The opt-in declaration of departed levels (individuals who LEFT the population:
``System(departed=...)``, ``TabularModel(departed_levels=...)``; docs/own-system.md,
"Individuals who leave").

The tiny triage case of tests/test_triage_user.py (two groups, sick / well / left, T = 2).
By hand, under PI the visits averaged over t < 2 are
  insured:   t0 (0.3, 0.7, 0), t1 (0.127, 0.737, 0.136)  -> mean (0.2135, 0.7185, 0.068)
  uninsured: t0 (0.7, 0.3, 0), t1 (0.272, 0.523, 0.205)  -> mean (0.486, 0.4115, 0.1025)
and those present (sick, well) have mass 0.932 and 0.8975. Benefits of admit: sick 0.4,
well 0.1 (both groups), left 0; eps = 0.1, so the pair terms eps |dpi| / (eps + |dDelta|) are
(sick, sick) 0.3, (sick, well) 0.7 * 0.1 / 0.4 = 0.175, (well, sick) 0.2 * 0.1 / 0.4 = 0.05,
(well, well) 0.2. Lambda over those present, renormalised (P(x | s) a distribution):
  (0.2135 * 0.486 * 0.3 + 0.2135 * 0.4115 * 0.175 + 0.7185 * 0.486 * 0.05
   + 0.7185 * 0.4115 * 0.2) / (0.932 * 0.8975).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.notions import other_notions
from causalfair.engines.selection import selection_rates
from causalfair.errors import ModelError, SimulatorContractError, SystemError_
from tests.tri_tiny import PI, PI_BASELINE_AT_LEFT, tiny_module  # noqa: F401

PRESENT_SUM = (0.2135 * 0.486 * 0.3 + 0.2135 * 0.4115 * 0.175 + 0.7185 * 0.486 * 0.05
               + 0.7185 * 0.4115 * 0.2)
HAND_LAMBDA = PRESENT_SUM / (0.932 * 0.8975)
HAND_DPE = (0.117 + 0.06275) - (0.143 + 0.05963)  # tests/test_triage_user.py's HAND
UNDECLARED_LAMBDA = 0.15293605875  # every visit counted (the published behaviour)


def _declared(tiny, **kw):
    return tiny.make().with_(departed=(2,), **kw)


# ------------------------------------------------------------------ the declaration
def test_declaration_is_checked_copied_to_the_model_and_recorded_only_when_set(tiny):
    plain = tiny.make()
    assert plain.departed is None and plain.tabular.departed_levels is None
    assert "departed" not in plain.to_dict()
    system = _declared(tiny)
    assert system.departed == (2,) and system.tabular.departed_levels == (2,)
    assert system.to_dict()["departed"] == ["left"]
    # a model that declares them gives them to the system
    via_model = tiny.make().with_(tabular=plain.tabular.with_(departed_levels=[2]))
    assert via_model.departed == (2,)


@pytest.mark.parametrize("bad, words", [
    ((3,), "departed=(3,) must be distinct level indices in [0, 3) of levels ['sick', 'well', "
           "'left']"),
    ((2, 2), "must be distinct"),
    ((0, 1, 2), "leaving at least one level present"),
    (("left",), "departed must be a sequence of level indices (integers), got ('left',)"),
    ((True,), "departed must be a sequence of level indices (integers), got (True,)"),
    (2, "departed must be a sequence of level indices (integers), got 2"),
    ((0,), "level 0 is not absorbing: kernel[0, 0, 0, 0] = 0.5, expected 1"),
])
def test_declaration_refused_with_field_value_and_fix(tiny, bad, words):
    with pytest.raises(SystemError_) as exc:
        tiny.make().with_(departed=bad)
    msg = str(exc.value)
    assert words in msg and "departed" in msg and "Individuals who leave" in msg, msg


def test_model_refuses_a_level_that_is_not_absorbing(tiny):
    tab = tiny.make().tabular
    with pytest.raises(ModelError, match=r"departed_levels: level 1 is not absorbing"):
        tab.with_(departed_levels=(1,))
    with pytest.raises(ModelError, match=r"departed_levels=\(-1,\) must be distinct level indices "
                                         r"in \[0, 3\), leaving at least one level present"):
        tab.with_(departed_levels=(-1,))
    with pytest.raises(ModelError, match=r"departed_levels must be a sequence of level indices"):
        tab.with_(departed_levels=(np.True_,))


def test_system_and_model_must_agree(tiny):
    tab = tiny.make().tabular.with_(departed_levels=(2,))
    with pytest.raises(SystemError_, match=r"departed=\(1,\) but its tabular model declares"):
        tiny.make().with_(tabular=tab, departed=(1,))


def test_system_and_model_refuse_a_bad_index_with_one_sentence(tiny):
    """One check (model.departed_indices) behind both doors: the same words, each door
    naming its own field."""
    tab = tiny.make().tabular
    for bad in ((3,), (1, 1), (0, 1, 2), (True,), ("left",)):
        with pytest.raises(ModelError) as m:
            tab.with_(departed_levels=bad)
        with pytest.raises(SystemError_) as s:
            tiny.make().with_(departed=bad)
        model_says = str(m.value).split("departed_levels", 1)[1].split(";")[0]
        system_says = re.sub(r" of levels \[[^]]*\]", "",
                             str(s.value).split("departed", 1)[1].split(";")[0])
        assert model_says == system_says, (model_says, system_says)


def test_with_departed_none_clears_the_declaration_on_the_model_too(tiny):
    """Clearing on the System clears the model's departed_levels (before: the model gave
    them back and the declaration stayed); every number is then the undeclared one."""
    declared = _declared(tiny)
    for cleared in (declared.with_(departed=None),
                    tiny.make().with_(tabular=declared.tabular).with_(departed=None)):
        assert cleared.departed is None and cleared.tabular.departed_levels is None
        assert "departed" not in cleared.to_dict()
        assert cf.benefit_fairness(cleared, tiny.TablePolicy(PI), eps=0.1).Lambda \
            == pytest.approx(UNDECLARED_LAMBDA, abs=1e-14)
    # other changes keep the declaration, and a new one replaces it on both
    assert declared.with_(horizon=3).departed == (2,)
    assert declared.with_(horizon=3).tabular.departed_levels == (2,)
    assert declared.with_(departed=None).with_(departed=(2,)).tabular.departed_levels == (2,)


def test_contract_check_refuses_a_simulator_that_moves_a_departed_unit(tiny):
    """Without a tabular model the contract check watches the steps it runs: 'well' is
    not absorbing (a unit there falls sick or leaves), so declaring it departed fails."""
    def bare(departed):
        return cf.System(id="bare", groups=tiny.GROUPS, levels=tiny.LEVELS, horizon=2,
                         decisions=cf.DecisionSet(labels=("monitor", "admit"), baseline=0),
                         simulator=tiny.TinySim, departed=departed)
    bare((2,)).check_contract()  # 'left' is absorbing with gain 0: accepted
    with pytest.raises(SimulatorContractError) as exc:
        bare((1,)).check_contract()
    msg = str(exc.value)
    assert "departed=(1,) declares level 1 absorbing with gain 0" in msg, msg
    with pytest.raises(SystemError_, match="needs levels"):
        cf.System(id="nolev", groups=tiny.GROUPS, simulator=tiny.TinySim, departed=(0,))


# ------------------------------------------------------------------ Lambda
def test_lambda_exact_is_the_hand_value_and_ignores_decisions_on_the_departed(tiny):
    system = _declared(tiny)
    res = [cf.benefit_fairness(system, tiny.TablePolicy(p), eps=0.1) for p in
           (PI, PI_BASELINE_AT_LEFT)]
    for r in res:
        assert r.Lambda == pytest.approx(HAND_LAMBDA, abs=1e-12)
        assert r.dpe_prop1 == pytest.approx(HAND_DPE, abs=1e-12)
        np.testing.assert_allclose(r.state_weights.sum(1), 1.0, atol=1e-12)
        assert np.all(r.state_weights[:, 2] == 0.0)
        pairs = r.worst_pairs(10)
        assert len(pairs) == 4 and "left" not in set(pairs.iloc[:, 0]) | set(pairs.iloc[:, 1])
    # undeclared: bit for bit what it was
    assert cf.benefit_fairness(tiny.make(), tiny.TablePolicy(PI), eps=0.1).Lambda \
        == pytest.approx(UNDECLARED_LAMBDA, abs=1e-14)


def test_lambda_monte_carlo_agrees_with_exact(tiny):
    system = _declared(tiny)
    mc = [cf.benefit_fairness(system, tiny.TablePolicy(p), eps=0.1, engine="mc", n=20_000,
                              seed=1) for p in (PI, PI_BASELINE_AT_LEFT)]
    assert mc[0].Lambda == mc[1].Lambda  # same random numbers, decisions at 'left' unused
    lo, hi = mc[0].ci
    assert lo <= HAND_LAMBDA <= hi and abs(mc[0].Lambda - HAND_LAMBDA) < 0.005
    assert np.all(mc[0].state_weights[:, 2] == 0.0)
    np.testing.assert_allclose(mc[0].state_weights.sum(1), 1.0, atol=1e-12)
    pairs = mc[0].worst_pairs(10)
    assert len(pairs) == 4 and "left" not in set(pairs.iloc[:, 0]) | set(pairs.iloc[:, 1])
    # DPE in Proposition-1 form counts every visit (a departed one adds 0): the hand DPE
    assert mc[0].dpe_prop1 == pytest.approx(HAND_DPE, abs=0.01)
    plain = cf.benefit_fairness(tiny.make(), tiny.TablePolicy(PI), eps=0.1, engine="mc",
                                n=20_000, seed=1)
    assert abs(plain.Lambda - UNDECLARED_LAMBDA) < 0.01  # undeclared: every visit counts


# ------------------------------------------------------------------ rates and levels
def test_rates_and_final_levels_count_only_those_present(tiny):
    """Insured admit rate: t0 0.3 * 0.8 + 0.7 * 0.3 = 0.45 of 1 present; t1
    0.127 * 0.8 + 0.737 * 0.3 = 0.3227 of 0.864 present; overall 0.7727 / 1.864. At T:
    sick 0.127 * 0.26 + 0.737 * 0.07 = 0.08461, well 0.67775, so the mean present level
    (sick 1, well 2) is (0.08461 + 2 * 0.67775) / 0.76236."""
    model = _declared(tiny).tabular
    notes = other_notions(model, PI, 2)
    assert notes["approval_rate"]["insured"] == pytest.approx(0.7727 / 1.864, abs=1e-12)
    assert notes["mean_level_final"]["insured"] == pytest.approx(
        (0.08461 + 2 * 0.67775) / 0.76236, abs=1e-12)
    sel = selection_rates(model, PI, model.propagate(PI, 2), 2, source="exact")
    assert sel["rate"]["insured"]["admit"] == pytest.approx([0.45, 0.3227 / 0.864], abs=1e-12)
    assert sel["rate_overall"]["insured"]["admit"] == pytest.approx(0.7727 / 1.864, abs=1e-12)
    # undeclared: everyone counted, as before
    plain = tiny.make().tabular
    assert other_notions(plain, PI, 2)["approval_rate"]["insured"] == pytest.approx(
        (0.45 + 0.3227 + 0.136 * 0.9) / 2, abs=1e-12)  # PI admits 0.9 of the departed
    assert other_notions(plain, PI, 2)["mean_level_final"]["insured"] == pytest.approx(
        0.08461 + 2 * 0.67775 + 3 * 0.23764, abs=1e-12)


# ------------------------------------------------------------------ model files
@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_model_file_carries_departed_levels_and_lambda_eps(tiny, tmp_path, suffix):
    """Written when set, read back: the loaded model's Lambda with its own eps (no eps
    given) is the hand value over those present."""
    model = _declared(tiny).tabular.with_(lambda_eps=0.1)
    loaded = cf.systems.load_tabular(cf.systems.save_tabular(tmp_path / f"m{suffix}", model))
    assert loaded.departed_levels == (2,) and loaded.lambda_eps == 0.1
    assert cf.benefit_fairness(loaded, tiny.TablePolicy(PI), horizon=2).Lambda == \
        pytest.approx(HAND_LAMBDA, abs=1e-12)
    system = cf.as_system(loaded, id="fromfile")
    assert system.departed == (2,)
    # a model that sets neither writes neither, and reads back without them (as old files)
    plain = cf.systems.save_tabular(tmp_path / f"p{suffix}", tiny.make().tabular)
    meta = (json.loads(str(np.load(plain)["meta"])) if suffix == ".npz"
            else json.loads(plain.read_text()))
    assert "departed_levels" not in meta and "lambda_eps" not in meta
    again = cf.systems.load_tabular(plain)
    assert again.departed_levels is None and again.lambda_eps is None
    assert cf.benefit_fairness(again, tiny.TablePolicy(PI), horizon=2, eps=0.1).Lambda == \
        pytest.approx(UNDECLARED_LAMBDA, abs=1e-14)


@pytest.mark.parametrize("field, value, words", [
    ("departed_levels", [1], "departed_levels: level 1 is not absorbing: kernel[0, 0, 1, 1] = "
                             "0.8, expected 1; declare only levels"),
    ("departed_levels", ["left"], "departed_levels must be a sequence of level indices "
                                  "(integers), got ['left']; declare only levels"),
    ("departed_levels", [True], "departed_levels must be a sequence of level indices "
                                "(integers), got [True]"),
    ("departed_levels", [2, 2], "departed_levels=(2, 2) must be distinct level indices in "
                                "[0, 3), leaving at least one level present"),
    ("departed_levels", 2, "departed_levels must be a sequence of level indices (integers), "
                           "got 2"),
    ("lambda_eps", -1, "lambda_eps: must be a number > 0 in the gain's units, or None for the "
                       "scale-free \"auto\", got -1"),
    ("lambda_eps", "0.1", "lambda_eps: must be a number > 0"),
])
def test_model_file_with_a_bad_declaration_names_file_field_value_and_fix(
        tiny, tmp_path, field, value, words):
    path = cf.systems.save_tabular(tmp_path / "m.json", tiny.make().tabular)
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, field: value}))
    with pytest.raises(ModelError) as exc:
        cf.systems.load_tabular(path)
    msg = str(exc.value)
    assert msg.startswith(f"tabular model {path}: ") and words in msg, msg
