"""Offline stand-in for rules_rust's crate_universe module extension.

tools/bazel-offline/run installs this file as
`@rules_rust//crate_universe:extensions.bzl` in an overlay of Debian's
rules_rust 0.54.1 (which has no such file, and whose real extension needs the
cargo-bazel binary and network access). It accepts the same `crate.from_cargo`
tag MODULE.bazel uses online and declares each named hub repository as a
placeholder; the run script replaces the placeholder with
`--override_repository=<canonical name>=third_party/vendor/crates`, the
repository tools/bazel-offline/gen_crates_repo.py generates from
`cargo vendor` and `cargo metadata`. Nothing else of crate_universe is served.
"""

def _placeholder_impl(repository_ctx):
    repository_ctx.file("REPO.bazel", "")
    repository_ctx.file("BUILD.bazel", """fail("@{name} is a placeholder: the offline build passes --override_repository for it (tools/bazel-offline/run)")\n""".format(name = repository_ctx.attr.hub_name))

_placeholder = repository_rule(
    implementation = _placeholder_impl,
    attrs = {"hub_name": attr.string()},
)

def _crate_impl(module_ctx):
    for mod in module_ctx.modules:
        for cfg in mod.tags.from_cargo:
            _placeholder(name = cfg.name, hub_name = cfg.name)

_from_cargo = tag_class(attrs = {
    "name": attr.string(default = "crates"),
    "cargo_lockfile": attr.label(),
    "lockfile": attr.label(),
    "manifests": attr.label_list(),
    "cargo_config": attr.label(),
    "generate_binaries": attr.bool(),
    "generate_build_scripts": attr.bool(default = True),
    "supported_platform_triples": attr.string_list(),
})

crate = module_extension(
    implementation = _crate_impl,
    tag_classes = {"from_cargo": _from_cargo},
)
