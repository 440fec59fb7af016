#!/usr/bin/env python3
"""The dynamic symbols libepochrun.so exports are its declared API, and nothing else.

    exported_symbols_test.py LIBRARY EXPORTED_SYMBOLS_LIST

Lists the defined dynamic symbols (`nm -D --defined-only --demangle`) and fails on
  - a symbol outside namespace epochrun (the typeinfo, typeinfo name, vtable and guard variable
    of an epochrun:: type count as inside): a std:: instantiation, a dependency's symbol;
  - a symbol whose name is not in EXPORTED_SYMBOLS_LIST (tests/exported_symbols.txt): an
    internal function or class that became exported;
  - a name in the list that the library no longer exports: the list is kept exact, so that a
    change of the exported API is a reviewed change of the list (and of kJobLibraryAbi or the
    SONAME when it is incompatible).
A name is compared without its parameters, its template arguments and its ABI tags, so that an
overload set or a template's instantiations are one line of the list.
"""
import subprocess
import sys

# What the compiler emits for a type rather than a function; the type must be epochrun's.
TYPE_PREFIXES = ("typeinfo name for ", "typeinfo for ", "vtable for ", "guard variable for ")


def strip_nested(text, opening, closing):
    """`text` without any bracketed part (template arguments, ABI tags)."""
    out, depth = [], 0
    for char in text:
        if char == opening:
            depth += 1
        elif char == closing and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


def api_name(symbol):
    """The name a symbol is listed under: "epochrun::Blob::Blob", "vtable for epochrun::Error"."""
    for prefix in TYPE_PREFIXES:
        if symbol.startswith(prefix):
            return prefix + strip_nested(symbol[len(prefix):], "<", ">")
    # The parameters start at the first top-level "(" (after any template arguments); a
    # function template's demangled name begins with its return type, which ends at the last
    # top-level space before its qualified name.
    name = strip_nested(symbol.replace("[abi:cxx11]", ""), "<", ">")
    depth, end = 0, len(name)
    for index, char in enumerate(name):
        if char == "(" and depth == 0 and not name[:index].endswith("operator"):
            end = index
            break
        depth += char == "("
        depth -= char == ")"
    name = name[:end].strip()
    start = name.rfind(" epochrun::")
    return name[start + 1:] if start >= 0 else name


def main():
    library, list_file = sys.argv[1], sys.argv[2]
    listing = subprocess.run(["nm", "-D", "--defined-only", "--demangle", library], check=True,
                             capture_output=True, text=True).stdout
    symbols = [line.split(" ", 2)[2] for line in listing.splitlines() if line.count(" ") >= 2]
    with open(list_file, encoding="utf-8") as lines:
        declared = {line.strip() for line in lines
                    if line.strip() and not line.lstrip().startswith("#")}

    outside, undeclared, exported = [], [], set()
    for symbol in symbols:
        name = api_name(symbol)
        bare = next((name[len(p):] for p in TYPE_PREFIXES if name.startswith(p)), name)
        if not bare.startswith("epochrun::"):
            outside.append(symbol)
        elif name not in declared:
            undeclared.append(f"{name}    ({symbol})")
        exported.add(name)
    missing = sorted(declared - exported)

    for title, items in (("outside namespace epochrun", outside),
                         (f"not in {list_file}", undeclared),
                         (f"listed in {list_file} but not exported", missing)):
        if items:
            print(f"exported_symbols_test: {len(items)} symbol(s) {title}:")
            for item in sorted(items):
                print("  " + item)
    if outside or undeclared or missing:
        print("exported_symbols_test: FAILED")
        return 1
    print(f"exported_symbols_test: {len(symbols)} symbols, all of the declared API "
          f"({len(declared)} names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
