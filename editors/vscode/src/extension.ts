// foe for VS Code: starts `foe lsp` for C files, shows its status in the status bar, and adds three commands
// (restart, analyse now, show trace).
//
// Diagnostics, hovers and quick fixes come from the server through vscode-languageclient; this file only
// starts the client, forwards the `foe.*` settings, and implements the commands. The manifest declares
// `untrustedWorkspaces.supported = false`: VS Code does not activate the extension in restricted mode, since
// the analysis compiles and runs the user's code.

import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from "vscode-languageclient/node";

let client: LanguageClient | undefined;
let output: vscode.OutputChannel | undefined;
/** Set while the extension itself stops the server (restart, disable): its end is then not an error. */
let stopping = false;
/** The keys of the `foe` settings section the server reads: every `foe.*` setting of package.json but the
 * client's own (`foe.path`, `foe.trace.server`). Declared once, in package.json (checked against the server). */
let settingKeys: string[] = [];

/** What `foe/status` says about one document. */
interface Status {
  uri: string;
  version: number;
  state: "analysing" | "idle" | "incomplete" | "stale" | "error" | "disabled";
  message: string;
  warnings?: number;
  information?: number;
  hints?: number;
  skipped?: number;
  /** Functions whose runs mostly crashed or timed out, or that failed. */
  incomplete?: number;
}

const statuses = new Map<string, Status>();
let statusItem: vscode.StatusBarItem | undefined;

/** The status bar item shows the active C file's state: idle with counts, analysing, stale, error. */
function renderStatus(): void {
  if (!statusItem) {
    return;
  }
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== "c") {
    statusItem.hide();
    return;
  }
  const s = statuses.get(editor.document.uri.toString());
  if (!client) {
    statusItem.text = "$(circle-slash) foe";
    statusItem.tooltip = "foe is not running";
  } else if (!s) {
    statusItem.text = "$(clock) foe";
    statusItem.tooltip = "foe: waiting to analyse this file";
  } else {
    // `incomplete`: the analysis ended, but some function was hardly compared (never shown as all clear).
    const icon = { analysing: "$(sync~spin)", idle: "$(check)", incomplete: "$(question)", stale: "$(warning)", error: "$(error)", disabled: "$(circle-slash)" }[s.state];
    let text = `${icon} foe`;
    if (s.state === "idle" || s.state === "incomplete") {
      // The Problems panel lists warnings and information, not hints: hints are counted apart.
      text += ` ${s.warnings ?? 0}$(warning) ${s.information ?? 0}$(info)`;
      if (s.hints) {
        text += ` ${s.hints} hint${s.hints === 1 ? "" : "s"}`;
      }
      if (s.incomplete) {
        text += ` ${s.incomplete} not compared`;
      }
      if (s.skipped) {
        text += ` ${s.skipped} not analysed`;
      }
    } else if (s.state === "stale") {
      text += " stale";
    }
    statusItem.text = text;
    statusItem.tooltip = `foe: ${s.message}`;
  }
  statusItem.show();
}

/** The answer of the server's `foe/trace` request. */
interface TraceResult {
  markdown: string;
}

/** The `foe` settings as sent to the server (unset values are null; the server keeps its defaults for them). */
function settings(): Record<string, unknown> {
  const config = vscode.workspace.getConfiguration("foe");
  const out: Record<string, unknown> = {};
  for (const key of settingKeys) {
    out[key] = config.get(key) ?? null;
  }
  return out;
}

/** The server binary: `foe.path`, with `${workspaceFolder}` replaced. */
function serverPath(): string {
  const configured = vscode.workspace.getConfiguration("foe").get<string>("path") || "foe";
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? "";
  return configured.replace(/\$\{workspaceFolder\}/g, folder);
}

function createClient(): LanguageClient {
  const serverOptions: ServerOptions = {
    command: serverPath(),
    args: ["lsp"],
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file", language: "c" }],
    initializationOptions: settings(),
    outputChannel: output,
    // Changes reach the server as didChangeConfiguration {"foe": {...}} (it reports keys it does not know).
    synchronize: { configurationSection: "foe" },
    errorHandler: {
      error: () => ({ action: stopping ? ErrorAction.Shutdown : ErrorAction.Continue, handled: stopping }),
      // A stop the extension asked for (restart, disable) is not a crash: no error, no automatic restart.
      closed: () => ({ action: stopping ? CloseAction.DoNotRestart : CloseAction.Restart, handled: stopping }),
    },
  };
  const c = new LanguageClient("foe", "foe", serverOptions, clientOptions);
  c.onNotification("foe/status", (s: Status) => {
    statuses.set(s.uri, s);
    renderStatus();
  });
  return c;
}

async function start(): Promise<void> {
  if (!vscode.workspace.getConfiguration("foe").get<boolean>("enable", true)) {
    return;
  }
  client = createClient();
  try {
    await client.start();
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    void vscode.window.showErrorMessage(
      `foe: cannot start \`${serverPath()} lsp\` (${message}). Set "foe.path" to the foe binary.`,
    );
  }
}

async function stop(): Promise<void> {
  stopping = true;
  try {
    if (client && client.state !== State.Stopped) {
      await client.stop();
    }
  } finally {
    client = undefined;
    stopping = false;
    statuses.clear();
    renderStatus();
  }
}

async function restart(): Promise<void> {
  await stop();
  await start();
}

/** `foe.analyseNow`: re-analyse the active C file without waiting for an edit. */
async function analyseNow(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!client || !editor || editor.document.languageId !== "c") {
    return;
  }
  await client.sendRequest("workspace/executeCommand", {
    command: "foe.analyse",
    arguments: [editor.document.uri.toString()],
  });
}

/** `foe.showTrace`: the inputs and both builds' traces of the divergence on the cursor's line, beside the editor. */
async function showTrace(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!client || !editor) {
    return;
  }
  const params = client.code2ProtocolConverter.asTextDocumentPositionParams(editor.document, editor.selection.active);
  const result = await client.sendRequest<TraceResult | null>("foe/trace", params);
  if (!result) {
    void vscode.window.showInformationMessage("foe: no divergence is flagged on this line.");
    return;
  }
  // A read-only document of our own scheme (no "save changes?" on close), rendered by the markdown preview.
  traceCount += 1;
  const name = editor.document.uri.path.split("/").pop() ?? "file";
  const uri = vscode.Uri.from({ scheme: TRACE_SCHEME, path: `/${name}:${editor.selection.active.line + 1} (${traceCount}).md` });
  traces.set(uri.toString(), result.markdown);
  try {
    await vscode.commands.executeCommand("markdown.showPreviewToSide", uri);
  } catch {
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: true, preserveFocus: true });
  }
}

/** The URI scheme of the trace documents `foe.showTrace` opens, and their texts. */
const TRACE_SCHEME = "foe-trace";
const traces = new Map<string, string>();
let traceCount = 0;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("foe");
  const properties = context.extension.packageJSON?.contributes?.configuration?.properties ?? {};
  settingKeys = Object.keys(properties)
    .filter((k) => k.startsWith("foe.") && k !== "foe.path" && !k.startsWith("foe.trace."))
    .map((k) => k.slice("foe.".length));
  statusItem = vscode.window.createStatusBarItem("foe.status", vscode.StatusBarAlignment.Left, 10);
  statusItem.name = "foe";
  statusItem.command = "foe.analyseNow";
  context.subscriptions.push(
    output,
    statusItem,
    vscode.window.onDidChangeActiveTextEditor(() => renderStatus()),
    vscode.commands.registerCommand("foe.restartServer", restart),
    vscode.commands.registerCommand("foe.analyseNow", analyseNow),
    vscode.commands.registerCommand("foe.showTrace", showTrace),
    vscode.workspace.registerTextDocumentContentProvider(TRACE_SCHEME, {
      provideTextDocumentContent: (uri) => traces.get(uri.toString()) ?? "",
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      // The binary or the switch changed: restart. Other settings reach the server as didChangeConfiguration.
      if (e.affectsConfiguration("foe.path") || e.affectsConfiguration("foe.enable")) {
        void restart();
      }
    }),
  );
  await start();
  renderStatus();
}

export async function deactivate(): Promise<void> {
  await stop();
}
