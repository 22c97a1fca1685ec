"""Shared fixtures of the fak Python suite: the embedded model (synthetic weights, byte tokenizer)."""

import pytest

import fak


@pytest.fixture(scope="session")
def model():
    return fak.Model.load("embedded", threads=2)


@pytest.fixture()
def auditor(tmp_path):
    return fak.Auditor(str(tmp_path / "journal.log"), str(tmp_path / "key.pem"))
