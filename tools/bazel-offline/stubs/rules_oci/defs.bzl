"""Offline stand-ins for rules_oci's oci_image and oci_load (oci/defs.bzl).

They keep packaging/BUILD.bazel loadable offline (so the targets beside them,
the layer tars and exported files, still build); building the image itself
fails with a message, since its base cannot be pulled without a registry.
"""

def _unavailable(name, what, **kwargs):
    native.genrule(
        name = name,
        outs = [name + ".unavailable"],
        cmd = "echo '%s needs rules_oci and a registry, unavailable offline (tools/bazel-offline)' >&2; exit 1" % what,
        tags = ["manual"],
        visibility = kwargs.get("visibility"),
    )

def oci_image(name, **kwargs):
    _unavailable(name, "oci_image", **kwargs)

def oci_load(name, **kwargs):
    _unavailable(name, "oci_load", **kwargs)
