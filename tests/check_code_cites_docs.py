#!/usr/bin/env python3
"""CTest code_cites_docs: comments in code cite what a reader can open (a page or section of
docs/), never a number of the project's own tracker, which no reader of the tree can resolve.

Scans cli/, framework/, data/, models/, run/, tests/, tools/, scripts/, dev/, cmake/, .ci/ and the top
CMakeLists.txt (C++, CUDA, Python, shell and CMake files; tests/data/ and tests/fuzz/corpus/ are
data, not code) for the word "issue" or "issues" followed by a number. Allowed: another
project's tracker, named right before the word (THIRD_PARTY, e.g. "oneDNN issue #4845"), and a
figure such as "host issue 0.25 ms" (a decimal number).

Usage: check_code_cites_docs.py SOURCE_DIR
Prints FILE:LINE: TEXT for each citation and exits 1.
"""
import os
import re
import sys

FOLDERS = ["cli", "framework", "data", "models", "run", "tests", "tools", "scripts", "dev", "cmake", ".ci"]
SUFFIXES = (".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake")
SKIP = {os.path.join("tests", "data"), os.path.join("tests", "fuzz", "corpus")}
# Projects whose own trackers a comment may cite by number.
THIRD_PARTY = {"oneDNN", "CUDA", "cuDNN", "cuBLAS", "NCCL", "PyTorch", "CLI11", "nlohmann", "libzip"}
CITE = re.compile(r"(?:(\S+)\s+)?\b[Ii]ssues?\s+#?(\d+(?:\.\d+)?)")


def sources(root):
    top = os.path.join(root, "CMakeLists.txt")
    if os.path.isfile(top):
        yield top
    for folder in FOLDERS:
        for d, dirs, files in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(x for x in dirs if os.path.relpath(os.path.join(d, x), root) not in SKIP)
            for f in sorted(files):
                if f.endswith(SUFFIXES) or f == "CMakeLists.txt":
                    yield os.path.join(d, f)


def citations(line):
    """The tracker numbers a line cites: not another project's, not a decimal figure."""
    out = []
    for m in CITE.finditer(line):
        if (m.group(1) or "").strip("(\"'`") in THIRD_PARTY or "." in m.group(2):
            continue
        out.append(m.group(0))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    bad = 0
    for path in sources(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if citations(line):
                    print(f"{os.path.relpath(path, root)}:{n}: {line.strip()}")
                    bad += 1
    if bad:
        print(f"FAIL: {bad} line(s) cite a tracker number no reader can open; cite the docs page "
              "or section that holds the reasoning (docs/; the lab notebook for a record), or drop the citation")
        return 1
    print("code_cites_docs: no comment cites a tracker number")
    return 0


if __name__ == "__main__":
    sys.exit(main())
