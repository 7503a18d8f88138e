#!/usr/bin/env python3
"""Issue 22's editor check, as an LSP client independent of foe's own (Python, stdio, no foe code).

Opens FILE through the compilation database of an instantiated corpus (`../shared/realworld/instantiate.sh DIR`),
waits for the analysis, applies the first quick fix offered on the first warning (waiting up to --fix-wait
seconds for its verification), and compares the edited session with a fresh server opening the edited text.
Prints: time to first diagnostics, counts by severity, the status, messages that read as a bug, the fix's
title and what it changed, and whether the edited session equals the fresh analysis.

    scripts/editor-check.py /tmp/rw/corpus gsl/specfunc/gamma.c [--foe target/release/foe] [--fix-wait 60]
"""
import argparse, json, os, queue, re, subprocess, sys, threading, time

SEVERITY = {1: "error", 2: "warning", 3: "information", 4: "hint"}
# What a user would read as a bug in foe: a source location shown as a value, IR words, a pseudo-file.
BUGLIKE = [r"returns `?line \d+", r"<stdin>", r"without a debug location", r"<\d+ x (float|double)>", r"\bfmul\b|\bfadd\b|\bfdiv\b"]


class Client:
    def __init__(self, foe, root):
        self.p = subprocess.Popen([foe, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.q, self.id, self.kept = queue.Queue(), 0, []
        threading.Thread(target=self._read, daemon=True).start()
        caps = {"workspace": {"workspaceEdit": {"documentChanges": True}, "configuration": True},
                "textDocument": {"codeAction": {"disabledSupport": True}}}
        self.request("initialize", {"processId": None, "rootUri": "file://" + root, "capabilities": caps})
        self.notify("initialized", {})

    def _read(self):
        f = self.p.stdout
        while True:
            headers = {}
            while True:
                line = f.readline()
                if not line:
                    return
                line = line.decode().strip()
                if not line:
                    break
                k, v = line.split(":", 1)
                headers[k.lower()] = v.strip()
            message = json.loads(f.read(int(headers["content-length"])))
            message["_at"] = time.time()
            self.q.put(message)

    def _send(self, m):
        b = json.dumps(m).encode()
        self.p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(b) + b)
        self.p.stdin.flush()

    def notify(self, method, params):
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params, timeout=120):
        self.id += 1
        i = self.id
        self._send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == i and "method" not in m, timeout)

    def wait(self, pred, timeout=600):
        for m in self.kept:
            if pred(m):
                self.kept.remove(m)
                return m
        end = time.time() + timeout
        while True:
            m = self.q.get(timeout=max(0.01, end - time.time()))
            if "method" in m and "id" in m:  # a request from the server
                result = [{} for _ in m["params"]["items"]] if m["method"] == "workspace/configuration" else None
                self._send({"jsonrpc": "2.0", "id": m["id"], "result": result})
                continue
            if pred(m):
                return m
            self.kept.append(m)

    def analysed(self, uri, version):
        """The status at rest and the last diagnostics published for `version`."""
        status = self.wait(lambda m: m.get("method") == "foe/status" and m["params"]["uri"] == uri
                           and m["params"]["version"] == version and m["params"]["state"] != "analysing")
        time.sleep(0.5)
        while not self.q.empty():
            self.kept.append(self.q.get())
        published = [m for m in self.kept if m.get("method") == "textDocument/publishDiagnostics"
                     and m["params"]["uri"] == uri and m["params"].get("version") == version]
        return status["params"], (published[-1]["params"]["diagnostics"] if published else [])

    def close(self):
        self.request("shutdown", None)
        self.notify("exit", None)


def apply(text, edits):
    def offset(pos):
        lines = text.split("\n")
        return sum(len(l) + 1 for l in lines[:pos["line"]]) + pos["character"]
    for e in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True):
        text = text[:offset(e["range"]["start"])] + e["newText"] + text[offset(e["range"]["end"]):]
    return text


def counts(diags):
    return {name: sum(1 for d in diags if d["severity"] == k) for k, name in SEVERITY.items()}


def key(d):
    return (d["range"]["start"]["line"], d["range"]["start"]["character"], d["severity"], d.get("code"), d["message"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("file")
    ap.add_argument("--foe", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "foe"))
    ap.add_argument("--fix-wait", type=float, default=60)
    a = ap.parse_args()
    root = os.path.abspath(a.corpus)
    path = os.path.join(root, a.file)
    uri, text = "file://" + path, open(path).read()

    c = Client(a.foe, root)
    t0 = time.time()
    c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "c", "version": 1, "text": text}})
    first = c.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri)
    c.kept.append(first)
    status, diags = c.analysed(uri, 1)
    look = any(d.get("data", {}).get("firstLook") for d in first["params"]["diagnostics"])
    kind = "a first look" if look else "the analysis"
    print(f"{a.file}: first diagnostics ({kind}) after {first['_at'] - t0:.1f} s, at rest after "
          f"{time.time() - 0.5 - t0:.1f} s: {counts(diags)}")
    print(f"  status: {status['state']}: {status['message']}")
    for d in diags:
        for pattern in BUGLIKE:
            if re.search(pattern, d["message"]):
                print(f"  reads as a bug ({pattern}): line {d['range']['start']['line'] + 1}: {d['message'][:160]}")
    warnings = [d for d in diags if d["severity"] <= 2]
    if not warnings:
        print("  no warning: no quick fix to try")
        c.close()
        return
    w = warnings[0]
    print(f"  first warning, line {w['range']['start']['line'] + 1}: {w['message'][:140]}")
    deadline, actions = time.time() + a.fix_wait, []
    while True:
        actions = c.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": w["range"],
                                                         "context": {"diagnostics": [w], "only": ["quickfix"]}})["result"] or []
        if not any("verifying" in x["title"] for x in actions) or time.time() > deadline:
            break
        time.sleep(1)
    print(f"  quick fixes: {[x['title'] for x in actions if 'disabled' not in x] or 'none offered'}")
    for x in actions:
        if "disabled" in x:
            print(f"  shown greyed: {x['title']}: {x['disabled']['reason']}")
    actions = [x for x in actions if "disabled" not in x]
    if not actions:
        c.close()
        return
    edit = actions[0]["edit"]
    edits = edit["documentChanges"][0]["edits"] if "documentChanges" in edit else edit["changes"][uri]
    edited = apply(text, edits)
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": edited}]})
    _, after = c.analysed(uri, 2)
    c.close()
    print(f"  after the fix: {counts(after)} (warnings {counts(diags)['warning']} -> {counts(after)['warning']})")
    fresh_client = Client(a.foe, root)
    fresh_client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "c", "version": 1, "text": edited}})
    _, fresh = fresh_client.analysed(uri, 1)
    fresh_client.close()
    same = sorted(map(key, after)) == sorted(map(key, fresh))
    print(f"  edited session equals a fresh analysis: {same}")
    for x in sorted(set(map(key, after)) - set(map(key, fresh)))[:5]:
        print(f"    only in the session: line {x[0] + 1}: {x[4][:120]}")
    for x in sorted(set(map(key, fresh)) - set(map(key, after)))[:5]:
        print(f"    only in the fresh analysis: line {x[0] + 1}: {x[4][:120]}")


if __name__ == "__main__":
    main()
