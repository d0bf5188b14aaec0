#!/usr/bin/env python3
"""Programmatic dependent launch is safe only if every kernel launched with it waits for its
predecessor before touching memory (core/cuda_util.cuh, cuda::launch and cuda::pdl_entry). So:
- every __global__ function in framework/core, framework/ops and framework/optim begins with
  `cuda::pdl_entry();` (its first statement);
- no kernel there is launched with <<<>>> (all go through cuda::launch), but those in ALLOWED;
- every cuda::launch anywhere in the tree names a kernel that begins with the entry.
The check runs on its own sample first, which must give exactly the breaches written into it.

Usage: check_pdl.py SOURCE_DIR     exit 0 when the rules hold, else 1 with every breach listed.
"""
import os
import re
import sys
import tempfile

SCOPE = ("framework/core", "framework/ops", "framework/optim")
# Kernels launched with <<<>>> on purpose, with the reason.
ALLOWED = {
    "hold": "core/gpu_timer_cuda.cu: holds a stream for timing; what follows it waits for it in full",
}
# cuda::launch calls whose first argument is a variable holding a kernel: the kernels it may hold.
VARIABLES = {
    "kernel": ("ce_rows", "correct_rows"),  # ops/loss_cuda.cu, rows_then_sum
    "shares": ("narrow_shares_kernel",),    # ops/linalg_cuda.cu, narrow_backward
}
KERNEL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(")
LAUNCH = re.compile(r"cuda::launch(?:_clustered)?\(\s*(\w+)")
CHEVRON = re.compile(r"(\w+)\s*(?:<[^;{}]*?>)?\s*<<<")


def strip_comments(text):
    return re.sub(r"//[^\n]*", "", text)


def kernels(text):
    """(name, line, begins with the entry) of each __global__ function."""
    out = []
    for m in KERNEL.finditer(text):
        j, depth = m.end(), 1
        while depth and j < len(text):
            depth += (text[j] == "(") - (text[j] == ")")
            j += 1
        k = text.find("{", j)
        first = text[k + 1:k + 200].lstrip()
        out.append((m.group(1), text.count("\n", 0, m.start()) + 1, first.startswith("cuda::pdl_entry();")))
    return out


def sources(root, dirs):
    for d in dirs:
        for base, _, files in os.walk(os.path.join(root, d)):
            for name in sorted(files):
                if name.endswith((".cu", ".cuh", ".cpp", ".h")):
                    path = os.path.join(base, name)
                    with open(path, encoding="utf-8") as fh:
                        yield os.path.relpath(path, root), strip_comments(fh.read())


def breaches(root):
    found, entered = [], set()
    for rel, text in sources(root, SCOPE):
        for name, line, ok in kernels(text):
            if ok:
                entered.add(name)
            elif name not in ALLOWED:
                found.append(f"{rel}:{line}: kernel {name} does not begin with cuda::pdl_entry();")
        for m in CHEVRON.finditer(text):
            if m.group(1) not in ALLOWED:
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{rel}:{line}: {m.group(1)} launched with <<<>>>; use cuda::launch")
    for rel, text in sources(root, ("framework", "cli", "dev", "tests", "models", "data")):
        for name, _, ok in kernels(text):
            if ok:
                entered.add(name)
        for m in LAUNCH.finditer(text):
            held = VARIABLES.get(m.group(1), (m.group(1),))
            if not all(k in entered for k in held):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{rel}:{line}: cuda::launch of {m.group(1)}, which does not begin with cuda::pdl_entry();")
    return found


SAMPLE = """
__global__ void good(float* x) {
  cuda::pdl_entry();
  x[0] = 1;
}
__global__ void __launch_bounds__(256) late(float* x) {  // the entry is not first
  x[0] = 1;
  cuda::pdl_entry();
}
template <class T>
__global__ void none(T* x) { x[0] = 1; }
void run(cudaStream_t s, float* x) {
  cuda::launch(good, 1, 1, 0, s, x);
  none<float><<<1, 1, 0, s>>>(x);
  cuda::launch(late, 1, 1, 0, s, x);
}
"""


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "framework", "ops"))
        with open(os.path.join(tmp, "framework", "ops", "sample_cuda.cu"), "w", encoding="utf-8") as fh:
            fh.write(SAMPLE)
        got = breaches(tmp)
        want = ["sample_cuda.cu:6: kernel late", "sample_cuda.cu:11: kernel none", "sample_cuda.cu:14: none launched",
                "sample_cuda.cu:15: cuda::launch of late"]
        if len(got) != len(want) or not all(any(w in g for g in got) for w in want):
            print("check_pdl: the check misreads its own sample; it reported:\n" + "\n".join(got), file=sys.stderr)
            return 1
    found = breaches(root)
    for f in found:
        print(f)
    if found:
        print("check_pdl: a kernel launched with programmatic dependent launch must wait for its predecessor "
              "first (core/cuda_util.cuh)", file=sys.stderr)
        return 1
    print("check_pdl: every kernel of framework/core, ops and optim begins with cuda::pdl_entry() and is "
          f"launched through cuda::launch (with <<<>>> on purpose: {', '.join(sorted(ALLOWED))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
