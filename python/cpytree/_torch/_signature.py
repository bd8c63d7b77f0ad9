"""torch's function, as a Python function, calling the engine's.

install() puts these where torch's pytree functions were. A C function would
be faster by one Python frame (about 25 ns a call on CPython 3.11), but
torch's code and tests read more than the call: `inspect.isfunction`, the
signature with its annotations and defaults (torch's own
`test_aligned_public_apis` compares them with `torch.utils._cxx_pytree`),
`__module__` and `__qualname__` (pickling by reference finds the function
again), `__doc__`. The function made here has torch's signature, name,
module, qualname, docstring and annotations, and its body is one call of the
engine function with every argument passed on.

Dynamo compiles such a function's frame when it meets one (a function
called eagerly while a compile is active, `torch.compile(tp.tree_structure)`)
and finds the engine function inside, which install() maps to torch's
original (`dynamo/_substitute.py`): it traces what it traced for torch's.

No code is compiled at install(): the functions are made from the templates
below (one per shape of torch's signatures, 2.10-2.15), their code renamed.
A torch whose signature matches none gets one compiled for it.

    fast = as_torch_function(cpytree.tree_flatten, tp.tree_flatten)
    inspect.signature(fast) == inspect.signature(tp.tree_flatten)   # True
"""

from __future__ import annotations

import builtins
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["as_torch_function", "engine_of"]

# Attribute naming the engine function a made function calls.
_ENGINE = "__cpytree_engine__"

# The templates' global, bound per made function (its own globals dict).
__engine: Any = None


def _tree(tree: Any, is_leaf: Any = None) -> Any:
    return __engine(tree, is_leaf)


def _args(*args: Any, **kwargs: Any) -> Any:
    return __engine(*args, **kwargs)


def _map(func: Any, tree: Any, *rests: Any, is_leaf: Any = None) -> Any:
    return __engine(func, tree, *rests, is_leaf=is_leaf)


def _map_only(type_or_types_or_pred: Any, /, func: Any, tree: Any, is_leaf: Any = None) -> Any:
    return __engine(type_or_types_or_pred, func, tree, is_leaf)


def _unflatten(leaves: Any, treespec: Any) -> Any:
    return __engine(leaves, treespec)


def _spec(pytree: Any, spec: Any) -> Any:
    return __engine(pytree, spec)


_TEMPLATES = (_tree, _args, _map, _map_only, _unflatten, _spec)
_ARG_FLAGS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def _shape(code: types.CodeType) -> tuple[Any, ...]:
    """What a template must share with a function: its parameters' names and kinds."""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
            code.co_flags & _ARG_FLAGS, code.co_varnames[:count])  # fmt: skip


def as_torch_function(engine: Callable[..., Any], original: Callable[..., Any]) -> Any:
    """A Python function shaped as `original` whose body calls `engine`."""
    code = getattr(original, "__code__", None)
    made = None
    if code is not None:
        shape = _shape(code)
        for template in _TEMPLATES:
            if _shape(template.__code__) == shape:
                made = _renamed(template, engine, original, code)
                break
    if made is None:
        made = _compiled(engine, original)
    made.__module__ = original.__module__
    made.__qualname__ = original.__qualname__
    made.__doc__ = original.__doc__
    made.__annotations__ = dict(getattr(original, "__annotations__", {}))
    setattr(made, _ENGINE, engine)
    return made


def _renamed(template: Any, engine: Any, original: Any, code: types.CodeType) -> Any:
    changes: dict[str, Any] = {"co_name": original.__name__}
    if sys.version_info >= (3, 11):
        changes["co_qualname"] = original.__qualname__
    renamed = template.__code__.replace(**changes)
    namespace = {"__engine": engine, "__builtins__": builtins}
    made = types.FunctionType(renamed, namespace, original.__name__, original.__defaults__)
    made.__kwdefaults__ = dict(original.__kwdefaults__) if original.__kwdefaults__ else None
    return made


def _compiled(engine: Any, original: Any) -> Any:
    """The same, compiled for a signature no template has (a torch that changed one)."""
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
    name = original.__name__
    filename = getattr(getattr(original, "__code__", None), "co_filename", f"<cpytree: {name}>")
    source = f"def {name}({', '.join(params)}):\n    return __engine({', '.join(passed)})\n"
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def engine_of(function: Any) -> Any:
    """The engine function `function` calls (None if it is not one made here)."""
    return getattr(function, _ENGINE, None)
