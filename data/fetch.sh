#!/usr/bin/env bash
# Fetches the data sets of the reference models and checks every download:
#   data/fetch.sh [mnist|fashion-mnist|cifar10|imdb|nietzsche|all] [--dir DIR]
# mnist, fashion-mnist: four IDX .gz files each (MD5 checked), to DIR/mnist and DIR/fashion-mnist.
#   Fashion-MNIST comes from Debian's dataset-fashion-mnist package when it is installed (no download).
# cifar10: the binary version (one tarball, MD5 checked), to DIR/cifar10/cifar-10-batches-bin.
# imdb: the Large Movie Review Dataset, aclImdb_v1.tar.gz (84 MB, MD5 checked), to DIR/imdb/aclImdb.
# nietzsche: the text of Keras' lstm_text_generation example, to DIR/nietzsche/nietzsche.txt (no
#   published checksum: checked to be non-empty UTF-8 text).
# all (the default): all five, each on its own, so one failed download does not stop the others.
# DIR defaults to ${LOUPE_DATA:-$HOME/.cache/loupe}, where loupe looks without --data.
# --from SRC, with one set: for cifar10, imdb or nietzsche a mirror's URL or a local copy of
#   cifar-10-binary.tar.gz, aclImdb_v1.tar.gz or nietzsche.txt (checked all the same); for
#   fashion-mnist a folder holding its four .gz files in place of Debian's package's.
set -euo pipefail

FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
# Official MD5 of each .gz (torchvision's), then of its decompressed contents. The second lets us
# accept a recompressed copy whose data is identical: Debian's package is one (its .gz differ).
declare -A GZ_MD5=(
  [mnist/train-images-idx3-ubyte]=f68b3c2dcbeaaa9fbdd348bbdeb94873
  [mnist/train-labels-idx1-ubyte]=d53e105ee54ea40749a09fcbcd1e9432
  [mnist/t10k-images-idx3-ubyte]=9fb629c4189551a2d022fa330f9573f3
  [mnist/t10k-labels-idx1-ubyte]=ec29112dd5afa0611ce80d1b7f02629c
  [fashion-mnist/train-images-idx3-ubyte]=8d4fb7e6c68d591d4c3dfef9ec88bf0d
  [fashion-mnist/train-labels-idx1-ubyte]=25c81989df183df01b3e8a0aad5dffbe
  [fashion-mnist/t10k-images-idx3-ubyte]=bef4ecab320f06d8554ea6380940ec79
  [fashion-mnist/t10k-labels-idx1-ubyte]=bb300cfdad3c16e7a12a480ee83cd310
)
declare -A RAW_MD5=(
  [mnist/train-images-idx3-ubyte]=6bbc9ace898e44ae57da46a324031adb
  [mnist/train-labels-idx1-ubyte]=a25bea736e30d166cdddb491f175f624
  [mnist/t10k-images-idx3-ubyte]=2646ac647ad5339dbf082846283269ea
  [mnist/t10k-labels-idx1-ubyte]=27ae3e4e09519cfbb04c329615203637
  [fashion-mnist/train-images-idx3-ubyte]=f4a8712d7a061bf5bd6d2ca38dc4d50a
  [fashion-mnist/train-labels-idx1-ubyte]=9018921c3c673c538a1fc5bad174d6f9
  [fashion-mnist/t10k-images-idx3-ubyte]=8181f5470baa50b63fa0f6fddb340f0a
  [fashion-mnist/t10k-labels-idx1-ubyte]=15d484375f8d13e6eb1aabb0c3f46965
)
# yann.lecun.com went offline in 2023; torchvision switched to the ossci mirror.
MNIST_URLS=(https://ossci-datasets.s3.amazonaws.com/mnist/ http://yann.lecun.com/exdb/mnist/)
FASHION_URLS=(http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/)
DEBIAN_FASHION=/usr/share/datasets/fashion-mnist
FASHION_FROM="Debian's copy in $DEBIAN_FASHION (package dataset-fashion-mnist)"
FASHION_FIX="reinstall it with 'sudo apt-get install --reinstall dataset-fashion-mnist'"

die() { echo "fetch.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; }

what=all
from=
dir=${LOUPE_DATA:-$HOME/.cache/loupe}
while (($#)); do
  case $1 in
    mnist|fashion-mnist|cifar10|imdb|nietzsche|all) what=$1 ;;
    --dir) (($# >= 2)) || die "--dir needs a directory"; dir=$2; shift ;;
    --dir=*) dir=${1#--dir=} ;;
    --from) (($# >= 2)) || die "--from needs a URL, a file or a folder"; from=$2; shift ;;
    --from=*) from=${1#--from=} ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done
command -v md5sum >/dev/null || die "md5sum not found; install coreutils"
if [[ -n $from ]]; then
  case $what in
    fashion-mnist) [[ -d $from ]] || die "--from for fashion-mnist names a folder of its four .gz files; '$from' is not a folder"
                   DEBIAN_FASHION=$from FASHION_FROM="the copy in $from (--from)" FASHION_FIX="replace it" ;;
    cifar10|imdb|nietzsche) ;;
    *) die "--from takes one set: cifar10, imdb, nietzsche (a URL or a file) or fashion-mnist (a folder), not '$what'" ;;
  esac
fi

# verify SET FILE PATH: true when PATH is the official .gz or a recompression of the same data.
verify() {
  local key=$1/$2 path=$3 sum
  sum=$(md5sum <"$path" | cut -d' ' -f1)
  [[ $sum == "${GZ_MD5[$key]}" ]] && return 0
  sum=$(gzip -dc <"$path" 2>/dev/null | md5sum | cut -d' ' -f1) || return 1
  [[ $sum == "${RAW_MD5[$key]}" ]]
}

# download URL OUT: curl or wget, quiet but with errors shown.
download() {
  if command -v curl >/dev/null; then
    curl -fsSL --connect-timeout 20 --retry 2 -o "$2" "$1"
  elif command -v wget >/dev/null; then
    wget -q --timeout=20 --tries=3 -O "$2" "$1"
  else
    die "neither curl nor wget is installed; install one, or copy the files into $(dirname "$2")"
  fi
}

fetch_set() {
  local set=$1 dest=$dir/$1 f out url ok
  local -a urls
  if [[ $set == mnist ]]; then urls=("${MNIST_URLS[@]}"); else urls=("${FASHION_URLS[@]}"); fi
  mkdir -p "$dest" || die "cannot create $dest"
  for f in "${FILES[@]}"; do
    out=$dest/$f.gz
    if [[ -e $out ]] && verify "$set" "$f" "$out"; then
      echo "$out: present, checksum ok"
      continue
    fi
    if [[ $set == fashion-mnist && -f $DEBIAN_FASHION/$f.gz ]]; then
      verify "$set" "$f" "$DEBIAN_FASHION/$f.gz" ||
        die "$DEBIAN_FASHION/$f.gz ($FASHION_FROM) has the wrong contents; $FASHION_FIX"
      rm -f "$out"
      ln -s "$DEBIAN_FASHION/$f.gz" "$out" 2>/dev/null || cp "$DEBIAN_FASHION/$f.gz" "$out"
      echo "$out: linked to $FASHION_FROM, contents checked"
      continue
    fi
    ok=
    for url in "${urls[@]}"; do
      echo "downloading $url$f.gz"
      if ! download "$url$f.gz" "$out.part" 2>"$out.log"; then
        echo "fetch.sh: $url$f.gz: download failed: $(tail -n 1 "$out.log")" >&2
      elif verify "$set" "$f" "$out.part"; then
        ok=1; break
      else
        echo "fetch.sh: $url$f.gz: wrong MD5 $(md5sum <"$out.part" | cut -d' ' -f1), expected ${GZ_MD5[$set/$f]}" >&2
      fi
    done
    rm -f "$out.log"
    if [[ -z $ok ]]; then
      rm -f "$out.part"
      rmdir "$dest" 2>/dev/null || true  # leave no empty directory behind
      die "could not get a valid $f.gz from ${urls[*]} (no network, or a bad copy). Download it by hand into $dest, or install the Debian package dataset-fashion-mnist and use Fashion-MNIST"
    fi
    mv "$out.part" "$out" || die "cannot move $out.part to $out"
    echo "$out: downloaded, checksum ok"
  done
  echo "$set ready in $dest"
}

# CIFAR-10, binary version: one tarball holding cifar-10-batches-bin/ (six batch files of 10,000
# records of 3,073 bytes, batches.meta.txt, readme.html). Extracted, then the tarball is deleted.
CIFAR_TAR=cifar-10-binary.tar.gz
CIFAR_MD5=c32a1d4ab5d03f1284b67883e8d87530
CIFAR_URL=https://www.cs.toronto.edu/~kriz/$CIFAR_TAR
[[ $what == cifar10 && -n $from ]] && CIFAR_URL=$from
CIFAR_BATCHES=(data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin)

# cifar_complete DIR: true when DIR holds the six batch files at their exact size.
cifar_complete() {
  local f
  for f in "${CIFAR_BATCHES[@]}"; do
    [[ -f $1/$f && $(wc -c <"$1/$f") -eq 30730000 ]] || return 1
  done
}

fetch_cifar10() {
  local dest=$dir/cifar10 bin=$dir/cifar10/cifar-10-batches-bin made=
  if cifar_complete "$bin"; then
    echo "$bin: present, all six batch files of the right size"
    echo "cifar10 ready in $bin"
    return
  fi
  [[ -d $dest ]] || made=1
  mkdir -p "$dest" || die "cannot create $dest"
  local tar=$dest/$CIFAR_TAR
  local help="Download $CIFAR_TAR (170 MB, MD5 $CIFAR_MD5) by hand and run data/fetch.sh cifar10 --from /path/to/$CIFAR_TAR, or extract it so that $bin exists"
  fetch_tarball "$CIFAR_URL" "$CIFAR_MD5" "$tar" "$dest" "$made" "$help"
  extract_tarball "$tar" "$dest" cifar-10-batches-bin cifar_complete "$bin" "six complete batch files"
  echo "$bin: extracted, six batch files checked"
  echo "cifar10 ready in $bin"
}

# obtain SRC OUT: copies SRC to OUT when it is a local path (no "://"), else downloads it. On failure
# says why on stderr, leaves no OUT behind and returns 1.
obtain() {
  local src=$1 out=$2
  if [[ $src != *://* ]]; then
    [[ -f $src ]] || { echo "fetch.sh: $src: no such file; give the path of a downloaded copy, or a URL" >&2; return 1; }
    cp "$src" "$out" || { rm -f "$out"; echo "fetch.sh: cannot copy $src to $out" >&2; return 1; }
  elif ! download "$src" "$out" 2>"$out.log"; then
    echo "fetch.sh: $src: download failed: $(tail -n 1 "$out.log")" >&2
    rm -f "$out" "$out.log"
    return 1
  fi
  rm -f "$out.log"
}

# fetch_tarball URL MD5 TAR DEST MADE HELP: leaves TAR in DEST checked by MD5 (already there,
# copied from a local path or downloaded). MADE: DEST was created by this run (removed on failure).
fetch_tarball() {
  local url=$1 md5=$2 tar=$3 dest=$4 made=$5 help=$6 sum
  if [[ -f $tar ]] && [[ $(md5sum <"$tar" | cut -d' ' -f1) == "$md5" ]]; then
    echo "$tar: present, checksum ok"
    return
  fi
  echo "getting $url"
  if ! obtain "$url" "$tar.part"; then
    [[ -z $made ]] || rmdir "$dest" 2>/dev/null || true  # leave no empty directory behind
    local why=""
    [[ $url == *://* ]] && why=" (no network?)"
    die "could not get $(basename "$tar") from $url$why. $help"
  fi
  sum=$(md5sum <"$tar.part" | cut -d' ' -f1)
  if [[ $sum != "$md5" ]]; then
    rm -f "$tar.part"
    [[ -z $made ]] || rmdir "$dest" 2>/dev/null || true
    die "$url has MD5 $sum, expected $md5 (a cut-short download or another file). $help"
  fi
  mv "$tar.part" "$tar" || die "cannot move $tar.part to $tar"
  echo "$tar: downloaded, checksum ok"
}

# extract_tarball TAR DEST SUB CHECK FINAL WHAT: extracts TAR beside the final place, checks its
# folder SUB with the function CHECK, moves it to FINAL and deletes TAR: an interrupted run
# leaves no half a set.
extract_tarball() {
  local tar=$1 dest=$2 sub=$3 check=$4 final=$5 what=$6 tmp
  tmp=$(mktemp -d "$dest/.extract.XXXXXX") || die "cannot create a temporary directory in $dest"
  if ! tar -xzf "$tar" -C "$tmp" || ! "$check" "$tmp/$sub"; then
    rm -rf "$tmp"
    die "$tar passed its checksum but did not extract to $sub/ with $what (disk full?); free space and run again"
  fi
  rm -rf "$final" && mv "$tmp/$sub" "$final" || die "cannot move the extracted files to $final"
  rm -rf "$tmp" "$tar"
}

# IMDb reviews: one tarball holding aclImdb/{train,test}/{pos,neg}/*.txt (12,500 reviews in each
# of the four folders), plus train/unsup and bag-of-words files loupe does not read. Extracted
# whole, then the tarball is deleted.
IMDB_TAR=aclImdb_v1.tar.gz
IMDB_MD5=7c2ac02c03563afcf9b574c7e56c153a
IMDB_URL=https://ai.stanford.edu/~amaas/data/sentiment/$IMDB_TAR
[[ $what == imdb && -n $from ]] && IMDB_URL=$from

# imdb_complete DIR: true when DIR (an aclImdb folder) holds 12,500 reviews in each folder.
imdb_complete() {
  local s
  for s in train/neg train/pos test/neg test/pos; do
    [[ -d $1/$s && $(find "$1/$s" -maxdepth 1 -type f -name '*.txt' | wc -l) -eq 12500 ]] || return 1
  done
}

fetch_imdb() {
  local dest=$dir/imdb top=$dir/imdb/aclImdb made=
  if imdb_complete "$top"; then
    echo "$top: present, 12500 reviews in each of train/neg, train/pos, test/neg, test/pos"
    echo "imdb ready in $top"
    return
  fi
  [[ -d $dest ]] || made=1
  mkdir -p "$dest" || die "cannot create $dest"
  local tar=$dest/$IMDB_TAR
  local help="Download $IMDB_TAR (84 MB, MD5 $IMDB_MD5) by hand and run data/fetch.sh imdb --from /path/to/$IMDB_TAR, or extract it so that $top exists"
  fetch_tarball "$IMDB_URL" "$IMDB_MD5" "$tar" "$dest" "$made" "$help"
  extract_tarball "$tar" "$dest" aclImdb imdb_complete "$top" \
    "12500 reviews in each of train/neg, train/pos, test/neg and test/pos"
  echo "$top: extracted, 4 x 12500 reviews checked"
  echo "imdb ready in $top"
}

# The Nietzsche text of Keras' examples/lstm_text_generation.py (about 600 kB of English).
NIETZSCHE_URL=https://s3.amazonaws.com/text-datasets/nietzsche.txt
[[ $what == nietzsche && -n $from ]] && NIETZSCHE_URL=$from

# text_problem FILE: what is wrong with FILE as a text corpus; prints nothing when it looks right.
# With no published checksum, this catches the likely failures: an empty or binary file, another
# encoding, or a server's error page saved in place of the text.
text_problem() {
  local f=$1 size start re='^[[:space:]]*<(!doctype|html|\?xml)'
  size=$(wc -c <"$f")
  if ((size == 0)); then
    echo "is empty"
  elif (($(tr -d '\000' <"$f" | wc -c) != size)); then
    echo "holds NUL bytes, so it is not a text file"
  elif command -v iconv >/dev/null && ! iconv -f UTF-8 -t UTF-8 <"$f" >/dev/null 2>&1; then
    echo "is not valid UTF-8 text"
  else
    start=$(head -c 200 "$f" | tr 'A-Z' 'a-z')
    if [[ $start =~ $re ]]; then echo "is an HTML or XML page (a server's error page?), not the text"; fi
  fi
}

fetch_nietzsche() {
  local dest=$dir/nietzsche out=$dir/nietzsche/nietzsche.txt why made=
  if [[ -f $out && -z $(text_problem "$out") ]]; then
    echo "$out: present, non-empty UTF-8 text"
    echo "nietzsche ready in $out"
    return
  fi
  [[ -d $dest ]] || made=1
  mkdir -p "$dest" || die "cannot create $dest"
  local help="Download nietzsche.txt (about 600 kB) by hand and run data/fetch.sh nietzsche --from /path/to/nietzsche.txt, or copy it to $out"
  echo "getting $NIETZSCHE_URL"
  if ! obtain "$NIETZSCHE_URL" "$out.part"; then
    [[ -z $made ]] || rmdir "$dest" 2>/dev/null || true  # leave no empty directory behind
    die "could not get nietzsche.txt from $NIETZSCHE_URL. $help"
  fi
  why=$(text_problem "$out.part")
  if [[ -n $why ]]; then
    rm -f "$out.part"
    [[ -z $made ]] || rmdir "$dest" 2>/dev/null || true
    die "$NIETZSCHE_URL $why. $help"
  fi
  mv "$out.part" "$out" || die "cannot move $out.part to $out"
  echo "$out: $(wc -c <"$out") bytes of UTF-8 text"
  echo "nietzsche ready in $out"
}

case $what in
  mnist|fashion-mnist) fetch_set "$what" ;;
  cifar10) fetch_cifar10 ;;
  imdb) fetch_imdb ;;
  nietzsche) fetch_nietzsche ;;
  all)  # each set in its own process, so a failed MNIST download still gets the others
    rc=0
    bash "$0" mnist --dir "$dir" || rc=1
    bash "$0" fashion-mnist --dir "$dir" || rc=1
    bash "$0" cifar10 --dir "$dir" || rc=1
    bash "$0" imdb --dir "$dir" || rc=1
    bash "$0" nietzsche --dir "$dir" || rc=1
    exit $rc ;;
esac
