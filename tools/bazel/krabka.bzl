"""The shape every Krabka crate has in Bazel, written once.

A crate is a library (`src/lib.rs`, all of `src/` but the binaries), its
binaries, its unit tests, and integration tests (one `tests/<name>.rs` each,
with shared modules such as `tests/common/`). Edition and version are the
workspace's (`[workspace.package]` in Cargo.toml).
"""

load("@rules_rust//rust:defs.bzl", "rust_binary", "rust_library", "rust_test")

EDITION = "2021"
VERSION = "0.1.0"

def krabka_crate(name, deps = [], binaries = {}, test_deps = [], **unit_test_kwargs):
    """A library `name`, its binaries ({target name: source}) and `:unit_test`.

    Args:
      name: the library (crate) name, as Cargo names it (underscores).
      deps: the library's dependencies; binaries get them too.
      binaries: {binary name: its main source file}.
      test_deps: dev-dependencies of the unit tests.
      **unit_test_kwargs: more rust_test attributes (data, rustc_env, size...).
    """
    rust_library(
        name = name,
        srcs = native.glob(["src/**/*.rs"], exclude = binaries.values()),
        crate_root = "src/lib.rs",
        edition = EDITION,
        version = VERSION,
        deps = deps,
    )
    for binary, main in binaries.items():
        rust_binary(
            name = binary,
            srcs = [main],
            edition = EDITION,
            version = VERSION,
            deps = [":" + name] + deps,
        )
    rust_test(
        name = "unit_test",
        crate = ":" + name,
        deps = test_deps,
        **unit_test_kwargs
    )

def krabka_integration_tests(names, deps, shared = [], **kwargs):
    """One rust_test `<name>_test` per `tests/<name>.rs`.

    Args:
      names: the test files' base names.
      deps: everything the tests link (the crate itself, its deps and dev-deps).
      shared: glob patterns of modules the tests share (tests/common/**/*.rs).
      **kwargs: more rust_test attributes (data, rustc_env, size, tags...).
    """
    for test in names:
        rust_test(
            name = test + "_test",
            srcs = ["tests/%s.rs" % test] + native.glob(shared),
            crate_root = "tests/%s.rs" % test,
            edition = EDITION,
            deps = deps,
            **kwargs
        )
