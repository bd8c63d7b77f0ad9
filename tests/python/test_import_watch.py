"""ImportWatcher: the callback runs once after the module's code; the finder
leaves sys.meta_path once it has found the module (the module's own imports
do not call it), and watches again if the module's code raised."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cpytree._torch_link._import_watch import ImportWatcher


class _Spy(ImportWatcher):
    def __init__(self, name: str, callback) -> None:
        super().__init__(name, callback)
        self.seen: list[str] = []

    def find_spec(self, fullname, path, target=None):
        self.seen.append(fullname)
        return super().find_spec(fullname, path, target)


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "cpytree_iw_inner.py").write_text("X = 1\n")
    (tmp_path / "cpytree_iw_outer.py").write_text(
        "import os\nimport cpytree_iw_inner\nif os.environ.get('CPYTREE_IW_FAIL'):\n"
        "    raise RuntimeError('boom')\n"
    )
    yield tmp_path
    for name in ("cpytree_iw_inner", "cpytree_iw_outer"):
        sys.modules.pop(name, None)


def test_found_module_imports_do_not_call_the_finder(modules: Path) -> None:
    calls: list[int] = []
    w = _Spy("cpytree_iw_outer", lambda: calls.append(1))
    w.start()
    import cpytree_iw_outer  # noqa: F401

    assert calls == [1]
    assert w.seen == ["cpytree_iw_outer"]  # not cpytree_iw_inner, imported by it
    assert w not in sys.meta_path


def test_rewatch_after_a_failed_import(modules: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    w = _Spy("cpytree_iw_outer", lambda: calls.append(1))
    w.start()
    monkeypatch.setenv("CPYTREE_IW_FAIL", "1")
    with pytest.raises(RuntimeError, match="boom"):
        import cpytree_iw_outer
    assert calls == [] and sys.meta_path[0] is w
    monkeypatch.delenv("CPYTREE_IW_FAIL")
    import cpytree_iw_outer  # noqa: F401

    assert calls == [1] and w not in sys.meta_path


def test_stopped_watcher_stays_stopped(modules: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    w = ImportWatcher("cpytree_iw_outer", lambda: calls.append(1))
    w.start()
    spec = w.find_spec("cpytree_iw_outer", None)  # found: the watcher left the list
    assert spec is not None and w not in sys.meta_path
    w.stop()  # its owner gave up (uninstall) before the module ran
    monkeypatch.setenv("CPYTREE_IW_FAIL", "1")
    module = type(sys)("cpytree_iw_outer")
    module.__spec__ = spec
    with pytest.raises(RuntimeError, match="boom"):
        spec.loader.exec_module(module)
    assert w not in sys.meta_path and calls == []
