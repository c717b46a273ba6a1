"""Compile the triton kernels (``synthesizer/attention/ops/triton_bias/kernels.py``) for a GPU without
one: triton's own compiler and the ptxas its wheel ships turn them into GPU code for the target
architecture, which catches type errors, unsupported operations and shared-memory overruns before
a GPU is at hand. Each configuration the layer launches on CUDA (``triton_bias._launch``) is
compiled; it prints the shared memory each needs and exits 1 if any fails.

    python scripts/triton_compile.py                       # sm_90 (H100), bf16/fp16/fp32, widths 32-256
    python scripts/triton_compile.py --arch 80 --dtypes bf16 --widths 128

Run it without ``TRITON_INTERPRET=1`` (an interpreted triton compiles nothing).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

DATA = ("Q", "K", "V", "Out", "DO", "DQ", "DK", "DV_")  # the features, values and their gradients
FLOAT32 = ("Bias", "W", "Lse", "Delta", "DB")  # the bias as the layer keeps R, and float32 buffers
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
SHARED_LIMIT = {80: 166 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024}  # bytes per block, CUDA docs


def compile_all(arch: int, dtypes: list[str], widths: list[int]) -> int:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from synthesizer.attention.ops.triton_bias import _launch, interpreting, kernels

    if interpreting():
        print("triton_compile: error: triton runs in its interpreter (TRITON_INTERPRET=1): unset it", file=sys.stderr)
        return 2
    target = GPUTarget("cuda", arch, 32)
    failures = 0
    for dtype in dtypes:
        for width in widths:
            launch = _cuda_launch(_launch, dtype, width)
            options = {k: launch.pop(k) for k in ("num_warps", "num_stages")}
            for causal in (False, True):
                flags = dict(HAS_BIAS=True, HAS_PAD=True, CAUSAL=causal, BLOCK_D=width, BLOCK_DV=width, UPCAST=False,
                             **launch)
                for fn, extra in ((kernels.forward, {}), (kernels.backward_kv, {"NEED_DB": True}),
                                  (kernels.backward_q, {})):
                    constants = {**flags, **extra}
                    signature = {name: "constexpr" if name in constants else f"*{dtype}" if name in DATA
                                 else "*fp32" if name in FLOAT32 else "*i8" if name == "Pad" else "i32"
                                 for name in fn.arg_names}
                    source = ASTSource(fn=fn, signature=signature,
                                       constexprs={(fn.arg_names.index(k),): v for k, v in constants.items()})
                    what = f"{fn.__name__} {dtype} width {width} {'causal' if causal else 'bidir'}"
                    start = time.perf_counter()
                    try:
                        shared = triton.compile(source, target=target, options=options).metadata.shared
                    except Exception as e:  # every failure is reported, then the exit status says so
                        failures += 1
                        print(f"FAIL {what}: {type(e).__name__}: {str(e)[:400]}", flush=True)
                        continue
                    limit = SHARED_LIMIT.get(arch)
                    over = limit is not None and shared > limit
                    failures += over
                    print(f"{'FAIL' if over else 'ok  '} {what}: {shared} bytes of shared memory"
                          f"{f' (limit {limit})' if limit else ''}, {time.perf_counter() - start:.1f} s", flush=True)
    return 1 if failures else 0


def _cuda_launch(launch_fn, dtype: str, width: int) -> dict:
    """What ``_launch`` gives a CUDA tensor of ``dtype`` (asked through a stand-in: no GPU here)."""

    class CudaLike:
        device = torch.device("cuda")

        @staticmethod
        def element_size() -> int:
            return torch.empty(0, dtype=TORCH_DTYPES[dtype]).element_size()

    return dict(launch_fn(CudaLike, width))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", type=int, default=90, help="compute capability x 10 (default: %(default)s, H100)")
    p.add_argument("--dtypes", nargs="+", default=list(TORCH_DTYPES), choices=list(TORCH_DTYPES))
    p.add_argument("--widths", nargs="+", type=int, default=[32, 64, 128, 256],
                   help="feature widths as the kernel pads them (powers of two from 16 to 256)")
    args = p.parse_args(argv)
    bad = [w for w in args.widths if w < 16 or w > 256 or w & (w - 1)]
    if bad:
        p.error(f"widths must be powers of two from 16 to 256, got {bad}")
    return compile_all(args.arch, args.dtypes, args.widths)


if __name__ == "__main__":
    sys.exit(main())
