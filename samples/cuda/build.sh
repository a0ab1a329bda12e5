#!/usr/bin/env bash
# Regenerates the PTX files of the gpudiv CUDA sample corpus.
# For every X.cu in this directory:
#   X.O3.ptx : nvcc -ptx -lineinfo -O3 -arch=sm_80
#   X.G.ptx  : nvcc -ptx -G -arch=sm_80
# nvcc writes the absolute path of the source into `.file`; it is made relative to this
# folder afterwards so the corpus does not carry the path of the machine that built it.
set -euo pipefail

cd "$(dirname "$0")"
NVCC="${NVCC:-nvcc}"
ARCH="${ARCH:-sm_80}"

shopt -s nullglob
srcs=(*.cu)
if [ "${#srcs[@]}" -eq 0 ]; then
    echo "no .cu files found" >&2
    exit 1
fi

for src in "${srcs[@]}"; do
    base="${src%.cu}"
    echo "nvcc: ${src} -> ${base}.O3.ptx, ${base}.G.ptx"
    "$NVCC" -ptx -lineinfo -O3 -arch="$ARCH" "$src" -o "${base}.O3.ptx"
    "$NVCC" -ptx -G -arch="$ARCH" "$src" -o "${base}.G.ptx"
    sed -i "s|\"$PWD/|\"|" "${base}.O3.ptx" "${base}.G.ptx"
done
