#!/usr/bin/env python3
"""builds.json: which exact binaries a release image or a benchmark used.

Every entry ties binaries (name -> SHA-256) to what built them: the source
commit, a hash of the build inputs (the working tree's files under
``CARGO_INPUTS``, so uncommitted edits count), the Cargo.lock hash, the rustc
version, the cargo profile and the target. docs/build.md describes the schema.

Library use (stdlib only), e.g. from packaging/performance:

    sys.path.insert(0, "<repo>/packaging"); import builds
    entry = builds.describe_build({"krabka-broker": "target/release/krabka-broker"},
                                  profile="release", target=builds.host_target(),
                                  name="benchmark")
    builds.record(entry)            # packaging/builds.json, no duplicates

CLI:

    packaging/builds.py describe --name benchmark --profile release \\
        --binary krabka-broker=target/release/krabka-broker [--record]
    packaging/builds.py inputs      # the inputs hash of the working tree
    packaging/builds.py show [--name release-image]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SCHEMA = 1
REPO_ROOT = Path(__file__).resolve().parent.parent
BUILDS_JSON = REPO_ROOT / "packaging" / "builds.json"

# What a cargo build of the workspace's binaries reads from the source tree.
# Missing paths (no rust-toolchain.toml, no .cargo/) are skipped.
CARGO_INPUTS = ("Cargo.toml", "Cargo.lock", "crates", "rust-toolchain", "rust-toolchain.toml", ".cargo")

# Files under the inputs that cargo never reads: Bazel's build files, so the
# Bazel build can change without changing the cargo build's identity.
IGNORED_NAMES = ("BUILD.bazel", "BUILD")
IGNORED_SUFFIXES = (".bzl",)


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _run(args: list[str], cwd: Path, env: dict | None = None) -> str:
    return subprocess.run(args, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _ignored(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in IGNORED_NAMES or name.endswith(IGNORED_SUFFIXES)


def source_state(root: Path = REPO_ROOT, inputs: tuple[str, ...] | list[str] = CARGO_INPUTS) -> dict:
    """The commit and a hash of the input files as they are in the working tree.

    The files are staged into a throw-away index (`git add -A` honours
    .gitignore and sees untracked files), so the hash is the same for a clean
    checkout of a commit and for a working tree with the same contents,
    wherever it is cloned: `mode blob-id path` per file, sorted by path.
    """
    root = Path(root)
    present = [p for p in inputs if (root / p).exists()]
    commit = _run(["git", "rev-parse", "HEAD"], root).strip()
    with tempfile.TemporaryDirectory(prefix="builds-index-") as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tmp, "index"))
        _run(["git", "read-tree", "HEAD"], root, env)
        _run(["git", "add", "-A", "--", *present], root, env)
        listing = _run(["git", "ls-files", "-s", "--", *present], root, env)
    lines = []
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        mode, blob, _stage = meta.split()
        if not _ignored(path):
            lines.append(f"{mode} {blob} {path}\n")
    lines.sort(key=lambda line: line.split(" ", 2)[2])
    inputs_sha256 = hashlib.sha256("".join(lines).encode()).hexdigest()
    dirty = bool(_run(["git", "status", "--porcelain", "--", *present], root).strip())
    return {"commit": commit, "dirty": dirty, "inputs": list(present), "inputs_sha256": inputs_sha256}


def rustc_version() -> str:
    """`rustc -V` of the toolchain cargo would use here, e.g. 'rustc 1.95.0 (59807616e 2026-04-14)'."""
    return _run(["rustc", "-V"], REPO_ROOT).strip()


def host_target() -> str:
    for line in _run(["rustc", "-vV"], REPO_ROOT).splitlines():
        if line.startswith("host: "):
            return line.removeprefix("host: ")
    raise RuntimeError("rustc -vV printed no host line")


def describe_build(
    binaries: dict[str, str | os.PathLike],
    profile: str,
    target: str,
    name: str = "benchmark",
    root: Path = REPO_ROOT,
    inputs: tuple[str, ...] | list[str] = CARGO_INPUTS,
    **extra,
) -> dict:
    """A builds.json entry for binaries built from `root`'s working tree.

    binaries: name -> path of each built binary. extra: more fields, e.g.
    image={...}, linkage="static (musl)" or environment={...} (part of the
    build key: inputs from outside the source tree).
    """
    root = Path(root)
    entry = {
        "name": name,
        "source": source_state(root, inputs),
        "cargo_lock_sha256": sha256_file(root / "Cargo.lock"),
        "rustc": rustc_version(),
        "profile": profile,
        "target": target,
        "binaries": {binary: sha256_file(path) for binary, path in sorted(binaries.items())},
    }
    entry.update(extra)
    return entry


def build_key(entry: dict) -> tuple:
    """Entries with equal keys must have built equal binaries (reproducibility).
    `environment` (optional) holds the other inputs from outside the source
    tree, e.g. the versions of the system packages an image is made with."""
    environment = json.dumps(entry.get("environment"), sort_keys=True)
    return (entry["name"], entry["source"]["inputs_sha256"], entry["rustc"], entry["profile"], entry["target"], environment)


def load(path: str | os.PathLike = BUILDS_JSON) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {"schema": SCHEMA, "builds": []}
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {data.get('schema')!r}, expected {SCHEMA}")
    return data


def find(key: tuple, path: str | os.PathLike = BUILDS_JSON) -> dict | None:
    """The recorded entry with this build_key, if any."""
    return next((e for e in load(path)["builds"] if build_key(e) == key), None)


def record(entry: dict, path: str | os.PathLike = BUILDS_JSON, only_one_per_name: bool = False) -> None:
    """Adds entry to builds.json, replacing an entry of the same name that has
    the same binaries or the same build_key (never two records of one build).
    only_one_per_name: drop every other entry of this name (the release image
    keeps only its current recipe's entry)."""
    data = load(path)

    def superseded(old: dict) -> bool:
        if old["name"] != entry["name"]:
            return False
        return only_one_per_name or old["binaries"] == entry["binaries"] or build_key(old) == build_key(entry)

    data["builds"] = [old for old in data["builds"] if not superseded(old)] + [entry]
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    tmp = Path(f"{path}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def differences(expected: dict, actual: dict, fields: tuple[str, ...]) -> list[str]:
    """'field: expected != actual' for each dotted field that differs."""

    def get(entry: dict, dotted: str):
        for part in dotted.split("."):
            entry = entry.get(part) if isinstance(entry, dict) else None
        return entry

    return [f"{f}: {get(expected, f)!r} != {get(actual, f)!r}" for f in fields if get(expected, f) != get(actual, f)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="builds.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    describe = sub.add_parser("describe", help="print (and optionally record) an entry for built binaries")
    describe.add_argument("--name", default="benchmark")
    describe.add_argument("--profile", default="release")
    describe.add_argument("--target", default=None, help="default: rustc's host target")
    describe.add_argument("--binary", action="append", required=True, metavar="NAME=PATH")
    describe.add_argument("--record", action="store_true", help=f"add it to {BUILDS_JSON.relative_to(REPO_ROOT)}")
    describe.add_argument("--builds-json", default=str(BUILDS_JSON))
    sub.add_parser("inputs", help="print the source state (commit, dirty, inputs hash)")
    show = sub.add_parser("show", help="print builds.json's entries")
    show.add_argument("--name")
    show.add_argument("--builds-json", default=str(BUILDS_JSON))
    args = parser.parse_args(argv)

    if args.command == "describe":
        binaries = dict(b.split("=", 1) for b in args.binary)
        entry = describe_build(binaries, args.profile, args.target or host_target(), args.name)
        if args.record:
            record(entry, args.builds_json)
        print(json.dumps(entry, indent=2, sort_keys=True))
    elif args.command == "inputs":
        print(json.dumps(source_state(), indent=2, sort_keys=True))
    else:
        entries = [e for e in load(args.builds_json)["builds"] if args.name in (None, e["name"])]
        print(json.dumps(entries, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
