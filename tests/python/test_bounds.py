"""Untrusted bytes are bounded (docs/reliability.md): a crafted audit journal nested past the JSON
depth limit is refused with fak.Error — it crashed the interpreter on nlohmann's recursive dump."""

import fak
import pytest


def test_auditor_refuses_a_deeply_nested_journal(tmp_path):
    path = tmp_path / "audit.journal"
    zeros = "0" * 64
    deep = "[" * 200_000 + "]" * 200_000
    row = ('{"hash":"%s","kind":"test","payload":{"a":%s},"prev_hash":"%s","seq":1,"subject":"s","time":1}'
           % (zeros, deep, zeros))
    path.write_text(row + "\n")
    with pytest.raises(fak.Error, match="nested deeper than the limit of 64 levels"):
        fak.Auditor(str(path))
    assert path.read_text() == row + "\n"  # refused, not rewritten
