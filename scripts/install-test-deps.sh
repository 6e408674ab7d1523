#!/usr/bin/env bash
# Installs what the test suite needs beyond the Rust toolchain. Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."

# --- reprise-mcp: a real MCP server nobody in this project wrote ---------------
# The reference server from npm, pinned, installed into .test-deps/ (git-ignored).
# The tests find it at .test-deps/node_modules/@modelcontextprotocol/server-everything.
MCP_EVERYTHING_VERSION="2026.8.31"
mcp_dir=".test-deps"
mcp_pkg="$mcp_dir/node_modules/@modelcontextprotocol/server-everything/package.json"
if { ! command -v node >/dev/null || ! command -v npm >/dev/null; } && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "install-test-deps: installing node and npm from Debian's packages"
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
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
