#!/usr/bin/env bash
# Checks on a GPU machine (writes logs under $OUT): NVML agreement with nvidia-smi,
# instrumentation overhead, advice at batch 128 and 8192, ncu on an NVTX range, loupe peak.
set -u
L=./build-gpu/loupe
D=${DATA:-.data/fashion-mnist}
O=${OUT:-/tmp/out}
mkdir -p "$O"
stamp() { while IFS= read -r line; do echo "$(date +%s.%N) $line"; done; }

$L peak 2>&1 | tee "$O/peak.txt"
for b in 128 1024 8192; do
  ep=$([ $b = 8192 ] && echo 300 || echo 30)  # 8192: epochs of ~30 ms, so many for enough NVML samples
  nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -lms 100 > "$O/smi_$b.csv" &
  smi=$!
  rm -f "$O/m_$b.jsonl"  # --metrics appends
  $L train mnist_mlp --data "$D" --batch $b --epochs $ep --plain --metrics "$O/m_$b.jsonl" | stamp > "$O/train_$b.log"
  kill $smi; wait $smi 2>/dev/null
  echo "== batch $b"; grep -A3 "^[0-9.]* epoch *$ep/" "$O/train_$b.log" | cut -d' ' -f2-
  python3 scripts/check_nvml_agreement.py "$O/train_$b.log" "$O/smi_$b.csv" "$O/m_$b.jsonl"
done
echo "== advice with CUPTI busy time (--busy)"
for b in 128 8192; do
  echo "batch $b:"; $L train mnist_mlp --data "$D" --batch $b --epochs 3 --plain --busy | grep -E "advice|busy" | tail -3
done
echo "== overhead at batch 128 (median samples/s over 8 epochs)"
for mode in "--no-nvml" "" "--busy"; do
  rm -f "$O/ovh.jsonl"  # --metrics appends: one mode per file
  $L train mnist_mlp --data "$D" --epochs 8 --plain --metrics "$O/ovh.jsonl" $mode > /dev/null
  python3 -c "import json,statistics,sys; r=[json.loads(l) for l in open('$O/ovh.jsonl')][1:]; print('mode [$mode]', round(statistics.median(x['samples_per_sec'] for x in r)), 'busy', [round(x['gpu_busy_share'],3) if x['gpu_busy_share'] is not None else None for x in r][:3])"
done
echo "== trace"
$L train mnist_mlp --data "$D" --epochs 1 --plain --busy --trace "$O/trace.json" --profile-steps 10:12 | grep trace
echo "== ncu on the NVTX range loupe@optimizer/"
ncu --nvtx --nvtx-include "loupe@optimizer/" -c 4 --clock-control none $L train mnist_mlp --data "$D" --epochs 1 --max-steps 4 --plain > "$O/ncu_nvtx.txt" 2>&1
grep -E "Context [0-9]+, Stream" "$O/ncu_nvtx.txt" | sed 's/(.*//' | sort | uniq -c
echo "== ncu with --profile-steps and --profile-from-start off"
ncu --profile-from-start off --clock-control none $L train mnist_mlp --data "$D" --epochs 1 --max-steps 6 --profile-steps 5:5 --plain > "$O/ncu_steps.txt" 2>&1
echo "kernels profiled in step 5: $(grep -cE "Context [0-9]+, Stream" "$O/ncu_steps.txt")"
