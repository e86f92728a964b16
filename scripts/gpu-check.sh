#!/usr/bin/env bash
# The GPU paths in one short run, on a machine with one NVIDIA GPU and possibly no internet:
#   packages        which pinned packages each venv already has (read locally: nothing is installed)
#   tiny-model      a tiny Qwen3-MoE checkpoint built from config (the quickstart's shape, no
#                   output_vocab), saved under OUT_DIR
#   preflight-vllm  `legorl plan` of step 1, with exactly the overrides `legorl apply` gets
#   vllm-embedded   1. `legorl apply` of the quickstart with vLLM inference (`vllm serve` launched
#                   by lego-rl, routed experts returned), two GRPO steps on the embedded trainer
#                   (CUDA), routing replay on; records the consistency figures
#   preflight-verl  `legorl plan` of step 2, with exactly its apply's overrides
#   verl-megatron   2. one verl step (megatron through mbridge, routing replay, verl's vLLM rollout
#                   at tensor parallel 1) through the `verl` trainer plugin
# The overrides of both steps are the bash arrays of scripts/gpu-check.args (the tests plan them
# too). Every part runs that can: the preflights run without a GPU (they then report what needs
# one); a step runs when a GPU is visible, its stack is importable and its preflight passed.
# Needs what pip cannot fetch on such a machine (README, "GPU stack"): the training environment of
# gpu/requirements-train.txt in $VENV (lego-rl, the embedded trainer, and for step 2 verl with
# its vLLM and megatron-core) and vLLM 0.33 of gpu/requirements-vllm.txt in $VLLM_VENV. It
# installs nothing and reaches no network.
# Output: what each part did, then, as the last line of stdout, one JSON object:
#   {"gpu": "<name, memory>" | null, "steps": {"packages": {...}, "tiny-model": {...},
#    "preflight-vllm": {...}, "vllm-embedded": {...}, "preflight-verl": {...},
#    "verl-megatron": {...}}, "passed": bool}
# where each part has "ran" and "passed" (and "skipped": why, when it did not run; a preflight's
# fatal findings under "fatal"; step 1's figures under "consistency"). "passed" is true when
# every part ran and passed; the exit status is 0 then, else 1.
# Usage: [VENV=.venv-train] [VLLM_VENV=.venv-vllm] [NVIDIA_SMI=nvidia-smi] scripts/gpu-check.sh [OUT_DIR]
#        (defaults: VENV=.venv, VLLM_VENV=.venv-vllm, OUT_DIR=runs/gpu-check; NVIDIA_SMI=false
#        checks as if no GPU were there; a rerun replaces OUT_DIR's model and runs)
set -uo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
VLLM_VENV="${VLLM_VENV:-.venv-vllm}"
NVIDIA_SMI="${NVIDIA_SMI:-nvidia-smi}"
OUT="${1:-runs/gpu-check}"
LEGORL="$VENV/bin/legorl"
PY="$VENV/bin/python"
PARTS=(packages tiny-model preflight-vllm vllm-embedded preflight-verl verl-megatron)
# The model is local: a hub lookup fails at once instead of waiting on a network that is not there.
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"

json_str() {  # TEXT: as a JSON string
    local s="$1"
    s="${s//\\/\\\\}"; s="${s//\"/\\\"}"; s="${s//$'\t'/ }"; s="${s//$'\n'/; }"; s="${s//$'\r'/}"
    printf '"%s"' "$s"
}

if ! mkdir -p "$OUT/gpu-check"; then
    echo "{\"gpu\": null, \"steps\": {}, \"passed\": false, \"error\": $(json_str "cannot create $OUT")}"
    exit 1
fi
OUT="$(realpath "$OUT")"
RESULTS="$OUT/gpu-check"  # one JSON record per part
rm -f "$RESULTS"/*

record() {  # PART JSON: what the part did (one line)
    printf '%s\n' "$2" >"$RESULTS/$1.json"
}
skip() {  # PART REASON
    echo "SKIP $1: $2"
    record "$1" "{\"ran\": false, \"passed\": false, \"skipped\": $(json_str "$2")}"
}
passed() {  # PART: whether its record says it passed
    grep -q '^{"ran": true, "passed": true' "$RESULTS/$1.json" 2>/dev/null
}

# ------------------------------------------------------------------------------ packages
pinned() {  # VENV LOCK RECORD: which of the lock's pinned versions the venv has; 0 when all are
    if [[ ! -x "$1/bin/python" ]]; then
        echo "$2: no venv at $1"
        printf '{"venv": %s, "lock": %s, "passed": false, "error": "no venv"}\n' \
            "$(json_str "$1")" "$(json_str "$2")" >"$3"
        return 1
    fi
    "$1/bin/python" - "$2" "$1" "$3" <<'EOF'
import json, re, sys
from importlib import metadata

def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()

lock, venv, record = sys.argv[1:4]
pins = {}
for line in open(lock):
    if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$", line.strip()):
        pins[canonical(m[1])] = m[2]
have = {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}
other = [f"{n} {have[n]} (pinned {v})" for n, v in pins.items() if n in have and have[n] != v]
missing = [f"{n}=={v}" for n, v in pins.items() if n not in have]
installed = len(pins) - len(other) - len(missing)
print(f"{lock} in {venv}: {installed}/{len(pins)} pinned versions installed")
for title, items in (("other versions", other), ("missing", missing)):
    if items:
        print(f"  {title} ({len(items)}): {', '.join(items)}")
ok = bool(pins) and not other and not missing
with open(record, "w") as f:
    f.write(json.dumps({"venv": venv, "lock": lock, "passed": ok, "pinned": len(pins),
                        "installed": installed, "other": other, "missing": missing}) + "\n")
sys.exit(0 if ok else 1)
EOF
}
echo "== pinned packages present (read from the venvs; nothing is installed)"
ok=true
pinned "$VENV" gpu/requirements-train.txt "$RESULTS/venv-train" || ok=false
pinned "$VLLM_VENV" gpu/requirements-vllm.txt "$RESULTS/venv-vllm" || ok=false
record packages "{\"ran\": true, \"passed\": $ok, \"venvs\": [$(cat "$RESULTS/venv-train"), $(cat "$RESULTS/venv-vllm")]}"

# ------------------------------------------------------------------------------ the GPU
gpu="$("$NVIDIA_SMI" --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
no_gpu=""
if [[ -z "$gpu" ]]; then
    no_gpu="no NVIDIA GPU visible ($NVIDIA_SMI)"
elif ! "$PY" -c "import torch; assert torch.cuda.is_available(); print('torch', torch.__version__, 'cuda', torch.version.cuda)"; then
    no_gpu="torch in $VENV cannot use the GPU ($gpu)"
fi
echo "== GPU: ${gpu:-none}${no_gpu:+ ($no_gpu)}"

# ------------------------------------------------------------------------------ the steps' overrides
MODEL="$OUT/tiny-qwen3-moe"
VLLM="$VLLM_VENV/bin/vllm"
[[ -x "$VLLM" ]] || VLLM="$(command -v vllm || echo "$VLLM")"  # missing: preflight-vllm says so
VLLM="$(realpath -m "$VLLM")"
# shellcheck source=scripts/gpu-check.args
source scripts/gpu-check.args  # GPU_CHECK_SPEC, MODEL_ARGS, VLLM_ARGS, VERL_ARGS

echo "== tiny model (the spec's model.config, saved at $MODEL)"
if [[ ! -x "$PY" ]]; then
    skip tiny-model "no venv at $VENV"
else
    rm -rf "$MODEL"
    if "$PY" - "$GPU_CHECK_SPEC" "$MODEL" "${MODEL_ARGS[@]}" <<'EOF'
import sys
from lego_rl.spec.load import load_spec
from legorl_embedded.policy.model import build_from_config, save_checkpoint
from legorl_embedded.policy.tokenizer import load_tokenizer

model = load_spec(sys.argv[1], sys.argv[3:]).model  # what both steps' specs say the model is
tokenizer = load_tokenizer(model.tokenizer, model.chat_template)
print("tiny model:", save_checkpoint(build_from_config(model, tokenizer), tokenizer, sys.argv[2]))
EOF
    then record tiny-model "{\"ran\": true, \"passed\": true, \"path\": $(json_str "$MODEL")}"
    else record tiny-model "{\"ran\": true, \"passed\": false, \"error\": \"the build failed (see above)\"}"
    fi
fi

preflight() {  # PART OVERRIDE...: `legorl plan --json` of the spec with these overrides
    local part="$1"; shift
    echo "== $part: legorl plan $GPU_CHECK_SPEC $*"
    if [[ ! -x "$LEGORL" ]]; then skip "$part" "no legorl in $VENV"; return; fi
    if ! passed tiny-model; then skip "$part" "no tiny checkpoint (tiny-model did not pass)"; return; fi
    "$LEGORL" plan --json "$GPU_CHECK_SPEC" "$@" >"$RESULTS/$part.plan" 2>"$RESULTS/$part.err"
    "$PY" - "$?" "$RESULTS/$part.plan" "$RESULTS/$part.err" "$RESULTS/$part.json" <<'EOF'
import json, sys
from pathlib import Path

rc, plan_file, err_file, record = int(sys.argv[1]), *map(Path, sys.argv[2:5])
rec = {"ran": True, "passed": False, "exit": rc}
try:
    plan = json.loads(plan_file.read_text())
except ValueError:  # no plan: a traceback or a message on stderr
    lines = err_file.read_text(errors="replace").strip().splitlines()
    rec["error"] = "\n".join(lines[-12:]) or f"legorl plan exited {rc} without a plan"
    print(f"  legorl plan exited {rc} without a plan:\n{rec['error']}")
else:
    findings = plan.get("preflight", [])
    rec["passed"] = rc == 0 and plan.get("ready") is True
    rec["fatal"] = [f"{f['path']} ({f['plugin']}): {f['message']}" for f in findings if f["fatal"]]
    rec["warnings"] = [f"{f['path']} ({f['plugin']}): {f['message']}" for f in findings if not f["fatal"]]
    if plan.get("missing"):
        rec["missing"] = [f"{m['path']}: {m['name']} ({m['how']})" for m in plan["missing"]]
    if plan.get("errors"):
        rec["errors"] = [f"{e['path']}: {e['message']}" for e in plan["errors"]]
    if plan.get("needs_gpu"):
        rec["needs_gpu"] = plan["needs_gpu"]
    for f in findings:
        fix = f" -- {f['fix']}" if f.get("fix") else ""
        print(f"  {'FATAL' if f['fatal'] else 'note'} {f['path']} ({f['plugin']}): {f['message']}{fix}")
    for line in rec.get("missing", []) + rec.get("errors", []):
        print(f"  FATAL {line}")
    print(f"  {'ready' if rec['passed'] else 'not ready: apply would refuse'}")
record.write_text(json.dumps(rec) + "\n")
EOF
}

figures() {  # RUN_DIR: the last step's consistency figures of a run directory, as JSON
    "$PY" - "$1" <<'EOF'
import json, sys
from lego_rl.observe.store import read_steps
steps = read_steps(sys.argv[1])
keys = [k for k in (steps[-1] if steps else {}) if any(w in k for w in ("logp", "k3", "pearson", "routing"))]
print(json.dumps({"steps": len(steps), **{k: steps[-1][k] for k in sorted(keys)}}))
EOF
}

step() {  # PART PREFLIGHT RUN_NAME OVERRIDE...: `legorl apply` of the spec with these overrides
    local part="$1" pre="$2" name="$3"; shift 3
    echo "== $part: legorl apply $GPU_CHECK_SPEC $*"
    if [[ -n "$no_gpu" ]]; then skip "$part" "$no_gpu"; return; fi
    if ! passed "$pre"; then skip "$part" "$pre did not pass"; return; fi
    rm -rf "${OUT:?}/$name"  # a fresh run directory (else apply picks $name-2)
    "$LEGORL" apply "$GPU_CHECK_SPEC" "$@"
    local rc=$? ok=false figs
    [[ $rc -eq 0 ]] && ok=true
    figs="$(figures "$OUT/$name" 2>/dev/null | tail -n 1)"
    [[ "$figs" == "{"* ]] || figs=null
    echo "  exit $rc; last step: $figs"
    record "$part" "{\"ran\": true, \"passed\": $ok, \"exit\": $rc, \"run_dir\": $(json_str "$OUT/$name"), \"consistency\": $figs}"
}

preflight preflight-vllm "${VLLM_ARGS[@]}"
step vllm-embedded preflight-vllm vllm "${VLLM_ARGS[@]}"

preflight preflight-verl "${VERL_ARGS[@]}"
if [[ -z "$no_gpu" ]] && ! "$PY" -c "import verl, megatron.core" 2>/dev/null; then
    skip verl-megatron "verl's megatron stack (verl, megatron-core) is not importable in $VENV"
else
    step verl-megatron preflight-verl verl "${VERL_ARGS[@]}"
fi

# ------------------------------------------------------------------------------ the JSON line
steps="" all=true
for part in "${PARTS[@]}"; do
    if [[ -s "$RESULTS/$part.json" ]]; then rec="$(head -n 1 "$RESULTS/$part.json")"
    else rec='{"ran": false, "passed": false, "skipped": "not reached"}'
    fi
    passed "$part" || all=false
    steps+="${steps:+, }$(json_str "$part"): $rec"
done
gpu_json=null
[[ -n "$gpu" ]] && gpu_json="$(json_str "$gpu")"
echo "{\"gpu\": $gpu_json, \"steps\": {$steps}, \"passed\": $all}"
[[ $all == true ]]
