"""Prints, as JSON, what the bits of torch training depend on besides the config and the
seed: the torch build, the CPU kernels it dispatches to, and the CPU's instruction-set
flags (docs/limits.md, "Reproducibility"). regenerate.sh records it beside the checkpoints
as checkpoints/machine.json; tests/test_examples_regenerate.py compares bit for bit only
on a machine that prints the same."""

import hashlib
import json
from pathlib import Path

import torch

flags = ""
cpuinfo = Path("/proc/cpuinfo")
if cpuinfo.is_file():
    for line in cpuinfo.read_text().splitlines():
        if line.startswith(("flags", "Features")):
            flags = " ".join(sorted(line.split(":", 1)[1].split()))
            break
print(json.dumps({"torch": torch.__version__,
                  "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                  "cpu_flags_sha256": hashlib.sha256(flags.encode()).hexdigest()[:16]},
                 sort_keys=True))
