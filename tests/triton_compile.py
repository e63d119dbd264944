"""The attention kernel (`mha_viz.metrics.row_triton`) compiled for a GPU on a machine without one: each launch
`rows_of` makes is compiled by Triton for an NVIDIA Hopper target (sm_90: Triton's parser, its passes and the PTX
assembler it ships), and not run. The interpreter the other tests use runs Python over the kernel's text, which lets
through what the compiler refuses (a variable whose shape changes in a branch: the kernel's first compile on an
H200 failed so). Run in a process of its own, without TRITON_INTERPRET (the kernels are made compiled at import):
`python -m tests.triton_compile [--plant]` prints one JSON line a launch, {"kernel", "constants", "error"}; --plant
compiles the kernel's text as it was before that fix (the test sees the compiler refuse it)."""

from __future__ import annotations

import json
import os
import sys

import torch

TARGET = ("cuda", 90, 32)  # backend, compute capability (Hopper: H100, H200), warp size
TYPES = {torch.float32: "*fp32", torch.int32: "*i32", torch.bfloat16: "*bf16", torch.int64: "*i64"}
BEFORE_THE_FIX = "sc_ok = (cols[None, :] < n)"  # the mask made (1, BN), then widened to (BM, BN) in a branch


def _type(value) -> str:
    if isinstance(value, torch.Tensor):
        return TYPES[value.dtype]
    return "i1" if isinstance(value, bool) else "i32" if isinstance(value, int) else "fp32"


class _Compiler:
    """Stands in for a jit function: `kernel[grid](*args)` compiles it for TARGET with those arguments' types."""

    def __init__(self, fn, out: list) -> None:
        self.fn, self.out = fn, out

    def __getitem__(self, grid):
        return self.compile

    def compile(self, *args, **constants) -> None:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        fn = self.fn
        values = dict(zip(fn.arg_names, args)) | constants
        fixed = {p.name for p in fn.params if p.is_constexpr}
        signature = {name: "constexpr" if name in fixed else _type(values[name]) for name in fn.arg_names}
        shown = {name: values[name] for name in sorted(fixed)}
        if any(o["kernel"] == fn.__name__ and o["constants"] == shown for o in self.out):
            return  # compiled already: the same kernel for other values of its arguments
        try:
            done = triton.compile(ASTSource(fn, signature, {name: values[name] for name in fixed}),
                                  target=GPUTarget(*TARGET))
            error = None if "cubin" in done.asm else "no machine code"
        except Exception as exc:  # noqa: BLE001 - reported, one line a launch
            error = f"{type(exc).__name__}: {exc}"
        self.out.append({"kernel": fn.__name__, "constants": shown, "error": error})


def main(plant: bool) -> None:
    from mha_viz.metrics import row_triton
    from tests.models import test_row_triton as cases

    made, out = row_triton.kernels, []
    if plant:
        text = row_triton.source
        row_triton.source = lambda table: text(table).replace(
            "sc_ok = (rows[:, None] >= 0) & (cols[None, :] < n)", BEFORE_THE_FIX)
    compiled = tuple(_Compiler(fn, out) for fn in made(cases._facts(True).table))  # every case's table
    row_triton.kernels = lambda table: compiled
    os.environ["TRITON_INTERPRET"] = "1"  # now only so that `rows_of` takes CPU tensors: the kernels are made
    # bidirectional with two segments, padding and chunks, no kept keys (what failed); then each constant's other
    # value: causal, sinks, one segment, a window, soft-capping, kept keys and thumbnails
    launches = [(False, {"valid": torch.ones(cases.N, dtype=torch.int32), "chunk": 8}, True, 0)]
    if not plant:
        launches.append((True, {"sinks": torch.tensor([0.5, -1.0, 2.0, 0.0]), "window": 5, "softcap": 2.0}, False,
                         cases.TOP_K))
    for causal, kinds, two, top_k in launches:
        row_triton.rows_of(*cases._inputs(), cases._facts(causal, two=two), top_k=top_k, thumb=top_k and cases.THUMB,
                           **kinds)
    for line in out:
        print(json.dumps(line))


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") == "1":
        sys.exit("run without TRITON_INTERPRET: the kernels must be made compiled")
    main("--plant" in sys.argv)
