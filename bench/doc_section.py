"""Rewrites a generated section of a document: the text between a BEGIN and an END marker line.
Used by the benchmarks that own one section of docs/validation.md (and of the template the
fidelity run generates it from)."""
import os


def replace_section(path, begin, end, body, tool):
    """Puts `body` between the markers `begin` and `end` in the file `path`, written whole
    (a temporary file renamed over it), or exits naming `tool` when a marker is missing."""
    with open(path) as f:
        text = f.read()
    if begin not in text or end not in text:
        raise SystemExit(f"{tool}: {path} has no '{begin}' marker")
    head, rest = text.split(begin, 1)
    with open(path + ".tmp", "w") as f:
        f.write(head + f"{begin}\n{body}\n{end}" + rest.split(end, 1)[1])
    os.replace(path + ".tmp", path)


def publish(section, out, docs, begin, end, tool):
    """Prints a generated section, writes it to the file `out` (if any) and into each document of
    `docs` between its markers."""
    print(section)
    if out:
        with open(out, "w") as f:
            f.write(section + "\n")
    for path in docs:
        replace_section(path, begin, end, section, tool)
