#!/bin/bash
# Issue 28's measurements on a many-core machine (and its GPU, when it has one), in one
# run of 5-8 minutes on 16 cores: what every core, the gate, the sweep and the GPU give
# against one core, each ratio beside the machine's own ceiling measured in the same run.
#
#   bash benchmarks/many_cores.sh [LOG]     (from the repository root; LOG: default many_cores.log)
#
# causalfair must be importable (installed, or this checkout on PYTHONPATH); leave
# OMP_NUM_THREADS unset (jobs="auto" honours it as a cap). Each step has a time limit and
# the log is written as it goes, so a run cut short keeps what it measured. docs/scale.md
# ("On a 16-core machine with an H100") records what these gave there.
set -u
log=${1:-many_cores.log}
export PYTHONUNBUFFERED=1
exec > >(tee -a "$log") 2>&1
py=${PYTHON:-python3}
step() {
    local name=$1 limit=$2
    shift 2
    echo
    echo "=== $name ($(date -u +%T))"
    timeout "$limit" "$@"
    echo "=== $name: exit $? ($(date -u +%T))"
}
date -u
echo "cores: $(nproc) in the affinity mask, $(getconf _NPROCESSORS_ONLN) online"
command -v nvidia-smi > /dev/null && nvidia-smi -L
"$py" -c "import numpy, causalfair; print('numpy', numpy.__version__, 'causalfair', causalfair.__file__)"
step "the machine's ceiling" 120 "$py" benchmarks/bench_ceiling.py
step "every core: the Monte Carlo audit, threads and processes" 180 \
    "$py" benchmarks/bench_mc_features.py --n 1000000 --jobs-only --processes
step "where that audit's time goes on one core and every core" 120 \
    "$py" benchmarks/profile_mc_stages.py 1000000
step "Lambda by forks: one core and every core" 90 "$py" benchmarks/bench_lambda_forks.py
step "the gate: 200 Monte Carlo specs" 150 \
    "$py" benchmarks/bench_gate.py --n 200 --jobs "$(nproc)" --no-ray --no-sweep
step "the sweep: 16 runs of 20 iterations" 150 \
    "$py" benchmarks/bench_gate.py --no-gate --no-ray --jobs "$(nproc)" --sweep-seeds 8
if command -v nvidia-smi > /dev/null; then
    step "the GPU tests" 90 "$py" -m pytest -q -p no:cacheprovider -n 4 \
        tests/engines/test_device.py tests/engines/test_device_path_cpu.py \
        tests/train/test_device.py tests/train/test_device_path_cpu.py
    step "the GPU: a per-row audit" 90 "$py" benchmarks/bench_gpu.py
    step "the GPU: PPO iterations" 90 "$py" benchmarks/bench_train.py --device-only
fi
step "reproducibility: the shipped specs against their golden copies" 120 \
    "$py" tests/test_golden_specs.py --compare
date -u
