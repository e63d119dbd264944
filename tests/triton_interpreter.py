"""Triton's interpreter made quicker for the tests (no GPU: tests/conftest.py turns the interpreter on). Each call of
a jit function from inside a kernel, which Triton's own reductions are (`tl.sum`, `tl.max`, `tl.argmax`), has the
interpreter patch its language again: `inspect.getmembers` of each language module, 1.3 ms a call, which was 40 % of a
scan through the kernel. Here the names of each module's builtins are listed once, at the first patch (a clean
module: nothing patched yet), and each later patch visits only those names, treating each as Triton does (a name
whose member is still a builtin is patched). The kernels run exactly as before."""

from __future__ import annotations

import inspect


def quicken() -> None:
    """Replace the interpreter's `_patch_builtin` with one that lists each module's builtins once."""
    from triton.language import core
    from triton.runtime import interpreter

    if getattr(interpreter._patch_builtin, "quickened", False):
        return
    original = interpreter._patch_builtin
    names: dict[int, list[str]] = {}

    def patch_builtin(pkg, builder, scope) -> None:
        listed = names.get(id(pkg))
        if listed is None:
            listed = names[id(pkg)] = [name for name, member in inspect.getmembers(pkg) if core.is_builtin(member)]
        for name in listed:
            member = getattr(pkg, name, None)
            if core.is_builtin(member):
                interpreter._patch_attr(pkg, name, member, builder, scope)

    patch_builtin.quickened, patch_builtin.original = True, original
    interpreter._patch_builtin = patch_builtin
