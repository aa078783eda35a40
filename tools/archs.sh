#!/usr/bin/env bash
# Prints the CUDA architectures to build, comma-separated: $GPUDYN_ARCHS if set
# ("90", "75 80 90"), else the GPU's own, else 90 (machines without a GPU).
if [ -n "${GPUDYN_ARCHS:-}" ]; then
  echo "$GPUDYN_ARCHS" | tr ' ;' ',,'
elif command -v nvidia-smi >/dev/null 2>&1 && cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1) && [ -n "$cc" ]; then
  echo "${cc/./}"
else
  echo 90
fi
