#!/usr/bin/env python3
"""Lists every #include that runs from a lower folder up to a higher one.

The layering is docs/ARCHITECTURE.md's (its diagram and the paragraph under it), written
here once as data: each checked folder and the folders its files may include. Everything
else is upward: an op that includes nn/, the tape that includes ops/, a tokenizer in text/
that includes nn/. Folders not in the table (tests/, tools/, bench/, fuzz/) may include
anything.

    tools/layering_check.py [ROOT]     prints each upward include and their count;
                                       exits 1 if there is any (a ctest runs it)
"""
from __future__ import annotations

import pathlib
import re
import sys

LIBRARY_BELOW_NN = ["ops", "ops/kernels", "autograd", "platform"]
LIBRARY = ["nn", "text"] + LIBRARY_BELOW_NN
UMBRELLAS = ["tapegrad.hpp", "tapegrad_nn.hpp"]  # the headers users include, at the top
# folder -> the folders its files may include (its own always among them)
ALLOWED = {
    "platform": ["platform"],
    "autograd": ["autograd", "platform"],
    "ops/kernels": ["ops/kernels", "platform"],  # a kernel never includes the tape
    "ops": ["ops", "ops/kernels", "autograd", "platform"],
    "text": ["text", "platform"],  # the tokenizer needs no model
    "nn": LIBRARY,
    "tasks": ["tasks"] + LIBRARY + UMBRELLAS,
    "examples": ["examples", "apps", "tasks"] + LIBRARY + UMBRELLAS,
    "apps": ["apps", "tasks"] + LIBRARY + UMBRELLAS,
    "python": ["python", "tasks"] + LIBRARY + UMBRELLAS,
}
# the umbrella headers at the top: tapegrad.hpp is the engine and the ops, tapegrad_nn.hpp all of the library
ROOT_FILES = {
    "tapegrad.hpp": ["tapegrad.hpp"] + LIBRARY_BELOW_NN,
    "tapegrad_nn.hpp": ["tapegrad.hpp"] + LIBRARY,
}
SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".c", ".cc"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def folder_of(relative: str) -> str | None:
    """The checked folder a path (from the root) lies in, the deepest one that matches."""
    best = None
    for folder in ALLOWED:
        if relative == folder or relative.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    if best is None and relative in ROOT_FILES:
        return relative
    return best


def allowed_for(folder: str) -> list[str]:
    return ROOT_FILES[folder] if folder in ROOT_FILES else ALLOWED[folder]


def upward_includes(root: pathlib.Path) -> list[tuple[str, int, str, str, str]]:
    """(file, line, its folder, the included path, the included folder) for each upward include."""
    found = []
    tops = sorted({folder.split("/")[0] for folder in ALLOWED} | set(ROOT_FILES))
    paths = [p for top in tops for p in ([root / top] if (root / top).is_file() else (root / top).rglob("*"))]
    for path in sorted(paths):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        relative = path.relative_to(root).as_posix()
        folder = folder_of(relative)
        if folder is None:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            included = match.group(1)
            target = folder_of(included)
            if target is None:
                continue  # a file beside it ("bindings.hpp") or outside the checked folders
            if target not in allowed_for(folder):
                found.append((relative, number, folder, included, target))
    return found


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    found = upward_includes(root.resolve())
    for relative, number, folder, included, target in found:
        print(f"{relative}:{number}: {folder} includes {included} ({target} is above it)")
    print(f"{len(found)} upward include{'' if len(found) == 1 else 's'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
