"""Where torch's own code uses a function install() swaps other than by calling it.

install() puts cpytree's C functions where torch.utils._pytree's (and
torch.fx._pytree's `tree_flatten_spec`) were, and rebinds the names torch
modules imported from there. torch's code that *calls* one gets the engine;
code that hands one to Dynamo's tracer (`_make_inlined(tx, pytree.tree_flatten)`,
`UserFunctionVariable(fn)`, `VariableTracker.build(tx, fn)`), compares it by
identity, or keeps it in a table meets a C function where torch's Python
function was. `scan(root)` lists every such site of the installed torch by
reading its source (AST, nothing imported); `SITES` classifies each one
seen on the supported releases, and `unclassified(root)` is what a torch
release adds (the drift test fails on it, naming the file and function).

A site's key is (file under torch/, enclosing function, name, how it is
used, the callee it is handed to): line numbers move between releases, keys
rarely do.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from typing import NamedTuple

__all__ = ["DIRS", "SITES", "SWAPPED", "Site", "scan", "unclassified"]

# The functions install() swaps, by the module that defines them.
SWAPPED: dict[str, frozenset[str]] = {
    "torch.utils._pytree": frozenset({
        "tree_leaves", "tree_iter", "arg_tree_leaves", "tree_map", "tree_map_", "tree_map_only",
        "tree_map_only_", "tree_flatten", "tree_structure", "tree_unflatten",
        "tree_flatten_with_path", "tree_leaves_with_path"}),
    "torch.fx._pytree": frozenset({"tree_flatten_spec"}),
}  # fmt: skip

# The parts of torch read (relative to the folder holding `torch/`): where
# torch's compiler stack, its operators, export and distributed tensors live.
DIRS = (
    "torch/_dynamo", "torch/_higher_order_ops", "torch/_functorch", "torch/export",
    "torch/_export", "torch/nn/attention", "torch/fx", "torch/distributed/tensor",
    "torch/_inductor", "torch/_subclasses", "torch/utils/checkpoint.py", "torch/func",
    "torch/_library", "torch/compiler",
)  # fmt: skip


class Site(NamedTuple):
    """One use of a swapped function other than a call."""

    file: str  # under torch/, "/"-separated
    function: str  # enclosing def/class qualname, "<module>" at top level
    name: str  # the swapped function, "module.name"
    use: str  # argument | compare | container | assign | return | default | attribute | other
    callee: str  # for an argument: the called expression's text (else "")
    line: int  # where (not part of the key)

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.file, self.function, self.name, self.use, self.callee)


def _aliases(tree: ast.Module) -> tuple[dict[str, str], dict[str, str]]:
    """(alias -> swapped module, local name -> "module.function") bound by imports."""
    modules: dict[str, str] = {}
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in SWAPPED and alias.asname:
                    modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in SWAPPED:  # from torch.utils import _pytree as pytree
                    modules[alias.asname or alias.name] = full
                elif node.module in SWAPPED and alias.name in SWAPPED[node.module]:
                    names[alias.asname or alias.name] = full
    return modules, names


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _swapped(node: ast.AST, modules: dict[str, str], names: dict[str, str]) -> str:
    """ "module.function" if `node` reads a swapped function, else ""."""
    if isinstance(node, ast.Name):
        return names.get(node.id, "")
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        module = modules.get(owner) or (owner if owner in SWAPPED else "")
        if module and node.attr in SWAPPED[module]:
            return f"{module}.{node.attr}"
    return ""


def _use(node: ast.AST, parent: ast.AST | None) -> tuple[str, str]:
    """How `parent` uses `node`: (use, callee), or ("call", "") for a call."""
    if isinstance(parent, ast.Call):
        if parent.func is node:
            return "call", ""
        return "argument", _dotted(parent.func) or type(parent.func).__name__
    if isinstance(parent, ast.keyword):
        return "argument", "keyword"
    if isinstance(parent, ast.Compare):
        return "compare", ""
    if isinstance(parent, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
        return "container", ""
    if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
        return "assign", ""
    if isinstance(parent, ast.Return):
        return "return", ""
    if isinstance(parent, ast.arguments):
        return "default", ""
    if isinstance(parent, ast.Attribute):
        return "attribute", parent.attr
    return "other", type(parent).__name__ if parent is not None else ""


def _files(root: str) -> Iterator[str]:
    for part in DIRS:
        path = os.path.join(root, part)
        if path.endswith(".py"):
            if os.path.isfile(path):
                yield path
            continue
        for folder, _, files in os.walk(path):
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(folder, name)


def scan(root: str) -> list[Site]:
    """Every site under `root` (the folder holding `torch/`), in file order."""
    sites: list[Site] = []
    for path in _files(root):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if "_pytree" not in text:  # no import of a swapped module: nothing to parse
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        modules, names = _aliases(tree)
        if not modules and not names:
            continue
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        sites.extend(_walk(tree, rel, modules, names))
    return sites


def _walk(tree: ast.Module, rel: str, modules: dict[str, str], names: dict[str, str]) -> list[Site]:
    found: list[Site] = []

    def visit(node: ast.AST, parent: ast.AST | None, scope: str) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return
        name = _swapped(node, modules, names)
        if name and not (isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)):
            use, callee = _use(node, parent)
            if use != "call":
                found.append(Site(rel, scope, name, use, callee, getattr(node, "lineno", 0)))
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = node.name if scope == "<module>" else f"{scope}.{node.name}"
            for child in ast.iter_child_nodes(node):
                visit(child, node, inner)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, node, scope)

    visit(tree, None, "<module>")
    return found


# How a site meets the C function, and what makes that work.
_TRACER = (
    "tracer",
    "handed to Dynamo's tracer: UserFunctionVariable.__init__ takes torch's original "
    "instead (dynamo/_substitute.py, the choke point), the trackers answer it",
)
_BUILDER = (
    "builder",
    "built as a tracker without a source: the trace_rules entry of the C function builds "
    "torch's original's tracker (dynamo/_substitute.py)",
)
_EAGER = (
    "eager",
    "kept and called later by torch's eager code (graph inputs at run time): the C "
    "function is called, as any caller calls it",
)
_TARGET = (
    "graph target",
    "an FX node's target, written and compared through the same module attribute: both "
    "are the C function while installed; the node is called eagerly",
)

_HOP = "torch/_dynamo/variables/higher_order_ops.py"
_TORCH = "torch/_dynamo/variables/torch.py"
_SUB = "torch/_dynamo/variables/invoke_subgraph.py"
_TP = "torch.utils._pytree"
_FXP = "torch.fx._pytree"

# Every site seen on the supported releases (2.10.0-2.15.0), classified.
SITES: dict[tuple[str, str, str, str, str], tuple[str, str]] = {
    ("torch/_dynamo/utils.py", "flatten_graph_inputs", f"{_TP}.arg_tree_leaves", "assign", ""):
        _EAGER,
    ("torch/_dynamo/utils.py", "flatten_graph_inputs", f"{_TP}.tree_unflatten", "argument",
     "functools.partial"): _EAGER,
    (_HOP, "AssociativeScanHigherOrderVariable._call_function", f"{_TP}.tree_flatten", "argument",
     "_make_inlined"): _TRACER,
    (_HOP, "AssociativeScanHigherOrderVariable._call_function", f"{_TP}.tree_structure",
     "argument", "_make_inlined"): _TRACER,
    (_HOP, "ScanHigherOrderVariable._call_function", f"{_TP}.tree_flatten", "argument",
     "_make_inlined"): _TRACER,
    (_HOP, "ScanHigherOrderVariable._call_function", f"{_TP}.tree_leaves", "argument",
     "_make_inlined"): _TRACER,
    (_HOP, "ScanHigherOrderVariable._call_function", f"{_TP}.tree_structure", "argument",
     "_make_inlined"): _TRACER,
    (_HOP, "_call_function_and_unflatten_output", f"{_TP}.tree_unflatten", "argument",
     "_make_inlined"): _TRACER,
    (_HOP, "speculate_subgraph", f"{_TP}.tree_flatten", "argument", "_make_inlined"): _TRACER,
    (_HOP, "validate_args_and_maybe_create_graph_inputs", f"{_TP}.tree_flatten", "argument",
     "_make_inlined"): _TRACER,
    (_HOP, "validate_args_and_maybe_create_graph_inputs", f"{_TP}.tree_unflatten", "argument",
     "_make_inlined"): _TRACER,
    (_SUB, "build_fingerprint_with_pytree", f"{_TP}.tree_flatten", "argument", "_make_inlined"):
        _TRACER,  # 2.12, 2.13
    (_SUB, "build_fingerprint_with_pytree.flatten", f"{_TP}.tree_flatten", "argument",
     "_make_inlined"): _TRACER,  # 2.14+
    (_TORCH, "TorchInGraphFunctionVariable._call_leaf_function", f"{_TP}.tree_flatten",
     "argument", "_make_inlined"): _TRACER,
    (_TORCH, "TorchInGraphFunctionVariable._call_leaf_function", f"{_TP}.tree_unflatten",
     "argument", "_make_inlined"): _TRACER,
    (_TORCH, "TorchInGraphFunctionVariable._call_nonstrict_traceable_function",
     f"{_TP}.tree_flatten", "argument", "SourcelessBuilder.create"): _BUILDER,  # 2.11
    (_TORCH, "TorchInGraphFunctionVariable._call_nonstrict_traceable_function",
     f"{_TP}.tree_flatten", "argument", "_make_inlined"): _TRACER,
    (_TORCH, "TorchInGraphFunctionVariable._call_nonstrict_traceable_function",
     f"{_TP}.tree_flatten", "argument", "variables.UserFunctionVariable"): _TRACER,  # 2.10
    (_TORCH, "TorchInGraphFunctionVariable._call_nonstrict_traceable_function",
     f"{_TP}.tree_unflatten", "argument", "SourcelessBuilder.create"): _BUILDER,
    (_TORCH, "TorchInGraphFunctionVariable._extract_nn_module_states", f"{_TP}.tree_flatten",
     "argument", "_make_inlined"): _TRACER,
    ("torch/export/_swap.py", "_try_remove_connecting_pytrees", f"{_FXP}.tree_flatten_spec",
     "compare", ""): _TARGET,
    ("torch/export/_swap.py", "_try_remove_connecting_pytrees", f"{_TP}.tree_unflatten",
     "compare", ""): _TARGET,
    ("torch/export/unflatten.py", "_generate_flatten", f"{_TP}.tree_flatten", "argument",
     "gm.graph.call_function"): _TARGET,
    ("torch/export/unflatten.py", "_generate_flatten_spec", f"{_FXP}.tree_flatten_spec",
     "argument", "gm.graph.call_function"): _TARGET,
    ("torch/export/unflatten.py", "_generate_unflatten", f"{_TP}.tree_unflatten", "argument",
     "gm.graph.call_function"): _TARGET,
}  # fmt: skip


def unclassified(root: str) -> list[Site]:
    """The sites under `root` that `SITES` does not classify (a release's new sites)."""
    return [site for site in scan(root) if site.key not in SITES]
