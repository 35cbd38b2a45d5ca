#!/usr/bin/env bash
# Regenerates reports/examples/: plain-PPO checkpoints on lending-1, -2 and -3 that fail
# the gate, and their constrained repairs (`causalfair gate --retrain`, [retrain] algo =
# "exact": the most profitable policy found under the spec's thresholds) that pass.
# Takes about two minutes on one CPU core. Deterministic: every step is seeded.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MPLBACKEND=Agg
EX=reports/examples
SETTINGS="1 2 3"

# 1. plain PPO (100 iterations, seed 0) -> checkpoints/lending-N-ppo.pt
rm -f "$EX"/checkpoints/lending-*-ppo*.pt
# report folders from before causalfair marked its folders (.causalfair-report.json)
for n in $SETTINGS; do
    for d in "$EX/lending-$n-ppo" "$EX/gate/lending-$n-ppo"; do
        [ -e "$d/.causalfair-report.json" ] || rm -rf "$d"
    done
done
for n in $SETTINGS; do
    python - "$n" <<'PY'
import shutil, sys, tempfile
import torch
torch.set_num_threads(1)
from causalfair.train import TrainConfig, train
n = sys.argv[1]
with tempfile.TemporaryDirectory() as tmp:
    res = train(TrainConfig(algo="ppo", setting=f"lending-{n}", iterations=100, seed=0), out=tmp)
    shutil.copyfile(res.checkpoint, f"reports/examples/checkpoints/lending-{n}-ppo.pt")
PY
done

# the torch build and CPU kernels the weights' bits depend on (docs/limits.md)
python "$EX/machine.py" > "$EX/checkpoints/machine.json"

# 2. the audit report of the lending-1 PPO checkpoint (verdict: FAIL)
python -m causalfair audit "$EX/lending-1-ppo.toml" --out "$EX/lending-1-ppo"

# 3. the gate: each checkpoint fails; the constrained repair of each ([retrain] algo =
#    "exact") is written beside it as checkpoints/lending-N-ppo.retrained-exact-1.pt,
#    re-audited (PASS), with the before/after report (utility kept, the best found, the
#    LP bound), the JUnit XML and the JSON summary. Exit code 0 (--accept-repaired: we
#    take the repaired checkpoints); without it the gate exits 1 while the originals fail.
python -m causalfair gate $(for n in $SETTINGS; do echo "$EX/lending-$n-ppo.toml"; done) \
    --retrain --accept-repaired --reports "$EX/gate" --junit "$EX/gate.xml" --json "$EX/gate.json"

# 4. the lending-1 example ships with the package (causalfair.examples: the analyst
#    notebook runs from an installed causalfair); tests keep the copies identical
cp "$EX/lending-1-ppo.toml" causalfair/examples/
cp "$EX/checkpoints/lending-1-ppo.pt" "$EX/checkpoints/lending-1-ppo.retrained-exact-1.pt" \
    causalfair/examples/checkpoints/
