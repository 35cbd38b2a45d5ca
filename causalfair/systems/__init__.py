"""Systems: what causalfair audits, and the registry that names them.

>>> import causalfair as cf
>>> system = cf.systems.make("lending-1")            # a registered id
>>> system.engines                                   # doctest: +SKIP
frozenset({'exact', 'frontier', 'mc'})

A system of your own: ``cf.systems.register("clinic", "mypkg.sims:make_clinic")`` or, in an
audit spec, ``[system] factory = "mysim:make"`` (a ``mysim.py`` next to the spec). See
docs/own-system.md.
"""

from causalfair.systems.builtin import lending_system, register_builtin
from causalfair.systems.gym.door import from_gym
from causalfair.systems.registry import (
    ENTRY_POINT_GROUP,
    SystemSpec,
    load_callable,
    make,
    pprint_registry,
    register,
    registered,
    spec,
)
from causalfair.systems.system import ENGINES, DecisionSet, Gain, System, as_system
from causalfair.systems.tabular_io import load_tabular, save_tabular

__all__ = [
    "System",
    "DecisionSet",
    "Gain",
    "ENGINES",
    "SystemSpec",
    "ENTRY_POINT_GROUP",
    "as_system",
    "from_gym",
    "register",
    "make",
    "spec",
    "registered",
    "pprint_registry",
    "load_callable",
    "lending_system",
    "load_tabular",
    "save_tabular",
]

register_builtin()
