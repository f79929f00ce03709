#!/usr/bin/env python3
"""Lists C++ functions longer than a limit (default 80 lines), longest first.

Usage: tools/long_functions.py [--limit N] [DIR_OR_FILE ...]   (default: engine app ui)

A function is a brace block that follows a parenthesised signature at namespace
or class scope; its length counts from the line of the signature's opening
parenthesis to its closing brace, both included (the code review's convention).
Lambdas and local blocks count toward the function that holds them. Comments,
string and character literals are skipped, so braces in them do not count;
so are preprocessor directives (with their backslash-continued lines), so
`#if defined(__AVX2__)` before a namespace is not read as a signature and a
`#define` body's braces do not count.
A heuristic, not a parser: macros used like statements that open braces can
confuse it, which is rare in this tree. Kernels (kernels/) are not scanned by
default: long kernels and data tables are allowed (docs/architecture.md,
STYLE.md "Functions").

Exit status 0 always; this is a report, not a gate. Tooling only.
"""
import argparse
import os
import re
import sys

SOURCE_EXTS = (".cpp", ".h", ".cc", ".hpp", ".inc")
SCOPE_KEYWORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else)\b")


def strip_code(text):
    """The text with comments and literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i + 2)
            delim = text[i + 2:k]
            end = text.find(")" + delim + '"', k)
            j = n if end < 0 else end + len(delim) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            # A quote after a digit is a digit separator (1'000), not a literal.
            if c == "'" and i > 0 and text[i - 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def blank_directives(code):
    """`code` (already through strip_code) with preprocessor directive lines,
    and the lines a trailing backslash continues them onto, blanked (newlines
    kept, so line numbers hold). A directive is a line whose first non-blank
    character is '#'; strip_code has blanked literals, so a '#' inside a string
    cannot start one."""
    lines = code.split("\n")
    continued = False
    for i, line in enumerate(lines):
        if continued or line.lstrip().startswith("#"):
            continued = line.rstrip().endswith("\\")
            lines[i] = " " * len(line)
    return "\n".join(lines)


def classify(head):
    """What a '{' after `head` (the text since the last ; { or }) opens."""
    flat = " ".join(head.split())
    flat = re.sub(r"^template\s*<.*?>\s*", "", flat)  # template <class T> ...
    if not flat or flat in ("else", "do", "try"):
        return "block"
    if re.match(r"^(inline\s+)?namespace\b|^extern\s+\"", flat):
        return "scope"
    before_paren = flat.split("(")[0]
    if SCOPE_KEYWORDS.search(before_paren) and not before_paren.rstrip().endswith(("operator", "=")):
        if "(" not in flat or re.match(r"^(typedef\s+)?(class|struct|union|enum)\b", flat):
            return "scope"
    if "(" not in flat or "=" in before_paren or CONTROL.match(flat):
        return "block"  # an initializer, an aggregate, a control statement
    if re.search(r"\)\s*(const\s*)?(noexcept\s*)?:.*[\w>]$", flat) and not flat.endswith(")"):
        return "initbrace"  # a member initialised with braces: A::A(int x) : a_{x}
    return "function"


def functions(path):
    """(start_line, end_line, name) of each function definition in the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        code = blank_directives(strip_code(f.read()))
    found = []
    stack = []  # per open brace: (kind, start line, name)
    stmt_start = 0  # index just after the last ';', '{' or '}' that ends a statement head
    line_of = lambda pos: code.count("\n", 0, pos) + 1
    for pos, c in enumerate(code):
        if c == "{":
            if any(k == "function" for k, _, _ in stack):
                stack.append(("block", 0, ""))
                stmt_start = pos + 1
                continue
            head = code[stmt_start:pos]
            kind = classify(head)
            if kind == "function":
                flat = " ".join(head.split())
                words = flat.split("(")[0].split()
                stack.append(("function", line_of(stmt_start + head.find("(")), words[-1] if words else "?"))
            else:
                stack.append((kind, 0, ""))
            if kind != "initbrace":
                stmt_start = pos + 1
        elif c == "}":
            kind = "block"
            if stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    found.append((start, line_of(pos), name))
            if kind != "initbrace":
                stmt_start = pos + 1
        elif c == ";":
            stmt_start = pos + 1
    return found


def source_files(roots):
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in ("build", ".git"))
            for name in sorted(filenames):
                if name.endswith(SOURCE_EXTS):
                    yield os.path.join(dirpath, name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("roots", nargs="*", default=["engine", "app", "ui"])
    args = parser.parse_args()
    rows = []
    for path in source_files(args.roots):
        for start, end, name in functions(path):
            length = end - start + 1
            if length > args.limit:
                rows.append((length, f"{path}:{start}-{end}", name))
    rows.sort(key=lambda r: (-r[0], r[1]))
    for length, where, name in rows:
        print(f"{length:5d}  {where}  {name}")
    print(f"{len(rows)} function(s) over {args.limit} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
