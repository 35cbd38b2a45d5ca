"""The Gymnasium views of systems, registered by ``import causalfair``: ``causalfair/Lending-v0``
(:mod:`.lending`), ``causalfair/System-v0`` and the per-system ids (:mod:`.system`,
:mod:`.attention`, :mod:`.infectious`)."""
