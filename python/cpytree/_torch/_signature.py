"""torch's function, as a Python function, calling the engine's.

install() puts these where torch's pytree functions were. A C function would
be faster by one Python frame (about 25 ns a call on CPython 3.11), but
torch's code and tests read more than the call: `inspect.isfunction`, the
signature with its annotations and defaults (torch's own
`test_aligned_public_apis` compares them with `torch.utils._cxx_pytree`),
`__module__` and `__qualname__` (pickling by reference finds the function
again), `__doc__`, `__code__`. The function made here has torch's
signature, name, module, qualname, docstring and annotations, and its body is
one call of the engine function with every argument passed on.

    fast = as_torch_function(cpytree.tree_flatten, tp.tree_flatten)
    inspect.signature(fast) == inspect.signature(tp.tree_flatten)   # True
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["as_torch_function", "engine_of"]

# Attribute naming the engine function a made function calls.
_ENGINE = "__cpytree_engine__"


def as_torch_function(
    engine: Callable[..., Any], original: Callable[..., Any], extra: tuple[Any, ...] = ()
) -> Any:
    """A Python function shaped as `original` whose body calls `engine`.

    `extra`: values passed after the arguments (torch.fx's registry for the
    engine's tree_flatten_spec).
    """
    signature = inspect.signature(original)
    params: list[str] = []
    passed: list[str] = []
    namespace: dict[str, Any] = {"__engine": engine}
    positional_only = False
    star_seen = False
    for p in signature.parameters.values():
        text = p.name
        if p.default is not inspect.Parameter.empty:
            namespace[f"__default_{p.name}"] = p.default
            text += f"=__default_{p.name}"
        if p.kind is p.POSITIONAL_ONLY:
            positional_only = True
        elif positional_only:
            params.append("/")
            positional_only = False
        if p.kind is p.VAR_POSITIONAL:
            text, star_seen = "*" + p.name, True
            passed.append(text)
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + p.name
            passed.append(text)
        elif p.kind is p.KEYWORD_ONLY:
            if not star_seen:
                params.append("*")
                star_seen = True
            passed.append(f"{p.name}={p.name}")
        else:
            passed.append(p.name)
        params.append(text)
    if positional_only:
        params.append("/")
    for i, value in enumerate(extra):
        namespace[f"__extra{i}"] = value
        passed.append(f"__extra{i}")
    name = original.__name__
    source = f"def {name}({', '.join(params)}):\n    return __engine({', '.join(passed)})\n"
    exec(compile(source, f"<cpytree: torch.{name}>", "exec"), namespace)
    made = namespace[name]
    made.__module__ = original.__module__
    made.__qualname__ = original.__qualname__
    made.__doc__ = original.__doc__
    made.__annotations__ = dict(getattr(original, "__annotations__", {}))
    setattr(made, _ENGINE, engine)
    return made


def engine_of(function: Any) -> Any:
    """The engine function `function` calls (None if it is not one made here)."""
    return getattr(function, _ENGINE, None)
