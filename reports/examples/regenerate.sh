#!/usr/bin/env bash
# Regenerates reports/examples/: a PPO checkpoint on lending-1 that fails the gate, and
# its PPO-Cb repair (warm-started from it by `causalfair gate --retrain`) that passes.
# Takes about a minute on one CPU core. Deterministic: every step is seeded.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MPLBACKEND=Agg
EX=reports/examples

# 1. plain PPO (100 iterations, seed 0) -> checkpoints/lending-1-ppo.pt
rm -f "$EX"/checkpoints/lending-1-ppo*.pt
# report folders from before causalfair marked its folders (.causalfair-report.json)
for d in "$EX/lending-1-ppo" "$EX/gate/lending-1-ppo"; do
    [ -e "$d/.causalfair-report.json" ] || rm -rf "$d"
done
python - <<'PY'
import shutil, tempfile
import torch
torch.set_num_threads(1)
from causalfair.train import TrainConfig, train
with tempfile.TemporaryDirectory() as tmp:
    res = train(TrainConfig(algo="ppo", setting="lending-1", iterations=100, seed=0), out=tmp)
    shutil.copyfile(res.checkpoint, "reports/examples/checkpoints/lending-1-ppo.pt")
PY

# 2. the audit report of the PPO checkpoint (verdict: FAIL)
python -m causalfair audit "$EX/lending-1-ppo.toml" --out "$EX/lending-1-ppo"

# 3. the gate: fails, retrains with the spec's [retrain] (PPO-Cb) from the checkpoint,
#    writes checkpoints/lending-1-ppo.retrained-ppo-cb-1.pt, re-audits (PASS) and writes
#    the before/after report, JUnit XML and JSON summary. Exit code 0 (--accept-repaired:
#    we take the repaired checkpoint); without it the gate exits 1 while the original fails.
python -m causalfair gate "$EX/lending-1-ppo.toml" --retrain --accept-repaired --reports "$EX/gate" \
    --junit "$EX/gate.xml" --json "$EX/gate.json"
