#!/usr/bin/env python3
"""CTest function_length: no function in the command (cli/), the library (framework/, CUDA
kernels included), data/, models/ or run/ is longer than 80 lines, and no file there longer than 800
(docs/design.md: functions stay short, files split before 800 lines).

A function's length is counted from the line of its body's opening brace to the line of its
closing brace. The scan is a brace-depth counter over the source with comments, string literals
(raw ones included) and character literals blanked out: a brace opened where every enclosing
brace is a namespace, class, struct, union or extern block, after a header with a parenthesis
and no `=` before it, opens a function body; lambdas and blocks inside it belong to it.

Usage: check_function_length.py SOURCE_DIR [LIMIT]
Prints FILE:LINE: NAME is N lines (limit LIMIT) for each function over the limit, FILE is N lines
(limit 800) for each file over it, and exits 1.
"""
import glob
import os
import re
import sys


def blank(text):
    """The text with comments, strings and character literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i + 2)
            delim = text[i + 2:k]
            j = text.find(")" + delim + '"', k)
            j = n if j < 0 else j + len(delim) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # 1'000 is a digit separator
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b|extern\s*$")
# Parenthesised specifiers before a function's name, which are not its name.
SPECIFIER = re.compile(r"\b(__launch_bounds__|__align__|alignas|__attribute__|__declspec)\s*\((?:[^()]|\([^()]*\))*\)")


def function_name(header):
    """The name in a function's header: the word before its parameter list (`A::f` for a member)."""
    m = re.search(r"([~\w:]+)\s*\(", header)
    return m.group(1) if m else "?"


DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)


def bodies(text):
    """(name, first line, last line, enclosing) of each function body at namespace or class level;
    enclosing is the kind of each brace around it, outermost first: "namespace" (extern blocks
    too) or "class" (class, struct, union, enum). Preprocessor lines are skipped: a macro's braces
    are not a function's."""
    src = DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), blank(text))
    stack = []  # per open brace: (kind, line, name)
    header_start = 0
    line = 1
    for i, c in enumerate(src):
        if c == "\n":
            line += 1
        elif c in ";{}":
            if c == "{":
                header = SPECIFIER.sub(" ", src[header_start:i])
                at_scope = all(kind in ("namespace", "class") for kind, _, _ in stack)
                scope = SCOPE.search(header)
                if not at_scope:
                    kind = "inner"
                elif scope and "(" not in header.split("{")[0]:
                    kind = "namespace" if scope.group(1) in (None, "namespace") else "class"
                elif "(" in header and "=" not in header.split("(")[0]:
                    kind = "function"
                else:
                    kind = "inner"
                stack.append((kind, line, function_name(header) if kind == "function" else ""))
            elif c == "}" and stack:
                kind, first, name = stack.pop()
                if kind == "function":
                    yield name, first, line, tuple(k for k, _, _ in stack)
            header_start = i + 1


def functions(text):
    """(name, first line, last line) of each function body at namespace or class level."""
    for name, first, last, _ in bodies(text):
        yield name, first, last


# Known and bounded: functions allowed past the limit, each at most its length here, until split.
# None now: the persistent LSTM kernels, the last two, are split into parts that leave their PTX as
# it was (lab/benchmarks.md).
PENDING = {}
FILE_LIMIT = 800


def pending_limit(rel, text, first, name):
    """The allowance of a PENDING function: matched by its file and the kernel's name on its line."""
    line = text.splitlines()[first - 1] if first - 1 < len(text.splitlines()) else ""
    for (path, fn), allowed in PENDING.items():
        if rel == path and (fn == name or fn in line):
            return allowed
    return None


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    bad = pending = 0
    files = []
    for pattern in ("cli/*.cpp", "cli/*.h", "cli/**/*.cpp", "framework/**/*.cpp", "framework/**/*.cu", "framework/**/*.h", "framework/**/*.cuh",
                    "data/*.cpp", "data/*.h", "models/*.cpp", "models/*.h", "run/*.cpp", "run/*.h"):
        files += glob.glob(os.path.join(src, pattern), recursive=True)
    files = sorted(set(files))
    if not any(f.endswith(".cu") for f in files) or not any("/cli/" in f for f in files):
        print(f"the sources were not found under {src}")
        return 1
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        rel = os.path.relpath(path, src)
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > FILE_LIMIT:
            print(f"{rel} is {lines} lines (limit {FILE_LIMIT}); split it")
            bad += 1
        for name, first, last in functions(text):
            length = last - first + 1
            if length <= limit:
                continue
            allowed = pending_limit(rel, text, first, name)
            if allowed is not None and length <= allowed:
                print(f"{rel}:{first}: {name} is {length} lines: pending (at most {allowed} until it is split)")
                pending += 1
                continue
            print(f"{rel}:{first}: {name} is {length} lines (limit {limit}); split it")
            bad += 1
    if bad:
        print(f"{bad} function(s) or file(s) over their limit")
        return 1
    print(f"every function in cli/, framework/, data/, models/ and run/ ({len(files)} files) is at most {limit} lines, "
          f"every file at most {FILE_LIMIT}"
          + (f", but the {pending} pending above" if pending else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
