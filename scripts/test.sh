#!/usr/bin/env bash
# The test command of the README: installs what the tests need beyond the Rust
# toolchain (safe to run again: what is there is kept), then runs every test of the
# workspace. Arguments are passed to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-test-deps.sh
cargo test --workspace "$@"
