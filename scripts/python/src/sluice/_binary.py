"""Where the `sluice` binary is: `SLUICE_BIN` if set, else the one the wheel installed beside
this interpreter's scripts (a venv's bin/, or the user scheme's with `pip install --user`),
else the first on PATH."""

import os
import shutil
import sys
import sysconfig
from typing import List

from ._errors import SluiceError

_NAME = "sluice.exe" if os.name == "nt" else "sluice"


def _script_dirs() -> List[str]:
    dirs = [sysconfig.get_path("scripts")]
    try:
        user_scheme = sysconfig.get_preferred_scheme("user")  # Python 3.10+
    except AttributeError:
        user_scheme = f"{os.name}_user"
    try:
        dirs.append(sysconfig.get_path("scripts", user_scheme))
    except KeyError:
        pass
    dirs.append(os.path.dirname(sys.executable))
    return [d for d in dirs if d]


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def binary() -> str:
    """The path of the `sluice` binary the module runs; SluiceError when there is none."""
    given = os.environ.get("SLUICE_BIN")
    if given:
        if not _executable(given):
            raise SluiceError(f"SLUICE_BIN={given} is not an executable file")
        return given
    for d in _script_dirs():
        candidate = os.path.join(d, _NAME)
        if _executable(candidate):
            return candidate
    on_path = shutil.which(_NAME)
    if on_path:
        return on_path
    raise SluiceError(
        "no sluice binary: not installed beside this Python "
        f"({', '.join(_script_dirs())}), not on PATH, and SLUICE_BIN is not set"
    )
