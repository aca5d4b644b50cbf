// The official TypeScript MCP SDK's client, remote-controlled by the rig (test_ts_client.py).
//
// Usage: node ts_client.mjs -- CMD [ARGS...]
//
// Starts CMD as a stdio MCP server the way an SDK-based client does: `Client` +
// `StdioClientTransport` with NO `env`, so the SDK's getDefaultEnvironment() decides the
// server's environment (HOME, LOGNAME, PATH, SHELL, TERM, USER and nothing else). That is the
// point: a relay started like this must still find its home's one daemon.
//
// Once connected it prints one JSON line {"ready": {...}} with the server's pid and the
// names of the variables in that process's environment (read from /proc/PID/environ: what
// the relay really got, not what we think the SDK passes). Then it reads one JSON request
// per line on stdin and answers each with one JSON line on stdout, in the order they
// complete (a held call does not stop the next request):
//   {"id": 1, "op": "list"}                                  -> {"id": 1, "result": ...}
//   {"id": 2, "op": "call", "name": "echo", "arguments": {}} -> {"id": 2, "result": ...}
//   {"id": 3, "op": "close"}                                 -> {"id": 3, "result": null}, exit 0
// A request the client raised an error for answers {"id": N, "error": {"code", "message"}}.
// It never writes anything else to stdout; the server's stderr is inherited.

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

// Every request's own time-out; the rig's held call is approved well within it.
const REQUEST_TIMEOUT_MS = 30_000;

const dash = process.argv.indexOf("--");
const argv = dash < 0 ? [] : process.argv.slice(dash + 1);
if (argv.length === 0) {
  process.stderr.write("usage: node ts_client.mjs -- CMD [ARGS...]\n");
  process.exit(2);
}

const say = (message) => process.stdout.write(JSON.stringify(message) + "\n");

function environmentNames(pid) {
  const raw = readFileSync(`/proc/${pid}/environ`, "latin1");
  return raw
    .split("\0")
    .filter((entry) => entry.length > 0)
    .map((entry) => entry.split("=", 1)[0])
    .sort();
}

// Deliberately no `env` (and no `cwd`, no `stderr`): the SDK's defaults, as a client uses them.
const transport = new StdioClientTransport({ command: argv[0], args: argv.slice(1) });
const client = new Client({ name: "holdcall-rig-ts-client", version: "1.0.0" });

try {
  await client.connect(transport);
} catch (err) {
  process.stderr.write(`ts_client: connect failed: ${err?.stack ?? err}\n`);
  process.exit(1);
}

const pid = transport.pid;
say({
  ready: {
    pid,
    environment: pid ? environmentNames(pid) : null,
    server: client.getServerVersion() ?? null,
  },
});

async function answer(request) {
  const options = { timeout: REQUEST_TIMEOUT_MS };
  switch (request.op) {
    case "list":
      return await client.listTools(undefined, options);
    case "call":
      return await client.callTool(
        { name: request.name, arguments: request.arguments ?? {} },
        undefined,
        options,
      );
    default:
      throw new Error(`unknown op ${JSON.stringify(request.op)}`);
  }
}

const pending = new Set();
const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of input) {
  if (line.trim() === "") continue;
  const request = JSON.parse(line);
  if (request.op === "close") {
    await Promise.allSettled(pending);
    await client.close();
    say({ id: request.id, result: null });
    process.exit(0);
  }
  const job = answer(request).then(
    (result) => say({ id: request.id, result }),
    (err) => say({ id: request.id, error: { code: err?.code ?? null, message: String(err?.message ?? err) } }),
  );
  pending.add(job);
  job.finally(() => pending.delete(job));
}
// stdin ended without "close": close the session all the same.
await Promise.allSettled(pending);
await client.close();
