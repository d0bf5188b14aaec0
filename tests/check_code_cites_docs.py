#!/usr/bin/env python3
"""CTest code_cites_docs: comments in code cite what a reader can open (a page or section of
docs/), never a number of the project's own tracker, which no reader of the tree can resolve.

Scans cli/, framework/, data/, models/, run/, tests/, tools/, scripts/, dev/, cmake/, .ci/ and the top
CMakeLists.txt (C++, CUDA, Python, shell and CMake files; tests/data/ and tests/fuzz/corpus/ are
data, not code) for the word "issue" or "issues" followed by a number. Allowed: another
project's tracker, named right before the word (THIRD_PARTY, e.g. "oneDNN issue #4845"), and a
figure such as "host issue 0.25 ms" (a decimal number). And a section a comment cites by title,
`(docs/profiling.md, "GPM")`, must be in its page (its text, backticks aside): a page renamed or
a heading reworded leaves no citation pointing nowhere.

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


SECTION = re.compile(r"((?:docs|lab)/[\w./-]+\.md),?\s*\"([^\"]{3,120})\"")


def comment_text(path):
    """The file's comments, each run of comment lines joined by spaces, with the first line of each."""
    marker = "//" if path.endswith((".cpp", ".h", ".cu", ".cuh")) else "#"
    runs, cur, start = [], [], 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            i = line.find(marker)
            if i >= 0 and (marker == "#" or '"' not in line[:i]):
                if not cur:
                    start = n
                cur.append(line[i + len(marker):].strip())
            elif cur:
                runs.append((start, " ".join(cur)))
                cur = []
    if cur:
        runs.append((start, " ".join(cur)))
    return runs


def missing_sections(root, text):
    """Each (page, title) that `text` cites as `page, "title"` and that the page (under root) does
    not hold: the page is missing, or its text, backticks aside, lacks the title."""
    out = []
    for page, title in SECTION.findall(text):
        full = os.path.join(root, page)
        body = open(full, encoding="utf-8").read().replace("`", "") if os.path.isfile(full) else None
        if body is None or title.replace("`", "") not in body:
            out.append((page, title))
    return out


def dead_sections(root, path):
    """Each (page, "title") a comment cites whose page is missing or does not hold the title."""
    return [f"{os.path.relpath(path, root)}:{n}: cites {page}, \"{title}\", which it does not hold"
            for n, text in comment_text(path) for page, title in missing_sections(root, text)]


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
    dead = [d for path in sources(root) for d in dead_sections(root, path)]
    for d in dead:
        print(d)
    if dead:
        print(f"FAIL: {len(dead)} comment(s) cite a section their page does not hold; name it as the page does")
        return 1
    if bad:
        print(f"FAIL: {bad} line(s) cite a tracker number no reader can open; cite the docs page "
              "or section that holds the reasoning (docs/; the lab notebook for a record), or drop the citation")
        return 1
    print("code_cites_docs: no comment cites a tracker number")
    return 0


if __name__ == "__main__":
    sys.exit(main())
