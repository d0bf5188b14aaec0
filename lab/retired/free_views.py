#!/usr/bin/env python3
"""One-off rewrite (docs/design.md, "Layout"): Tensor's autograd-recording methods became free
functions in ops/view.h (and backward() in autograd/), so that core/ depends on nothing above it.

    x.reshape(s)       -> reshape(x, s)          x.t()          -> transpose(x, 0, 1)
    f(a).contiguous()  -> contiguous(f(a))       loss.backward() -> backward(loss)

Usage: free_views.py FILE...   (rewrites in place; string literals and comments are left alone).
Kept for branches written against the old API: run it on their files after a merge.
"""
import re
import sys

METHODS = ["reshape", "flatten", "transpose", "slice", "contiguous", "dense", "clone", "to", "t",
           "backward", "relu", "sigmoid", "tanh", "sum", "mean", "matmul"]
CALL = re.compile(r"(\.)\s*(" + "|".join(METHODS) + r")\(")
IDENT = re.compile(r"[A-Za-z0-9_]")
# Receivers that are not tensors (their classes have methods of these names).
NOT_TENSOR = re.compile(r"^(scaler|grad_scaler|\w*_scaler|model|module|net|this|std::.*|kernels<.*|gpu|memu|power|clock|set|test|train|resident)$")


def code_mask(s):
    """True for characters of code, False inside comments, string and character literals."""
    mask = [True] * len(s)
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if s.startswith("//", i):
            j = s.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j): mask[k] = False
            i = j
        elif s.startswith("/*", i):
            j = s.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j): mask[k] = False
            i = j
        elif s.startswith('R"', i) and (i == 0 or not IDENT.match(s[i - 1])):
            d = s.index("(", i)
            delim = ")" + s[i + 2:d] + '"'
            j = s.index(delim, d) + len(delim)
            for k in range(i, j): mask[k] = False
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and s[j] != c:
                j += 2 if s[j] == "\\" else 1
            for k in range(i, min(j + 1, n)): mask[k] = False
            i = j + 1
        else:
            i += 1
    return mask


def match_back(s, i, close, open_):
    depth = 0
    while i >= 0:
        if s[i] == close: depth += 1
        elif s[i] == open_:
            depth -= 1
            if depth == 0: return i
        i -= 1
    raise ValueError("unbalanced")


def match_fwd(s, i):
    depth = 0
    while i < len(s):
        if s[i] == "(": depth += 1
        elif s[i] == ")":
            depth -= 1
            if depth == 0: return i
        i += 1
    raise ValueError("unbalanced")


def receiver_start(s, end):
    """The start of the postfix expression that ends just before s[end] (the '.' or '->')."""
    i = end - 1
    while i >= 0 and s[i] in " \t\n": i -= 1
    start = i + 1
    while i >= 0:
        if s[i] in ")]":
            o = match_back(s, i, s[i], "(" if s[i] == ")" else "[")
            start, i = o, o - 1
            if i >= 0 and s[i] == ">":  # a template call: f<T>(...)
                start = match_back(s, i, ">", "<")
                i = start - 1
            if i >= 0 and IDENT.match(s[i]): continue
            if s.startswith("::", i - 1) or s[i] == "." or s.startswith("->", i - 1): pass
            else: break
        if i >= 0 and IDENT.match(s[i]):
            while i >= 0 and IDENT.match(s[i]): i -= 1
            start = i + 1
        if i >= 1 and s[i - 1:i + 1] in ("::", "->"):
            i -= 2
            continue
        if i >= 0 and s[i] == "." and (i == 0 or s[i - 1] != "."):
            i -= 1
            continue
        break
    return start


def name_is(m, name):
    return m.group(2) == name


def rewrite(s):
    changed = 0
    pos = 0
    while True:
        mask = code_mask(s)
        m = None
        for cand in CALL.finditer(s, pos):
            if mask[cand.start()]:
                m = cand
                break
        if not m: return s, changed
        dot = m.start()
        rs = receiver_start(s, dot)
        recv = s[rs:dot].rstrip()
        if recv.startswith("(") and match_fwd(recv, 0) == len(recv) - 1:
            recv = recv[1:-1]  # (a + b).sum() -> sum(a + b)
        if not recv or NOT_TENSOR.match(recv) or recv.endswith("->") or recv.isdigit():
            pos = m.end()
            continue
        open_ = m.end() - 1
        close = match_fwd(s, open_)
        line_start = s.rfind("\n", 0, rs) + 1
        if name_is(m, "to") and not s[line_start:rs].strip() and s[close + 1:close + 2] == ";":
            pos = m.end()  # `m.to(d);`, the result unused: a Module moving, not a tensor copy
            continue
        args = s[open_ + 1:close].strip()
        name = m.group(2)
        if name == "t":
            new = "transpose(%s, 0, 1)" % recv
        elif args:
            new = "%s(%s, %s)" % (name, recv, args)
        else:
            new = "%s(%s)" % (name, recv)
        s = s[:rs] + new + s[close + 1:]
        changed += 1
        pos = rs  # an outer call on this result comes next


def main():
    for path in sys.argv[1:]:
        with open(path) as f: s = f.read()
        out, n = rewrite(s)
        if n:
            with open(path, "w") as f: f.write(out)
            print(f"{path}: {n}")


if __name__ == "__main__":
    main()
