"""hunt_a F9a: `graph --out` naming a folder is refused before any work, suggesting a
name with its own suffix (not .xml, which graph refuses), and a bad --paths or --out
leaves nothing on stdout before its one-line error."""

from __future__ import annotations


def test_a_folder_out_is_refused_with_its_suffix_and_no_summary(tmp_path, cli_here):
    (tmp_path / "d.json").mkdir()
    proc = cli_here("graph", "--out", "d.json", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.strip() == ("causalfair graph: error: d.json: is a folder; give a file "
                                   f"name (e.g. {'d.json/out.json'}).")
    assert proc.stdout == ""


def test_a_bad_paths_source_prints_no_summary_first(tmp_path, cli_here):
    proc = cli_here("graph", "--paths", "D9", cwd=tmp_path)
    assert proc.returncode == 2 and "'D9' is not a node" in proc.stderr, proc
    assert proc.stdout == ""
