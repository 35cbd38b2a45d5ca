"""The built-in systems' "published parameters" against a recorded copy of the published
source (tests/systems/published_sources.toml: repository, commit, file and the lines
verbatim). Each number is read from the recorded source text here, never typed twice, so
a constant edited in causalfair (or copied wrong) fails against the source it cites."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

import causalfair as cf
from causalfair.systems.attention import (
    ATTENTION_DEFAULTS,
    ATTENTION_TRAIN_DEFAULTS,
    FPPO_INCREASE,
    HISTORY,
    WINDOW,
)
from causalfair.systems.infectious import INFECTIOUS_DEFAULTS
from causalfair.systems.lending.harder import ELBERT_HARDER_LENDING

RECORD = Path(__file__).with_name("published_sources.toml")


def _sources() -> dict[str, dict]:
    return {s["name"]: s for s in tomllib.loads(RECORD.read_text())["source"]}


def published(name: str) -> dict[str, object]:
    """The assignments ``NAME = literal`` of one recorded source, evaluated as literals."""
    out = {}
    for line in _sources()[name]["text"].strip().splitlines():
        key, _, value = line.partition("=")
        out[key.strip()] = ast.literal_eval(value.strip())
    return out


def floats(v) -> tuple[float, ...]:
    return tuple(float(x) for x in v)


def test_the_record_names_repository_commit_and_file_for_every_source():
    # fails if a source is recorded without where it comes from
    for name, s in _sources().items():
        assert s["repo"].startswith("https://github.com/"), name
        assert len(s["commit"]) >= 8 and all(c in "0123456789abcdef" for c in s["commit"]), name
        assert s["path"] and s["text"].strip(), name


@pytest.mark.parametrize("source", ["pocar-attention", "fairness-in-rl-attention"])
def test_attention_1_is_the_published_environment(source):
    # fails if attention-1's units, rates, rate steps or reward weights drift from pocar's /
    # Fairness-in-RL's config (e.g. ELBERT's harder numbers, or zeta_1 = 0)
    src = published(source)
    a = ATTENTION_DEFAULTS["attention-1"]
    assert len(a["rates"]) == src["N_LOCATIONS"]
    assert a["units"] == src["N_ATTENTION_UNITS"]
    assert a["rates"] == floats(src["INCIDENT_RATES"])
    assert a["decrease"] == (src["DYNAMIC_RATE"],) * src["N_LOCATIONS"]
    assert (a["reward_seen"], a["reward_missed"]) == (src["ZETA_0"], src["ZETA_1"])
    assert HISTORY == src["OBS_HIST_LEN"]
    # the published episode length is what attention-central's docs point to
    assert src["EP_TIMESTEPS"] == 1000
    s = cf.systems.make("attention-central", horizon=src["EP_TIMESTEPS"])
    assert s.horizon == 1000


def test_attention_1_rises_by_elberts_uniform_rate_and_f_ppo_by_its_own():
    # fails if the seed 001 option carried other numbers than Fairness-in-RL's
    pocar, frl = published("pocar-attention"), published("fairness-in-rl-attention")
    assert ATTENTION_DEFAULTS["attention-1"]["increase"] == (pocar["DYNAMIC_RATE"],) * 5
    assert FPPO_INCREASE == floats(frl["DYNAMIC_INCREASE_RATES"])
    s = cf.systems.make("attention-1", increase="f-ppo")
    assert tuple(s.make_simulator().up) == floats(frl["DYNAMIC_INCREASE_RATES"])
    assert WINDOW == frl["WINDOW"]


def test_the_fair_methods_hyper_parameters_on_attention_are_the_published_ones():
    # fails if A-PPO's betas / omega or F-PPO-L's were taken from another branch of the
    # config (e.g. F-PPO-L's omega 0.1 given to A-PPO)
    appo, fppol = published("fairness-in-rl-attention-a-ppo"), published(
        "fairness-in-rl-attention-f-ppo-l")
    pocar = published("pocar-attention")
    for sid in ("attention-1", "attention-harder"):
        d = ATTENTION_TRAIN_DEFAULTS[sid]
        for src in (appo, pocar):
            assert (d["appo_beta1"], d["appo_beta2"], d["appo_omega"]) == (
                src["BETA_1"], src["BETA_2"], src["OMEGA"])
        assert (d["fppo_beta3"], d["fppo_beta4"], d["fppo_omega"]) == (
            fppol["BETA_3"], fppol["BETA_4"], fppol["OMEGA"])


def test_attention_harder_is_elberts_harder_environment():
    # fails if the increase and decrease rows were swapped or a site's number mistyped
    src = published("elbert-attention-harder")
    h = ATTENTION_DEFAULTS["attention-harder"]
    assert h["units"] == src["N"]
    assert h["rates"] == floats(src["lambda_0"])
    assert h["increase"] == floats(src["DYNAMIC_RATE_1"][0])
    assert h["decrease"] == floats(src["DYNAMIC_RATE_1"][1])


def test_infectious_is_the_published_sir_model():
    # fails if tau and rho were swapped, or the harder loss of immunity changed
    src = published("elbert-infectious")
    d = INFECTIOUS_DEFAULTS
    assert (d["infection_probability"], d["recovery_probability"]) == (src["tau"], src["rho"])
    assert (d["burn_in"], d["horizon"]) == (src["burn_in"], src["episode_steps"])
    assert d["harder_immunity_loss_probability"] == src["DISABLE_PROBILITY"]


def test_lending_harder_is_the_published_kernel():
    # fails if the repayment probabilities or the per-group alter rates drift
    assert ELBERT_HARDER_LENDING["p_repay"] == floats(
        published("ml-fairness-gym-lending")["DELAYED_IMPACT_SUCCESS_PROBS"])
    assert ELBERT_HARDER_LENDING["alter_rate"] == floats(
        published("elbert-lending-harder")["ALTER_RATE"])
