"""The contract of providers/httpx2_import.py, the seam that imports httpx2
and httpcore2 with a stand-in for ``importlib.metadata``: each case runs in
a fresh interpreter (the test process has imported both already)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
from fresh_interpreter import output_of


def _run(code: str) -> list[str]:
    return output_of(code).splitlines()


def test_the_client_library_loads_without_importlib_metadata() -> None:
    got = _run(
        """
        import sys
        from holon_cli.providers import http_session
        print("importlib.metadata" in sys.modules, "httpx2" in sys.modules)
        import httpcore2, httpx2
        import importlib.metadata as real
        print(httpx2.__version__ == real.version("httpx2"))
        print(httpcore2.__version__ == real.version("httpcore2"))
        print(sys.modules["importlib.metadata"] is real, real.version.__module__)
        """
    )
    assert got == ["False True", "True", "True", "True importlib.metadata"]


def test_a_name_the_stand_in_lacks_comes_from_the_real_module_for_good() -> None:
    got = _run(
        """
        import sys
        from holon_cli.providers import httpx2_import as seam
        stand_in = seam.place_stand_in()
        assert sys.modules["importlib.metadata"] is stand_in
        from importlib.metadata import PackageNotFoundError, version
        print(version is seam.version, PackageNotFoundError.__module__)
        print(sys.modules["importlib.metadata"] is not stand_in)
        print(hasattr(stand_in, "__path__"))
        """
    )
    assert got == ["True importlib.metadata", "True", "False"]


def test_a_distribution_it_cannot_place_is_asked_of_the_real_lookup() -> None:
    got = _run(
        """
        from holon_cli.providers import httpx2_import as seam
        import click
        try:
            seam.version("no-such-distribution-here")
        except Exception as exc:
            print(type(exc).__name__)
        import importlib.metadata as real
        print(seam.version("click") == real.version("click"))
        print(seam._dist_info_version("click") in (None, real.version("click")))
        """
    )
    assert got == ["PackageNotFoundError", "True", "True"]


def test_a_loaded_importlib_metadata_is_left_as_it_is() -> None:
    got = _run(
        """
        import sys, importlib.metadata as real
        from holon_cli.providers import httpx2_import as seam
        print(seam.place_stand_in())
        seam.load()
        print(sys.modules["importlib.metadata"] is real)
        """
    )
    assert got == ["None", "True"]


def test_the_version_is_read_only_from_the_one_dist_info_beside_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own ``METADATA``'s ``Version:`` header; none to read (no
    ``dist-info``, two of them, no header) is no answer, for the real lookup."""
    from holon_cli.providers import httpx2_import as seam

    pkg = tmp_path / "site" / "fake_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    module = ModuleType("fake_pkg")
    module.__file__ = str(pkg / "__init__.py")
    monkeypatch.setitem(sys.modules, "fake_pkg", module)
    assert seam._dist_info_version("fake_pkg") is None  # no dist-info
    info = tmp_path / "site" / "fake_pkg-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-pkg\n\nVersion: 9 (body)\n")
    assert seam._dist_info_version("fake_pkg") is None  # headers end before a Version
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-pkg\nVersion: 1.2.3\n\nbody\n"
    )
    assert seam._dist_info_version("fake_pkg") == "1.2.3"
    stale = tmp_path / "site" / "fake_pkg-1.0.dist-info"  # one left behind by an upgrade
    stale.mkdir()
    (stale / "METADATA").write_text("Name: fake-pkg\nVersion: 1.0\n")
    assert seam._dist_info_version("fake_pkg") is None
    assert seam._dist_info_version("not_loaded_at_all") is None
