#!/usr/bin/env bash
# Regenerates the PTX files of the gpudiv CUDA sample corpus.
#   samples/cuda/build.sh [FOLDER]   (default: this folder; samples/cuda_large holds the
#                                     large programs that only benchmarks and slow tests use)
# For every X.cu in FOLDER:
#   X.O3.ptx : nvcc -ptx -lineinfo -O3 -arch=sm_80
#   X.G.ptx  : nvcc -ptx -G -arch=sm_80
# A file with a line `// arch: sm_NN` is built for that architecture instead (e.g.
# launch_shapes.cu: `__block_size__` needs sm_90).
# nvcc writes the absolute path of the source into `.file`; it is made relative to this
# folder afterwards so the corpus does not carry the path of the machine that built it.
set -euo pipefail

cd "${1:-$(dirname "$0")}"
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
    arch="$(sed -n 's|^// arch: *\(sm_[0-9a-z]*\).*|\1|p' "$src" | head -n 1)"
    arch="${arch:-$ARCH}"
    echo "nvcc: ${src} -> ${base}.O3.ptx, ${base}.G.ptx (${arch})"
    "$NVCC" -ptx -lineinfo -O3 -arch="$arch" "$src" -o "${base}.O3.ptx"
    "$NVCC" -ptx -G -arch="$arch" "$src" -o "${base}.G.ptx"
    sed -i "s|\"$PWD/|\"|" "${base}.O3.ptx" "${base}.G.ptx"
done
