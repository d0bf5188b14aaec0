#!/usr/bin/env python3
"""CTest function_names: no function is named twice across the tree (docs/design.md: one name,
one meaning). A reader who greps a function's name finds one thing, or that thing's backends.

Counted: every free function DEFINED (with a body) at namespace scope, anonymous namespaces
included, in cli/, framework/, data/, models/ and run/ (.h .cuh .cpp .cu), found with
check_function_length.py's brace-depth scanner. A member defined out of its class is `A::f`, a
name apart from `f`; functions defined inside a class, operators and macros do not count.
Overloads in one file are one name. `main` is exempt (the tools' and tests' own).

A name defined in two or more files is a breach, except where those files are one thing:
  (a) one folder's files whose names differ only by the extension and a backend suffix (_cpu,
      _cuda): a header and its source (core/precision.h, core/precision.cpp), an op's dispatch
      and its backends (ops/loss.cpp, ops/loss_cpu.cpp, ops/loss_cuda.cu);
  (b) build alternatives, of which CMake compiles one: ALTERNATIVES below, each with why.

Usage: check_function_names.py SOURCE_DIR
Prints NAME: FILE1, FILE2, ... for each breach and exits 1; else the count of names, exit 0.
"""
import collections
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_function_length import bodies  # noqa: E402  (the one scanner, not a copy)

FOLDERS = ("cli", "framework", "data", "models", "run")
EXTENSIONS = (".h", ".cuh", ".cpp", ".cu")
BACKEND = re.compile(r"_(cpu|cuda)$")
EXEMPT = {"main"}

# Build alternatives: the top CMakeLists.txt's loupe_pick_source compiles one file of each pair,
# with a library or without it, so their functions never meet in one build.
ALTERNATIVES = [
    ({"data/npz_zip.cpp", "data/npz_none.cpp"}, "NumPy .npz with libzip or without (LOUPE_WITH_ZIP)"),
    ({"data/h5_hdf5.cpp", "data/h5_none.cpp"}, "HDF5 with libhdf5 or without (LOUPE_WITH_HDF5)"),
    ({"data/image_decode_stb.cpp", "data/image_decode_none.cpp"},
     "image folders with stb_image or without (LOUPE_WITH_STB)"),
    ({"framework/instrument/tensorboard.cpp", "framework/instrument/tensorboard_none.cpp"},
     "TensorBoard event files with protobuf or without (LOUPE_WITH_TENSORBOARD)"),
    ({"framework/ops/backend/gemm_blas.cpp", "framework/ops/backend/gemm_default.cpp"},
     "the CPU GEMM with OpenBLAS or without (LOUPE_WITH_BLAS)"),
]


def unit(rel):
    """The thing a file belongs to: its folder and name less extension, backend suffix and the
    build alternative it is one of."""
    for files, _ in ALTERNATIVES:
        if rel in files:
            return min(files)
    stem = os.path.splitext(rel)[0]
    return BACKEND.sub("", stem)


def sources(src):
    files = set()
    for folder in FOLDERS:
        for ext in EXTENSIONS:
            files.update(glob.glob(os.path.join(src, folder, "**", "*" + ext), recursive=True))
    return sorted(files)


def defined_names(text):
    """The names of the free functions the text defines."""
    names = set()
    for name, _, _, enclosing in bodies(text):
        if all(kind == "namespace" for kind in enclosing) and name != "?":
            names.add(name)
    return names


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    files = sources(src)
    if not any(f.endswith(".cu") for f in files) or not any("/cli/" in f for f in files):
        print(f"the sources were not found under {src}")
        return 1
    where = collections.defaultdict(set)  # name -> files defining it
    for path in files:
        rel = os.path.relpath(path, src).replace(os.sep, "/")
        with open(path, encoding="utf-8") as f:
            for name in defined_names(f.read()) - EXEMPT:
                where[name].add(rel)
    bad = 0
    for name in sorted(where):
        if len({unit(rel) for rel in where[name]}) > 1:
            print(f"{name}: {', '.join(sorted(where[name]))}")
            bad += 1
    if bad:
        print(f"{bad} name(s) defined in more than one file: merge copies into one function, give "
              "different things names that say what they are (tests/check_function_names.py)")
        return 1
    print(f"{len(where)} function names in {len(files)} files, each defined in one file "
          "(or its backends, or one build alternative)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
