"""Policies: the policy objects and built-ins (:mod:`.core`), torch and SB3 adapters
(:mod:`.adapters`), the networks (:mod:`.nets`), checkpoints (:mod:`.checkpoint`), the
decision-set choice (:mod:`.choice`) and population policies (:mod:`.population`)."""
