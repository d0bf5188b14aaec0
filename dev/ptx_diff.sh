#!/usr/bin/env bash
# Whether a change to a .cu file leaves its kernels' PTX as it was: compiles FILE as committed at
# REV (default HEAD) and as it is in the working tree (sm_90, the build's flags; no GPU needed),
# and compares each kernel's PTX, line info aside. Identical PTX means ptxas gives identical SASS.
# Each side is compiled against its own tree's headers (REV's from git archive).
# usage: dev/ptx_diff.sh FILE.cu [REV]     e.g. dev/ptx_diff.sh framework/ops/lstm/lstm_persist_cuda.cu
set -eu
file=$1 rev=${2:-HEAD}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ptx() {  # TREE OUT: TREE's FILE, compiled under FILE's own name (the anonymous namespace's symbol follows it)
  if ! (cd "$1" && "$nvcc" -DLOUPE_WITH_NCCL=1 -Iframework -I. -Ithird_party -O3 -DNDEBUG -arch=sm_90 \
          --expt-relaxed-constexpr -std=c++17 -ptx "$file" -o "$2" 2> "$2.log"); then
    echo "$file does not compile in $1:"; grep -m5 error "$2.log"; exit 2
  fi
  sed -E -i '/^\s*\.loc/d; /^\s*\.file/d; /^\/\//d' "$2"  # line info aside
}
mkdir -p "$tmp/old"
git archive "$rev" framework third_party | tar -x -C "$tmp/old"
ptx "$tmp/old" "$tmp/old.ptx"
ptx "$PWD" "$tmp/new.ptx"
python3 - "$tmp/old.ptx" "$tmp/new.ptx" <<'PY'
import re, sys
def anonymous(text):  # the anonymous namespace's mangled name (its length first) hashes the file's path
    # and a function's static __shared__ arrays are named under _INTERNAL_<hash>..., which hashes its text
    text = re.sub(r'_INTERNAL_[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+_\d+', 'INTERNAL', text)
    text = re.sub(r'\$L__BB\d+_', '$L__BB_', text)  # branch labels carry the function's place in the file
    return re.sub(r'(\d+)(_GLOBAL__N__\w+)', lambda m: 'ANON' + m.group(2)[int(m.group(1)):], text)
def entries(p):
    parts = re.split(r'(?=\.visible \.entry|\.entry )', anonymous(open(p).read()))
    return {re.match(r'(?:\.visible )?\.entry (\S+)\(', x).group(1): x for x in parts[1:]}
old, new = entries(sys.argv[1]), entries(sys.argv[2])
same = [k for k in old if new.get(k) == old[k]]
differ = [k for k in old if k in new and new[k] != old[k]]
gone, added = set(old) - set(new), set(new) - set(old)
print(f"{len(same)} kernels with identical PTX, {len(differ)} different, {len(gone)} gone, {len(added)} new")
for k in differ[:10]: print("  differs:", k)
sys.exit(1 if differ or gone or added else 0)
PY
