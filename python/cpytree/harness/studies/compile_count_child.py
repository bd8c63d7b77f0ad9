"""One whole first compile in a fresh process, its phases marked for callgrind.

    valgrind --tool=callgrind --dump-before=getpgrp ... \\
        python compile_count_child.py '{"model": "pytree-blocks", "mode": "autoload",
                                   "events": "out.json"}'

`mode`: "torch" or "autoload" (the environment decides: CPYTREE_INSTALL=0
or not, `child.child_env`), or "cpytree" / "cpytree-attrs" (explicit
install() right after `import torch`). Run by path, not as
`-m cpytree...`: this file imports no cpytree module, so with
CPYTREE_INSTALL=0 the process is torch alone, and with autoload on cpytree
loads where a user's process loads it (torch's `torch.backends`
entry point, inside `import torch`). The zoo and `usercode` are loaded
from their files for the same reason (they import torch only). "model" is
a zoo name or a user's `module:callable`, as in `compile_child`.

What the process does is what a user's script does: `import torch`, build
the model, `torch.compile(model)(inputs)` (which imports torch._dynamo and
compiles), nothing else. Every change of the innermost phase calls
`os.getpgrp()` (libc's getpgrp, which neither torch nor Python call
otherwise): under `--dump-before=getpgrp` callgrind writes one profile dump
per change, holding the instructions executed since the previous one. The
phase each dump belongs to is written, in dump order, to the file
`config["events"]` (JSON list of phase names); the dump callgrind writes at
exit is the phase "exit". `compile_count.py` runs this and adds the dumps up.

Phases (the innermost open one owns the instructions):

* startup          interpreter start-up, this file
* import torch     `import torch`, cpytree's part excluded
* cpytree install  cpytree's entry point at `import torch` (`import cpytree`,
                   install()), or in modes "cpytree"/"cpytree-attrs" the
                   explicit `import cpytree; cpytree.install()` after it
* dynamo layer     cpytree's Dynamo hooks applied when torch._dynamo loads
                   (its modules imported, Dynamo's tables filled)
* import dynamo    `import torch._dynamo` (torch.compile's first step)
* model            loading and building the model (the zoo's file or the
                   user's module), its eager call, torch.compile()
* dynamo           the compiled call outside the phases below: Dynamo's
                   bytecode tracing, guards, code generation, and running
                   the compiled code
* aotautograd      `create_aot_dispatcher_function` outside Inductor
* inductor         Inductor: pre-grad passes, `compile_fx_inner` and the
                   forward compiler (`fw_compiler_base`)
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Dynamo's timed events (dynamo_timed) that open a phase; the others are
# inside whichever phase is open.
EVENT_PHASES = {
    "create_aot_dispatcher_function": "aotautograd",
    "_recursive_pre_grad_passes": "inductor",
    "compile_fx.<locals>.fw_compiler_base": "inductor",
    "compile_fx.<locals>.bw_compiler": "inductor",
    "compile_fx_inner": "inductor",
}

_owners: list[str] = []  # the phase owning each dump, in dump order
_stack: list[str] = ["startup"]  # the base phase: start-up and the glue between phases


def _mark(new_top: Callable[[], None]) -> None:
    """Close the current interval (owned by the innermost phase), then change the stack."""
    _owners.append(_stack[-1])
    os.getpgrp()  # callgrind dumps here (--dump-before=getpgrp)
    new_top()


def enter(phase: str) -> None:
    _mark(lambda: _stack.append(phase))


def _pop() -> None:
    _stack.pop()


def leave() -> None:
    _mark(_pop)


def timed(phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` running inside `phase`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        enter(phase)
        try:
            return fn(*args, **kwargs)
        finally:
            leave()

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def _wrap_autoload() -> None:
    """Make cpytree's entry point (when torch calls it) run inside "cpytree install".

    `_cpytree_autoload` imports only os and sys; torch's entry-point loading
    imports it and reads its `autoload`, which is then this wrapper. Its
    calls of its import watchers are counted once cpytree is loaded.
    """
    if importlib.util.find_spec("_cpytree_autoload") is None:
        return
    import _cpytree_autoload

    real = _cpytree_autoload.autoload

    def autoload() -> None:
        enter("cpytree install")
        try:
            real()
        finally:
            leave()
        _wrap_import_watch()

    _cpytree_autoload.autoload = autoload


_watch_calls = [0]


def _wrap_import_watch() -> None:
    """Count the calls of cpytree's import watchers (`sys.meta_path` finders:
    one call per import while one waits); their instructions stay in the
    phase of the import (a dump per call made the run several times slower).
    The Dynamo hooks' callback runs inside "dynamo layer"."""
    watch = sys.modules.get("cpytree._torch_link._import_watch")
    if watch is None:
        return
    cls = watch.ImportWatcher
    find_spec = cls.find_spec

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        _watch_calls[0] += 1
        return find_spec(self, *args, **kwargs)

    cls.find_spec = counted
    for finder in sys.meta_path:  # the Dynamo hooks' callback: a bound method, held
        if isinstance(finder, cls):
            finder._callback = timed("dynamo layer", finder._callback)


def _wrap_dynamo_events() -> None:
    """Open a phase at each of Dynamo's timed events named in EVENT_PHASES."""
    from torch._dynamo.utils import ChromiumEventLogger

    start, end = ChromiumEventLogger.log_event_start, ChromiumEventLogger.log_event_end

    def log_event_start(self: Any, event_name: str, *args: Any, **kwargs: Any) -> Any:
        phase = EVENT_PHASES.get(event_name)
        if phase is not None:
            enter(phase)
        return start(self, event_name, *args, **kwargs)

    def log_event_end(self: Any, event_name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return end(self, event_name, *args, **kwargs)
        finally:
            if event_name in EVENT_PHASES:
                leave()

    ChromiumEventLogger.log_event_start = log_event_start  # type: ignore[method-assign]
    ChromiumEventLogger.log_event_end = log_event_end  # type: ignore[method-assign]


def _load_file(path: Path) -> Any:
    """The module of a file of the harness, imported without its package (cpytree)."""
    spec = importlib.util.spec_from_file_location(f"_cpytree_count_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def build_model(name: str) -> tuple[Any, tuple[Any, ...]]:
    """`compile_child.build_model` without importing cpytree: a zoo name or `module:callable`."""
    here = Path(__file__).resolve().parent
    if ":" not in name:
        zoo = _load_file(here / "zoo.py")
        return zoo.build(name)  # type: ignore[no-any-return]
    import torch

    torch.manual_seed(0)
    usercode = _load_file(here.parent / "usercode.py")
    fn, inputs = usercode.load_callable(name, "--model")()
    return fn, inputs if isinstance(inputs, tuple) else (inputs,)


def run(config: dict[str, Any]) -> dict[str, Any]:
    _wrap_autoload()
    enter("import torch")
    import torch

    leave()
    mode = config.get("mode", "torch")
    if mode in ("cpytree", "cpytree-attrs"):
        enter("cpytree install")
        import cpytree

        cpytree.install(rebind_imports=mode == "cpytree")
        leave()
        _wrap_import_watch()
    torch.set_num_threads(1)
    enter("import dynamo")
    import torch._dynamo  # what torch.compile imports first

    leave()
    _wrap_dynamo_events()
    enter("model")
    model, inputs = build_model(config["model"])
    model(*inputs)
    compiled: Any = torch.compile(model, backend=config.get("backend", "inductor"))
    leave()
    enter("dynamo")
    compiled(*inputs)
    leave()
    from torch._dynamo.utils import counters

    face: Any = sys.modules.get("cpytree")
    installed = face is not None and face.is_installed()
    return {
        "owners": [*_owners, _stack[-1]],  # the last: the dump at exit
        "torch_version": torch.__version__,
        "installed": bool(installed),
        "import_watch_calls": _watch_calls[0],
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "graphs": int(counters["stats"].get("unique_graphs", 0)),
    }


def main() -> int:
    config = json.loads(sys.argv[1])
    result = run(config)
    result["owners"][-1] = "exit"
    Path(config["events"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
