"""Starts llama.cpp's own HTTP server (from the xllamacpp wheel) on 127.0.0.1.

Run it with the Python of the virtualenv that scripts/install-test-deps.sh builds:

    "$DEPS/llama/venv/bin/python" scripts/llama-server.py [--port N] [--ctx-size N]

where DEPS is $REPRISE_TEST_DEPS, or $XDG_CACHE_HOME/reprise/test-deps, or
~/.cache/reprise/test-deps. It prints one line, `listening http://127.0.0.1:PORT`,
once the server is bound, then serves the OpenAI-compatible API under /v1 until it
is stopped (SIGTERM, SIGINT or SIGKILL; with --exit-on-stdin-eof also when its
stdin closes).

The defaults make replies repeatable: temperature 0 and a fixed seed, 2 threads and
one slot. The default model is Gemma 3 270M, which the tests of the wire format use:
it ships no chat template, so the server gets llama-chat-template.jinja (Gemma's turn
markers, Hermes-style <tool_call> tags) with Jinja on, which is what lets llama.cpp
turn the model's calls into `tool_calls`. `reprise --local` and
scripts/local-model.sh start it with SmolLM2-135M-Instruct and llama-chatml.jinja
instead (--model, --chat-template, --alias).
"""

import argparse
import faulthandler
import os
import signal
import sys
import threading
from pathlib import Path

import xllamacpp


def default_deps_dir() -> Path:
    explicit = os.environ.get("REPRISE_TEST_DEPS")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "reprise" / "test-deps"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        type=Path,
        default=default_deps_dir() / "llama" / "gemma3-270m-q4_k_m.gguf",
        help="the GGUF file (default: the Gemma 3 270M file the install script assembles)",
    )
    parser.add_argument(
        "--chat-template",
        type=Path,
        default=Path(__file__).resolve().parent / "llama-chat-template.jinja",
        help="a Jinja chat template file",
    )
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--ctx-size", type=int, default=4096, help="context size in tokens")
    parser.add_argument(
        "--n-predict",
        type=int,
        default=-1,
        help="the most tokens one reply may have, whatever the request asks (-1: no limit)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--alias", default="gemma3-270m", help="the model name the server reports"
    )
    parser.add_argument(
        "--exit-on-stdin-eof",
        action="store_true",
        help="also stop when stdin closes: a parent holding the pipe takes the server "
        "down with it however it ends",
    )
    return parser.parse_args()


def main() -> int:
    # A crash inside the server leaves the threads' stacks in the log (stderr)
    # instead of ending the process without a word.
    faulthandler.enable()
    args = parse_args()
    if not args.model.is_file():
        print(
            f"llama-server: no model at {args.model}; run scripts/install-test-deps.sh llama",
            file=sys.stderr,
        )
        return 1

    params = xllamacpp.CommonParams()
    params.model.path = str(args.model)
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_parallel = 1
    params.n_predict = args.n_predict
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.sampling.temp = args.temperature
    params.sampling.seed = args.seed
    params.use_jinja = True
    params.chat_template = args.chat_template.read_text()
    params.ui = False

    server = xllamacpp.Server(params)
    print(f"listening {server.listening_address}", flush=True)

    # The HTTP server runs on threads of its own; this one only waits for a signal.
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.exit_on_stdin_eof:
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.wait(3600):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
