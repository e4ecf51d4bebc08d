set -u
cd "$(dirname "$0")" 2>/dev/null || true
export PYTHONUNBUFFERED=1; unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/gapbench-pycache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install -q --no-build-isolation --no-deps -Ccmake.define.GAPBENCH_CUDA_ARCHS=90 -Ccmake.define.GAPBENCH_LAB=OFF . > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
mkdir -p $OUT/seed
i=0
for s in 1 2 1 2 1 2 3 4 5 6 7 8; do
  i=$((i+1))
  timeout 100 python3 -m bench.blas --ops gemv,vjp_dx --shapes 16384x1024,1024x16384,4096x4096 --dtypes fp16 --backends native-cuda,torch-cuda,cupy --no-plain --no-progress --no-plots --seed $s --out $OUT/seed/r$i-s$s.json.gz > /tmp/seed-$i.txt 2>&1 || tail -5 /tmp/seed-$i.txt
  grep -h "wall time" /tmp/seed-$i.txt | cut -c1-30
done
rm -f $OUT/seed/*.csv
python3 cmake/provenance.py --root . | tail -1
