"""The written report (causalfair.report.render): group names are user strings, so the
figures survive mathtext in a label and report.md escapes Markdown and HTML markup."""


def test_a_mathtext_group_label_does_not_crash_the_report(tmp_path):
    import causalfair as cf
    from causalfair.systems import as_system

    tab = cf.lending_setting("lending-1").tabular.with_(group_names=("$\\foo{$", "b_$x$"))
    res = cf.audit({"name": "m", "horizon": 3}, system=as_system(tab, id="m"),
                   policy="always")
    out = res.write_report(tmp_path / "rep")
    assert (out / "benefit.png").stat().st_size > 0
    md = (out / "report.md").read_text()
    assert "| \\$\\\\foo{\\$ |" in md  # escaped in Markdown (the backslash too)


def test_markdown_escapes_injected_markup(tmp_path):
    import causalfair as cf
    from causalfair.systems import as_system

    tab = cf.lending_setting("lending-1").tabular.with_(
        group_names=("<script>alert(1)</script>", "[x](http://e.vil)"))
    res = cf.audit({"name": "inj", "horizon": 3}, system=as_system(tab, id="inj"), policy="always")
    md = (res.write_report(tmp_path / "rep") / "report.md").read_text()
    table = md[: md.index("## Spec")]  # the spec itself is shown verbatim in a code fence
    assert "<script>" not in table and "[x](http" not in table
    assert "\\<script\\>" in table and "\\[x\\](http://e.vil)" in table
