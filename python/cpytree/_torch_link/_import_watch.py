"""Run a callback right after a module finishes importing, without importing it.

cpytree must react to torch modules it never imports itself: the registry
follower attaches to `torch.utils._pytree` (`_follow.py`) and install()'s
Dynamo entries go in when `torch._dynamo` loads (`cpytree._torch.dynamo._hooks`). A finder at
the front of `sys.meta_path` wraps the loader of one module name; the
callback runs once, after the module's code has run, in the importing thread.

The finder leaves `sys.meta_path` as soon as it has found the module: the
module's own imports (about 950 for `torch._dynamo`) then no longer call
it (6.2M instructions of a first compile, docs/measurements.md). If the
module's code raises, the finder goes back to the front of `sys.meta_path`,
so the next import of that name is watched again.

    watcher = ImportWatcher("torch._dynamo", on_dynamo)
    watcher.start()      # on_dynamo() runs after `import torch._dynamo`
    watcher.stop()       # or never, if it has not happened yet
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class ImportWatcher(importlib.abc.MetaPathFinder):
    """Runs `callback` once, right after module `name` has been executed."""

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self._name = name
        self._callback = callback
        self._stopped = False  # stop() called: never watch again

    def start(self) -> None:
        """Watch from now on (first in `sys.meta_path`)."""
        self._stopped = False
        sys.meta_path.insert(0, self)

    def stop(self) -> None:
        """Stop watching; the callback will not run if it has not yet."""
        self._stopped = True
        self._leave()

    def _leave(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def _rewatch(self) -> None:
        """The module's code raised: watch its next import, unless stop() was called."""
        if not self._stopped and self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self._name:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _RunAfterLoader(spec.loader, self._callback, self)
        # Found: the module's own imports need not call this finder. importlib
        # stops at the spec returned, so leaving the list it iterates is safe.
        self._leave()
        return spec


class _RunAfterLoader(importlib.abc.Loader):
    """A loader that delegates to `loader`, then calls `callback`; if the
    module's code raises, `watcher` starts watching again."""

    def __init__(self, loader: Any, callback: Callable[[], None], watcher: ImportWatcher) -> None:
        self._loader = loader
        self._callback = callback
        self._watcher = watcher

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ... of the real loader
        return getattr(self._loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The module keeps the real loader (tools read module.__loader__).
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        try:
            self._loader.exec_module(module)
        except BaseException:
            self._watcher._rewatch()
            raise
        self._callback()
