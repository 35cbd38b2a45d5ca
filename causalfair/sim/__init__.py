"""Simulators: the lending model (tabular and individual level) and its data."""

from causalfair.sim.lending import SETTINGS, LendingModel, lending_setting

__all__ = ["SETTINGS", "LendingModel", "lending_setting"]
