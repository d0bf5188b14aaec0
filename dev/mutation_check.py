#!/usr/bin/env python3
"""The mutation check (docs/testing.md).

Applies each one-line mutation of a list (dev/mutations.txt) to a copy of the working tree,
rebuilds only the test targets the mutation names, for the CPU, runs only the tests it names (all
of them, to name every test that catches it; --first-kill stops at the first), and reports whether
a test caught it (KILLED), none did (SURVIVED), or the mutation no longer applies (STALE: its
original text is not in its file exactly once). Before the mutations, every test the list names
runs once on the unmutated copy: one that fails there would "kill" everything (ERROR instead).
The copy is made from the files `git ls-files -co --exclude-standard` lists (uncommitted work
included) into a scratch directory that is reused between runs: only changed files are copied
again, so its build stays warm.

  dev/mutation_check.py                 # the whole list
  dev/mutation_check.py --only sampler-shard-offset,advice-data-bound
  dev/mutation_check.py --list          # the list, nothing run
  dev/mutation_check.py --in-place build-asan --share 2/8   # CI (.ci/run): its own clone, an eighth

--in-place BUILD mutates the checkout itself and rebuilds in BUILD, an existing build of it (CI's
disposable clone: no third build); --doc writes the whole list's summary and table into the doc.

Exit status: 0 when every mutation was killed or is a listed expected survivor; 1 when one
survived that is not listed as expected, or is STALE, or does not compile without its entry saying
that a build failure kills it (BROKEN), or a test it names fails or is missing without the
mutation (ERROR); 2 on a usage or setup error (a bad list, a copy that does not configure or build,
another run in the same scratch directory); 130 when interrupted. Every file
is restored after its mutation, also on Ctrl-C and errors; a run killed outright (kill -9) is
repaired by the next run's re-sync. Every build step holds /tmp/loupe-build.lock (flock), so it
never runs beside another build that takes the lock; tests run outside it.
"""
import argparse
import datetime
import fcntl
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SRC = os.path.dirname(HERE)
DEFAULT_LIST = os.path.join(HERE, "mutations.txt")
DEFAULT_WORK = "/tmp/loupe-mutation"
LOCK = "/tmp/loupe-build.lock"
CONFIGURE = ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DLOUPE_CUDA=OFF", "-DLOUPE_BUILD_TESTS=ON"]
KEYS = {"id", "file", "from", "to", "build", "tests", "does", "expect", "build-fails", "timeout"}


def log(*a):
    print(*a, flush=True)


def die(msg):
    print(f"mutation_check: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


class ListError(Exception):
    pass


class Mutation:
    def __init__(self, fields, where):
        self.where = where
        for k in ("id", "file", "from", "to", "build", "tests", "does"):
            if not fields.get(k):
                raise ListError(f"{where}: entry {fields.get('id', '?')!r} has no '{k}:'")
        self.id = fields["id"]
        self.file = fields["file"]
        self.orig = fields["from"]
        self.repl = fields["to"]
        if self.orig == self.repl:
            raise ListError(f"{where}: {self.id}: 'from' and 'to' are the same")
        self.build = split_items(fields["build"])
        self.tests = split_items(fields["tests"])
        self.does = fields["does"]
        self.expect = fields.get("expect", "")
        bf = fields.get("build-fails", "")
        if bf not in ("", "killed"):
            raise ListError(f"{where}: {self.id}: 'build-fails:' takes only 'killed'")
        self.build_fails_kills = bf == "killed"
        try:
            self.timeout = int(fields.get("timeout", "300"))
        except ValueError:
            raise ListError(f"{where}: {self.id}: 'timeout:' is not a whole number of seconds")
        # Filled in by the run.
        self.result = "NOT RUN"
        self.killer = ""
        self.seconds = 0.0
        self.steps = 0  # build steps the mutation took (compiles and links)


def split_items(s):
    return [x for x in re.split(r"[\s,]+", s) if x]


def read_list(path):
    """The list's entries: `key: value` lines, an entry starting at each `id:`; '#' lines and blank
    lines are ignored. Values are stripped of the spaces around them."""
    entries, cur, where = [], None, path
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            s = line.rstrip("\n")
            if not s.strip() or s.lstrip().startswith("#"):
                continue
            m = re.match(r"^([a-z-]+):(.*)$", s)
            if not m or m.group(1) not in KEYS:
                raise ListError(f"{path}:{n}: not 'key: value' with a key of {sorted(KEYS)}: {s!r}")
            key, value = m.group(1), m.group(2).strip()
            if key == "id":
                if cur is not None:
                    entries.append(Mutation(cur, where))
                cur, where = {}, f"{path}:{n}"
            elif cur is None:
                raise ListError(f"{path}:{n}: '{key}:' before the first 'id:'")
            if key in cur:
                raise ListError(f"{path}:{n}: '{key}:' twice in entry {cur.get('id')!r}")
            cur[key] = value
    if cur is not None:
        entries.append(Mutation(cur, where))
    seen = set()
    for e in entries:
        if e.id in seen:
            raise ListError(f"{e.where}: id {e.id!r} is used twice")
        seen.add(e.id)
    return entries


# ---- processes -------------------------------------------------------------------------------------

class Timeout(Exception):
    pass


def run(cmd, cwd=None, timeout=None, env=None):
    """Runs cmd in a process group of its own; returns (rc, output). On a timeout, Ctrl-C or an
    error the whole group is killed (ctest's and the tests' children too)."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except BaseException as e:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            raise Timeout() from None
        raise
    return p.returncode, out.decode("utf-8", "replace")


class BuildLock:
    """flock on /tmp/loupe-build.lock: one build at a time on the machine."""

    def __enter__(self):
        self.f = open(LOCK, "a")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"  (waiting for {LOCK}: another build holds it)")
            fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *a):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


# ---- the copy ---------------------------------------------------------------------------------------

def same_file(a, b):
    try:
        if os.path.getsize(a) != os.path.getsize(b):
            return False
    except OSError:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def sync(src, dst):
    """Copies the files git lists (tracked and untracked, not ignored) from src to dst, only those
    whose contents differ; a copied file gets the current time as its mtime, so the build sees it
    as changed. Files of the previous sync that git no longer lists are removed."""
    rc, out = run(["git", "-C", src, "ls-files", "-z", "-co", "--exclude-standard"])
    if rc != 0:
        die(f"git ls-files in {src} failed:\n{out}")
    files = sorted({f for f in out.split("\0") if f})
    manifest = os.path.join(os.path.dirname(dst), "manifest.txt")
    old = set()
    if os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as f:
            old = set(f.read().split("\0")) - {""}
    copied = removed = 0
    present = []
    for rel in files:
        s, d = os.path.join(src, rel), os.path.join(dst, rel)
        if os.path.islink(s):
            target = os.readlink(s)
            if not (os.path.islink(d) and os.readlink(d) == target):
                if os.path.lexists(d):
                    os.remove(d)
                os.makedirs(os.path.dirname(d), exist_ok=True)
                os.symlink(target, d)
                copied += 1
            present.append(rel)
            continue
        if not os.path.isfile(s):
            continue  # tracked but deleted in the working tree
        present.append(rel)
        if os.path.isfile(d) and not os.path.islink(d) and same_file(s, d):
            continue
        os.makedirs(os.path.dirname(d), exist_ok=True)
        if os.path.lexists(d):
            os.remove(d)
        shutil.copyfile(s, d)
        shutil.copymode(s, d)
        copied += 1
    for rel in sorted(old - set(present)):
        d = os.path.join(dst, rel)
        if os.path.lexists(d):
            os.remove(d)
            removed += 1
    with open(manifest, "w", encoding="utf-8") as f:
        f.write("\0".join(present))
    return copied, removed, len(present)


def configure_and_build(work, targets, jobs):
    src, build = os.path.join(work, "src"), os.path.join(work, "build")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        log(f"configuring {build} for the CPU (once)")
        with BuildLock():
            rc, out = run(["cmake", "-S", src, "-B", build] + CONFIGURE)
        if rc != 0:
            print(out[-6000:])
            die("configuring the copy failed")
    return build_targets(build, targets, jobs)


def build_targets(build, targets, jobs):
    with BuildLock():
        return run(["cmake", "--build", build, "-j", str(jobs), "--target"] + sorted(set(targets)))


# ---- tests ------------------------------------------------------------------------------------------

def find_binary(build, name):
    for sub in ("tests", "tests/fuzz", "."):
        p = os.path.join(build, sub, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def failed_cases(out):
    cases = []
    for m in re.finditer(r"^\[  FAILED  \] ([\w/.]+)(?: \(| *,|\s*$)", out, re.M):
        if m.group(1) not in cases:
            cases.append(m.group(1))
    return cases


def run_test(build, item, timeout):
    """One test item: NAME (a CTest test) or BINARY:FILTER (the GoogleTest binary with
    --gtest_filter). Returns (status, detail): status 'pass', 'skip', 'fail' or 'error'."""
    env = dict(os.environ)
    env.pop("GTEST_FILTER", None)
    env.pop("LOUPE_TEST_REQUIRE", None)
    if ":" in item:
        name, filt = item.split(":", 1)
        binary = find_binary(build, name)
        if not binary:
            return "error", f"no binary {name} in {build}/tests"
        cmd, cwd = [binary, "--gtest_filter=" + filt], os.path.dirname(binary)
    else:
        cmd = ["ctest", "--test-dir", build, "-R", "^" + re.escape(item) + "$", "--output-on-failure",
               "--no-tests=error", "--timeout", str(timeout)]
        cwd = build
    try:
        rc, out = run(cmd, cwd=cwd, timeout=timeout, env=env)
    except Timeout:
        return "fail", f"{item}: timed out after {timeout} s"
    if ":" not in item and re.search(r"No tests were found", out):
        return "error", f"no CTest test named {item}"
    if ":" in item and rc == 1 and "no case matches the filter" in out:
        return "error", f"{item}: no case matches the filter"
    if ":" not in item and rc != 0 and re.search(r"\(Timeout\)", out):
        return "fail", f"{item}: timed out after {timeout} s"
    if rc == 0:
        if ":" not in item and "***Skipped" in out:
            return "skip", f"{item}: skipped"
        return "pass", ""
    if rc == 77:
        return "skip", f"{item}: every case skipped"
    cases = failed_cases(out)
    if cases:
        more = f" +{len(cases) - 2}" if len(cases) > 2 else ""
        return "fail", f"{item} ({', '.join(cases[:2])}{more})"
    if rc < 0:
        return "fail", f"{item} (killed by signal {-rc})"
    # A script's or the fuzz replay's own words: "replay: MISMATCH ...", "FAIL: ...".
    said = [l.strip() for l in out.splitlines() if re.search(r"\bMISMATCH\b|^\s*FAIL(ED)?\b:?", l)]
    if said:
        first = re.sub(r"^replay: (MISMATCH )?", "", said[0]).split(", got ")[0]
        # A path in the build tree, relative to it: the table is committed and names no outside path.
        for root in {build, os.path.realpath(build)}:
            first = first.replace(root.rstrip("/") + "/", "")
        first = first if len(first) <= 100 else first[:99] + "~"
        more = f", {len(said)} in all" if len(said) > 1 else ""
        return "fail", f"{item} ({first}{more})"
    # CTest's summary: "The following tests FAILED: ... 80 - fuzz_replay_idx (ILLEGAL)".
    m = re.search(r"^\s*\d+ - " + re.escape(item) + r" \(([^)]+)\)", out, re.M)
    if m and m.group(1) != "Failed":
        what = {"ILLEGAL": "trapped: SIGILL", "SEGFAULT": "SIGSEGV", "BUS_ERROR": "SIGBUS"}.get(m.group(1), m.group(1))
        return "fail", f"{item} ({what})"
    return "fail", f"{item} (failed, exit status {rc}{' from ctest' if ':' not in item else ''})"


# ---- mutations ---------------------------------------------------------------------------------------

def apply_and_test(m, src, build, jobs, first_kill):
    path = os.path.join(src, m.file)
    if not os.path.isfile(path):
        m.result, m.killer = "STALE", f"{m.file} does not exist"
        return
    with open(path, "rb") as f:
        text = f.read()
    orig, repl = m.orig.encode(), m.repl.encode()
    count = text.count(orig)
    if count != 1:
        m.result, m.killer = "STALE", f"original text found {count} times in {m.file}, not once"
        return
    st = os.stat(path)
    try:
        with open(path, "wb") as f:
            f.write(text.replace(orig, repl))
        rc, out = build_targets(build, m.build, jobs)
        if rc != 0:
            if m.build_fails_kills:
                m.result, m.killer = "KILLED", "the build (as the entry expects)"
            else:
                m.result, m.killer = "BROKEN", "does not compile: " + first_error(out)
            return
        m.steps = len(re.findall(r"^\[\d+/\d+\]", out, re.M))
        killers = []
        for item in m.tests:
            status, detail = run_test(build, item, m.timeout)
            if status == "error":
                m.result, m.killer = "ERROR", detail
                return
            if status == "fail":
                killers.append(detail)
                if first_kill:
                    break
        m.result = "KILLED" if killers else "SURVIVED"
        m.killer = "; ".join(killers)
    finally:
        # The original text, with a fresh mtime: the object built from the mutant is older than it,
        # so the next build compiles the restored file again.
        with open(path, "wb") as f:
            f.write(text)
        os.chmod(path, st.st_mode)


def check_list(ms, src):
    """The STALE test of apply_and_test without the build: a change to a mutated line fails here,
    in the test suite, rather than in CI's mutation check an hour later."""
    stale = 0
    for m in ms:
        path = os.path.join(src, m.file)
        if not os.path.isfile(path):
            log(f"STALE {m.id}: {m.file} does not exist")
            stale += 1
            continue
        with open(path, "rb") as f:
            count = f.read().count(m.orig.encode())
        if count != 1:
            log(f"STALE {m.id}: its from: text occurs {count} times in {m.file}, not once")
            stale += 1
    log(f"{len(ms)} mutations, {stale} stale")
    return 1 if stale else 0


def first_error(out):
    for line in out.splitlines():
        if "error:" in line:
            return line.strip()[:160]
    return out.strip().splitlines()[-1][:160] if out.strip() else "(no output)"


def table(ms, markdown=False):
    rows = [("id", "file", "what it does", "result", "killed by", "s")]
    for m in ms:
        res = m.result
        if m.result == "SURVIVED" and m.expect:
            res = "SURVIVED (expected)"
        if m.result == "KILLED" and m.expect:
            res = "KILLED (listed as expected survivor)"
        killer = m.killer if m.result != "SURVIVED" else ("expected: " + m.expect if m.expect else "-")
        rows.append((m.id, m.file, m.does, res, killer, f"{m.seconds:.0f}"))
    if markdown:
        lines = ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        lines.insert(1, "|" + "---|" * len(rows[0]))
        return "\n".join(lines)
    widths = [min(max(len(r[i]) for r in rows), cap) for i, cap in enumerate((28, 40, 48, 20, 60, 5))]

    def cut(s, w):
        return s if len(s) <= w else s[: w - 1] + "~"

    return "\n".join("  ".join(cut(c, w).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


DOC_BEGIN, DOC_END = "<!-- mutation-check: begin -->", "<!-- mutation-check: end -->"


def write_doc(path, summary, md_table):
    """The run's summary and table between the doc's two marker lines (docs/testing.md): the doc
    shows what the current list gave, written by the check, never typed in."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    b, e = text.find(DOC_BEGIN), text.find(DOC_END)
    if b < 0 or e < b:
        die(f"--doc {path}: no '{DOC_BEGIN}' ... '{DOC_END}' block")
    block = (f"{DOC_BEGIN}\n`dev/mutation_check.py --doc docs/testing.md`: {summary}.\n\n{md_table}\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[:b] + block + text[e:])
    log(f"wrote the table into {path}")


def interrupt(signum, frame):
    raise KeyboardInterrupt()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="ID[,ID...]: only these mutations")
    ap.add_argument("--share", metavar="K/N",
                    help="only the K-th of N shares of the list: entries K, K+N, K+2N, ... (CI's bounded run)")
    ap.add_argument("--list", action="store_true", help="print the list and exit")
    ap.add_argument("--check-list", action="store_true",
                    help="only check that every entry still applies (its file exists, its original text "
                         "occurs there once); nothing is built or run (CTest mutation_list)")
    ap.add_argument("--src", default=DEFAULT_SRC, help="the tree to copy (default: this checkout)")
    ap.add_argument("--work", default=DEFAULT_WORK, help="scratch directory, reused (default %(default)s)")
    ap.add_argument("--jobs", type=int, default=2, help="build jobs (default %(default)s)")
    ap.add_argument("--mutations", default=DEFAULT_LIST, help="the list (default dev/mutations.txt)")
    ap.add_argument("--first-kill", action="store_true",
                    help="stop at the first test that kills a mutation (default: run every test it names)")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip running the named tests once unmutated first (a failing one would kill everything)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the result table as Markdown to FILE")
    ap.add_argument("--in-place", metavar="BUILD",
                    help="mutate the --src tree itself and rebuild in BUILD, a build of that tree that exists "
                         "(CI's clone and its build/): no copy, no configure; each file is restored after its "
                         "mutation as in the copy")
    ap.add_argument("--doc", metavar="FILE",
                    help="after a run of the whole list, write its summary and table between FILE's "
                         "'<!-- mutation-check: begin -->' and '<!-- mutation-check: end -->' lines")
    a = ap.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `--list | head`

    try:
        ms = read_list(a.mutations)
    except ListError as e:
        die(str(e))
    if a.only:
        want = split_items(a.only)
        unknown = [w for w in want if w not in {m.id for m in ms}]
        if unknown:
            die(f"no mutation with id {', '.join(unknown)} (see --list)")
        ms = [m for m in ms if m.id in want]
    if a.share:
        got = re.fullmatch(r"(\d+)/(\d+)", a.share)
        if not got or not 1 <= int(got.group(1)) <= int(got.group(2)):
            die(f"--share takes K/N with 1 <= K <= N, got '{a.share}'")
        k, n = int(got.group(1)), int(got.group(2))
        ms = [m for i, m in enumerate(ms) if i % n == k - 1]
    if a.list:
        for m in ms:
            log(f"{m.id}: {m.file}: {m.does}")
            log(f"    - {m.orig}\n    + {m.repl}")
            log(f"    build {' '.join(m.build)}; tests {' '.join(m.tests)}"
                + (f"; expected survivor: {m.expect}" if m.expect else ""))
        return 0

    if a.check_list:
        return check_list(ms, os.path.abspath(a.src))
    if a.doc and (a.only or a.share):
        die("--doc writes the whole list's result: leave out --only and --share")
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)  # also where started with SIGINT ignored (a background job)
    start = time.time()
    if a.in_place:
        src, build = os.path.abspath(a.src), os.path.abspath(a.in_place)
        if not os.path.exists(os.path.join(build, "build.ninja")):
            die(f"--in-place {build}: not a configured Ninja build (no build.ninja)")
        work = build
    else:
        work = os.path.abspath(a.work)
        src, build = os.path.join(work, "src"), os.path.join(work, "build")
        os.makedirs(src, exist_ok=True)
    run_lock = open(os.path.join(work, "mutation-run.lock" if a.in_place else "run.lock"), "a")  # held until exit
    try:
        fcntl.flock(run_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        die(f"another mutation check is running in {work}; wait for it or pass another --work")
    if a.in_place:
        log(f"in place: mutating {src}, building in {build}")
    else:
        copied, removed, total = sync(os.path.abspath(a.src), src)
        log(f"copy {src}: {total} files, {copied} copied, {removed} removed")

    # Mutations of one file run one after the other: the restored file is compiled again once.
    order = {}
    for m in ms:
        order.setdefault(m.file, len(order))
    ms.sort(key=lambda m: order[m.file])

    targets = sorted({t for m in ms for t in m.build})
    log(f"building {len(targets)} targets: {' '.join(targets)}")
    t0 = time.time()
    rc, out = build_targets(build, targets, a.jobs) if a.in_place else configure_and_build(work, targets, a.jobs)
    if rc != 0:
        print(out[-6000:])
        die("the unmutated tree does not build; nothing to measure")
    log(f"  built in {time.time() - t0:.0f} s")

    bad_items = {}
    if not a.no_baseline:
        items = []
        for m in ms:
            for i in m.tests:
                if i not in items:
                    items.append(i)
        log(f"baseline: {len(items)} tests unmutated")
        for i in items:
            t0 = time.time()
            status, detail = run_test(build, i, max(m.timeout for m in ms if i in m.tests))
            log(f"  {i}: {status} ({time.time() - t0:.0f} s){' ' + detail if detail else ''}")
            if status in ("fail", "error"):
                bad_items[i] = detail or status
            elif status == "skip":
                log(f"  warning: {i} skips unmutated, so it cannot catch anything on this machine")

    log(f"{len(ms)} mutations")
    interrupted = False
    # Run grouped by file (the table keeps the list's order): the next mutant of the same file
    # replaces the restored original's object, which is then never compiled in between.
    first = {}
    for m in ms:
        first.setdefault(m.file, len(first))
    order = sorted(ms, key=lambda m: first[m.file])
    try:
        for k, m in enumerate(order, 1):
            t0 = time.time()
            broken = [i for i in m.tests if i in bad_items]
            if broken:
                m.result, m.killer = "ERROR", f"fails unmutated: {bad_items[broken[0]]}"
            else:
                apply_and_test(m, src, build, a.jobs, a.first_kill)
            m.seconds = time.time() - t0
            note = m.killer if m.result != "SURVIVED" else (f"expected: {m.expect}" if m.expect else "")
            built = f", {m.steps} build steps" if m.steps else ""
            log(f"[{k}/{len(ms)}] {m.id}: {m.result} ({m.seconds:.0f} s{built}){'  ' + note if note else ''}")
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: the mutated file was restored; the table holds what ran")

    elapsed = time.time() - start
    log("")
    log(table(ms))
    counts = {}
    for m in ms:
        key = "SURVIVED (expected)" if m.result == "SURVIVED" and m.expect else m.result
        counts[key] = counts.get(key, 0) + 1
    log("")
    log(", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + f"; {elapsed / 60:.1f} min in all "
        f"({datetime.date.today().isoformat()}, {platform.node()}, {os.cpu_count()} CPUs)")
    summary = (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) +
               f"; {elapsed / 60:.1f} min on {os.cpu_count()} CPUs, {datetime.date.today().isoformat()}")
    if a.markdown:
        with open(a.markdown, "w", encoding="utf-8") as f:
            f.write(table(ms, markdown=True) + "\n")
    if a.doc and not interrupted:
        write_doc(a.doc, summary, table(ms, markdown=True))
    bad = [m for m in ms if (m.result == "SURVIVED" and not m.expect) or m.result in ("STALE", "BROKEN", "ERROR")]
    for m in bad:
        log(f"FAIL {m.id}: {m.result}" + (f": {m.killer}" if m.killer else " (no test caught it)"))
    for m in ms:
        if m.result == "KILLED" and m.expect:
            log(f"note {m.id}: killed now; its 'expect:' line can go")
    if interrupted:
        return 130
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # before or after the mutations: no file of the copy is mutated then
        print("mutation_check: interrupted", file=sys.stderr)
        sys.exit(130)
