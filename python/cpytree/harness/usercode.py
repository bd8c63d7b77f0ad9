"""`module:callable`: code the user names on the command line (`--tree`, `--model`).

`module` is a dotted module name importable from the current directory, or a
path to a `.py` file; `callable` a (dotted) attribute of it. Both wings use
it: `ops.usertree` for `--tree`, the compile and Dynamo children of
`studies` for `--model`.

Usage:

    make = load_callable("path/to/mymodel.py:make", "--model")
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["load_callable"]


def _import(module: str) -> Any:
    if module.endswith(".py") or os.sep in module:
        path = Path(module).resolve()
        if not path.is_file():
            raise ImportError(f"no file {path}")
        name = f"cpytree_harness_user_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses and pickling look themselves up here
        spec.loader.exec_module(mod)
        return mod
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(module)


def load_callable(target: str, option: str = "--tree") -> Callable[[], Any]:
    """The callable named by `module:callable` (a module name or a .py path)."""
    if ":" not in target:
        raise ValueError(f"{option} wants module:callable, got {target!r}")
    module, _, attr = target.rpartition(":")
    obj: Any = _import(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target} is not callable")
    return obj  # type: ignore[no-any-return]
