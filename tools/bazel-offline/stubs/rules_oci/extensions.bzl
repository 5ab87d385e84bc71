"""Offline stand-in for rules_oci's `oci` module extension (oci/extensions.bzl).

The offline proof cannot reach a container registry, so `oci.pull` declares
placeholder repositories under the names rules_oci would create (the image
and one per platform); building anything from them fails with a message.
"""

_PLATFORM_SUFFIXES = {
    "linux/amd64": "linux_amd64",
    "linux/arm64": "linux_arm64",
    "linux/arm64/v8": "linux_arm64_v8",
}

def _placeholder_impl(repository_ctx):
    repository_ctx.file("REPO.bazel", "")
    repository_ctx.file("BUILD.bazel", """
genrule(
    name = "{name}",
    outs = ["unavailable"],
    cmd = "echo 'the base image {image} cannot be pulled offline (tools/bazel-offline)' >&2; exit 1",
    visibility = ["//visibility:public"],
)
""".format(name = repository_ctx.attr.target_name, image = repository_ctx.attr.image))

_placeholder = repository_rule(
    implementation = _placeholder_impl,
    attrs = {"image": attr.string(), "target_name": attr.string()},
)

def _oci_impl(module_ctx):
    for mod in module_ctx.modules:
        for pull in mod.tags.pull:
            _placeholder(name = pull.name, image = pull.image, target_name = pull.name)
            for platform in pull.platforms:
                name = "%s_%s" % (pull.name, _PLATFORM_SUFFIXES.get(platform, platform.replace("/", "_")))
                _placeholder(name = name, image = pull.image, target_name = name)

_pull = tag_class(attrs = {
    "name": attr.string(mandatory = True),
    "image": attr.string(),
    "digest": attr.string(),
    "tag": attr.string(),
    "platforms": attr.string_list(),
})

oci = module_extension(
    implementation = _oci_impl,
    tag_classes = {"pull": _pull},
)
