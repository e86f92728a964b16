#!/usr/bin/env bash
# The GPU paths in one short run, on a machine with an NVIDIA GPU and no internet:
#   1. `legorl apply` of the quickstart with vLLM inference (a tiny Qwen3-MoE built from
#      config, served by `vllm serve` with routed experts returned), two GRPO steps on the
#      embedded trainer (CUDA), routing replay on; prints the consistency figures.
#   2. one verl step (megatron, routing replay) through the `verl` trainer plugin.
# Needs what pip cannot fetch there (README, "GPU stack"): the training environment of
# gpu/requirements-train.txt in $VENV (lego-rl, the embedded trainer, and for step 2 verl with
# its vLLM and megatron-core) and vLLM 0.33 of gpu/requirements-vllm.txt in $VLLM_VENV.
# It first reports which pinned packages each venv has; it installs nothing. Each step says
# what is missing instead of failing.
# Usage: [VENV=.venv-train] [VLLM_VENV=.venv-vllm] scripts/gpu-check.sh [OUT_DIR]
#        (defaults: VENV=.venv, VLLM_VENV=.venv-vllm, OUT_DIR=runs/gpu-check)
set -uo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
VLLM_VENV="${VLLM_VENV:-.venv-vllm}"
OUT="${1:-runs/gpu-check}"
LEGORL="$VENV/bin/legorl"
PY="$VENV/bin/python"
mkdir -p "$OUT"
status=0

pinned() {  # VENV LOCK: which of the lock's pinned versions the venv has (read locally, installs nothing)
    if [[ ! -x "$1/bin/python" ]]; then echo "$2: no venv at $1"; return; fi
    "$1/bin/python" - "$2" "$1" <<'EOF'
import re, sys
from importlib import metadata

def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()

pins = {}
for line in open(sys.argv[1]):
    if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$", line.strip()):
        pins[canonical(m[1])] = m[2]
have = {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}
other = [f"{n} {have[n]} (pinned {v})" for n, v in pins.items() if n in have and have[n] != v]
missing = [f"{n}=={v}" for n, v in pins.items() if n not in have]
print(f"{sys.argv[1]} in {sys.argv[2]}: {len(pins) - len(other) - len(missing)}/{len(pins)} pinned versions installed")
for title, items in (("other versions", other), ("missing", missing)):
    if items:
        print(f"  {title} ({len(items)}): {', '.join(items)}")
EOF
}
echo "== pinned packages present (read from the venvs; nothing is installed)"
pinned "$VENV" gpu/requirements-train.txt
pinned "$VLLM_VENV" gpu/requirements-vllm.txt

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || { echo "gpu-check: no NVIDIA GPU visible"; exit 2; }
"$PY" -c "import torch; assert torch.cuda.is_available(); print('torch', torch.__version__, 'cuda', torch.version.cuda)" \
    || { echo "gpu-check: torch cannot use the GPU"; exit 2; }

MODEL="$OUT/tiny-qwen3-moe"
"$PY" - "$MODEL" <<'EOF'
import sys
from lego_rl.spec.models import ModelSpec
from legorl_embedded.model import build_from_config, save_checkpoint
from legorl_embedded.tokenizer import load_tokenizer

spec = ModelSpec(name="tiny-qwen3-moe", config={"hidden_size": 128, "num_hidden_layers": 2, "num_experts": 4,
                                                "num_experts_per_tok": 2, "head_dim": 32})
tokenizer = load_tokenizer("qwen3", "qwen3")
print("tiny model:", save_checkpoint(build_from_config(spec, tokenizer), tokenizer, sys.argv[1]))
EOF

consistency() {  # the last step's consistency figures of a run directory
    "$PY" - "$1" <<'EOF'
import json, sys
from lego_rl.observe.store import read_steps
steps = read_steps(sys.argv[1])
keys = [k for k in (steps[-1] if steps else {}) if any(w in k for w in ("logp", "k3", "pearson", "routing"))]
print(json.dumps({"steps": len(steps), **{k: steps[-1][k] for k in sorted(keys)}}))
EOF
}

echo "== 1. quickstart with vLLM inference, embedded trainer on CUDA, routing replay"
VLLM="$VLLM_VENV/bin/vllm"
[[ -x "$VLLM" ]] || VLLM="$(command -v vllm || true)"
if [[ -n "$VLLM" ]]; then
    "$LEGORL" apply specs/quickstart.yaml "run.output_dir=$OUT" run.name=vllm run.steps=2 \
        "model.path=$(realpath "$MODEL")" model.warmstart=null evaluate=null \
        inference.plugin=vllm inference.options.enable_routing_replay=true \
        "inference.options.executable=$(realpath "$VLLM")" \
        'inference.options.gpu_memory_utilization=0.3' trainer.options.device=cuda \
        && consistency "$OUT/vllm" || status=1
else
    echo "SKIP: no vllm in $VLLM_VENV nor on PATH (gpu/requirements-vllm.txt needs the internet)"; status=1
fi

echo "== 2. one verl step (megatron, routing replay)"
if "$PY" -c "import verl, megatron.core" 2>/dev/null; then
    "$LEGORL" apply specs/quickstart.yaml "run.output_dir=$OUT" run.name=verl run.steps=1 \
        "model.path=$(realpath "$MODEL")" model.warmstart=null evaluate=null \
        trainer.plugin=verl 'trainer.options={"nodes": 1, "gpus_per_node": 1, "strategy": "megatron"}' \
        inference.plugin=vllm inference.options.enable_routing_replay=true inference.options.weight_sync=none \
        || status=1
else
    echo "SKIP: verl's megatron stack (megatron-core) is not importable here"; status=1
fi
exit $status
