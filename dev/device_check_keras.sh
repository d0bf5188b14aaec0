#!/usr/bin/env bash
# lab/plans/keras_and_numpy.md on the device: each Keras model file in models/keras beside the
# built-in model it describes, on the GPU (step mode, graph kernels, samples/s of the last epoch),
# and a file trained on real Fashion-MNIST as .npy arrays (made here from the carried IDX files,
# when numpy is there).
# usage: [MODELS="m1 m2"] dev/device_check_keras.sh [LOUPE] ; logs under $OUT (or /tmp/out).
set -u
L=${1:-build-gpu/loupe}
O=${OUT:-/tmp/out}; mkdir -p "$O"
for m in ${MODELS:-mnist_mlp mnist_cnn cifar10_cnn imdb_bilstm imdb_fasttext char_lstm}; do
  for what in "$m" "models/keras/$m.json"; do
    log="$O/keras-$(basename "$what" .json)$([ "$what" = "$m" ] || echo -file).log"  # kept for a failure's tail
    timeout 120 "$L" train "$what" --synthetic --epochs 3 --batch 256 --precision fp16 --plain > "$log" 2>&1
    echo "$what (rc $?): $(grep -E '^model' "$log" | cut -c1-110)"
    echo "   $(grep -E '^step' "$log")"
    echo "   $(grep -E '^epoch 3/' "$log" | grep -oE '[0-9,]+ samples/s') $(grep -oE 'graph: [0-9]+ kernels|[0-9]+ kernels' "$log" | tail -1)"
  done
done
D=$PWD/.devdata/fashion-mnist; A=$O/fmnist-npy
if python3 -c 'import numpy' 2>/dev/null; then
  python3 - "$D" "$A" <<'PY'
import gzip, os, sys, numpy as np
src, dst = sys.argv[1], sys.argv[2]; os.makedirs(dst, exist_ok=True)
def idx(name):
    p = os.path.join(src, name)
    with (open(p, 'rb') if os.path.exists(p) else gzip.open(p + '.gz', 'rb')) as f: b = f.read()
    nd = b[3]; dims = [int.from_bytes(b[4+4*i:8+4*i], 'big') for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4+4*nd).reshape(dims)
for split, pre in (('train', 'train'), ('test', 't10k')):
    np.save(f'{dst}/x_{split}.npy', idx(f'{pre}-images-idx3-ubyte')[..., None])
    np.save(f'{dst}/y_{split}.npy', idx(f'{pre}-labels-idx1-ubyte').astype(np.int64))
PY
  timeout 200 "$L" train models/keras/mnist_cnn.json --data "$A" --epochs 3 --batch 128 --plain > "$O/keras-npy.log" 2>&1
  echo "mnist_cnn.json on Fashion-MNIST .npy (rc $?):"; grep -E '^(data|recipe|step|epoch)|final' "$O/keras-npy.log"
  rm -rf "$A"
else
  echo "no numpy for python3 here: the .npy run skipped"
fi
