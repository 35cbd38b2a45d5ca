"""What a fresh process pays before its real work: a training worker loads no library the
run does not use (pandas, scipy, networkx), its run folder's metrics.csv is still what
pandas writes, byte for byte, and the sweep's tables are unchanged (docs/scale.md)."""

import math
import pickle
import random
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalfair.train import TrainConfig, TrainResult
from causalfair.train.checkpoint import metrics_csv, write_metrics
from causalfair.train.sweep import t_interval, train_many
from tests.conftest import describe, run_cmd

#: Libraries a training run does not use: a worker that loads one pays its import.
UNUSED = ("pandas", "scipy", "networkx", "matplotlib", "pyarrow", "dowhy", "statsmodels")

WORKER = f"""
import sys, tempfile
import causalfair.cli
unused = {UNUSED!r}
print('cli', sorted(m for m in unused if m in sys.modules))
from causalfair.train import sweep
config = sweep._config('lending-1', {{}}, 'ppo', 0, {{'iterations': 1}})
out = sweep._train_config((config, '.', tempfile.mkdtemp() + '/run'))
print('task', sorted(m for m in unused if m in sys.modules), type(out['history']).__name__,
      out.get('written'))
sweep.t_interval([1.0, 2.0, 4.0])
print('t_interval', 'scipy.stats' in sys.modules)
"""


def test_a_training_worker_loads_no_library_the_run_does_not_use():
    proc = run_cmd([sys.executable, "-c", WORKER], expect=0)
    lines = proc.stdout.strip().splitlines()
    # the command line's modules (networkx: only a graph needs it), the sweep's task in a
    # worker (pandas: the history travels as rows, metrics.csv is written without it), the
    # t-interval (scipy.special, not scipy.stats)
    assert lines[-3:] == ["cli []", "task [] list True", "t_interval False"], describe(proc)


def _rows(rng: random.Random) -> list[dict]:
    """A history with gaps, mixed ints and floats, booleans, NaN, infinities, and now and
    then a cell pandas must write itself (None, a string, a numpy scalar, a huge int)."""
    cols = [f"c{i}" if rng.random() < 0.9 else f"c,{i}" for i in range(rng.randint(1, 5))]
    odd = rng.random() < 0.3

    def cell(col: str) -> object:
        r = rng.random()
        if odd and r < 0.1:
            return rng.choice([np.float32(0.1), np.int64(3), np.bool_(True), None, "x,y", 2**64])
        if r < 0.25:
            return rng.choice([True, False]) if int(col[-1]) % 2 else rng.randint(-10**6, 10**6)
        if r < 0.3:
            return rng.choice([math.nan, math.inf, -math.inf, -0.0])
        if r < 0.4:
            return np.float64(rng.gauss(0, 1) * 10.0 ** rng.randint(-20, 20))
        return rng.gauss(0, 1) * 10.0 ** rng.randint(-20, 20)

    return [{c: cell(c) for c in cols if rng.random() > 0.15} or {cols[0]: 1.0}
            for _ in range(rng.randint(1, 5))]


def test_metrics_csv_is_what_pandas_writes_byte_for_byte(monkeypatch):
    rng = random.Random(0)
    own = 0
    for _ in range(400):
        rows = _rows(rng)
        want = pd.DataFrame(rows).to_csv(index=False)
        assert metrics_csv(rows) == want, rows
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "pandas", None)  # any import of pandas now fails
            try:
                own += metrics_csv(rows) == want
            except ImportError:  # a cell only pandas writes
                pass
    assert own > 200, own  # most tables were written without pandas


def test_a_trainers_history_is_written_without_pandas(tmp_path, monkeypatch):
    from causalfair.train.core import Trainer

    trainer = Trainer(TrainConfig(algo="ppo-cb", iterations=3, eval_every=2, n_individuals=64,
                                  horizon=5))
    for _ in range(3):
        trainer.step()
    rows = trainer.history  # exact/* on iterations 2 and 3 only: columns with a gap
    assert "exact/C" in rows[-1] and "exact/C" not in rows[0]
    want = pd.DataFrame(rows).to_csv(index=False)
    monkeypatch.setitem(sys.modules, "pandas", None)  # any import of pandas now fails
    write_metrics(tmp_path, rows)
    assert (tmp_path / "metrics.csv").read_text() == want


def test_t_interval_is_the_student_t_interval_bit_for_bit():
    for n in (2, 3, 7, 30):
        x = np.random.default_rng(n).normal(size=n).tolist()
        for alpha in (0.05, 0.1, 0.01):
            a = np.asarray(x)
            h = float(stats.t.ppf(1 - alpha / 2, n - 1) * a.std(ddof=1) / math.sqrt(n))
            assert t_interval(x, alpha) == (float(a.mean()), a.mean() - h, a.mean() + h)


def test_train_result_makes_its_history_frame_when_first_read():
    rows = [{"iteration": 1, "loss": 0.5}, {"iteration": 2, "loss": 0.25, "exact/C": 0.1}]
    res = TrainResult(policy=None, checkpoint=None, history=rows, metrics={"C": 0.1},
                      config=TrainConfig())
    assert "iterations=2" in repr(res) and res.history_rows() is rows  # repr: no frame
    back = pickle.loads(pickle.dumps(res))  # (how a worker sends it)
    assert back.history_rows() == rows
    pd.testing.assert_frame_equal(back.history, pd.DataFrame(rows))
    assert isinstance(back.history_rows(), pd.DataFrame)  # made once, then kept
    res.history = pd.DataFrame(rows[:1])
    assert len(res.history) == 1


@pytest.mark.parametrize("folder", [False, True])
def test_train_many_hands_back_the_history_as_a_frame(tmp_path, folder):
    config = TrainConfig(algo="ppo", iterations=2, n_individuals=64, horizon=5)
    (out,) = train_many([config], folders=[tmp_path / "run"] if folder else None)
    assert isinstance(out["history"], pd.DataFrame)
    assert out["history"]["iteration"].tolist() == [1, 2]
    csv = (tmp_path / "run" / "metrics.csv").read_text() if folder else None
    assert csv is None or csv == out["history"].to_csv(index=False)
