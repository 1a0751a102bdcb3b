"""Protobuf modules for the suites: .proto texts compiled into Python modules with
grpcio-tools' protoc (the well-known types it carries are on the include path)."""
import importlib
import os
import sys

from grpc_tools import protoc

from harness import RUN_TAG, check


def compiled(files, module, tag="proto"):
    """The Python module `module` protoc makes of `files` ([(file name, .proto text)]); the
    sources and modules go to a directory of this run under $SUITE_TMP."""
    src = os.path.join(os.environ.get("SUITE_TMP", "/tmp"), "%s-src-%s" % (tag, RUN_TAG))
    os.makedirs(src, exist_ok=True)
    for name, text in files:
        with open(os.path.join(src, name), "w") as f:
            f.write(text)
    well_known = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    rc = protoc.main(["protoc", "-I" + src, "-I" + well_known, "--python_out=" + src]
                     + [os.path.join(src, name) for name, _ in files])
    check(rc == 0, "protoc exited %s" % rc)
    if src not in sys.path:
        sys.path.insert(0, src)
    return importlib.import_module(module)
