#!/usr/bin/env bash
# CTest launch_streams: CUDA launchers take their stream explicitly. An entry point (a function a
# backend table registers, the CUDA runtime's methods, instrument's measurers) reads its stream
# once (a table's function from its context, `const cudaStream_t s = cuda::stream(ctx);`; the
# runtime's own methods `cuda::stream()`) and passes it down; every helper
# below it takes `cudaStream_t stream` as a parameter. So no kernel launch's configuration
# (<<<grid, block, shared, stream>>>, cuda::launch's arguments) and no *Async call in
# framework/**/*.cu or *.cuh may name
# the global accessor itself: cuda::stream(), or stream() inside loupe::cuda.
# And the kernels take their precision, stream and library handles from the context their table
# hands them (core/exec_context.h): no backend file (framework/**/*_cuda.cu, *.cuh, *_cpu.cpp,
# *_dnnl.cpp, gemm_*.cpp) reads the thread's precision itself, precision() or compute_dtype()
# without an argument, and no kernel table's CUDA file (framework/{ops,optim}/*_cuda.cu,
# core/copy_cuda.cu) names the runtime's stream or handles, cuda::stream(), cublas() or cudnn()
# without an argument: stream(ctx), cublas(ctx), cudnn(ctx).
# Usage: check_launch_streams.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: check_launch_streams.sh SOURCE_DIR}

# Files exempt from the rule (shell patterns on the file name); none today. Add one only with a
# reason beside it.
excluded=()

# scan DIR: prints FILE:LINE: ... for each offending launch or *Async call under DIR/framework;
# fails if there is one.
scan() {
  local root=$1 found=0 f
  local skip=()
  for p in "${excluded[@]}"; do skip+=(! -name "$p"); done
  while IFS= read -r f; do
    awk -v file="${f#"$root"/}" '
      { line = $0; sub(/\/\/.*/, "", line); text = text line "\n" }  # comments dropped
      function line_of(p,   head) { head = substr(text, 1, p - 1); return gsub(/\n/, "", head) + 1 }
      function global(s) { return s ~ /(^|[^.>A-Za-z0-9_])(cuda::)?stream[ \t\n]*\([ \t\n]*\)/ }
      function report(p, what) {
        printf "%s:%d: %s names the global compute stream; take it as a parameter (cudaStream_t stream)\n",
               file, line_of(p), what
        bad = 1
      }
      END {
        # Launch configurations: from <<< to the next >>> (may span lines).
        p = 1
        while ((i = index(substr(text, p), "<<<")) > 0) {
          start = p + i - 1
          j = index(substr(text, start + 3), ">>>")
          if (j == 0) break
          if (global(substr(text, start + 3, j - 1))) report(start, "kernel launch")
          p = start + 3 + j + 2
        }
        # *Async calls and cuda::launch: the arguments up to the matching parenthesis (may span lines).
        p = 1
        while (match(substr(text, p), /([A-Za-z_][A-Za-z0-9_]*Async|cuda::launch)[ \t\n]*\(/)) {
          start = p + RSTART - 1
          open = start + RLENGTH - 1
          depth = 0
          for (k = open; k <= length(text); ++k) {
            c = substr(text, k, 1)
            if (c == "(") ++depth
            else if (c == ")" && --depth == 0) break
          }
          if (global(substr(text, open + 1, k - open - 1))) report(start, substr(text, start, open - start) " call")
          p = open + 1
        }
        exit bad
      }' "$f" || found=1
  done < <(find "$root/framework" -type f \( -name '*.cu' -o -name '*.cuh' \) "${skip[@]}" | sort)
  return $found
}

# The check itself is checked first: a sample with three offending sites (a <<<>>> launch, a
# memset and a cuda::launch, each over two lines) and sites that are fine must give exactly those
# three reports.
sample=$(mktemp -d)
trap 'rm -rf "$sample"' EXIT
mkdir -p "$sample/framework/ops"
cat > "$sample/framework/ops/sample_cuda.cu" <<'EOF'
void entry(const Tensor& t) {
  const cudaStream_t s = cuda::stream();
  launch(t, s);
  k<<<cuda::blocks_for(n), cuda::kThreads, 0,
      cuda::stream()>>>(t.data<float>());
  LOUPE_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0,
                                   t.nbytes(), cuda::stream()));
  k<<<1, 1, 0, s>>>(t.data<float>());  // not <<<1, 1, 0, cuda::stream()>>>
  LOUPE_CUDA_CHECK(cudaMemcpyAsync(d, p, n, cudaMemcpyDeviceToDevice, loader.stream()));
  cuda::launch(k, 1, 1, 0,
               cuda::stream(), t.data<float>());
  cuda::launch(k, 1, 1, 0, s, t.data<float>());
}
EOF
if got=$(scan "$sample"); then
  echo "launch_streams: the check found nothing in its own bad sample; it is broken" >&2
  exit 1
fi
if [ "$(printf '%s\n' "$got" | wc -l)" -ne 3 ] || ! grep -q 'sample_cuda.cu:4: kernel launch' <<< "$got" ||
   ! grep -q 'sample_cuda.cu:6: cudaMemsetAsync call' <<< "$got" ||
   ! grep -q 'sample_cuda.cu:10: cuda::launch call' <<< "$got"; then
  printf 'launch_streams: the check misreads its own sample; it reported:\n%s\n' "$got" >&2
  exit 1
fi

# reads_none FINDER WANT WHAT MESSAGE: FINDER (a function of a source dir printing FILE:LINE: per
# offending line) reports exactly WANT lines of the sample just written, else the check itself is
# broken; then none in the tree, else it prints them and MESSAGE.
reads_none() {
  local finder=$1 want=$2 what=$3 msg=$4 found
  if [ "$("$finder" "$sample" | wc -l)" -ne "$want" ]; then
    echo "launch_streams: the $what check misreads its own sample" >&2
    exit 1
  fi
  found=$("$finder" "$src")
  if [ -n "$found" ]; then
    printf '%s\n' "$found"
    echo "launch_streams: $msg" >&2
    exit 1
  fi
}

# precision_reads DIR: prints FILE:LINE: for each backend file's read of the thread's precision.
precision_reads() {
  find "$1/framework" -type f \( -name '*_cuda.cu' -o -name '*.cuh' -o -name '*_cpu.cpp' -o -name '*_dnnl.cpp' \
    -o -name 'gemm_*.cpp' \) -print0 | sort -z |
    xargs -0 grep -nHE '(^|[^A-Za-z0-9_.>:])(loupe::)?(precision|compute_dtype)[ 	]*\([ 	]*\)' |
    grep -vE '^[^:]+:[0-9]+:[ 	]*//' || true
}
cat > "$sample/framework/ops/sample_cuda.cu" <<'SAMPLE'
  if (precision() == Precision::TF32) x = 1;
  Key k{int(ctx.precision), int(p.precision())};  // neither reads the thread
SAMPLE
reads_none precision_reads 1 precision \
  "a kernel reads the thread's precision; take it from its ExecContext (core/exec_context.h)"

# lane_reads DIR: prints FILE:LINE: for each kernel table file's use of the runtime's own stream or
# handles instead of its context's lane.
lane_reads() {
  find "$1/framework/ops" "$1/framework/optim" "$1/framework/core" -type f \( -name '*_cuda.cu' \) \
    ! -name 'cuda_runtime.cu' -print0 2> /dev/null | sort -z |
    xargs -0 -r grep -nHE '(^|[^A-Za-z0-9_.>])(cuda::)?(stream|cublas|cudnn)[ 	]*\([ 	]*\)' |
    grep -vE '^[^:]+:[0-9]+:[ 	]*//' || true
}
cat > "$sample/framework/ops/sample_cuda.cu" <<'SAMPLE'
  const cudaStream_t s = cuda::stream();
  LOUPE_CUBLAS_CHECK(cublasSgemm(cuda::cublas(), a, b));
  cudnnHandle_t h = cuda::cudnn(ctx);  // the context's lane: fine
  const cudaStream_t t = cuda::stream(ctx), u = loader.stream();
SAMPLE
reads_none lane_reads 2 lane "a kernel table's CUDA code uses the runtime's stream or handles; take them from its\
 ExecContext: cuda::stream(ctx), cuda::cublas(ctx), cuda::cudnn(ctx)"

if ! scan "$src"; then
  echo "launch_streams: read the stream once in the entry point (const cudaStream_t s = cuda::stream(ctx);)" \
       "and pass it down; see docs/design.md, "The op pattern"" >&2
  exit 1
fi
echo "launch_streams: every launch and *Async call in framework/ takes its stream from a variable," \
     "and no kernel reads the thread's precision or the runtime's stream and handles" \
     "${excluded[*]:+(excluded: ${excluded[*]})}"
