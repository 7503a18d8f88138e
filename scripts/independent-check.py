#!/usr/bin/env python3
"""Checks foe's reported set differences with a harness that shares no code with foe.

For every divergence foe reports as `confirmed` (an exception present in one build's shipped trace and absent
from the other's), this script builds the file itself, as the issue defines the check: P with `-O0`, P' with
`-O2 -ffast-math` and linked with `-ffast-math`, both with the file's own include and define flags from the
compilation database, and the rest of the file's library (its top directory in the database) as a static archive
built the same way, so calls into other files run the real code (Cephes' own `sqrt`, `exp` too: the archive
comes before libm). A function defined nowhere (GSL's `gsl_error` in the corpus) ends the run at its call: its
stub prints the flags raised so far and exits, as foe ends a run there (the exceptions before the call are what
both builds are compared on). Data defined nowhere (Cephes' `SQRT2`, `MAXLOG`, whose `const.c` is not in the
database: an undefined symbol some input references through a relocation other than a call's) gets no function
stub, whose code bytes would be read as its value, but an unreadable stand-in: a run that reads it is not the
program's, so its divergence is not checkable (with the reason); a run that does not read it is checked. Static
functions are made global with llvm-objcopy. A small C driver, compiled without fast math, clears the flags,
calls the function on foe's input and prints `fetestexcept`, then the result's bits and the first 4 KiB of each
pointer parameter's buffer. A set difference reproduces when the two builds' flag sets differ; a result divergence
(`special_value`, `accuracy`) when the output foe names (its return value, or the C type at the parameter and
offset foe gives) is NaN, infinite, zero or finite in one build and in another category in the other, or, for an
integer, differs; for accuracy, when the builds' values are at least `--accuracy-bits` bits apart.

    scripts/independent-check.py --db /tmp/rw/corpus --reports DIR_OF_FOE_JSON [--run]

With `--run`, `foe check --format json` is run first on every file of the database (or of `files.txt` beside it)
that has no report in DIR yet. Prints one line per divergence that does not reproduce or cannot be checked (with
the reason) and a summary.
"""
import argparse
import json
import os
import re
import shlex
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

CLANG = "clang-19"
OBJCOPY = "/usr/lib/llvm-19/bin/llvm-objcopy"
OBJDUMP = "/usr/lib/llvm-19/bin/llvm-objdump"
P_FLAGS = ["-O0"]
PP_FLAGS = ["-O2", "-ffast-math"]
BUILD_NAMES = {"p": "P", "pp": "P'"}
ACCURACY_BITS = 20  # foe's default `accuracyBits`
GUARD_EXIT = 97  # the driver's exit status when the run read a stand-in of data no file defines
KINDS = {1: "invalid", 4: "divide-by-zero", 8: "overflow", 16: "underflow"}  # glibc x86-64 FE_* bits


def entry_flags(entry):
    """The entry's preprocessor and language flags: no optimisation, fast-math, output or input options."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    keep, skip_next = [], False
    for a in args[1:]:
        if skip_next:
            skip_next = False
            continue
        if a in ("-c", "-o", "-MF", "-MT", "-MQ"):
            skip_next = a != "-c"
            continue
        fast_math = a.startswith("-f") and "math" in a  # not -I../cmath
        if a == entry["file"] or a.endswith(".c") or a.startswith("-O") or fast_math or a.startswith("-M"):
            continue
        keep.append(a)
    return keep


def compile_unit(entry, flags, out):
    src = Path(entry["directory"], entry["file"])
    cmd = [CLANG, *entry_flags(entry), *flags, "-w", "-c", str(src), "-o", str(out)]
    r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
    return r.returncode == 0


def library_of(db_dir, entry):
    rel = Path(entry["directory"], entry["file"]).resolve().relative_to(db_dir.resolve())
    return rel.parts[0]


def build_archives(db_dir, entries, work):
    """One static archive per library and build: every file of it compiled with the build's flags."""
    archives = {}
    for lib in sorted({library_of(db_dir, e) for e in entries}):
        for build, flags in (("p", P_FLAGS), ("pp", PP_FLAGS)):
            objs = []
            for i, e in enumerate(entries):
                if library_of(db_dir, e) != lib:
                    continue
                o = work / f"{lib}.{build}.{i}.o"
                if compile_unit(e, flags, o):
                    objs.append(str(o))
            a = work / f"lib{lib}.{build}.a"
            subprocess.run(["ar", "rcs", str(a), *objs], check=True)
            archives[(lib, build)] = a
    return archives


C_TYPES = {"f64": "double", "f32": "float"}


def c_type(ty):
    t = ty["type"]
    if t in C_TYPES:
        return C_TYPES[t]
    if t == "int" and ty["bits"] == 1:
        return "_Bool"
    if t == "int":
        return ("" if ty.get("signed", True) else "u") + f"int{ty['bits']}_t"
    if t == "out_ptr":
        return "void *"
    if t == "void":
        return "void"
    return None


def word(ty, text):
    """The 64-bit word of an input value as foe prints it (C99 hex float, inf, nan, or an integer)."""
    t = ty["type"]
    if t == "out_ptr":
        return 0
    if t in ("f64", "f32"):
        v = float.fromhex(text) if "0x" in text.lower() else float(text)
        if t == "f64":
            return struct.unpack("<Q", struct.pack("<d", v))[0]
        return struct.unpack("<I", struct.pack("<f", v))[0]
    return int(text, 0) & ((1 << ty["bits"]) - 1)


RETURN_PARAM = 0xFFFFFFFF  # the `param` of an output that is a field of the returned struct


def size_of(ty):
    return {"f64": 8, "f32": 4}.get(ty["type"]) or (ty.get("bits", 64) + 7) // 8  # a `_Bool` (1 bit): 1 byte


def struct_decl(tag, fields, size, in_memory=False):
    """A C struct of `size` bytes with each (offset, C type, size) of `fields` at its offset and unsigned chars in
    the gaps: the same bytes, and for a struct of 16 bytes or fewer whose every byte is a field, the same x86-64
    classification (so it travels in the same registers) as the struct it stands for. One passed in memory
    (`byval`) is packed: only some of its fields are known, and its bytes go to the same eightbyte-aligned stack
    slot whatever its alignment up to 8."""
    members, at = [], 0
    for k, (offset, ctype, n) in enumerate(sorted(fields)):
        if offset < at:
            return None
        if offset > at:
            members.append(f"unsigned char gap{k}[{offset - at}];")
        members.append(f"{ctype} f{k};")
        at = offset + n
    if at < size:
        members.append(f"unsigned char tail[{size - at}];")
    packed = " __attribute__((packed))" if in_memory else ""
    return (f"struct{packed} {tag} {{ {' '.join(members)} }};\n"
            f"_Static_assert(sizeof(struct {tag}) == {size}, \"layout of {tag}\");")


def return_fields(sig, divergences):
    """The returned struct's fields (offset, C type, size) that foe's outputs name, when they cover its bytes."""
    fields = {}
    for d in divergences:
        for end in ("end_p", "end_pp"):
            for o in (d.get(end) or {}).get("outputs", []):
                if o.get("param") == RETURN_PARAM and c_type(o["ctype"]):
                    fields[o["offset"]] = (o["offset"], c_type(o["ctype"]), size_of(o["ctype"]))
    fields = sorted(fields.values())
    return fields if sum(f[2] for f in fields) == sig["ret"]["bytes"] else None


def driver_source(sig, divergences=()):
    """A driver for one function: argv holds one hexadecimal word per parameter of foe's signature. The fields of a
    struct passed by value (`by_value`: its C parameter, offset and size) are put together into a struct of the
    same layout, passed as the C parameter; a returned struct is declared by its size (its fields where foe's
    outputs name them all) and its bytes printed after the buffers."""
    decls, ret_struct = [], None
    if sig["ret"]["type"] == "struct":
        size = sig["ret"]["bytes"]
        fields = return_fields(sig, divergences) if not sig["ret"].get("sret") else None
        if bool(sig["ret"].get("sret")) != (size > 16):
            return None  # a returned struct's place (registers or memory) the driver would not match
        decls.append(struct_decl("ret", fields or [], size))
        ret, ret_struct = "struct ret", fields is not None or bool(sig["ret"].get("sret"))
    else:
        ret = c_type(sig["ret"])
    if ret is None or any(c_type(p["ty"]) is None for p in sig["params"]):
        return None
    # The C call's arguments in order: a scalar parameter, or a struct put together from its fields.
    call, structs = [], {}
    for i, p in enumerate(sig["params"]):
        if p.get("pointee"):
            continue
        b = p.get("by_value")
        if b is None:
            call.append(("scalar", i))
            continue
        if b["c_param"] not in structs:
            structs[b["c_param"]] = {"bytes": b["bytes"], "memory": b["memory"], "fields": []}
            call.append(("struct", b["c_param"]))
        structs[b["c_param"]]["fields"].append((b["offset"], c_type(p["ty"]), size_of(p["ty"]), i))
    for c, st in structs.items():
        decl = struct_decl(f"arg{c}", [f[:3] for f in st["fields"]], st["bytes"], st["memory"])
        if decl is None:
            return None
        decls.append(decl)
    proto = ", ".join(c_type(sig["params"][i]["ty"]) if kind == "scalar" else f"struct arg{i}" for kind, i in call)
    lines = ["#include <fenv.h>", "#include <signal.h>", "#include <stdint.h>", "#include <stdio.h>",
             "#include <stdlib.h>", "#include <string.h>", "#include <sys/mman.h>", "#include <unistd.h>",
             *decls,
             f"{ret} {sig['name']}({proto or 'void'});",
             "static unsigned char buffers[16][65536];",
             # The stand-ins of data no file defines (see `link`): unreadable, a read ends the run with GUARD_EXIT.
             "extern char __start_harness_guard[] __attribute__((weak));",
             "extern char __stop_harness_guard[] __attribute__((weak));",
             "static void on_segv(int sig, siginfo_t *info, void *ctx) {",
             "  char *a = info->si_addr;",
             f"  _exit(a >= __start_harness_guard && a < __stop_harness_guard ? {GUARD_EXIT} : 128 + sig);",
             "}",
             "int main(int argc, char **argv) {",
             "  struct sigaction sa; memset(&sa, 0, sizeof sa); sa.sa_sigaction = on_segv; sa.sa_flags = SA_SIGINFO;",
             "  sigaction(SIGSEGV, &sa, 0); sigaction(SIGBUS, &sa, 0);",
             "  if (__start_harness_guard && __stop_harness_guard > __start_harness_guard && mprotect(",
             "      __start_harness_guard, __stop_harness_guard - __start_harness_guard, PROT_NONE)) return 70;",
             "  uint64_t w[64] = {0};",
             "  for (int i = 1; i < argc && i <= 64; i++) w[i - 1] = strtoull(argv[i], 0, 16);"]
    for i, p in enumerate(sig["params"]):
        if p.get("pointee"):
            pt = p["pointee"]
            lines.append(f"  memcpy(buffers[{pt['param']}] + {pt['offset']}, &w[{i}], {size_of(p['ty'])});")
    args = []
    for kind, i in call:
        if kind == "struct":
            lines.append(f"  struct arg{i} s{i}; memset(&s{i}, 0, sizeof s{i});")
            for offset, _, n, param in structs[i]["fields"]:
                lines.append(f"  memcpy((unsigned char *)&s{i} + {offset}, &w[{param}], {n});")
            args.append(f"s{i}")
        elif c_type(sig["params"][i]["ty"]) == "void *":
            args.append(f"buffers[{i}]")
        else:
            ty = c_type(sig["params"][i]["ty"])
            lines.append(f"  {ty} a{i}; memcpy(&a{i}, &w[{i}], sizeof a{i});")
            args.append(f"a{i}")
    lines.append("  feclearexcept(FE_ALL_EXCEPT);")
    value = "" if ret == "void" else f"volatile {ret} r = "
    lines.append(f"  {value}{sig['name']}({', '.join(args)});")
    lines.append("  int flags = fetestexcept(FE_INVALID | FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW);")
    lines.append('  printf("%d\\n", flags);')
    # The result's bits and the pointer buffers, for result divergences.
    if ret == "void" or ret == "struct ret":
        lines.append('  printf("0\\n");')
    else:
        lines.append(f"  {ret} rv = r; uint64_t rb = 0; memcpy(&rb, &rv, sizeof rv); printf(\"%llx\\n\", "
                     "(unsigned long long)rb);")
    lines.append("  for (int b = 0; b < 16; b++) { for (int o = 0; o < 4096; o++) printf(\"%02x\", buffers[b][o]); "
                 "printf(\"\\n\"); }")
    if ret_struct:
        lines.append("  struct ret rs = r; for (unsigned o = 0; o < sizeof rs; o++) "
                     "printf(\"%02x\", ((unsigned char *)&rs)[o]); printf(\"\\n\");")
    lines.append("  return 0;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def data_references(inputs):
    """The symbols `inputs` (objects, archives) reference other than by a call: through a relocation other than
    R_X86_64_PLT32 (a data access, or a function's address taken)."""
    r = subprocess.run([OBJDUMP, "-r", *map(str, inputs)], capture_output=True, text=True)
    data = set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1].startswith("R_X86_64_") and parts[1] != "R_X86_64_PLT32":
            data.add(re.split(r"[+-]", parts[2], maxsplit=1)[0])
    return data


# C's classification macros, which glibc does not export as functions, called as functions as K&R-era libraries
# declare them (Cephes' mconf.h: `int isfinite(double);`): defined here with their C meaning on a double.
CLASSIFICATION = {
    name: f"#undef {name}\nint {name}(double x) {{ return {body}; }}\n"
    for name, body in {
        "isfinite": "__builtin_isfinite(x)",
        "isnormal": "__builtin_isnormal(x)",
        "signbit": "__builtin_signbit(x) != 0",
        "fpclassify": "__builtin_fpclassify(FP_NAN, FP_INFINITE, FP_NORMAL, FP_SUBNORMAL, FP_ZERO, x)",
    }.items()
}


def link(work, flags, inputs, exe):
    """Links `inputs`; returns (why not or None, the data no file defines). A function defined nowhere (outside
    the library) becomes a stub that prints the flags raised so far and exits, so a run ends at its call (but C's
    classification macros called as functions get their C meaning, [`CLASSIFICATION`]). Data
    defined nowhere gets an unreadable stand-in (64 KiB, page-aligned, in the section the driver protects), never a
    function stub whose code bytes would be read as its value: a run that reads it is not the program's and
    ends with GUARD_EXIT."""
    cmd = [CLANG, *flags, *map(str, inputs), "-lm", "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 0:
        return None, []
    missing = sorted(set(re.findall(r"undefined reference to `([^']+)'", r.stderr)))
    if not missing:
        return "does not link: " + (r.stderr.strip().splitlines() or ["?"])[-1], []
    data = set(missing) & data_references(inputs)
    stubs = work / "stubs.c"
    stubs.write_text("#include <fenv.h>\n#include <stdio.h>\n#include <unistd.h>\n#include <math.h>\n" + "".join(
        CLASSIFICATION[m] if m in CLASSIFICATION and m not in data else
        f"#undef {m}\n__attribute__((aligned(4096), section(\"harness_guard\"))) char {m}[65536];\n" if m in data else
        f"void {m}(void) {{ printf(\"%d\\n\", fetestexcept(FE_INVALID | FE_DIVBYZERO | FE_OVERFLOW | "
        f"FE_UNDERFLOW)); fflush(stdout); _exit(0); }}\n" for m in missing))
    subprocess.run([CLANG, "-O0", "-w", "-c", str(stubs), "-o", str(work / "stubs.o")], check=True)
    r = subprocess.run(cmd[:-2] + [str(work / "stubs.o"), "-o", str(exe)], capture_output=True, text=True)
    if r.returncode != 0:
        return "does not link with stubs for " + ", ".join(missing), []
    return None, sorted(data)


def scalar(ctype, raw):
    """A value of foe's C type (`{"type": "f64"}`, `f32`, `int` with bits and signedness) from little-endian bytes:
    a float, or an int."""
    t = ctype["type"]
    if t == "f64":
        return struct.unpack("<d", raw[:8])[0]
    if t == "f32":
        return struct.unpack("<f", raw[:4])[0]
    n = max(1, ctype.get("bits", 64) // 8)
    return int.from_bytes(raw[:n], "little", signed=ctype.get("signed", True) and ctype.get("bits", 64) > 1)


def category(v):
    if isinstance(v, int):
        return ("int", v)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf"
    return "zero" if v == 0 else "finite"


def bits_apart(a, b, ctype):
    """log2 of one plus the floats between two finite values of the type."""
    fmt, ifmt = ("<d", "<q") if ctype["type"] == "f64" else ("<f", "<i")
    def ordinal(x):
        i = struct.unpack(ifmt, struct.pack(fmt, x))[0]
        return -(i & ~(1 << (63 if ifmt == "<q" else 31))) if i < 0 else i
    import math
    return math.log2(1 + abs(ordinal(a) - ordinal(b)))


def output_value(d, sig, lines):
    """The output foe names in a result divergence, as one driver run (its stdout lines) left it."""
    res = d["result"]
    if res.get("output") is None:
        ctype = {"f64": {"type": "f64"}, "f32": {"type": "f32"}}.get(sig["ret"]["type"], sig["ret"])
        return scalar(ctype, int(lines[1], 16).to_bytes(8, "little")), ctype
    place = next(o for o in d["end_p"]["outputs"] if o["name"] == res["output"])
    # A returned struct's bytes follow the 16 buffers when the driver knows its layout (`driver_source`).
    buffer = bytes.fromhex(lines[2 + 16 if place["param"] == RETURN_PARAM else 2 + place["param"]])
    return scalar(place["ctype"], buffer[place["offset"]:]), place["ctype"]


def kinds_of(flags):
    return sorted(k for bit, k in KINDS.items() if flags & bit)


def check_file(db_dir, entry, report, archives, work, out):
    counts = {"reproduced": 0, "not_reproduced": 0, "not_checkable": 0}
    lib = library_of(db_dir, entry)
    targets = [f for f in report["functions"]
               if any(d.get("confirmation") == "confirmed" for d in f.get("divergences", []))]
    result_classes = ("special_value", "accuracy")
    if not targets:
        return counts
    names = sorted({f["name"] for f in targets})
    objs = {}
    for build, flags in (("p", P_FLAGS), ("pp", PP_FLAGS)):
        o = work / f"unit.{build}.o"
        if not compile_unit(entry, flags, o):
            for f in targets:
                n = sum(d.get("confirmation") == "confirmed" for d in f["divergences"])
                counts["not_checkable"] += n
                out.append(f"not checkable: {entry['file']} {f['name']} ({n}): does not compile with {flags}")
            return counts
        subprocess.run([OBJCOPY, *(f"--globalize-symbol={n}" for n in names), str(o)], check=True)
        objs[build] = o
    for f in targets:
        sig = f.get("signature")
        confirmed = [d for d in f["divergences"] if d.get("confirmation") == "confirmed"]
        src = driver_source(sig, confirmed) if sig else None
        bins, why, unknown = {}, "foe's signature has no C driver", {}
        if src:
            (work / "driver.c").write_text(src)
            subprocess.run([CLANG, "-O0", "-w", "-c", str(work / "driver.c"), "-o", str(work / "driver.o")],
                           check=True)
            for build, flags in (("p", P_FLAGS), ("pp", PP_FLAGS)):
                exe = work / f"run.{build}"
                failed, unknown[build] = link(
                    work, flags, [work / "driver.o", objs[build], archives[(lib, build)]], exe)
                if failed is None:
                    bins[build] = exe
                else:
                    why = f"{BUILD_NAMES[build]} {failed}"
        for d in confirmed:
            if d.get("class") == "ending":
                # Where a run ends (an error handler the other build never calls) needs the handler replaced by a
                # stop, which this driver does not do: foe replay's shipped runs show it.
                counts["not_checkable"] += 1
                out.append(f"not checkable: {entry['file']} {f['name']} {d['location']}: an error-path divergence")
                continue
            if len(bins) < 2:
                counts["not_checkable"] += 1
                out.append(f"not checkable: {entry['file']} {f['name']} {d['location']}: {why}")
                continue
            by_name = {i["name"]: i["value"] for i in d["inputs"]}
            try:
                words = [format(word(p["ty"], by_name.get(p["name"], "0")), "x") for p in sig["params"]]
            except (ValueError, KeyError):
                counts["not_checkable"] += 1
                out.append(f"not checkable: {entry['file']} {f['name']} {d['location']}: an input is not "
                           f"foe's signature's")
                continue
            sets, reads, runs = {}, [], {}
            for build, exe in bins.items():
                try:
                    r = subprocess.run([str(exe), *words], capture_output=True, text=True, timeout=10)
                    lines = r.stdout.split()
                    runs[build] = lines
                    sets[build] = kinds_of(int(lines[0])) if r.returncode == 0 and lines else None
                    if r.returncode == GUARD_EXIT:
                        reads.append(f"{BUILD_NAMES[build]} reads one of {', '.join(unknown[build])}, which no "
                                     f"file of the database defines")
                except (subprocess.TimeoutExpired, ValueError):
                    sets[build] = None
            if sets["p"] is None or sets["pp"] is None:
                counts["not_checkable"] += 1
                failed = "; ".join(reads) or " and ".join(BUILD_NAMES[b] for b in ("p", "pp") if sets[b] is None) \
                    + " did not run to the end (crash, time-out)"
                out.append(f"not checkable: {entry['file']} {f['name']} {d['location']}: {failed}")
                continue
            if d.get("class") in result_classes:
                try:
                    (a, ctype), (b, _) = (output_value(d, sig, runs["p"]), output_value(d, sig, runs["pp"]))
                except (IndexError, ValueError, StopIteration, KeyError):
                    counts["not_checkable"] += 1
                    out.append(f"not checkable: {entry['file']} {f['name']} {d['location']}: the driver's output")
                    continue
                if d["class"] == "special_value":
                    same = category(a) == category(b) if not isinstance(a, int) else a == b
                else:
                    same = not (category(a) == category(b) == "finite") or \
                        bits_apart(a, b, ctype) < ACCURACY_BITS
                if not same:
                    counts["reproduced"] += 1
                else:
                    counts["not_reproduced"] += 1
                    out.append(f"not reproduced: {entry['file']} {f['name']} {d['location']} inputs {by_name} "
                               f"result P {a} P' {b}")
                continue
            if sets["p"] != sets["pp"]:
                counts["reproduced"] += 1
            else:
                counts["not_reproduced"] += 1
                out.append(f"not reproduced: {entry['file']} {f['name']} {d['location']} inputs "
                           f"{by_name} P {sets['p']} P' {sets['pp']} (foe: P {d.get('shipped_p', [])} "
                           f"P' {d.get('shipped_p_prime', [])})")
    return counts


def main():
    global ACCURACY_BITS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, type=Path, help="directory of compile_commands.json")
    ap.add_argument("--reports", required=True, type=Path, help="directory of `foe check --format json` reports")
    ap.add_argument("--run", action="store_true", help="run foe first on files without a report")
    ap.add_argument("--foe", default="foe")
    ap.add_argument("--accuracy-bits", type=int, default=ACCURACY_BITS,
                    help="the accuracyBits the reports were made with (default 20)")
    args = ap.parse_args()
    ACCURACY_BITS = args.accuracy_bits
    entries = all_entries = json.loads((args.db / "compile_commands.json").read_text())
    selected = args.db / "files.txt"
    if selected.is_file():
        wanted = set(selected.read_text().split())
        entries = [e for e in entries
                   if str(Path(e["directory"], e["file"]).resolve().relative_to(args.db.resolve())) in wanted]
    args.reports.mkdir(parents=True, exist_ok=True)

    def report_path(e):
        rel = Path(e["directory"], e["file"]).resolve().relative_to(args.db.resolve())
        return args.reports / (str(rel).replace("/", "_") + ".json")

    if args.run:
        for e in entries:
            rp = report_path(e)
            if not rp.exists():
                r = subprocess.run([args.foe, "check", e["file"], "--format", "json"], cwd=e["directory"],
                                   capture_output=True, text=True)
                if r.stdout.strip():
                    rp.write_text(r.stdout)
    totals = {"reproduced": 0, "not_reproduced": 0, "not_checkable": 0}
    out = []
    with tempfile.TemporaryDirectory(prefix="foe-independent-") as tmp:
        work = Path(tmp)
        # Every file of the database goes into its library's archive, whichever files are checked.
        archives = build_archives(args.db, all_entries, work)
        for e in entries:
            rp = report_path(e)
            if not rp.exists():
                continue
            try:
                report = json.loads(rp.read_text())
            except json.JSONDecodeError:
                continue
            for k, v in check_file(args.db, e, report, archives, work, out).items():
                totals[k] += v
    for line in out:
        print(line)
    print(f"confirmed set differences: {sum(totals.values())}; reproduced by the independent harness: "
          f"{totals['reproduced']}; not reproduced: {totals['not_reproduced']}; "
          f"not checkable (data no file defines, link, crash, signature): {totals['not_checkable']}")
    return 1 if totals["not_reproduced"] else 0


if __name__ == "__main__":
    sys.exit(main())
