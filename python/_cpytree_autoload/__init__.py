"""cpytree's `torch.backends` entry point: install() at the end of `import torch`.

torch calls every entry point of that group at the end of `import torch`
(`_import_device_backends`) and turns an exception from one into a failed
`import torch`. The entry point lives in this tiny package, apart from
`cpytree`, for two reasons:

* switched off (`CPYTREE_INSTALL=0`), `import torch` imports no cpytree
  module at all: the user pays nothing, and a process that imports cpytree
  later (the test suite, a benchmark) meets it exactly as without autoload;
* even an `import cpytree` that raised could not make `import torch` fail.

Inductor's compile-worker sidecar (`python .../torch/_inductor/compile_worker/
__main__.py`, started by every `SubprocPool`; its workers fork from it) is
left as torch ships it: it runs Inductor's kernel-compile jobs only, which
never call pytree, so install() there would only make every pool start later.

Otherwise it imports `cpytree` as any user does and hands that module (the
package's face) to `cpytree._torch._autoload.autoload`, which decides the
rest and installs: `cpytree._torch` sits above the face and never imports it.
"""

from __future__ import annotations

import os
import sys

__all__ = ["autoload"]

# The values of CPYTREE_INSTALL that switch autoload off; the same set as
# cpytree._torch_link._OFF (tests/python/test_autoload.py checks it).
_OFF = frozenset({"0", "false", "no", "off"})

# One warning per process, however often torch calls the entry point (once per
# distribution that declares it: two where an installed cpytree sits beside
# another .dist-info naming it).
_warned = False

# The script torch's SubprocPool runs as its compile-worker sidecar.
_COMPILE_WORKER = os.path.join("torch", "_inductor", "compile_worker", "__main__.py")


def _in_compile_worker() -> bool:
    return bool(sys.argv) and sys.argv[0].endswith(_COMPILE_WORKER)


def autoload() -> None:
    """install() unless CPYTREE_INSTALL switches it off; never raises."""
    global _warned
    if os.environ.get("CPYTREE_INSTALL", "").strip().lower() in _OFF or _in_compile_worker():
        return
    try:
        import cpytree
        from cpytree._torch._autoload import autoload as run
    except Exception as error:  # noqa: BLE001 - must not fail `import torch`
        if _warned:
            return
        _warned = True
        import contextlib
        import warnings

        # Under -W error the warning is an exception: `import torch` must still succeed.
        with contextlib.suppress(Exception):
            warnings.warn(
                f"cpytree: could not be imported at `import torch` ({type(error).__name__}: "
                f"{error}); torch's pytree is left as it was. CPYTREE_INSTALL=0 turns this "
                "autoload off.",
                RuntimeWarning,
                stacklevel=2,
            )
        return
    run(cpytree)
