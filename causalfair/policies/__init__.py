"""Policies: the policy objects and built-ins (:mod:`.core`), how the engines evaluate them
(their tables on the (group, level) grid, pi^PS, what they read: :mod:`.grid`), torch and
SB3 adapters (:mod:`.adapters`), the networks (:mod:`.nets`), checkpoints (:mod:`.checkpoint`), the
decision-set choice (:mod:`.choice`), population policies (:mod:`.population`), and the one
way to resolve a policy for a system (:func:`.resolver.resolve`, re-exported here)."""

from causalfair.policies.resolver import ResolvedPolicy, as_policy, resolve

__all__ = ["ResolvedPolicy", "as_policy", "resolve"]
