"""The lead's fixes of session 17 (from the helpers' findings in others' files)."""
from __future__ import annotations

import sys

import pytest

import causalfair as cf
from causalfair.errors import ConfigError
from causalfair.policies.nets import TorchPolicy
from causalfair.train import TrainConfig
from causalfair.train.generic import SystemTrainer
from tests.test_platform_user import FEATURES, _system


def test_a_warm_start_of_another_width_names_both_networks_and_the_fix():
    """A warm start whose reader records no architecture (a policy factory, another
    format) reached the trainer with the config's default widths and was refused with
    "architecture differs from the config (Error(s) in loading state_dict for
    Sequential:)": no sizes, no fix. The message now names both networks' layer widths
    and what to set."""
    enc = cf.FeatureEncoding("features", names=FEATURES)
    init = TorchPolicy(cf.policies.checkpoint.mlp(len(FEATURES), (8,), 1, "tanh").eval(), enc)
    cfg = TrainConfig(algo="ppo", iterations=1, n_individuals=16, audit_n=50, hidden=(16,))
    with pytest.raises(ConfigError) as e:
        SystemTrainer(_system(), cfg, init=init)
    msg = str(e.value)
    assert f"{len(FEATURES)}-16-1" in msg and f"{len(FEATURES)}-8-1" in msg, msg
    assert "hidden=[16]" in msg and "[retrain] hidden" in msg and "\n" not in msg, msg


def test_system_written_as_a_string_says_how_to_write_the_table(tmp_path):
    """`system = "lending-1"` at a spec's top level was refused with the [system] table's
    keys but not the fix (a contributor's first spec)."""
    from tests.conftest import one_line_error, run_cmd

    spec = tmp_path / "s.toml"
    spec.write_text('name = "x"\nsystem = "lending-1"\n[policy]\nbuiltin = "threshold:0.5"\n')
    err = one_line_error(run_cmd([sys.executable, "-m", "causalfair", "audit", spec, "--out", tmp_path / "o"]))
    assert 'write [system] on its own line, then id = "lending-1"' in err, err
    assert not (tmp_path / "o").exists()


def test_a_dotted_factory_module_names_the_file_it_is_read_from(tmp_path):
    """A missing `pkg.sim:make` was told to "put pkg.sim.py next to the spec", a file
    Python never reads for that name."""
    from causalfair._usercode import load_callable
    from causalfair.errors import SystemError_

    with pytest.raises(SystemError_) as e:
        load_callable("nopkg_cf17.sim:make", search_path=tmp_path)
    msg = str(e.value)
    assert "put nopkg_cf17/sim.py (in a package folder nopkg_cf17/)" in msg, msg
    assert "nopkg_cf17.sim.py" not in msg, msg
    with pytest.raises(SystemError_) as e:
        load_callable("nomod_cf17:make", search_path=tmp_path)
    assert f"put nomod_cf17.py in {tmp_path} or install" in str(e.value)


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_a_resumed_sweep_reads_its_result_files_bounded(tmp_path, kind):
    """`sweep --resume` read a run's result.json with read_text: an 8 GB file was a
    MemoryError traceback, a FIFO hung for ever (the Security walkthrough). It is read as
    every file causalfair reads back (a regular file, its size bounded): such a run counts
    as not finished, so it is trained again."""
    import os

    from causalfair.train.sweep_io import RESULT, finished_run

    folder = tmp_path / "seed-0"
    folder.mkdir()
    if kind == "fifo":
        os.mkfifo(folder / RESULT)
    else:
        with open(folder / RESULT, "wb") as fh:  # sparse: no disk used
            fh.truncate(8 * 2**30)
    cfg = TrainConfig(algo="ppo", setting="lending-1", iterations=1)
    assert finished_run(folder, cfg) is None


def test_a_threshold_pair_written_with_quotes_says_drop_them(tmp_path):
    """`'abs_C["B-A"]' = 0.5` (the key copied from the docs' prose) was refused as
    '"B-A"' naming no two groups, without the fix (the Groups walkthrough)."""
    from tests.conftest import one_line_error, run_cmd

    spec = tmp_path / "q.toml"
    spec.write_text('name = "q"\nhorizon = 5\n[system]\nid = "lending-1"\n[policy]\n'
                    'builtin = "threshold:0.5"\n[thresholds]\n\'abs_C["s+-s-"]\' = 0.5\n')
    err = one_line_error(run_cmd([sys.executable, "-m", "causalfair", "audit", spec,
                                  "--no-report"]))
    assert "drop the quotes inside the brackets ([s+-s-])" in err, err
