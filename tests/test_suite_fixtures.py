"""The suite's own fixtures (tests/conftest.py) do what the tests using them rely on."""
from __future__ import annotations

import importlib.util
import sys
import types

import pytest

from imports_as_found import imports_as_found


def test_imports_as_found_leaves_sys_path_and_sys_modules_as_found(tmp_path):
    """A module shadowing the standard library's, one importing a module for the first time,
    a package in a folder the test adds itself and two stand-ins: afterwards sys.path is the
    same list, the shadowed module is back, the test's modules and stand-ins are gone and the
    module first imported from the standard library stays."""
    import sched as stdlib_sched

    fresh = next(m for m in ("tabnanny", "pyclbr", "mailcap", "sndhdr", "xdrlib", "pipes")
                 if m not in sys.modules and importlib.util.find_spec(m) is not None)
    (tmp_path / "sched.py").write_text("WRITTEN = 1\n")
    (tmp_path / "net_s54.py").write_text(f"import {fresh}\nVALUE = 2\n")
    pkg = tmp_path / "other" / "pkg_s54"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("X = 3\n")
    path = list(sys.path)
    with imports_as_found(tmp_path) as folder:
        assert folder == tmp_path and sys.path[0] == str(tmp_path)
        del sys.modules["sched"]
        import net_s54
        import sched
        sys.path.insert(0, str(tmp_path / "other"))
        import pkg_s54.mod
        sys.modules["stand_in_s54"] = types.SimpleNamespace()
        sys.modules["made_s54"] = types.ModuleType("made_s54")
        assert (sched.WRITTEN, net_s54.VALUE, pkg_s54.mod.X) == (1, 2, 3)
    assert sys.path == path
    assert sys.modules["sched"] is stdlib_sched
    assert not {"net_s54", "pkg_s54", "pkg_s54.mod", "stand_in_s54", "made_s54"} & set(sys.modules)
    assert fresh in sys.modules
    with pytest.raises(ModuleNotFoundError):
        import net_s54  # noqa: F401,F811 - its folder is no longer on sys.path
