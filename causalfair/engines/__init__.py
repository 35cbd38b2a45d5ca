"""Engines: the numbers of a policy on a system. Exact on a tabular model (:mod:`.effects`
C = DPE + IPE + SPE, :mod:`.benefit` Delta and Lambda, :mod:`.notions`, :mod:`.exact` (all of them
for one policy table), :mod:`.occupancy`,
:mod:`.frontier`, :mod:`.wen`, :mod:`.exact_torch`) and Monte Carlo on a simulator
(:mod:`.montecarlo`, :mod:`.montecarlo_coupled`, :mod:`.benefit_mc`)."""
