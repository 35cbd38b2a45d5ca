"""hunt_a F9 leftovers: a huge --eps computes without a numpy overflow warning (b), errors
name --param's key, not the factory's field (c), contradictory flags are refused (d),
simulate-logs --out naming a folder or a .csv.gz (e), compare's keywords are checked (f)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest


@pytest.fixture(scope="module")
def logs_csv(tmp_path_factory):
    """A small log with both decisions at every (group, level): random:0.5."""
    from causalfair.logs.schema import simulate_logs

    path = tmp_path_factory.mktemp("logs") / "L.csv"
    simulate_logs("lending-1", "random:0.5", 300, 20, 0).to_csv(path, index=False)
    return path


def test_plugin_tangent_of_a_huge_eps_does_not_overflow():
    from causalfair.engines.benefit_mc import plugin_tangent

    gap = np.array([[[0.5], [0.1]], [[0.25], [2.0]]])
    one = np.ones(gap.shape[:-1])
    with np.errstate(over="raise", invalid="raise", divide="raise"), \
            warnings.catch_warnings():  # (an underflow to a slope of 0 is the right value)
        warnings.simplefilter("error")
        plug = plugin_tangent(gap, gap, None, 1e308)
        assert plug(gap + 0.01, one, one) == pytest.approx(4.0)  # eps >> gaps: all count
    # an ordinary eps keeps its tangent: level - eps / (eps + |gap|)^2 x the move
    at = gap[..., 0]
    expect = (0.1 / (0.1 + at) - 0.1 / (0.1 + at) ** 2 * 0.01).sum()
    assert plugin_tangent(gap, gap, None, 0.1)(gap + 0.01, one, one) == pytest.approx(expect)


def test_decompose_logs_with_a_huge_eps_prints_no_numpy_warning(logs_csv, cli_here):
    # before: "causalfair decompose: warning: overflow encountered in square" (hunt_a F9b)
    proc = cli_here("decompose", "--logs", logs_csv, "--boot", "5", "--eps", "1e308",
                    cwd=logs_csv.parent)
    assert proc.returncode == 0, proc
    assert "warning" not in proc.stderr, proc.stderr
    assert "eps = 1e+308" in proc.stdout


@pytest.mark.parametrize("command", [["decompose", "--system", "lending-1"],
                                     ["systems", "lending-1"], ["systems", "delayed-impact"]])
def test_a_param_refusal_names_the_param_key(command, tmp_path, cli_here):
    # before: "n_levels: must be an integer >= 3, got 0." (the model's field; hunt_a F9c)
    proc = cli_here(*command, "--param", "levels=0", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.strip() == (f"causalfair {command[0]}: error: --param levels: must be "
                                   "an integer >= 3, got 0.")


def test_a_shorthand_refusal_names_its_flag(tmp_path, cli_here):
    proc = cli_here("decompose", "--interest", "-1", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.startswith("causalfair decompose: error: --interest: must be a number")


def test_the_factory_and_a_spec_name_levels(tmp_path, cli_here):
    import causalfair as cf

    with pytest.raises(cf.ModelError, match=r"^levels: must be an integer >= 3, got 2\.$"):
        cf.systems.make("lending-1", levels=2)
    (tmp_path / "s.toml").write_text('name = "x"\n[system]\nid = "lending-1"\n'
                                     'params = { levels = 2 }\n[policy]\nbuiltin = "always"\n')
    proc = cli_here("audit", "s.toml", "--out", "r", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.strip().endswith("s.toml: [system]: levels: must be an integer >= 3, "
                                        "got 2."), proc.stderr


@pytest.mark.parametrize("flags, named", [
    (["--engine", "mc"], "--engine mc: not with --logs FILE"),
    (["--n", "10", "--jobs", "2"], "--n 10, --jobs 2: not with --logs FILE"),
])
def test_decompose_logs_refuses_the_engines_flags(flags, named, logs_csv, cli_here):
    # before: accepted and ignored, exit 0 (hunt_a F9d)
    proc = cli_here("decompose", "--logs", logs_csv, *flags, cwd=logs_csv.parent)
    assert proc.returncode == 2, proc
    assert proc.stderr.startswith(f"causalfair decompose: error: {named}"), proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [["gate", "g.toml"],
                                     ["decompose", "--engine", "mc", "--n", "200"]])
def test_jobs_with_the_serial_backend_is_refused(command, tmp_path, cli_here):
    # before: gate --jobs 2 --backend serial ran serially, exit 0 (hunt_a F9d)
    (tmp_path / "g.toml").write_text('name = "x"\n[system]\nid = "lending-1"\n[policy]\n'
                                     'builtin = "always"\n[thresholds]\nabs_C = 1.0\n')
    proc = cli_here(*command, "--jobs", "2", "--backend", "serial", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.startswith(f"causalfair {command[0]}: error: --jobs 2 and --backend "
                                  "serial: a serial backend runs every task in this process")
    assert proc.stdout == ""
    ok = cli_here(*command, "--jobs", "1", "--backend", "serial", cwd=tmp_path)
    assert ok.returncode in (0, 1), ok  # one job in this process: what serial means


def test_simulate_logs_out_a_folder_says_so(tmp_path, cli_here):
    # before: "--out: unknown suffix '(none)'; use .csv or .parquet." (hunt_a F9e)
    (tmp_path / "adir").mkdir()
    proc = cli_here("simulate-logs", "--n", "10", "--out", "adir", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.strip() == ("causalfair simulate-logs: error: --out: adir is a folder; "
                                   f"give a file name (e.g. {'adir/logs.csv'}).")
    assert list((tmp_path / "adir").iterdir()) == []


def test_simulate_logs_writes_a_csv_gz_that_logs_reads(tmp_path, cli_here):
    import gzip

    from causalfair.logs import read_logs

    proc = cli_here("simulate-logs", "--n", "20", "--out", "L.csv.gz", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert proc.stdout.startswith("wrote L.csv.gz: ")
    assert gzip.decompress((tmp_path / "L.csv.gz").read_bytes()).startswith(b"id,t,group,")
    plain = cli_here("simulate-logs", "--n", "20", "--out", "L.csv", cwd=tmp_path)
    assert plain.returncode == 0, plain
    assert read_logs(tmp_path / "L.csv.gz").equals(read_logs(tmp_path / "L.csv"))
    again = cli_here("simulate-logs", "--n", "20", "--out", "M.csv.gz", cwd=tmp_path)
    assert again.returncode == 0  # the same log, the same bytes (no time in the header)
    assert (tmp_path / "M.csv.gz").read_bytes() == (tmp_path / "L.csv.gz").read_bytes()


def test_compare_refuses_a_mistyped_keyword_naming_it():
    # before: TypeError: compare() got an unexpected keyword argument 'nmes' (hunt_a F9f)
    from causalfair.audit import compare
    from causalfair.errors import InputError

    with pytest.raises(InputError, match=r"^compare: unknown keyword argument 'nmes'; "
                                            r"did you mean 'names'\? it takes: names\.$"):
        compare(nmes=["a", "b"])
