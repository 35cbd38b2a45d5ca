"""A key written in the wrong place of an audit spec (hunt2_own F6): TOML reads every key
after a `[section]` header as that section's, so `horizon = 10` below `[thresholds]` was
refused as "unknown key (written for a newer causalfair? ...)", which sends a user to
upgrade; a section's key at the top level (`n = 1000` above `[engine]`) likewise. Both
now say where the key belongs."""

from __future__ import annotations

import pytest

from causalfair.audit.spec import load_spec
from causalfair.errors import SpecError

HEAD = 'name = "x"\n[system]\nid = "lending-1"\n'


@pytest.mark.parametrize("text, says", [
    (HEAD + "[thresholds]\nabs_C = 0.1\nhorizon = 5\n",
     "[thresholds] horizon: unknown key here: 'horizon' is a top-level key of the spec, and "
     "TOML reads every key after the [thresholds] header as one of that section; move "
     "'horizon = ...' above the first [section] header."),
    (HEAD + "[engine]\nkind = \"mc\"\ntimeout = 60\n",
     "[engine] timeout: unknown key here: 'timeout' is a top-level key"),
    ('name = "x"\nn = 1000\n[system]\nid = "lending-1"\n',
     "n: unknown top-level key: 'n' is a key of [engine]; write it under that section's "
     "header ([engine] on its own line, then n = ...)."),
    ('name = "x"\ncheckpoint = "p.pt"\n[system]\nid = "lending-1"\n',
     "'checkpoint' is a key of [policy] or [baseline]"),
])
def test_a_key_in_the_wrong_place_is_named_with_its_place(tmp_path, text, says):
    spec = tmp_path / "x.toml"
    spec.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert says in str(info.value), info.value
    assert "newer causalfair" not in str(info.value)


def test_an_unknown_key_anywhere_keeps_its_message(tmp_path):
    spec = tmp_path / "x.toml"
    spec.write_text(HEAD + "[engine]\nkind = \"mc\"\nfrobnicate = 1\n")
    with pytest.raises(SpecError, match="newer causalfair"):
        load_spec(spec)
