#!/usr/bin/env python3
"""Writes the C++ snippets of the project's READMEs as one CMake project, so that they are built
against the installed SDK and run (tests/docs/check_snippets.cmake).

Every ```cpp block of a README must follow a marker line that says what it is:

  <!-- doc-snippet: program NAME [LIB...] -->   a whole program, linked with backplane::LIB
                                                (core, hub, torch), built and run: exit 0
  <!-- doc-snippet: plugin NAME TYPE... -->      a plugin (backplane_add_plugin), built and
                                                loaded by the installed hwprobe
  <!-- doc-snippet: conformance NAME PLUGIN -->  a conformance-suite program for the plugin
                                                snippet PLUGIN, built and run
  <!-- doc-snippet: excerpt -->                 lines shown for reading, from a file that is
                                                built elsewhere (named in the text); not built

A block without a marker is an error, so no snippet can silently drift out of the build.

Usage: extract_snippets.py OUT_DIR README...
Writes OUT_DIR/CMakeLists.txt, one source file per snippet, and OUT_DIR/snippets.txt with a line
"KIND NAME [ARGS...]" per snippet.
"""

import os
import re
import sys

MARKER = re.compile(r"^<!-- doc-snippet: (.+?) -->$")
KINDS = {"program", "plugin", "conformance", "excerpt"}
LIBRARIES = {"core", "hub", "torch"}


def fail(where, message):
    sys.exit(f"extract_snippets.py: {where}: {message}")


def snippets(path):
    """(kind, name, args, code, where) for every cpp block of one README."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    marker = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = MARKER.match(line.strip())
        if m:
            marker = (m.group(1).split(), f"{path}:{i + 1}")
        elif line.startswith("```cpp"):
            where = f"{path}:{i + 1}"
            if marker is None:
                fail(where, "a ```cpp block without a <!-- doc-snippet: ... --> line before it")
            words, marker_where = marker
            marker = None
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if end == len(lines):
                fail(where, "the ```cpp block never ends")
            code = "\n".join(lines[i + 1:end]) + "\n"
            kind = words[0]
            if kind not in KINDS:
                fail(marker_where, f"unknown snippet kind '{kind}'; expected one of {sorted(KINDS)}")
            if kind != "excerpt":
                if len(words) < 2 or not re.fullmatch(r"[a-z0-9_]+", words[1]):
                    fail(marker_where, "a snippet needs a name of a-z, 0-9 and _")
                found.append((kind, words[1], words[2:], code, where))
            i = end
        elif line.strip() and marker is not None and not line.startswith("```"):
            fail(marker[1], "the marker is not followed by a ```cpp block")
        i += 1
    return found


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    all_snippets = []
    for readme in sys.argv[2:]:
        all_snippets += snippets(readme)
    names = [s[1] for s in all_snippets]
    for name in names:
        if names.count(name) > 1:
            fail(name, "two snippets have this name")
    plugins = {s[1]: s[2] for s in all_snippets if s[0] == "plugin"}
    components = set()
    cmake = []
    listing = []
    for kind, name, args, code, where in all_snippets:
        source = f"{name}.cpp"
        with open(os.path.join(out, source), "w", encoding="utf-8") as f:
            f.write(f"// From {os.path.relpath(where.rsplit(':', 1)[0])}, line {where.rsplit(':', 1)[1]}.\n")
            f.write(code)
        if kind == "program":
            libs = args or ["core"]
            for lib in libs:
                if lib not in LIBRARIES:
                    fail(where, f"unknown library '{lib}'; expected one of {sorted(LIBRARIES)}")
            components |= {lib for lib in libs if lib != "core"}
            cmake.append(f"add_executable({name} {source})")
            cmake.append(f"target_link_libraries({name} PRIVATE "
                         + " ".join(f"backplane::{lib}" for lib in libs) + ")")
        elif kind == "plugin":
            if not args:
                fail(where, "a plugin snippet names its device types")
            cmake.append(f"backplane_add_plugin(NAME {name} SOURCES {source} DEVICE_TYPES "
                         + " ".join(args) + " OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/plugins NO_INSTALL)")
        elif kind == "conformance":
            if len(args) != 1 or args[0] not in plugins:
                fail(where, "a conformance snippet names one plugin snippet")
            plugin = args[0]
            macro = plugin.upper() + "_MANIFEST"
            cmake.append(f"add_executable({name} {source})")
            cmake.append(f"target_compile_definitions({name} PRIVATE "
                         f"{macro}=\"$<TARGET_FILE_DIR:backplane-{plugin}>/{plugin}.json\")")
            cmake.append(f"target_link_libraries({name} PRIVATE backplane::conformance "
                         "GTest::gtest_main)")
            cmake.append(f"add_dependencies({name} backplane-{plugin})")
        listing.append(" ".join([kind, name] + args))
    needs_gtest = any(s[0] == "conformance" for s in all_snippets)
    with open(os.path.join(out, "CMakeLists.txt"), "w", encoding="utf-8") as f:
        f.write("# Written by tests/docs/extract_snippets.py from the READMEs; do not edit.\n")
        f.write("cmake_minimum_required(VERSION 3.20)\nproject(doc_snippets LANGUAGES CXX)\n")
        if components:
            f.write("find_package(backplane 0.1 CONFIG REQUIRED COMPONENTS "
                    + " ".join(sorted(components)) + ")\n")
        else:
            f.write("find_package(backplane 0.1 CONFIG REQUIRED)\n")
        if needs_gtest:
            f.write("find_package(GTest REQUIRED)\n")
        f.write("\n".join(cmake) + "\n")
    with open(os.path.join(out, "snippets.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(listing) + "\n")


if __name__ == "__main__":
    main()
