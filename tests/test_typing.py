"""crawler/ is typed strictly (STYLE.md): mypy --strict must pass."""

from mypy import api

from tests.support import ROOT


def test_mypy_strict_passes_on_crawler():
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), str(ROOT / "crawler")])
    assert status == 0, out + err
