"""The lending system family: the reference settings and the lending model (:mod:`.settings`),
the FICO-calibrated setting 3 (:mod:`.fico`), lending-harder (:mod:`.harder`) and the data
they read (``data/``)."""

from causalfair.systems.lending.settings import SETTINGS, LendingModel, lending_setting

__all__ = ["SETTINGS", "LendingModel", "lending_setting"]
