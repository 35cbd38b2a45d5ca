"""A user whose population is not two tidy groups (the Groups walkthrough): group labels
that are numbers or bools, many groups, the pair chosen by label, at every door."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import causalfair as cf
from causalfair.engines.groups import pair_arg, resolve_pair
from causalfair.errors import CausalfairError


def _tabular(groups: tuple[str, ...]) -> cf.TabularModel:
    """Two levels, two actions; group g moves up under d1 with probability 0.2 + 0.1 g."""
    G = len(groups)
    kernel = np.zeros((G, 2, 2, 2))
    for g in range(G):
        kernel[g, 0] = [[1.0, 0.0], [0.0, 1.0]]
        up = 0.2 + 0.1 * g
        kernel[g, 1] = [[1 - up, up], [0.0, 1.0]]
    return cf.TabularModel(kernel=kernel, initial=np.full((G, 2), 0.5),
                           potential=np.array([0.0, 1.0]), group_names=groups)


# ------------------------------------------------- a pair of labels that are numbers
@pytest.mark.parametrize("groups, pair, label", [
    (("0", "7", "42"), (7, 42), "7"),        # non-contiguous ints, as a log's labels
    (("-1", "0", "1"), (-1, 1), "-1"),       # a negative int
])
def test_a_number_that_is_a_group_label_is_not_called_not_a_group(groups, pair, label):
    """Old code: "pair: '7' is not one of the groups; name two of the groups 0, 7, 42": the
    message contradicted itself. Ints are indices (documented), so the label is refused
    with the fix: write the name as a string."""
    model = _tabular(groups)
    for call in (lambda: resolve_pair(pair, groups),
                 lambda: cf.decompose(model, "always", 2, pair=pair),
                 lambda: cf.compare_groups(model, "always", 2, reference=pair[0])):
        with pytest.raises(CausalfairError) as err:
            call()
        msg = str(err.value)
        assert msg.split(":")[0] in ("pair", "reference") and "\n" not in msg
        assert "is not one of the groups" not in msg
        assert f"the group named {label!r}" in msg and f'"{label}"' in msg


def test_bool_labels_name_their_groups_at_every_python_door():
    """A bool is never an index: True names the group "True" (old code: the pair refused
    it as "not one of the groups" while the reference took it)."""
    model = _tabular(("False", "True"))
    assert resolve_pair((True, False), model.group_names) == (1, 0)
    assert cf.decompose(model, "always", 2, pair=(True, False)).pair == (1, 0)
    assert cf.compare_groups(model, "always", 2, reference=True).reference == "True"


def test_the_same_refusal_at_the_engine_door_and_the_spec_door():
    groups = ("0", "7", "42")
    with pytest.raises(CausalfairError) as a:
        resolve_pair((0, 42), groups)
    with pytest.raises(CausalfairError) as b:
        cf.decompose(_tabular(groups), "always", 2, pair=(0, 42))
    assert str(a.value) == str(b.value)


def test_the_label_written_as_a_string_gives_the_pair_the_user_named():
    groups = ("0", "7", "42")
    model = _tabular(groups)
    named = cf.decompose(model, "always", 3, pair=("7", "42"))
    assert named.pair == (1, 2)
    # by hand: V_g = E[x_T] - E[x_0] = 0.5 - 0.5 (1 - up_g)^T, up_g = 0.2 + 0.1 g
    V = np.array([0.5 - 0.5 * (1 - (0.2 + 0.1 * g)) ** 3 for g in range(3)])
    assert named.C == pytest.approx(V[1] - V[2], abs=1e-12)
    assert pair_arg((1, 2), groups) == (1, 2)  # in-range ints stay indices


# ------------------------------------- a group with nobody present (all have left)
def _leaving(empty: bool, departed: tuple[int, ...] | None = (0,)) -> cf.TabularModel:
    """Levels left (absorbing), low, high; group c starts all at 'left' when ``empty``."""
    kernel = np.zeros((3, 2, 3, 3))
    kernel[:, :, 0, 0] = 1.0
    kernel[:, 0, 1] = [0.1, 0.8, 0.1]
    kernel[:, 1, 1] = [0.1, 0.4, 0.5]
    kernel[:, :, 2, 2] = 1.0
    initial = np.array([[0.0, 0.5, 0.5], [0.0, 0.7, 0.3], [1.0, 0.0, 0.0] if empty else
                        [0.0, 0.9, 0.1]])
    return cf.TabularModel(kernel=kernel, initial=initial, potential=np.arange(3.0),
                           group_names=("a", "b", "c"), level_labels=("left", "low", "high"),
                           departed_levels=departed)


class _LeavingSim:
    """The same dynamics as a user's simulator (level 0: left)."""
    n_groups, group_names, n_levels = 3, ("a", "b", "c"), 3

    def __init__(self, empty: bool):
        self.model = _leaving(empty, None)

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        cdf = np.cumsum(self.model.initial, 1)[g]
        return (np.minimum((rng.random(n)[:, None] >= cdf).sum(1), 2), g)

    def observe(self, state):
        return cf.Observation(group=state[1], level=state[0])

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, state, decisions, noise):
        x, g = state
        cdf = np.cumsum(self.model.kernel[g, np.asarray(decisions, dtype=np.intp), x], 1)
        nxt = np.minimum((noise[:, None] >= cdf).sum(1), 2)
        gain = (nxt - x).astype(float)
        return cf.StepResult(state=(nxt, g), reward=gain, gain=gain)


def _sim_system(empty: bool) -> cf.System:
    return cf.System(id="leaving", groups=("a", "b", "c"), levels=("left", "low", "high"),
                     simulator=lambda: _LeavingSim(empty), departed=(0,), horizon=3)


def test_a_group_with_nobody_present_is_refused_not_audited_as_lambda_0():
    """Old code: group c (everyone at the departed level from the start) gave C = 0 - V_a
    and Lambda = 0 with "no pair contributes", and a gate PASS on Lambda."""
    with pytest.raises(cf.ModelError) as err:
        _leaving(empty=True)
    msg = str(err.value)
    assert msg.startswith("departed_levels: group 'c' starts with nobody present")
    assert "leave it out of the groups" in msg and "\n" not in msg
    with pytest.raises(CausalfairError) as err2:  # a simulator: the contract check, same words
        cf.decompose(_sim_system(empty=True), "always", engine="mc", n=200)
    assert "group 'c' starts with nobody present" in str(err2.value)
    assert msg.split(": ", 1)[1] == str(err2.value).split("reset: ", 1)[1]


def test_members_who_all_leave_later_still_audit_and_both_engines_agree():
    model = _leaving(empty=False)  # present at the start, then may leave: allowed
    ex = cf.decompose(model, "always", 3)
    mc = cf.decompose(_sim_system(empty=False), "always", engine="mc", n=20_000, seed=1)
    lo, hi = mc.conf_int().loc["C"]
    assert lo <= ex.C <= hi
    # by hand, under d1 from low: 0.5 up (gain +1), 0.1 leave (gain -1) per step
    V = []
    for p_low in (0.5, 0.7, 0.9):
        low, v = p_low, 0.0
        for _ in range(3):
            v += low * (0.5 - 0.1)
            low *= 0.4
        V.append(v)
    assert ex.V[2] - ex.V[0] == pytest.approx(V[2] - V[0], abs=1e-12)


# ------------------------------------- the Gymnasium door: labels an env reports
class _Trainee:
    """One job seeker (skill 0..3); reset draws the group and reports its label in
    info['group']; training (action 1) raises the skill with probability 0.6 for the first
    label, 0.2 for the second."""

    def __init__(self, labels):
        import gymnasium as gym

        self.labels = list(labels)
        self.observation_space = gym.spaces.Box(0, 3, (1,), np.float64)
        self.action_space = gym.spaces.Discrete(2)
        self.np_random = np.random.default_rng()
        self.metadata, self.spec, self.render_mode = {}, None, None

    @property
    def unwrapped(self):
        return self

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.g, self.x = int(self.np_random.integers(len(self.labels))), 1.0
        return np.array([self.x]), {"group": self.labels[self.g]}

    def step(self, a):
        old = self.x
        if self.np_random.random() < (0.6 if self.g == 0 else 0.2) * a:
            self.x = min(self.x + 1.0, 3.0)
        return np.array([self.x]), 0.0, False, False, {"gain": self.x - old,
                                                        "group": self.labels[self.g]}

    def close(self):
        pass


@pytest.mark.parametrize("labels", [(1, 0), (True, False), ("protected", "other")])
def test_a_gym_env_reporting_number_or_bool_labels_keeps_them_with_their_names(labels):
    """Old code: groups=[1, 0] (or [True, False]) matched the env's label 0 to group index 0,
    named "1": the groups were swapped silently (C -0.81 instead of +0.81)."""
    pytest.importorskip("gymnasium")
    system = cf.systems.from_gym(lambda: _Trainee(labels), groups=list(labels),
                                 group="info:group", horizon=1, check=False)
    assert system.groups == tuple(str(v) for v in labels)
    res = cf.decompose(system, "always", n=1000, seed=0)
    # by hand, T = 1 under d1: V = P(up) = 0.6 for the first label, 0.2 for the second
    lo, hi = res.conf_int().loc["C"]
    assert lo <= 0.4 <= hi and res.C > 0.3


# ------------------------- simulate-logs from your own system, decompose --logs back
_THREE = '''
import numpy as np
import causalfair as cf

def make():
    """Three levels, gain = change of level (potential 0, 1, 2), three groups."""
    kernel = np.zeros((3, 2, 3, 3))
    for g in range(3):
        for a in range(2):
            up = 0.1 + 0.3 * a - 0.05 * g
            kernel[g, a] = [[1 - up, up, 0], [0.1, 0.9 - up, up], [0, 0.1, 0.9]]
    tab = cf.TabularModel(kernel=kernel, initial=np.full((3, 3), 1 / 3),
                          potential=np.arange(3.0), group_names=("x", "y", "z"))
    return cf.System(id="three", groups=("x", "y", "z"), tabular=tab, horizon=4)

def half():
    return lambda obs: np.where(np.asarray(obs.level) == 0, 0.8, 0.3)
'''


def test_a_log_simulated_from_your_system_says_which_potential_measures_its_gain(
        tmp_path, cli_here):
    """Old code: the log holds levels, and decompose --logs measured the gain with the
    lending potential: C of the round trip 6-group agency log -0.006 [-0.057, 0.044]
    against the system's exact +0.080 (with --potential 0,1,2,3: +0.068 [-0.020, 0.148]),
    silently. simulate-logs now names the --potential to give."""
    from causalfair.logs.simulate import potential_note

    (tmp_path / "three.py").write_text(_THREE)
    out = cli_here("simulate-logs", "--system", "three:make", "--policy", "three:half",
                   "--n", "3000", "--out", "log.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "note: a log holds levels, not gains: audit it with --potential 0,1,2 " in out.stdout
    assert potential_note("lending-1") is None  # the default is lending's own potential
    log = pd.read_csv(tmp_path / "log.csv")
    import sys
    sys.path.insert(0, str(tmp_path))
    try:
        import three
        exact = cf.decompose(three.make(), three.half(), 4)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("three", None)
    logged = cf.audit_logs(log, potential=[0, 1, 2], n_boot=60, seed=0).decomposition
    for g in range(3):  # each group's V^pi within 4 bootstrap se of the system's
        assert abs(logged.V[g] - exact.V[g]) < 4 * logged.se[f"V[{'xyz'[g]}]"]


# --------------------------- group names whose pair names "A-B" read two ways
def test_groups_whose_pair_names_read_two_ways_are_refused_at_every_door():
    """Old code: groups North, North-East, East-South, South: the pairs table's row
    "North-East-South" is North-East minus South, while pair="North-East-South" audited
    North minus East-South (C -0.062 for the table's -0.046), silently."""
    groups = ("North", "North-East", "East-South", "South")
    says = ("'North-East-South' names two pairs, 'North' minus 'East-South' and "
            "'North-East' minus 'South'")
    with pytest.raises(cf.ModelError, match=says):
        _tabular(groups)
    with pytest.raises(CausalfairError, match=says):
        cf.System(id="regions", groups=groups, tabular=_tabular(("a", "b", "c", "d")))
    log = pd.DataFrame({"id": [0, 1, 2, 3] * 2, "t": [0] * 4 + [1] * 4,
                        "group": list(groups) * 2, "level": [0, 1, 0, 1] * 2,
                        "decision": [0, 1, 1, 0] * 2, "next_level": [0, 1, 1, 0] * 2,
                        "reward": [0.0] * 8})
    with pytest.raises(CausalfairError, match=says):
        cf.audit_logs(log, n_boot=0)
    # names with a dash that read one way only stay allowed (age bands)
    assert _tabular(("F/16-24", "F/25-64", "M/16-24")).group_names[0] == "F/16-24"


# --------------------------- intersectional groups: the product order is checked
def _product_system(groups, attributes):
    G = len(groups)
    return cf.System(id="agency", groups=groups, tabular=_tabular(tuple(groups)),
                     group_attributes=attributes, horizon=2) if G else None


def test_intersectional_groups_out_of_product_order_are_refused():
    """Old code: groups listed age-major (F/16-24, M/16-24, F/25-64, ...) with
    group_attributes {"sex": ..., "age": ...} (sex-major product order) pooled F/16-24,
    M/16-24 and F/25-64 as "F": the sex marginal (C 0.167) silently mixed the sexes."""
    sexes, ages = ("F", "M"), ("16-24", "65+")
    attributes = {"sex": sexes, "age": ages}
    wrong = [f"{s}/{a}" for a in ages for s in sexes]
    with pytest.raises(CausalfairError) as err:
        _product_system(wrong, attributes)
    msg = str(err.value)
    assert "group_attributes" in msg and "'M/16-24'" in msg and "'F'" in msg
    assert "F/16-24, F/65+, M/16-24, M/65+" in msg  # the order to list them in
    right = [f"{s}/{a}" for s in sexes for a in ages]
    system = _product_system(right, attributes)
    g = cf.compare_groups(system, "always", 2)
    V = np.array([0.5 - 0.5 * (1 - (0.2 + 0.1 * i)) ** 2 for i in range(4)])
    w = system.group_weights  # uniform: the sex marginal pools (0, 1) against (2, 3)
    assert g.attributes["sex"]["pairs"]["M-F"]["C"][0] == pytest.approx(
        (V[2:] @ w[2:]) / w[2:].sum() - (V[:2] @ w[:2]) / w[:2].sum(), abs=1e-12)
    # names that do not spell the values are not second-guessed
    assert _product_system(["g0", "g1", "g2", "g3"], attributes).group_attributes == attributes


class _PinnedTrainee(_Trainee):
    """The same job seeker, its group pinned by reset(options={"group": index})."""

    def reset(self, *, seed=None, options=None):
        obs, _ = super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        return obs, {"group": self.labels[self.g]}


def test_a_pinned_gym_env_reporting_its_label_is_not_refused_as_another_group():
    """Old code: reset(options={'group': 0}) reporting the label 1 of groups=[1, 0] was
    refused: "reported info['group'] = 1, neither 0 nor groups[0] = '1'"."""
    pytest.importorskip("gymnasium")
    system = cf.systems.from_gym(lambda: _PinnedTrainee((1, 0)), groups=[1, 0], horizon=1,
                                 check=False)
    res = cf.decompose(system, "always", n=1000, seed=0)
    lo, hi = res.conf_int().loc["C"]
    assert lo <= 0.4 <= hi  # 0.6 - 0.2: the group named 1 is the first


class _IndexTrainee(_PinnedTrainee):
    """Pinned by options, but reports the group's index, not its label."""

    def reset(self, *, seed=None, options=None):
        obs, _ = super().reset(seed=seed, options=options)
        return obs, {"group": self.g}


@pytest.mark.parametrize("env", [_Trainee, _IndexTrainee])
def test_groups_named_by_the_envs_labels_are_matched_by_name_first(env):
    """groups=[1, 0]: a reported 0 is the group named 0 (groups[1]), as with info:KEY. Old
    code also took it as the index 0, so an env that ignores options and draws the group
    itself (the first) passed for both groups, which then were one population; and one
    that reports indices read its two groups as each other's labels."""
    pytest.importorskip("gymnasium")
    with pytest.raises(cf.errors.SystemError_,
                       match=r"reported info\['group'\] = 0, which is groups\[1\] = '0'"):
        system = cf.systems.from_gym(lambda: env((1, 0)), groups=[1, 0], group="options",
                                     horizon=1, check=False)
        cf.decompose(system, "always", n=200, seed=0)
