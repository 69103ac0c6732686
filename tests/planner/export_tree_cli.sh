#!/usr/bin/env bash
# tools/export-module-tree as a user runs it (with the venv's transformers), then hwprobe plan
# --tree on what it wrote. Usage: export_tree_cli.sh PYTHON TOOL HWPROBE WORK
set -euo pipefail
python=$1 tool=$2 hwprobe=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Bad input: exit 2, a message naming it, nothing on stdout.
for bad in /nonexistent/config.json "$work"; do
  set +e
  out=$("$python" "$tool" "$bad" 2>"$work/err")
  rc=$?
  set -e
  [[ $rc -eq 2 && -z $out ]] || fail "export-module-tree $bad: exit $rc, stdout '$out'"
  grep -q -- "$bad" "$work/err" || fail "the message does not name $bad: $(cat "$work/err")"
done
echo '{"model_type": "no-such-model"}' >"$work/unknown.json"
set +e
"$python" "$tool" "$work/unknown.json" >/dev/null 2>"$work/err"
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "model_type 'no-such-model' is not known" "$work/err" ||
  fail "unknown model_type: exit $rc: $(cat "$work/err")"

# A Mixtral (fused experts, MoE) and a GPT-2 (tied head, Conv1D), planned from their trees.
echo '{"model_type": "mixtral", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024, "num_local_experts": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "dtype": "bfloat16"}' >"$work/mixtral.json"
"$python" "$tool" "$work/mixtral.json" -o "$work/mixtral.tree.json"
plan=$("$hwprobe" plan --tree "$work/mixtral.tree.json" --device-map sequential --max-memory 0=20MiB,1=20MiB,cpu=1GiB --json)
echo "$plan" | "$python" -c '
import json, sys
p = json.load(sys.stdin)
assert p["exact"] is True, p
devices = set(map(str, p["device_map"].values()))
assert {"0", "1"} <= devices, p["device_map"]
assert all(not k.endswith("experts") for k in p["device_map"]), p["device_map"]  # layers whole
print("mixtral:", p["device_map"])'
echo '{"model_type": "gpt2", "n_layer": 2}' >"$work/gpt2.json"
"$python" "$tool" "$work/gpt2.json" -o "$work/gpt2.tree.json"
"$hwprobe" plan --tree "$work/gpt2.tree.json" --device-map auto --max-memory 0=150MiB,cpu=1GiB --json |
  "$python" -c '
import json, sys
p = json.load(sys.stdin)
assert p["exact"] is True and "transformer.wte" in p["device_map"] or "" in p["device_map"], p
print("gpt2:", p["device_map"])'
echo "PASS"
