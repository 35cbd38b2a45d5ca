"""The Gymnasium door and the audit spec are split into modules by concept
(systems/gym/door.py, simulator.py, readings.py; audit/spec.py, spec_sections.py): every
public name keeps the import path it had, as the same object as in its new home."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import causalfair.audit.spec as spec
import causalfair.audit.spec_sections as sections
import causalfair.systems.gym.checks as checks
import causalfair.systems.gym.door as door
import causalfair.systems.gym.simulator as simulator


@pytest.mark.parametrize("name, home", [
    ("GymSimulator", simulator), ("GymState", simulator), ("BATCH_SIZE", simulator),
    ("check_forks", checks), ("group_columns", checks), ("GymForkError", checks),
])
def test_the_door_hands_on_the_simulator_names(name, home):
    assert getattr(door, name) is getattr(home, name)
    assert name in door.__all__


@pytest.mark.parametrize("name", ["METRICS", "ENGINES", "RETRAIN_ALGOS", "TOP_KEYS",
                                  "SECTION_KEYS", "RELATIVE_KEYS", "GYM_KEYS", "WEIGHTS",
                                  "spec_label"])
def test_the_spec_hands_on_the_schema_names(name):
    assert getattr(spec, name) is getattr(sections, name)
    assert name in spec.__all__


def test_a_gym_simulator_pickles_under_its_new_home():
    """Workers receive the simulator pickled: its class is found at its module and a copy
    steps the same numbers."""
    from tests.systems.test_gym_shared import TableWalk

    sim = door.from_gym(TableWalk, groups=["a", "b"], horizon=3, check=False).simulator
    twin = pickle.loads(pickle.dumps(sim))
    assert type(twin) is simulator.GymSimulator
    got = []
    for s in (sim, twin):
        st = s.reset(4, 1, np.random.default_rng(0))
        noise = s.draw_noise(4, np.random.default_rng(1))
        got.append(s.step(st, np.array([0, 1, 0, 1]), noise))
    assert np.array_equal(got[0].gain, got[1].gain)
    assert np.array_equal(got[0].state.obs, got[1].state.obs)
