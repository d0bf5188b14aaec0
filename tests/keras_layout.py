#!/usr/bin/env python3
"""Whether two .keras files have one layout: the archive's members, the root's groups of its
model.weights.h5 and each variable with its path, shape and dtype; and each metadata.json names a keras_version and
a date_saved, as Keras 3 writes them. tests/test_keras_reference.cpp compares loupe's .keras files
with those tests/keras_reference.py writes in Keras 3's layout.

  keras_layout.py WANT.keras GOT.keras     exit 0: one layout; 1: the differences, printed
"""
import io
import json
import sys
import zipfile

import h5py


def layout(path):
    with zipfile.ZipFile(path) as z:
        out = ["member " + n for n in sorted(z.namelist())]
        meta = json.loads(z.read("metadata.json"))
        out += ["metadata " + k for k in ("keras_version", "date_saved") if isinstance(meta.get(k), str)]
        weights = h5py.File(io.BytesIO(z.read("model.weights.h5")), "r")
    # The root's groups: Keras 3's loader reads the model's own vars/ there.
    out += ["group " + k for k in sorted(weights.keys()) if isinstance(weights[k], h5py.Group)]

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out.append(f"variable {name} {list(obj.shape)} {obj.dtype}")
    weights.visititems(visit)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    want, got = layout(sys.argv[1]), layout(sys.argv[2])
    if want == got:
        return 0
    for line in want:
        if line not in got:
            print(f"{sys.argv[2]} lacks: {line}")
    for line in got:
        if line not in want:
            print(f"{sys.argv[2]} has more: {line}")
    if sorted(want) == sorted(got):
        print("the same lines in another order")
    return 1


if __name__ == "__main__":
    sys.exit(main())
