#!/usr/bin/env bash
# Installs what the test suite needs beyond the Rust toolchain. Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
